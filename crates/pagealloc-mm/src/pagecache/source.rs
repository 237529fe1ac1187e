//! Where a mapping's pages come from and go to: the [`PageSource`] trait
//! and its two stock implementations, a file ([`FileSource`]) and a fill
//! callback ([`FillFn`]). Every call the cache makes into a source goes
//! through `checked::guarded`, so a source that panics fails that call
//! with [`PageCacheError::SourcePanicked`](super::PageCacheError) and
//! leaves no page locked.

use super::checked::byte_offset;
use pagealloc_core::types::PAGE_SIZE;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Where a mapping's pages come from and go to.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, PageCache, PageCacheConfig, PageSource};
/// use std::{collections::HashMap, io, sync::{Arc, Mutex}};
/// /// A disk kept in memory: the pages written back, by index.
/// #[derive(Default)]
/// struct Disk(Mutex<HashMap<u64, Vec<u8>>>);
/// impl PageSource for Disk {
///     fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
///         match self.0.lock().unwrap().get(&index) {
///             Some(page) => buf.copy_from_slice(page),
///             None => buf.fill(0),
///         }
///         Ok(())
///     }
///     fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
///         self.0.lock().unwrap().insert(index, buf.to_vec());
///         Ok(())
///     }
/// }
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// let disk = Arc::new(Disk::default());
/// let m = cache.mapping(1, disk.clone());
/// m.write(0, b"durable").unwrap();
/// m.fsync().unwrap(); // the dirty page goes back through write_page
/// assert_eq!(&disk.0.lock().unwrap()[&0][..7], b"durable");
/// ```
pub trait PageSource: Send + Sync {
    /// Fill `buf` (one page) with page `index`'s contents.
    ///
    /// # Errors
    /// Any I/O error; the page is then dropped and the error returned to the
    /// reader.
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Write page `index` back (default: nothing to write to).
    ///
    /// # Errors
    /// Any I/O error; the page stays dirty and `fsync` reports it.
    fn write_page(&self, _index: u64, _buf: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Make written pages durable (default: nothing).
    ///
    /// # Errors
    /// Any I/O error.
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    /// Fill `bufs` (pages) with pages `index..index + bufs.len()`: what a
    /// readahead window reads. The default reads them one by one; a file
    /// reads them with one `preadv`.
    ///
    /// # Errors
    /// Any I/O error; every page of the window is then dropped.
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        for (i, b) in bufs.iter_mut().enumerate() {
            let at = index.checked_add(i as u64).ok_or(io::ErrorKind::InvalidInput)?;
            self.read_page(at, b)?;
        }
        Ok(())
    }
    /// The source's size in pages, if it has one: readahead does not read
    /// past it (default: none, no limit).
    fn nr_pages(&self) -> Option<u64> {
        None
    }
    /// Whether misses read ahead (see the `readahead` module): true for
    /// files (`FileSource`); a fill callback (the default) computes only the
    /// pages asked for.
    fn readahead(&self) -> bool {
        false
    }
    /// A write through the cache reached byte `end` of the file (the
    /// kernel's `i_size_write` at the end of a buffered write): a source
    /// that keeps its own size grows it to at least `end`, so that the
    /// write's bytes in the last page survive its writeback (default:
    /// nothing).
    ///
    /// # Errors
    /// Any I/O error; the write that reached `end` returns it.
    fn grow_to(&self, _end: u64) -> io::Result<()> {
        Ok(())
    }
}

/// A file, read with `pread` and written with `pwrite` on the descriptor the
/// source owns. Bytes past the end of the file read as zeros; writeback
/// writes whole pages (a file grows to a page multiple). Indexes past
/// [`MAX_INDEX`](super::MAX_INDEX) are refused (`InvalidInput`).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FileSource, PageAllocator, PageCache, PageCacheConfig};
/// use std::{fs, sync::Arc};
/// let path = std::env::temp_dir().join(format!("pagealloc-doc-file-{}", std::process::id()));
/// fs::write(&path, b"on disk").unwrap();
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// let m = cache.mapping(1, Arc::new(FileSource(fs::File::open(&path).unwrap())));
/// let mut b = [1u8; 9];
/// assert_eq!(m.read(0, &mut b).unwrap(), 9);
/// assert_eq!(&b, b"on disk\0\0"); // past the file's end: zeros
/// fs::remove_file(&path).unwrap();
/// ```
pub struct FileSource(pub File);

impl PageSource for FileSource {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        let off = byte_offset(index)?;
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf[done..].fill(0);
        Ok(())
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        self.0.write_all_at(buf, byte_offset(index)?)
    }
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn readahead(&self) -> bool {
        true
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        super::readahead::preadv_pages(&self.0, index, bufs)
    }
    fn nr_pages(&self) -> Option<u64> {
        self.0.metadata().ok().map(|m| m.len().div_ceil(PAGE_SIZE as u64))
    }
}

/// A fill callback: a cache of computed blocks with no file behind it
/// (writes stay in memory; reclaim drops clean pages, writes back nothing).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FillFn, PageAllocator, PageCache, PageCacheConfig};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// // Page i holds i * i in its first 8 bytes, computed on a miss.
/// let squares = FillFn(|i: u64, buf: &mut [u8]| {
///     buf.fill(0); // a fill writes the whole page
///     buf[..8].copy_from_slice(&(i * i).to_le_bytes());
///     Ok(())
/// });
/// let m = cache.mapping(1, Arc::new(squares));
/// let mut b = [0u8; 8];
/// m.read(12 * 4096, &mut b).unwrap();
/// assert_eq!(u64::from_le_bytes(b), 144);
/// ```
pub struct FillFn<F>(pub F);

impl<F: Fn(u64, &mut [u8]) -> io::Result<()> + Send + Sync> PageSource for FillFn<F> {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        (self.0)(index, buf)
    }
}
