//! The page cache's limits and its two guards against hostile input:
//! [`PageIndex`], the one checked type every offset and index goes through
//! before it reaches a mapping, and [`guarded`], the one unwind guard every
//! call into a user's [`PageSource`](super::PageSource) goes through.
//!
//! Why a largest index: a cached page's owner record (`CacheInner::owners`,
//! 8 bytes a frame) packs the mapping slot above [`INDEX_BITS`] bits of
//! index. An index that did not fit would spill into the slot bits and name
//! another page of another file, so indexes past [`MAX_INDEX`] are refused
//! at the boundary with [`PageCacheError::IndexTooLarge`] and byte ranges
//! that end past [`MAX_FILE_BYTES`] with [`PageCacheError::RangeTooLarge`].
//! 2^40 pages of 4 KiB is 4 PiB, past what any Linux file system stores in
//! one file, and every byte offset of a valid index fits `off_t`.
//!
//! Why an unwind guard: a source's callbacks run while the cache holds page
//! locks (a fill), the writeback bit (a write) or a window of locked pages
//! (readahead). A panic that unwound through those frames would leave them
//! held, and the next reader of the page would wait forever. [`guarded`]
//! turns a panic into [`PageCacheError::SourcePanicked`], an I/O error of the
//! call that made it, and the cache's ordinary error path undoes the rest.

use pagealloc_core::types::{Pfn, PAGE_SIZE};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Index bits of an owner word; the mapping slot + 1 sits above them.
pub(crate) const INDEX_BITS: u32 = 40;

/// The largest page index a mapping holds (2^40 - 1).
pub const MAX_INDEX: u64 = (1 << INDEX_BITS) - 1;

/// The largest file the page cache serves, in bytes (2^52, 4 PiB): the byte
/// just past page [`MAX_INDEX`].
pub const MAX_FILE_BYTES: u64 = (MAX_INDEX + 1) * PAGE_SIZE as u64;

/// The most mappings a cache holds at once (the slot bits of an owner word).
pub const MAX_MAPPINGS: usize = (1 << (64 - INDEX_BITS)) - 1;

/// Why a page-cache call was refused. Page-cache calls return
/// [`std::io::Error`]s; the refusals of this enum travel inside them (see
/// [`PageCacheError::of`]), with the [`io::ErrorKind`] each variant names.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FillFn, PageAllocator, PageCache, PageCacheConfig, PageCacheError};
/// use std::{io::ErrorKind, sync::Arc};
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// let m = cache.mapping(1, Arc::new(FillFn(|_: u64, buf: &mut [u8]| { buf.fill(0); Ok(()) })));
/// assert!(cache.remove_mapping(1));
/// let err = m.read(0, &mut [0u8; 8]).unwrap_err(); // an io::Error, as file I/O gives
/// assert_eq!(err.kind(), ErrorKind::NotFound);
/// assert_eq!(PageCacheError::of(&err), Some(&PageCacheError::MappingRemoved { id: 1 }));
/// ```
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageCacheError {
    /// A page index past [`MAX_INDEX`] (`InvalidInput`).
    #[error("page index {index} is past the largest the page cache holds ({MAX_INDEX})")]
    IndexTooLarge {
        /// The index given.
        index: u64,
    },
    /// A byte range that wraps or ends past [`MAX_FILE_BYTES`]
    /// (`InvalidInput`).
    #[error("bytes {pos}..+{len} end past the largest file the page cache serves ({MAX_FILE_BYTES} bytes)")]
    RangeTooLarge {
        /// The offset given.
        pos: u64,
        /// The length given.
        len: u64,
    },
    /// The mapping was removed (`PageCache::remove_mapping`) or its cache
    /// dropped: its handles serve nothing more (`NotFound`).
    #[error("mapping {id} was removed or its page cache dropped")]
    MappingRemoved {
        /// The mapping's id.
        id: u64,
    },
    /// The cache holds [`MAX_MAPPINGS`] mappings already (`OutOfMemory`).
    #[error("the page cache holds the most mappings it can ({MAX_MAPPINGS})")]
    TooManyMappings {
        /// The id asked for.
        id: u64,
    },
    /// The page's reference count is at the most its users may hold
    /// (`ResourceBusy`): put some references and try again.
    #[error("{pfn:?} has the most references a page may hold")]
    Saturated {
        /// The page.
        pfn: Pfn,
    },
    /// A [`PageSource`](super::PageSource) callback panicked (`Other`): the
    /// call failed as for an I/O error, and every lock and writeback bit it
    /// held was released.
    #[error("the page source's {op} panicked: {message}")]
    SourcePanicked {
        /// The callback (`read_pages`, `write_page`, `sync`, ...).
        op: &'static str,
        /// The panic's message, where it had one.
        message: String,
    },
}

impl PageCacheError {
    /// The page-cache refusal an I/O error carries, if it carries one.
    #[must_use]
    pub fn of(e: &io::Error) -> Option<&PageCacheError> {
        e.get_ref().and_then(|inner| inner.downcast_ref())
    }

    fn kind(&self) -> io::ErrorKind {
        match self {
            Self::IndexTooLarge { .. } | Self::RangeTooLarge { .. } => io::ErrorKind::InvalidInput,
            Self::MappingRemoved { .. } => io::ErrorKind::NotFound,
            Self::TooManyMappings { .. } => io::ErrorKind::OutOfMemory,
            Self::Saturated { .. } => io::ErrorKind::ResourceBusy,
            Self::SourcePanicked { .. } => io::ErrorKind::Other,
        }
    }
}

