//! On-demand readahead (the kernel's mm/readahead.c, reduced to its context
//! readahead), for sources that ask for it (`PageSource::readahead`; files
//! do): a miss at `index` whose preceding pages are cached is taken
//! as a sequential stream, and the fill reads a window of pages starting at
//! `index` with one call to the source (one `preadv` for a file) instead of
//! one read per page.
//!
//! Window size, from the stream's history (the run of cached pages just
//! before `index`, counted up to [`RA_MAX_PAGES`]): [`RA_INIT_PAGES`] at the
//! start of the file, twice the history otherwise (so 4, 8, 24, 32, 32...
//! pages down a sequential read from the start), at most [`RA_MAX_PAGES`] (the kernel's
//! default `read_ahead_kb`, 128 KiB) and never past the source's end. A miss
//! with at most one cached page before it (random access) reads one page,
//! as before.
//! The history is the cache itself, so readers sharing a mapping need no
//! shared readahead state (the kernel keeps one per open file).
//!
//! Invariants: every page of a window is inserted locked, before the read,
//! so a concurrent reader of any of them waits on its page lock and then
//! sees it up to date (or gone, after a read error); the window stops at the
//! first index already cached or the first allocation that fails, so it is
//! always one contiguous run. Pages beyond the requested one hold the
//! cache's and the LRU batch's references only. The kernel's asynchronous
//! readahead marker is not kept (no page flag is free for it): the next
//! window is read when the reader first misses past this one.

use super::mapping::{page_bytes, Mapping};
use super::PageHandle;
use crate::types::{Pfn, PAGE_SIZE};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// The first window of a stream read from the start of the source.
#[cfg(not(loom))]
pub(crate) const RA_INIT_PAGES: u64 = 4;
/// The largest window (the kernel's default `read_ahead_kb` of 128 KiB).
#[cfg(not(loom))]
pub(crate) const RA_MAX_PAGES: u64 = 32;
/// Under loom, windows of one page: the models check the fill protocol of
/// one page, which every page of a window follows alike.
#[cfg(loom)]
pub(crate) const RA_INIT_PAGES: u64 = 1;
#[cfg(loom)]
pub(crate) const RA_MAX_PAGES: u64 = 1;

#[cfg(all(test, not(loom)))]
#[path = "readahead_tests.rs"]
mod tests;

impl Mapping {
    /// Pages to read for a miss at `index` (see the module doc).
    pub(super) fn ra_window(&self, index: u64) -> u64 {
        if !self.m.source.readahead() {
            return 1;
        }
        let history = (1..=RA_MAX_PAGES.min(index))
            .take_while(|&k| self.m.shard(index - k).read().contains_key(&(index - k)))
            .count() as u64;
        // As the kernel's context readahead: a history of one page is no
        // stream (a random miss next to a cached page reads one page).
        let size = match (index, history) {
            (0, _) => RA_INIT_PAGES,
            (_, 0 | 1) => 1,
            (_, h) => (2 * h).clamp(RA_INIT_PAGES, RA_MAX_PAGES),
        };
        match self.m.source.nr_pages() {
            Some(end) if end > index => size.min(end - index),
            Some(_) => 1,
            None => size,
        }
    }

    /// Fill page `index` and up to `n - 1` pages after it with one read of
    /// the source; a referenced, up-to-date handle on page `index`.
    /// `Ok(None)` if another thread inserted page `index` first.
    ///
    /// # Errors
    /// The source's read error (every page of the window is dropped), or
    /// `OutOfMemory` if no page could be had for `index`.
    pub(super) fn fill_window(&self, index: u64, n: u64) -> io::Result<Option<PageHandle<'_>>> {
        // The requested page: the cache's, the LRU batch's and our handle's
        // references.
        let Some(first) = self.alloc_insert(index, 3)? else {
            return Ok(None);
        };
        let mut pages: Vec<Pfn> = vec![first];
        for i in index + 1..index + n.max(1) {
            match self.alloc_insert(i, 2) {
                Ok(Some(p)) => pages.push(p),
                _ => break,
            }
        }
        let a = self.alloc();
        // SAFETY: see `page_bytes`: every page of the window is locked and
        // referenced, and no two are the same frame.
        let mut bufs: Vec<&mut [u8]> = pages.iter().map(|&p| unsafe { &mut *page_bytes(a, p) }).collect();
        let res = self.m.source.read_pages(index, &mut bufs);
        drop(bufs);
        for (k, &pfn) in pages.iter().enumerate() {
            let r = a.page_ref(pfn).map_err(io::Error::other)?;
            if res.is_ok() {
                let _ = r.set_uptodate(true);
            } else {
                self.delete_locked(pfn.as_u64(), index + k as u64);
            }
            let _ = r.unlock();
        }
        let h = PageHandle { alloc: a, pfn: first, index };
        res.map(|()| Some(h))
    }
}

/// Read pages `index..index + bufs.len()` of `f` into `bufs` with `preadv`
/// (bytes past the end of the file read as zeros).
pub(super) fn preadv_pages(f: &File, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
    let mut iov: Vec<libc::iovec> =
        bufs.iter_mut().map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() }).collect();
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut done = 0usize;
    let mut first = 0usize;
    while done < total {
        let off = index * PAGE_SIZE as u64 + done as u64;
        let cnt = (iov.len() - first).min(libc::UIO_MAXIOV as usize) as libc::c_int;
        // SAFETY: `iov[first..first + cnt]` describe live, disjoint buffers
        // (the pages of `bufs`, exclusively borrowed for this call), the
        // first one advanced past the bytes already read.
        let n = unsafe { libc::preadv(f.as_raw_fd(), iov[first..].as_ptr(), cnt, off as libc::off_t) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        done += n as usize;
        // Skip the buffers filled; advance into a partly filled one.
        let mut left = n as usize;
        while left > 0 && first < iov.len() {
            let l = iov[first].iov_len;
            if left >= l {
                left -= l;
                first += 1;
            } else {
                // SAFETY: `left < iov_len`: still inside the same buffer.
                iov[first].iov_base = unsafe { iov[first].iov_base.cast::<u8>().add(left) }.cast();
                iov[first].iov_len -= left;
                left = 0;
            }
        }
    }
    // Past the end of the file: zeros, as a single page's read gives.
    let mut skip = done;
    for b in bufs.iter_mut() {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        b[skip..].fill(0);
        skip = 0;
    }
    Ok(())
}
