//! On-demand readahead (the kernel's mm/readahead.c, reduced), for sources
//! that ask for it (`PageSource::readahead`; files do). Two parts:
//!
//! **Synchronous readahead** (a miss). A miss at `index` whose preceding
//! pages are cached is taken as a sequential stream, and the fill reads a
//! window of pages starting at `index` with one call to the source (one
//! `preadv` for a file) instead of one read per page. Window size, from the
//! stream's history (the run of cached pages just before `index`, counted up
//! to [`RA_HISTORY_PAGES`]): [`RA_INIT_PAGES`] at the start of the file,
//! twice the history otherwise, at most the cache's maximum window
//! ([`Readahead::max_pages`], default [`RA_MAX_PAGES`], the kernel's default
//! `read_ahead_kb` of 128 KiB) and never past the source's end. A miss with
//! at most one cached page before it (random access) reads one page. The
//! history is the cache itself, so readers sharing a mapping need no shared
//! state to be recognised as streams (the kernel's context readahead).
//!
//! **Asynchronous readahead** (a marker). A synchronous window of more than
//! one page starts a *stream*: one of the mapping's [`RA_STREAMS`] slots
//! holds a marker index (the kernel keeps a `PG_readahead` page flag; no
//! descriptor bit is free, so the marker lives in the slot) and the end and
//! size of the stream's last window. The marker is the second page of a
//! stream's first window and the first page of every later one. A reader
//! that reaches the marker page (cached or not, before waiting for it to
//! come up to date) claims the marker with one CAS and starts the next
//! window right away: its pages are allocated and inserted locked by the
//! reader, and the read itself is done inline or by a readahead worker
//! thread (`ra_worker`; [`Readahead::workers`]). Windows grow 4x while small,
//! then 2x, up to the maximum. So a sequential reader finds its next window
//! already in flight, one window ahead, and waits (on the page lock) only if
//! the source is slower than it.
//!
//! Invariants: every page of a window is inserted locked, before the read,
//! so a concurrent reader of any of them waits on its page lock and then
//! sees it up to date (or gone, after a read error); the window stops at the
//! first index already cached or the first allocation that fails, so it is
//! always one contiguous run. Pages of a synchronous window beyond the
//! requested one hold the cache's and the LRU batch's references only; pages
//! of an asynchronous window hold one more, the read's, put when the read
//! ends. A marker is a hint: a lost or stale one (slot reused by another
//! stream, page reclaimed) costs a synchronous window later, never data.
//!
//! Lock order: a stream slot's lock is taken first and held while the next
//! window's pages are allocated and inserted (zone, shard and LRU locks
//! nest inside it); nothing takes a slot's lock while holding another lock,
//! and the read itself runs after it is dropped.

use super::checked::{guarded, PageIndex, MAX_INDEX};
use super::handle::page_bytes;
use super::handle::CacheLock;
use super::mapping::{Mapping, MappingInner};
use super::ra_state::{next_size, RA_HISTORY_PAGES, RA_INIT_PAGES, RA_MAX_LIMIT, RA_STREAMS};
use super::{CacheInner, PageHandle};
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::Pfn;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

#[cfg(all(test, not(loom)))]
#[path = "readahead_tests.rs"]
mod tests;

impl Mapping {
    /// The cache's largest window.
    fn ra_max(&self) -> u64 {
        self.cache.ra.max_pages()
    }

    /// Pages to read for a miss at `index` (see the module doc).
    ///
    /// # Errors
    /// A panicking source hint (`readahead`, `nr_pages`).
    pub(super) fn ra_window(&self, index: PageIndex) -> io::Result<u64> {
        let max = self.ra_max();
        if max <= 1 || !self.source_call("readahead", |s| Ok(s.readahead()))? {
            return Ok(1);
        }
        let index = index.get();
        let history = (1..=RA_HISTORY_PAGES.min(index))
            .take_while(|&k| self.m.shard(index - k).read().contains_key(&(index - k)))
            .count() as u64;
        // As the kernel's context readahead: a history of one page is no
        // stream (a random miss next to a cached page reads one page).
        let size = match (index, history) {
            (0, _) => RA_INIT_PAGES.min(max),
            (_, 0 | 1) => 1,
            (_, h) => (2 * h).clamp(RA_INIT_PAGES.min(max), max),
        };
        Ok(self.clamp_to_end(index, size)?.max(1))
    }

    /// `size` cut at the source's end and at the largest index (0 if
    /// `index` is past either).
    fn clamp_to_end(&self, index: u64, size: u64) -> io::Result<u64> {
        let size = size.min((MAX_INDEX + 1).saturating_sub(index));
        Ok(match self.source_call("nr_pages", |s| Ok(s.nr_pages()))? {
            Some(end) => size.min(end.saturating_sub(index)),
            None => size,
        })
    }

    /// A reader reached page `index` (cached, maybe still being read): if it
    /// is a stream's marker, start the stream's next window.
    ///
    /// # Errors
    /// A panicking source hint.
    pub(super) fn ra_hit(&self, index: u64) -> io::Result<()> {
        if !self.source_call("readahead", |s| Ok(s.readahead()))? {
            return Ok(());
        }
        if let Some(s) = self.m.ra.claim(index) {
            self.ra_async(s)?;
        }
        Ok(())
    }

