//! The sub-handles that group `PageAllocator`'s rarer services, each a
//! borrowed view of the allocator made by one accessor. The common calls
//! (allocation, free, bulk, owned pages, drains, checks) stay on
//! [`PageAllocator`] itself.

use super::PageAllocator;
use pagealloc_core::PageLocks;

/// Pageblock isolation and contiguous ranges (`alloc_contig_pages`, `alloc_contig_range`): [`PageAllocator::contig`].
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator, PAGEBLOCK_PAGES};
/// let a = PageAllocator::new(Config::small(8 << 20)).unwrap();
/// let c = a.contig();
/// let p = c.alloc_contig_pages(600, Gfp::MOVABLE).unwrap(); // 600 pages in a row
/// c.free_contig_range(p, 600).unwrap();
/// a.drain_all_pages();
/// c.isolate_range(p, PAGEBLOCK_PAGES).unwrap(); // its free pages leave the count
/// assert!(c.test_pages_isolated(p, PAGEBLOCK_PAGES));
/// c.undo_isolate_range(p, PAGEBLOCK_PAGES).unwrap();
/// a.check_invariants().unwrap();
/// ```
#[derive(Clone, Copy)]
pub struct Contig<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// Movable pages and compaction: owners' movable operations, compaction passes and the fragmentation reports: [`PageAllocator::compaction`].
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let out = a.compaction().compact_memory(); // nothing is movable: nothing moves
/// assert_eq!(out.migrated, 0);
/// assert!(a.compaction().fragmentation_score(0).unwrap() <= 100);
/// ```
#[derive(Clone, Copy)]
pub struct Compactor<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// Free page reporting (the kernel's `page_reporting`): passes now, settings and counters: [`PageAllocator::reporting`].
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(8 << 20).page_reporting(true)).unwrap();
/// let pass = a.reporting().report_free_pages_now(); // a fresh arena is released already
/// assert_eq!(pass.errors, 0);
/// assert!(a.reporting().page_reporting_stats().enabled);
/// ```
#[derive(Clone, Copy)]
pub struct PageReporting<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// The statistics: counter snapshots, the /proc views in the kernel's formats, event counters and lock statistics: [`PageAllocator::stats`].
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let st = a.stats();
/// assert!(st.buddyinfo().to_string().starts_with("Node 0, zone   Normal "));
/// assert_eq!(st.vmstat().get("nr_free_pages"), Some(a.nr_free_pages()));
/// ```
#[derive(Clone, Copy)]
pub struct Stats<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// Reclaim: shrinkers, the LRU add batches and lists, and the dirty limits: [`PageAllocator::reclaim`].
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, ShrinkControl, Shrinker};
/// use std::sync::Arc;
/// struct Nothing; // a cache with nothing to give back
/// impl Shrinker for Nothing {
///     fn count_objects(&self, _: &ShrinkControl) -> u64 { 0 }
///     fn scan_objects(&self, _: &ShrinkControl) -> u64 { 0 }
/// }
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let id = a.reclaim().register_shrinker(Arc::new(Nothing));
/// assert!(a.reclaim().unregister_shrinker(id));
/// assert_eq!(a.reclaim().lru_sizes(0), (0, 0)); // no page cache: empty lists
/// ```
#[derive(Clone, Copy)]
pub struct Reclaim<'a> {
    pub(crate) a: &'a PageAllocator,
}

impl PageAllocator {
    /// The page lock, writeback and uptodate bits, by pfn (the core's, as
    /// a kernel's `FrameAllocator` has them).
    #[inline]
    #[must_use]
    pub fn page_locks(&self) -> PageLocks<'_> {
        self.core.frames().page_locks()
    }

    /// Pageblock isolation and contiguous ranges.
    #[inline]
    #[must_use]
    pub fn contig(&self) -> Contig<'_> {
        Contig { a: self }
    }

    /// Movable pages, compaction and the fragmentation reports.
    #[inline]
    #[must_use]
    pub fn compaction(&self) -> Compactor<'_> {
        Compactor { a: self }
    }

    /// Free page reporting.
    #[inline]
    #[must_use]
    pub fn reporting(&self) -> PageReporting<'_> {
        PageReporting { a: self }
    }

    /// Counter snapshots, the /proc views, events and lock statistics.
    #[inline]
    #[must_use]
    pub fn stats(&self) -> Stats<'_> {
        Stats { a: self }
    }

    /// Shrinkers, the LRU lists and the dirty limits.
    #[inline]
    #[must_use]
    pub fn reclaim(&self) -> Reclaim<'_> {
        Reclaim { a: self }
    }
}
