//! Dirty-page limits (the kernel's `vm.dirty_background_ratio` and
//! `vm.dirty_ratio`, mm/page-writeback.c's `global_dirty_limits`), kept
//! here, below the allocator, so that `vmstat` can report the thresholds;
//! the page cache's flusher and its throttling of writers use them
//! (`pagecache::writeback`).
//!
//! Memory the page cache can use ("dirtyable" memory, the kernel's
//! `global_dirtyable_memory`): free pages in the buddy lists plus the pages
//! on the file LRU lists, less the zones' reserves (each zone's high
//! watermark plus its largest lowmem reserve: the kernel's
//! `totalreserve_pages`). Of that:
//! - the background threshold is `dirty_background_ratio` percent: above it
//!   the flusher writes back the oldest dirty pages until below it;
//! - the dirty limit is `dirty_ratio` percent (at least one page): a writer
//!   that would dirty a page with `nr_dirty + nr_writeback` at or above it is
//!   throttled (it writes back pages itself, and waits for the flusher).
//!
//! As in the kernel, a background ratio at or above the dirty ratio gives a
//! background threshold of half the limit.
//!
//! Invariants: the ratios are each in their valid range at every instant
//! (set only through [`DirtyLimits::set_ratios`], which validates first);
//! the cached thresholds are the last ones computed (racy, refreshed by
//! writers every [`REFRESH_EVERY`] dirtied pages, by throttled writers and by
//! the flusher on every wake).

use pagealloc_core::error::ConfigError;
use pagealloc_core::sync::{AtomicU32, AtomicU64, Ordering};

/// The kernel's default `dirty_background_ratio`.
pub const DEFAULT_DIRTY_BACKGROUND_RATIO: u32 = 10;
/// The kernel's default `dirty_ratio`.
pub const DEFAULT_DIRTY_RATIO: u32 = 20;
/// Pages dirtied between two refreshes of the cached thresholds by writers
/// (the kernel's per-CPU `ratelimit_pages` does the same job).
pub const REFRESH_EVERY: u64 = 32;

/// Dirty thresholds computed from the ratios and the memory the page cache
/// can use now (pages).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, DEFAULT_DIRTY_RATIO};
/// let a = PageAllocator::new(Config::small(8 << 20)).unwrap();
/// let t = a.reclaim().dirty_thresholds();
/// assert_eq!(t.limit, t.dirtyable * u64::from(DEFAULT_DIRTY_RATIO) / 100); // writers throttle here
/// a.reclaim().set_dirty_ratios(5, 10).unwrap();
/// assert!(a.reclaim().dirty_thresholds().limit < t.limit);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirtyThresholds {
    /// Memory the page cache can use: free + file LRU pages - reserves.
    pub dirtyable: u64,
    /// `nr_dirty_background_threshold`: the flusher works above it.
    pub background: u64,
    /// `nr_dirty_threshold`: writers are throttled at it.
    pub limit: u64,
}

impl DirtyThresholds {
    /// The thresholds for `dirtyable` pages under the two ratios (validated).
    #[must_use]
    pub fn compute(dirtyable: u64, background_ratio: u32, ratio: u32) -> Self {
        let limit = (dirtyable * u64::from(ratio) / 100).max(1);
        let mut background = dirtyable * u64::from(background_ratio) / 100;
        if background_ratio >= ratio {
            background = limit / 2;
        }
        Self { dirtyable, background, limit }
    }
}

/// See the module doc.
pub struct DirtyLimits {
    background_ratio: AtomicU32,
    ratio: AtomicU32,
    background: AtomicU64,
    limit: AtomicU64,
    /// Clean-to-dirty transitions (the kernel's `nr_dirtied`), for the
    /// writers' refresh rate.
    pub dirtied: AtomicU64,
}

impl Default for DirtyLimits {
    fn default() -> Self {
        Self {
            background_ratio: AtomicU32::new(DEFAULT_DIRTY_BACKGROUND_RATIO),
            ratio: AtomicU32::new(DEFAULT_DIRTY_RATIO),
            // Until the first refresh nothing is throttled.
            background: AtomicU64::new(u64::MAX),
            limit: AtomicU64::new(u64::MAX),
            dirtied: AtomicU64::new(0),
        }
    }
}

impl DirtyLimits {
    /// (dirty_background_ratio, dirty_ratio) now.
    pub fn ratios(&self) -> (u32, u32) {
        (self.background_ratio.load(Ordering::Relaxed), self.ratio.load(Ordering::Relaxed))
    }

    /// Set both ratios (percent).
    ///
    /// # Errors
    /// `ConfigError::Invalid` if `background` is over 100 or `ratio` is not
    /// in 1..=100 (a dirty limit of 0% would allow no dirty page at all);
    /// nothing changes then.
    pub fn set_ratios(&self, background: u32, ratio: u32) -> Result<(), ConfigError> {
        if background > 100 {
            return Err(ConfigError::Invalid {
                field: "dirty_background_ratio",
                why: format!("{background} is not a percentage (0..=100)"),
            });
        }
        if !(1..=100).contains(&ratio) {
            return Err(ConfigError::Invalid { field: "dirty_ratio", why: format!("{ratio} is not in 1..=100") });
        }
        self.background_ratio.store(background, Ordering::Relaxed);
        self.ratio.store(ratio, Ordering::Relaxed);
        Ok(())
    }

    /// Compute the thresholds for `dirtyable` pages and cache them.
    pub fn refresh(&self, dirtyable: u64) -> DirtyThresholds {
        let (b, r) = self.ratios();
        let t = DirtyThresholds::compute(dirtyable, b, r);
        self.background.store(t.background, Ordering::Relaxed);
        self.limit.store(t.limit, Ordering::Relaxed);
        t
    }

    /// The cached (background, limit) thresholds.
    #[inline]
    pub fn cached(&self) -> (u64, u64) {
        (self.background.load(Ordering::Relaxed), self.limit.load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_the_kernels_rules() {
        let t = DirtyThresholds::compute(1000, 10, 20);
        assert_eq!((t.background, t.limit), (100, 200));
        // Background at or above the ratio: half the limit.
        let t = DirtyThresholds::compute(1000, 30, 20);
        assert_eq!((t.background, t.limit), (100, 200));
        // Never a limit of 0.
        assert_eq!(DirtyThresholds::compute(3, 0, 1).limit, 1);
    }

    #[test]
    fn ratios_are_validated_and_unchanged_on_error() {
        let d = DirtyLimits::default();
        assert_eq!(d.ratios(), (10, 20));
        assert!(matches!(d.set_ratios(101, 20), Err(ConfigError::Invalid { field: "dirty_background_ratio", .. })));
        assert!(matches!(d.set_ratios(5, 0), Err(ConfigError::Invalid { field: "dirty_ratio", .. })));
        assert!(matches!(d.set_ratios(5, 101), Err(ConfigError::Invalid { field: "dirty_ratio", .. })));
        assert_eq!(d.ratios(), (10, 20));
        d.set_ratios(0, 100).unwrap();
        assert_eq!(d.ratios(), (0, 100));
        assert_eq!(d.cached(), (u64::MAX, u64::MAX));
        assert_eq!(d.refresh(200), DirtyThresholds { dirtyable: 200, background: 0, limit: 200 });
        assert_eq!(d.cached(), (0, 200));
    }
}