impl From<PageCacheError> for io::Error {
    fn from(e: PageCacheError) -> Self {
        io::Error::new(e.kind(), e)
    }
}

/// A page index checked against [`MAX_INDEX`]: what every mapping call
/// converts its `u64` into before it touches a map, an owner word or a
/// source, so that `index + 1`, `index * PAGE_SIZE` and the owner word's
/// packing cannot overflow past it.
///
/// # Examples
///
/// ```
/// use pagealloc::{PageCacheError, PageIndex, MAX_INDEX};
/// let i = PageIndex::new(3).unwrap();
/// assert_eq!((i.get(), i.byte_offset()), (3, 3 * 4096));
/// assert_eq!(PageIndex::of_range(8195, 10), Ok((PageIndex::new(2).unwrap(), 3))); // page 2, byte 3
/// assert_eq!(PageIndex::new(MAX_INDEX + 1), Err(PageCacheError::IndexTooLarge { index: MAX_INDEX + 1 }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageIndex(u64);

impl PageIndex {
    /// `index`, if the page cache can hold it.
    ///
    /// # Errors
    /// [`PageCacheError::IndexTooLarge`] past [`MAX_INDEX`].
    pub const fn new(index: u64) -> Result<Self, PageCacheError> {
        if index > MAX_INDEX {
            return Err(PageCacheError::IndexTooLarge { index });
        }
        Ok(Self(index))
    }

    /// The index.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The page's first byte in its file (cannot overflow: at most
    /// [`MAX_FILE_BYTES`] - 4096).
    #[must_use]
    pub const fn byte_offset(self) -> u64 {
        self.0 * PAGE_SIZE as u64
    }

    /// How many pages from this one fit before the largest index: at least 1.
    #[must_use]
    pub const fn pages_to_end(self) -> u64 {
        MAX_INDEX - self.0 + 1
    }

    /// Check the byte range `pos..pos + len`: the page and in-page offset
    /// of its first byte.
    ///
    /// # Errors
    /// [`PageCacheError::RangeTooLarge`] if the range wraps or ends past
    /// [`MAX_FILE_BYTES`] (an empty range may start at it).
    pub fn of_range(pos: u64, len: usize) -> Result<(Self, usize), PageCacheError> {
        let end = pos.checked_add(len as u64).filter(|&e| e <= MAX_FILE_BYTES);
        if end.is_none() || (len > 0 && pos >= MAX_FILE_BYTES) {
            return Err(PageCacheError::RangeTooLarge { pos, len: len as u64 });
        }
        let page = pos / PAGE_SIZE as u64;
        Ok((Self(page.min(MAX_INDEX)), (pos % PAGE_SIZE as u64) as usize))
    }
}

/// The byte offset of page `index` in a file, for sources that are handed
/// indexes by callers other than the cache.
///
/// # Errors
/// `InvalidInput` ([`PageCacheError::IndexTooLarge`]) past [`MAX_INDEX`].
pub(crate) fn byte_offset(index: u64) -> io::Result<u64> {
    Ok(PageIndex::new(index)?.byte_offset())
}

/// Run the user callback `f` (the source's `op`), turning a panic into
/// [`PageCacheError::SourcePanicked`]. The callers hold page locks or
/// writeback bits across `f` and release them on its error path, so a
/// panic never leaves them held.
pub(crate) fn guarded<R>(op: &'static str, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let message = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(PageCacheError::SourcePanicked { op, message }.into())
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn index_and_range_limits() {
        assert_eq!(PageIndex::new(MAX_INDEX).map(PageIndex::get), Ok(MAX_INDEX));
        assert_eq!(PageIndex::new(MAX_INDEX + 1), Err(PageCacheError::IndexTooLarge { index: MAX_INDEX + 1 }));
        assert!(PageIndex::new(u64::MAX).is_err());
        assert_eq!(PageIndex::new(MAX_INDEX).unwrap().byte_offset(), MAX_FILE_BYTES - PAGE_SIZE as u64);
        assert_eq!(PageIndex::new(MAX_INDEX).unwrap().pages_to_end(), 1);
        let last = MAX_FILE_BYTES - 1;
        assert_eq!(PageIndex::of_range(last, 1).map(|(i, o)| (i.get(), o)), Ok((MAX_INDEX, PAGE_SIZE - 1)));
        assert!(PageIndex::of_range(last, 2).is_err());
        assert!(PageIndex::of_range(u64::MAX - 99, 200).is_err(), "wraps");
        assert!(PageIndex::of_range(u64::MAX, 0).is_err());
        assert!(PageIndex::of_range(MAX_FILE_BYTES, 1).is_err());
        assert!(PageIndex::of_range(MAX_FILE_BYTES, 0).is_ok(), "an empty range at the end");
        assert!(byte_offset(1 << 52).is_err());
    }

    #[test]
    fn a_panic_is_a_typed_io_error() {
        let e = guarded::<()>("read_pages", || panic!("boom {}", 7)).unwrap_err();
        assert_eq!(
            PageCacheError::of(&e),
            Some(&PageCacheError::SourcePanicked { op: "read_pages", message: "boom 7".into() })
        );
        let e: io::Error = PageCacheError::IndexTooLarge { index: u64::MAX }.into();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(guarded("x", || Ok(3)).is_ok_and(|v| v == 3));
    }
}
