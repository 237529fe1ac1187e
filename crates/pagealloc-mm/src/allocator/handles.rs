//! The sub-handles that group `PageAllocator`'s rarer services, each a
//! borrowed view of the allocator made by one accessor. The common calls
//! (allocation, free, bulk, owned pages, drains, checks) stay on
//! [`PageAllocator`] itself.

use super::PageAllocator;
use pagealloc_core::PageLocks;

/// Pageblock isolation and contiguous ranges (`alloc_contig_pages`, `alloc_contig_range`): [`PageAllocator::contig`].
#[derive(Clone, Copy)]
pub struct Contig<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// Movable pages and compaction: owners' movable operations, compaction passes and the fragmentation reports: [`PageAllocator::compaction`].
#[derive(Clone, Copy)]
pub struct Compactor<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// Free page reporting (the kernel's `page_reporting`): passes now, settings and counters: [`PageAllocator::reporting`].
#[derive(Clone, Copy)]
pub struct PageReporting<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// The statistics: counter snapshots, the /proc views in the kernel's formats, event counters and lock statistics: [`PageAllocator::stats`].
#[derive(Clone, Copy)]
pub struct Stats<'a> {
    pub(crate) a: &'a PageAllocator,
}

/// Reclaim: shrinkers, the LRU add batches and lists, and the dirty limits: [`PageAllocator::reclaim`].
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
