//! [`DirectFileSource`]: a file read and written with `O_DIRECT`, whole
//! aligned pages straight between the disk and the cache's pages, so that a
//! page is not cached twice (once by the kernel, once by us), as user-space
//! buffer managers do. Where the file system refuses `O_DIRECT` (`EINVAL`
//! at open) the file is opened buffered instead, and [`DirectFileSource::mode`]
//! says which mode is in use.
//!
//! Invariants and contracts:
//! - Every read and write covers whole 4 KiB pages at page-aligned offsets,
//!   from and into page-aligned buffers (the arena's pages are; a caller's
//!   buffer that is not goes through an aligned bounce page).
//! - The file's logical size is kept here (`size`, from the file at open,
//!   or [`DirectFileSource::set_size`]). Reading the page that holds the end
//!   reads it whole and zeros the bytes past the end; pages past the end
//!   read as zeros. A page written past the end by a caller of
//!   `write_page` (not through a mapping) grows the size to that page's
//!   end; writing the page that holds the end writes it whole and then cuts the
//!   file back to its size (`ftruncate`), so the file never grows past its
//!   size. A write through the cache grows the size to the write's end
//!   first (`PageSource::grow_to`, as `pwrite` grows a file), so the
//!   written bytes of the last page survive its writeback and eviction.
//!   Growth is recorded (`fetch_max`) before the write that makes it
//!   and the cut reads the size after its write, so a cut never removes a
//!   page another writer just added.
//! - Readahead applies (the cache's windows become single `preadv` calls):
//!   with `O_DIRECT` the kernel reads nothing ahead for us.

use super::checked::byte_offset;
use super::readahead::preadv_pages;
use super::PageSource;
use pagealloc_core::sync::{AtomicU64, Ordering};
use pagealloc_core::types::PAGE_SIZE;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// How a [`DirectFileSource`] reaches its file.
///
/// # Examples
///
/// ```
/// use pagealloc::{DirectFileSource, IoMode};
/// use std::{fs::OpenOptions, os::unix::fs::OpenOptionsExt};
/// let path = std::env::temp_dir().join(format!("pagealloc-doc-iomode-{}", std::process::id()));
/// let src = DirectFileSource::open(&path, true).unwrap(); // buffered where O_DIRECT is refused
/// let direct_ok = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&path).is_ok();
/// assert_eq!(src.mode() == IoMode::Direct, direct_ok);
/// std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// `O_DIRECT`: the kernel's page cache is bypassed.
    Direct,
    /// The file system refused `O_DIRECT`: reads and writes go through the
    /// kernel's page cache (pages are then cached twice).
    Buffered,
}

/// A file accessed with `O_DIRECT` where the file system allows it; see
/// the module doc.
///
/// # Examples
///
/// ```
/// use pagealloc::{DirectFileSource, PageSource};
/// let path = std::env::temp_dir().join(format!("pagealloc-doc-direct-{}", std::process::id()));
/// let src = DirectFileSource::open(&path, true).unwrap(); // read-write, created
/// src.write_page(1, &[7; 4096]).unwrap(); // whole pages, aligned for O_DIRECT
/// assert_eq!(src.size(), 8192); // a page written past the end grows the file
/// let mut page = vec![1; 4096];
/// src.read_page(0, &mut page).unwrap();
/// assert!(page.iter().all(|&b| b == 0)); // the hole reads as zeros
/// std::fs::remove_file(&path).unwrap();
/// ```
pub struct DirectFileSource {
    file: File,
    mode: IoMode,
    /// The file's logical size in bytes.
    size: AtomicU64,
}