    /// Start a stream whose first (synchronous) window was `[index, index + n)`.
    fn ra_start(&self, index: u64, n: u64) {
        let s = (self.m.ra.next.fetch_add(1, Ordering::Relaxed) % RA_STREAMS as u64) as usize;
        let mut w = self.m.ra.windows[s].lock();
        *w = (index + n, n);
        self.m.ra.markers[s].store(index + 2, Ordering::Release);
    }

    /// The next window of stream `s`, whose marker the caller claimed: pages
    /// inserted locked here, read inline or by a worker.
    fn ra_async(&self, s: usize) -> io::Result<()> {
        let mut w = self.m.ra.windows[s].lock();
        let (start, last) = *w;
        let n = self.clamp_to_end(start, next_size(last, self.ra_max()))?;
        let pages = self.insert_run(start, n, 3);
        if pages.is_empty() {
            return Ok(());
        }
        *w = (start + pages.len() as u64, n);
        // The next marker: this window's first page.
        self.m.ra.markers[s].store(start + 1, Ordering::Release);
        drop(w);
        self.cache.ra.async_windows.fetch_add(1, Ordering::Relaxed);
        self.cache.ra.submit(&self.cache, &self.m, start, pages);
        Ok(())
    }

    /// Insert pages `start..start + n` locked, each with `refs` references
    /// (the cache's, the LRU batch's and the read's), up to the first index
    /// cached already, past the largest, or whose allocation fails.
    fn insert_run(&self, start: u64, n: u64, refs: u32) -> Vec<Pfn> {
        let mut pages = Vec::with_capacity(n.min(RA_MAX_LIMIT) as usize);
        for i in start..start.saturating_add(n) {
            let Ok(i) = PageIndex::new(i) else { break };
            match self.alloc_insert(i, refs) {
                Ok(Some(p)) => pages.push(p),
                _ => break,
            }
        }
        pages
    }

    /// Fill page `index` and up to `n - 1` pages after it with one read of
    /// the source; a referenced, up-to-date handle on page `index`.
    /// `Ok(None)` if another thread inserted page `index` first. A window of
    /// more than one page starts a stream (module doc).
    ///
    /// # Errors
    /// The source's read error (every page of the window is dropped; a
    /// window of several pages is retried as the page alone first), or
    /// `OutOfMemory` if no page could be had for `index`.
    pub(super) fn fill_window(&self, index: PageIndex, n: u64) -> io::Result<Option<PageHandle<'_>>> {
        // The requested page: the cache's, the LRU batch's and our handle's
        // references.
        let Some(first) = self.alloc_insert(index, 3)? else {
            return Ok(None);
        };
        let h = self.handle(first, index.get());
        // The rest: the cache's, the LRU batch's and the read's.
        let mut pages = vec![first];
        pages.extend(self.insert_run(index.get() + 1, n.max(1) - 1, 3));
        let res = read_window(&self.cache, &self.m, index.get(), &pages, Some(first));
        if res.is_err() && pages.len() > 1 {
            // The window may have failed for another page of it: read the
            // page asked for alone (the kernel falls back to one page too),
            // so one bad page cannot keep its neighbours from being served.
            drop(h);
            return self.fill_window(index, 1);
        }
        if res.is_ok() && pages.len() > 1 {
            self.ra_start(index.get(), pages.len() as u64);
        }
        res.map(|()| Some(h))
    }
}

/// Read the locked pages `pages` (indexes `start..`) of mapping `m` with one
/// call to its source, then mark them up to date (or, after an error or a
/// panic of the source, drop them from the mapping) and unlock them, and
/// put the read's reference of each page but `keep` (whose reference is
/// the caller's handle).
pub(crate) fn read_window(
    cache: &Arc<CacheInner>,
    m: &Arc<MappingInner>,
    start: u64,
    pages: &[Pfn],
    keep: Option<Pfn>,
) -> io::Result<()> {
    let a = &cache.alloc;
    // Every page of the window is unlocked and put by these guards, on every
    // path out: the source's panic cannot leave one locked.
    // Declared first, dropped last: a page's reference outlives its lock.
    let _refs: Vec<ReadRef<'_>> = pages.iter().filter(|&&p| Some(p) != keep).map(|&p| ReadRef(a, p)).collect();
    let locks: Vec<CacheLock<'_>> = pages.iter().map(|&p| CacheLock::adopt(a, p)).collect();
    // SAFETY: see `page_bytes`: every page of the window is locked and
    // referenced, and no two are the same frame.
    let mut bufs: Vec<&mut [u8]> = pages.iter().map(|&p| unsafe { &mut *page_bytes(a, p) }).collect();
    let res = guarded("read_pages", || m.source.read_pages(start, &mut bufs));
    drop(bufs);
    let mapping = Mapping::new(cache.clone(), m.clone());
    for (k, l) in locks.into_iter().enumerate() {
        if res.is_err() {
            mapping.delete_locked(pages[k].as_u64(), start + k as u64);
            drop(l);
        } else {
            // One RMW marks the page up to date and unlocks it (`folio_end_read`).
            l.unlock_uptodate();
        }
    }
    res
}

/// The read's reference on a page of a window, put on drop (after the
/// page's lock: see `read_window`'s order of declarations).
struct ReadRef<'a>(&'a crate::allocator::PageAllocator, Pfn);

impl Drop for ReadRef<'_> {
    fn drop(&mut self) {
        let _ = self.0.core.put_page(self.1);
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
    let base = super::checked::byte_offset(index)?;
    while done < total {
        let off = base + done as u64;
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
