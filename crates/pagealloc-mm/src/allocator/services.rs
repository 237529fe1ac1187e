//! The façade's services on top of allocation: isolation and contiguous
//! ranges, drains, invariant checks and censuses.

use super::handles::{Contig, Stats};
use super::PageAllocator;
use crate::stats::report::PcpReport;
use pagealloc_compaction::migrate::OwnerPanic;
use pagealloc_core::error::{AllocError, FreeError, InvariantError, PageStateError};
use pagealloc_core::invariants::{Fragmentation, ZoneCensus};
use pagealloc_core::types::{Gfp, Pfn};

impl PageAllocator {
    /// Give `[start, start + nr_pages)`, which must lie in
    /// [`Config::holes`](crate::Config::holes) not yet given, to the buddy
    /// lists: memory a kernel hands its frame allocator region by region at
    /// boot, or brings online later. The pages merge with free neighbours
    /// and count as managed from then on. Any part of a hole may be given,
    /// in any order, from any thread.
    ///
    /// # Errors
    /// [`PageStateError::BadRange`] naming `start`, with nothing changed,
    /// for an empty range, one past the arena, or one with a page that is
    /// not in a hole (given already, or never one).
    ///
    /// # Examples
    ///
    /// ```
    /// use pagealloc::{Config, PageAllocator, PageStateError, Pfn};
    /// // 8 MiB of pfns, of which a kernel found the second 4 MiB usable only later.
    /// let a = PageAllocator::new(Config::small(8 << 20).holes(vec![(Pfn::new(1024), 1024)])).unwrap();
    /// assert_eq!(a.managed_pages(), 1024);
    /// a.add_free_memory(Pfn::new(1024), 1024).unwrap();
    /// assert_eq!((a.managed_pages(), a.nr_free_pages()), (2048, 2048));
    /// let again = a.add_free_memory(Pfn::new(1024), 1);
    /// assert_eq!(again, Err(PageStateError::BadRange { pfn: Pfn::new(1024) }));
    /// a.check_invariants().unwrap();
    /// ```
    pub fn add_free_memory(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.core.frames().add_free_memory(start, nr_pages)
    }

    /// Return this CPU's per-CPU pages and this thread's front cache to the buddy.
    pub fn drain_local_pages(&self) {
        self.core.drain_local();
    }

    /// Return every per-CPU page and every thread's front cache to the buddy
    /// (serialised with other drains). Pages freed concurrently may land on the
    /// lists again at once; this drains what was there when it ran.
    pub fn drain_all_pages(&self) {
        self.core.frames().drain();
    }

    /// Check every invariant; the first broken one is returned with its pfn.
    ///
    /// Holds still, for the duration: every thread's front cache (paused), every
    /// per-CPU list (locked), and each zone in turn (locked). The result is exact
    /// when no other thread allocates or frees meanwhile; run concurrently, it
    /// may report a page that is between its claim and its list (a page being
    /// freed right now) as an error, but it never changes anything.
    ///
    /// # Errors
    /// The first broken invariant, with the pfn where it was found.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        self.core.frames().check_invariants()?;
        // The LRU lists: each walk agrees with its counter and flags.
        self.core.vmscan.check(&self.core.mm).map_err(|e| InvariantError::new(0, e))
    }

    /// Pages by state, summed over zones (a walk under each zone lock in turn).
    #[must_use]
    pub fn census(&self) -> ZoneCensus {
        self.core.census()
    }
}

impl<'a> Contig<'a> {
    /// Isolate the pageblocks covering `[start, start + nr_pages)` (one zone).
    ///
    /// # Errors
    /// Without changing anything: a bad range, or a pageblock in it that is
    /// already isolated or cannot be (HighAtomic).
    pub fn isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.a.core.compaction().isolate_range(start, nr_pages)
    }

    /// Undo [`Contig::isolate_range`] for the same range.
    ///
    /// # Errors
    /// Without changing anything: a bad range, or a pageblock in it that is
    /// not isolated.
    pub fn undo_isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.a.core.compaction().undo_isolate_range(start, nr_pages)
    }

    /// Are all pageblocks covering the range isolated and every page of the
    /// range free on the Isolate lists?
    #[must_use]
    pub fn test_pages_isolated(&self, start: Pfn, nr_pages: u64) -> bool {
        self.a.core.compaction().test_pages_isolated(start, nr_pages)
    }

    /// Find `nr_pages` contiguous free pages (aligned to the next power of two
    /// up to a pageblock), isolate them, drain the per-CPU lists, verify and
    /// take them. The pages come back as order-0 allocated pages: free them
    /// with [`Contig::free_contig_range`] or one by one. Without
    /// movable pages only free memory counts, so fragmentation can make this
    /// fail; with them it falls back to migrating them out of a range, as
    /// [`Contig::alloc_contig_range`].
    ///
    /// # Errors
    /// [`AllocError::NoMemory`] when no such range is free.
    ///
    /// # Panics
    /// When an owner's [`crate::MovableOps`] callback panics in that
    /// fallback: as [`Contig::alloc_contig_range`].
    pub fn alloc_contig_pages(&self, nr_pages: u64, gfp: Gfp) -> Result<Pfn, AllocError> {
        OwnerPanic::resuming(|caught| self.a.core.compaction().alloc_contig_pages(nr_pages, gfp, caught))
    }

    /// Free a range from [`Contig::alloc_contig_pages`] (order-0
    /// pages), all or nothing.
    ///
    /// # Errors
    /// The first page that cannot be freed, as [`PageAllocator::free_pages`]
    /// reports it; then nothing was freed.
    pub fn free_contig_range(&self, start: Pfn, nr_pages: u64) -> Result<(), FreeError> {
        self.a.core.compaction().free_contig_range(start, nr_pages)
    }
}

impl<'a> Stats<'a> {
    /// Every CPU's per-CPU list totals for every zone, read without locks.
    #[must_use]
    pub fn pcp_report(&self) -> Vec<PcpReport> {
        let core = &*self.a.core;
        core.zones.iter().flat_map(|z| core.pcp_report(z)).collect()
    }

    /// Count mixed pageblocks (a walk of the descriptors under each zone lock).
    #[must_use]
    pub fn fragmentation(&self) -> Fragmentation {
        self.a.core.fragmentation()
    }
}