/// Open `path` (read-only, or read-write and created if `write`), with
/// `O_DIRECT` if `direct`.
fn open_file(path: &Path, write: bool, direct: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    if write {
        o.write(true).create(true);
    }
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// Try `open(true)` (direct); if the file system refuses it (`EINVAL`),
/// `open(false)`.
fn open_fallback(open: impl Fn(bool) -> io::Result<File>) -> io::Result<(File, IoMode)> {
    match open(true) {
        Ok(f) => Ok((f, IoMode::Direct)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((open(false)?, IoMode::Buffered)),
        Err(e) => Err(e),
    }
}

impl DirectFileSource {
    /// Open `path` with `O_DIRECT` (read-only, or read-write and created if
    /// `write`), falling back to buffered I/O where the file system refuses
    /// `O_DIRECT`.
    ///
    /// # Errors
    /// The open's error, or `fstat`'s.
    pub fn open(path: &Path, write: bool) -> io::Result<Self> {
        Self::from_open(|direct| open_file(path, write, direct))
    }

    fn from_open(open: impl Fn(bool) -> io::Result<File>) -> io::Result<Self> {
        let (file, mode) = open_fallback(open)?;
        let size = file.metadata()?.len();
        Ok(Self { file, mode, size: AtomicU64::new(size) })
    }

    /// The I/O mode in use.
    #[must_use]
    pub fn mode(&self) -> IoMode {
        self.mode
    }

    /// The file.
    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file's logical size in bytes.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// Set the file's size (`ftruncate`): what reads see as its end and what
    /// writes of its last page keep.
    ///
    /// # Errors
    /// `ftruncate`'s error.
    pub fn set_size(&self, bytes: u64) -> io::Result<()> {
        self.size.store(bytes, Ordering::Release);
        self.file.set_len(bytes)
    }

    fn preadv_direct(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        let mut first = 0usize;
        while first < bufs.len() {
            let iov: Vec<libc::iovec> = bufs[first..]
                .iter_mut()
                .take(libc::UIO_MAXIOV as usize)
                .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
                .collect();
            let off = byte_offset(index.checked_add(first as u64).ok_or(io::ErrorKind::InvalidInput)?)?;
            // SAFETY: `iov` describes live, disjoint, page-aligned whole
            // pages (`bufs[first..]`, exclusively borrowed for this call).
            let n = unsafe { libc::preadv(self.file.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, off as _) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let (whole, part) = (n as usize / PAGE_SIZE, n as usize % PAGE_SIZE);
            if n == 0 {
                break;
            }
            if whole == 0 {
                // The file ends inside this page: the rest of it is zeros.
                bufs[first][part..].fill(0);
                first += 1;
            } else {
                // Whole pages read; a partial one after them is read again
                // from its start (alignment).
                first += whole;
            }
        }
        for b in &mut bufs[first..] {
            b.fill(0);
        }
        Ok(())
    }

    fn write_whole(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        let off = byte_offset(index)?;
        let end = off + PAGE_SIZE as u64;
        let size = self.size();
        let holds_end = off < size && size < end;
        if !holds_end && end > size {
            // A page past the end: the file grows to its end (recorded
            // before the write: see the module doc).
            self.size.fetch_max(end, Ordering::AcqRel);
        }
        with_aligned(buf, |b| self.file.write_all_at(b, off))?;
        if holds_end {
            self.file.set_len(self.size().max(size))?;
        }
        Ok(())
    }
}

fn aligned(b: &[u8]) -> bool {
    b.len() == PAGE_SIZE && (b.as_ptr() as usize).is_multiple_of(PAGE_SIZE)
}

/// Run `f` on `buf`, or on an aligned copy of it if it is not one aligned page.
fn with_aligned<R>(buf: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    if aligned(buf) {
        return f(buf);
    }
    let mut page = Bounce::new();
    page.0[..buf.len().min(PAGE_SIZE)].copy_from_slice(&buf[..buf.len().min(PAGE_SIZE)]);
    f(&page.0)
}

/// One page-aligned page.
#[repr(C, align(4096))]
struct Bounce([u8; PAGE_SIZE]);

impl Bounce {
    fn new() -> Box<Self> {
        Box::new(Bounce([0; PAGE_SIZE]))
    }
}

impl PageSource for DirectFileSource {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        if aligned(buf) {
            return self.read_pages(index, &mut [buf]);
        }
        let mut page = Bounce::new();
        self.read_pages(index, &mut [&mut page.0[..]])?;
        let n = buf.len().min(PAGE_SIZE);
        buf[..n].copy_from_slice(&page.0[..n]);
        Ok(())
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        match self.mode {
            IoMode::Direct => self.preadv_direct(index, bufs),
            IoMode::Buffered => preadv_pages(&self.file, index, bufs),
        }
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        self.write_whole(index, buf)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn nr_pages(&self) -> Option<u64> {
        Some(self.size().div_ceil(PAGE_SIZE as u64))
    }
    fn grow_to(&self, end: u64) -> io::Result<()> {
        // Before the page that holds `end` can be written back (the cache
        // calls this with the page locked): its writeback keeps the bytes
        // up to the new size.
        self.size.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }
    fn readahead(&self) -> bool {
        true
    }
}

#[cfg(all(test, not(loom)))]
#[path = "direct_tests.rs"]
mod tests;
