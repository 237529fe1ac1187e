//! The façade's migration and compaction services: movable
//! operations, `compact_memory`, contiguous ranges with migration, and the
//! fragmentation reports.

use super::handles::{Compactor, Contig};
use super::PageAllocator;
use pagealloc_compaction::compaction::{CompactOutcome, FragIndexReport};
use pagealloc_compaction::migrate::OwnerPanic;
use pagealloc_compaction::movable::{MobilityCensus, MovableId, MovableOps};
use pagealloc_core::error::{AllocError, PageStateError};
use pagealloc_core::types::{Gfp, Order, Pfn, ZoneIdx};
use std::sync::Arc;

impl PageAllocator {
    fn frag_report(&self, extfrag: bool) -> FragIndexReport {
        let zones = self.core.zones.iter().map(|z| (z.nid, z.ztype.name(), z.free_blocks_racy()));
        FragIndexReport::build(extfrag, zones)
    }
}

impl<'a> Contig<'a> {
    /// Allocate exactly `[start, start + nr_pages)`, migrating the movable
    /// pages in it elsewhere (the kernel's `alloc_contig_range`). The pages
    /// come back as order-0 pages: free them with
    /// [`Contig::free_contig_range`].
    ///
    /// # Errors
    /// [`AllocError::Unmovable`] naming the first page that blocks (for a
    /// pinned page, before anything moved); [`AllocError::NoMemory`] for a
    /// bad range (empty, past the arena, or whose end a `u64` cannot hold),
    /// before anything changed.
    ///
    /// # Panics
    /// When an owner's [`MovableOps`] callback panics: that page's migration
    /// fails as in [`Compactor::compact_memory`], the range's isolation
    /// is undone (pages already moved stay moved), and then the owner's
    /// panic goes on in this thread.
    pub fn alloc_contig_range(&self, start: Pfn, nr_pages: u64, gfp: Gfp) -> Result<(), AllocError> {
        OwnerPanic::resuming(|caught| self.a.core.compaction().alloc_contig_range(start, nr_pages, gfp, caught))
    }
}

impl<'a> Compactor<'a> {
    /// Register movable operations; pages marked with the returned id (see
    /// [`Compactor::set_page_movable`]) may be migrated.
    ///
    /// The first registration starts kcompactd (one thread per node). A
    /// panic in `ops` reaches the thread whose call migrated (see
    /// [`MovableOps`]), never kills kcompactd.
    pub fn register_movable_ops(&self, ops: Arc<dyn MovableOps>) -> MovableId {
        let id = self.a.core.mobility.register(ops);
        pagealloc_compaction::compaction::kcompactd::start(&self.a.core);
        id
    }

    /// Node `nid`'s fragmentation score (0..=100; the kernel's
    /// `fragmentation_score_node`): the share of free memory not in free
    /// blocks of the pageblock order, per zone, weighted by zone size. None
    /// for a node that does not exist.
    #[must_use]
    pub fn fragmentation_score(&self, nid: u32) -> Option<u64> {
        ((nid as usize) < self.a.core.nodes.len())
            .then(|| self.a.core.compaction().fragmentation_score_node(nid as usize))
    }

    /// The proactive compaction watermarks (low, high) of the node score
    /// from `compaction_proactiveness`: kcompactd starts above high and
    /// stops at low.
    #[must_use]
    pub fn fragmentation_score_wmarks(&self) -> (u64, u64) {
        self.a.core.compaction().fragmentation_score_wmarks()
    }

    /// Mark the order-0 page `pfn` (allocated through the raw pfn API) movable
    /// with the ops `id`: compaction and contiguous allocation may move it,
    /// telling the ops. A page never marked is pinned.
    ///
    /// # Errors
    /// Without changing anything: out of range, not allocated, or not an
    /// order-0 raw page ([`PageStateError::NotMovable`], also for an unknown
    /// id); [`PageStateError::Referenced`] for a page-cache page (the cache
    /// migrates its pages itself); [`PageStateError::HeldByGuard`] for a page
    /// held by a [`crate::PageLockGuard`].
    pub fn set_page_movable(&self, pfn: Pfn, id: MovableId) -> Result<(), PageStateError> {
        self.a.core.compaction().set_page_movable(pfn, id)?;
        // Free page reporting's compaction before release looks at it.
        self.a.core.reporting.movable_marks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Make a movable page pinned again.
    ///
    /// # Errors
    /// Not allocated, or being migrated right now ([`PageStateError::NotMovable`]: retry).
    pub fn clear_page_movable(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.core.compaction().clear_page_movable(pfn)
    }

    /// Compact every zone completely (`echo 1 > /proc/sys/vm/compact_memory`).
    ///
    /// # Panics
    /// When an owner's [`MovableOps`] callback panics: that page's migration
    /// fails (its isolation undone, the owner told with `putback`, counted in
    /// `pgmigrate_fail`), compaction stops and gives its unused targets back
    /// to the buddy lists, and then the owner's panic goes on in this thread.
    /// The page stays its owner's, to use or free as before.
    pub fn compact_memory(&self) -> CompactOutcome {
        OwnerPanic::resuming(|caught| self.a.core.compaction().compact_memory(caught))
    }

    /// Compact zone `zone` (an index into the zones, as reports list them) until a
    /// free block of `order` exists or the scanners meet.
    ///
    /// # Panics
    /// When an owner's [`MovableOps`] callback panics, as
    /// [`Compactor::compact_memory`].
    pub fn compact_zone(&self, zone: usize, order: u32) -> Option<CompactOutcome> {
        let zi = ZoneIdx::new(zone).filter(|&zi| self.a.core.zones.get(zi).is_some())?;
        let order = Some(Order::new(order).unwrap_or(Order::MAX));
        Some(OwnerPanic::resuming(|caught| self.a.core.compaction().compact_zone(zi, order, caught)))
    }

    /// `/sys/kernel/debug/extfrag/extfrag_index`, from lock-free counters.
    pub fn extfrag_index(&self) -> FragIndexReport {
        self.a.frag_report(true)
    }

    /// `/sys/kernel/debug/extfrag/unusable_index`, from lock-free counters.
    pub fn unusable_index(&self) -> FragIndexReport {
        self.a.frag_report(false)
    }

    /// Allocated pages by mobility: registered movable, pinned, isolated for
    /// migration (a racy walk of the descriptors).
    pub fn mobility_census(&self) -> MobilityCensus {
        self.a.core.compaction().mobility_census()
    }
}
