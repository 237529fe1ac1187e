//! The host compaction's tests run on: the core (a `FrameAllocator`) and
//! compaction's state, with the calls of `PageAllocator` the tests make.

use crate::movable::{Mobility, MobilityCensus, MovableId, MovableOps};
use crate::{Compaction, CompactionHost};
use pagealloc_core::error::{AllocError, FreeError, InvariantError, PageStateError};
use pagealloc_core::page_alloc::Core;
use pagealloc_core::types::{Gfp, Pfn, PAGEBLOCK_PAGES};
use pagealloc_core::{Config, FrameAllocator, PageLocks};
use std::ptr::NonNull;
use std::sync::Arc;

/// The core with compaction's state and nothing else: the host the paths
/// under test run on, with the calls of `TestAlloc` the models make.
pub(crate) struct TestAlloc {
    pub(crate) f: FrameAllocator,
    mob: Mobility,
}

impl std::ops::Deref for TestAlloc {
    type Target = Core;
    fn deref(&self) -> &Core {
        // SAFETY: test code of this workspace, which calls the core's
        // internals only as compaction does.
        unsafe { self.f.core() }
    }
}

impl CompactionHost for TestAlloc {
    fn mobility(&self) -> &Mobility {
        &self.mob
    }
    fn lru_add_drain_all(&self) {}
}

#[allow(dead_code)] // some calls serve only the loom models, some only the unit tests
impl TestAlloc {
    pub(crate) fn new(cfg: Config) -> Self {
        let f = FrameAllocator::new(cfg).unwrap();
        let pages = f.nr_pages();
        Self { f, mob: Mobility::new((pages / PAGEBLOCK_PAGES) as usize, 1) }
    }
    pub(crate) fn compaction(&self) -> Compaction<'_, Self> {
        Compaction::new(self)
    }
    pub(crate) fn register_movable_ops(&self, ops: Arc<dyn MovableOps>) -> MovableId {
        self.mob.register(ops)
    }
    /// A migration target, as compaction takes one (`MIGRATE_TARGET`).
    pub(crate) fn alloc_target(&self) -> Pfn {
        Core::alloc_pages(self, Gfp::MOVABLE, 0, pagealloc_core::page::flags::MIGRATE_TARGET).unwrap()
    }
    /// Give back a target migration did not use, as compaction does.
    pub(crate) fn free_target(&self, t: Pfn) {
        self.compaction().free_target(t.as_u64());
    }
    pub(crate) fn set_page_movable(&self, pfn: Pfn, id: MovableId) -> Result<(), PageStateError> {
        self.compaction().set_page_movable(pfn, id)
    }
    pub(crate) fn mobility_census(&self) -> MobilityCensus {
        self.compaction().mobility_census()
    }
    pub(crate) fn alloc_pages(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        self.f.alloc(gfp, order)
    }
    pub(crate) fn free_pages(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.f.free(pfn, order)
    }
    pub(crate) fn page_address(&self, pfn: Pfn) -> Option<NonNull<u8>> {
        self.mm.page_address(pfn)
    }
    pub(crate) fn page_locks(&self) -> PageLocks<'_> {
        self.f.page_locks()
    }
    pub(crate) fn drain_all_pages(&self) {
        self.f.drain();
    }
    pub(crate) fn check_invariants(&self) -> Result<(), InvariantError> {
        self.f.check_invariants()
    }
    pub(crate) fn nr_free_pages(&self) -> u64 {
        self.f.nr_free_pages()
    }
    pub(crate) fn core_census_allocated(&self) -> u64 {
        self.census().allocated
    }
    pub(crate) fn managed_pages(&self) -> u64 {
        self.f.managed_pages()
    }
}
