//! Readahead's settings and per-mapping state: the window sizes, the
//! user's [`Readahead`] knobs, and each mapping's streams (what a mapping
//! holds; the paths that use them are `readahead`'s).

use pagealloc_core::error::ConfigError;
use pagealloc_core::sync::{AtomicU64, Mutex, Ordering};

/// The first window of a stream read from the start of the source.
#[cfg(not(loom))]
pub(crate) const RA_INIT_PAGES: u64 = 4;
/// The default largest window (the kernel's default `read_ahead_kb`, 128 KiB).
#[cfg(not(loom))]
pub const RA_MAX_PAGES: u64 = 32;
/// Cached pages a miss looks back at to size a synchronous window.
#[cfg(not(loom))]
pub(crate) const RA_HISTORY_PAGES: u64 = 32;
/// Under loom, windows of one page: the models check the fill protocol of
/// one page, which every page of a window follows alike.
#[cfg(loom)]
pub(crate) const RA_INIT_PAGES: u64 = 1;
/// The largest window under loom (see `RA_INIT_PAGES`).
#[cfg(loom)]
pub const RA_MAX_PAGES: u64 = 1;
#[cfg(loom)]
pub(crate) const RA_HISTORY_PAGES: u64 = 1;
/// The largest `max_pages` accepted (16 MiB windows).
pub const RA_MAX_LIMIT: u64 = 4096;
/// Streams with a marker per mapping.
pub(crate) const RA_STREAMS: usize = 8;

/// A page cache's readahead settings (`PageCache::set_readahead`).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, PageCache, PageCacheConfig, Readahead, RA_MAX_LIMIT};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// assert_eq!(cache.readahead(), Readahead { max_pages: 32, workers: 0 }); // the default
/// cache.set_readahead(Readahead { max_pages: 128, workers: 0 }).unwrap(); // 512 KiB windows
/// assert_eq!(cache.readahead().max_pages, 128);
/// assert!(cache.set_readahead(Readahead { max_pages: RA_MAX_LIMIT + 1, workers: 0 }).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readahead {
    /// The largest window, in pages (1..=[`RA_MAX_LIMIT`]; 1 reads only the
    /// page asked for: readahead off).
    pub max_pages: u64,
    /// Threads that read asynchronous windows; 0: the reader that reaches a
    /// marker reads the next window itself, inline.
    pub workers: usize,
}

/// The default: 128 KiB windows read inline. Measured on the 2-CPU
/// machine (`pagealloc bench lru-file-readtwice`, cold rounds), inline beat
/// one worker for buffered files: the kernel's own readahead on the file
/// already makes the disk reads asynchronous, and a worker costs a wakeup
/// and a context switch per window on CPUs the readers keep busy. Workers
/// pay where nothing reads ahead for us (`O_DIRECT`).
impl Default for Readahead {
    fn default() -> Self {
        Self { max_pages: RA_MAX_PAGES, workers: 0 }
    }
}

impl Readahead {
    /// # Errors
    /// `ConfigError::Invalid` for a window of 0 or more than
    /// [`RA_MAX_LIMIT`] pages, or more than 64 workers.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=RA_MAX_LIMIT).contains(&self.max_pages) {
            return Err(ConfigError::Invalid {
                field: "readahead.max_pages",
                why: format!("{} is not in 1..={RA_MAX_LIMIT}", self.max_pages),
            });
        }
        if self.workers > 64 {
            return Err(ConfigError::Invalid { field: "readahead.workers", why: format!("{} > 64", self.workers) });
        }
        Ok(())
    }
}

/// The next window of a stream whose last window had `size` pages (the
/// kernel's ramp: 4x while small, then 2x), at most `max`.
pub(crate) fn next_size(size: u64, max: u64) -> u64 {
    let grow = if size < max / 16 { 4 } else { 2 };
    (size * grow).clamp(1, max)
}

/// A mapping's readahead streams (see the module doc).
pub(crate) struct RaStreams {
    /// Per slot: the marker's index + 1 (0: none).
    pub(crate) markers: [AtomicU64; RA_STREAMS],
    /// Per slot: the end (first index after) and size of the stream's last
    /// window.
    pub(crate) windows: [Mutex<(u64, u64)>; RA_STREAMS],
    /// The slot the next new stream takes (round robin).
    pub(crate) next: AtomicU64,
}

impl RaStreams {
    pub(crate) fn new() -> Self {
        Self {
            markers: std::array::from_fn(|_| AtomicU64::new(0)),
            windows: std::array::from_fn(|_| Mutex::new((0, 0))),
            next: AtomicU64::new(0),
        }
    }
    /// Claim the marker at `index`, if a stream has one there: its slot.
    pub(crate) fn claim(&self, index: u64) -> Option<usize> {
        let s = (0..RA_STREAMS).find(|&s| self.markers[s].load(Ordering::Relaxed) == index + 1)?;
        self.markers[s].compare_exchange(index + 1, 0, Ordering::AcqRel, Ordering::Relaxed).ok().map(|_| s)
    }
    /// Markers set now (racy; tests, none of them loom's).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn markers(&self) -> Vec<u64> {
        self.markers.iter().map(|m| m.load(Ordering::Relaxed)).filter(|&m| m != 0).map(|m| m - 1).collect()
    }
}
