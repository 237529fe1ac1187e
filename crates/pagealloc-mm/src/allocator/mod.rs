//! The public façade: [`PageAllocator`], a handle on one allocator: a
//! `FrameAllocator` (the core as a kernel has it) with reclaim, compaction,
//! free page reporting and their threads around it. The calls the two share
//! (allocation and free, the no-lock calls, page locks, counts, drains,
//! checks) are the `FrameAllocator`'s; the order-0 fast paths (`alloc_pages`,
//! `free_pages`, small bulk calls) are forced inline into the caller so a
//! front-cache hit costs no call.
//!
//! The rarer services are sub-handles (`handles`): page locks, contiguous
//! ranges, compaction, reporting, statistics, reclaim; the calls that moved
//! there stay as deprecated forwarders for one release (`deprecated`).

#[cfg(feature = "seed-variants")]
mod bulk_linked;
mod compaction;
mod deprecated;
mod dirty;
mod handles;
mod nolock;
mod pageref_api;
mod procfs;
mod reporting;
mod services;

pub use handles::{Compactor, Contig, PageReporting, Reclaim, Stats};
pub use pageref_api::PageReference;
pub use reporting::{ReportingStats, ZoneResidency};

use crate::mm::Mm;
use pagealloc_core::config::Config;
use pagealloc_core::error::{AllocError, BulkFreeError, ConfigError, FreeError};
use pagealloc_core::page::flags;
use pagealloc_core::types::{Gfp, NodeId, Pfn};
use std::ptr::NonNull;
use std::sync::Arc;

/// A zoned buddy page-frame allocator over one arena. `Send + Sync`: share it by
/// reference or clone the handle (clones share one allocator).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// // 16 MiB of abstract frames (no memory behind them).
/// let a = PageAllocator::new(Config::small(16 << 20)).unwrap();
/// let b = a.clone(); // the same allocator
/// let pfn = a.alloc_pages(Gfp::KERNEL, 3).unwrap(); // 8 contiguous frames
/// assert_eq!(pfn.as_u64() % 8, 0, "a block is aligned to its size");
/// b.free_pages(pfn, 3).unwrap();
/// b.check_invariants().unwrap();
/// ```
#[derive(Clone)]
pub struct PageAllocator {
    /// The allocator (crate-private: nothing outside reaches its insides).
    pub(crate) core: Arc<Mm>,
    /// Shared by the clones (not by internal threads): its drop, with the
    /// last clone, stops the allocator's background threads.
    _users: Arc<Users>,
}

/// The user handles' share of the allocator; see [`PageAllocator`]'s `_users`.
struct Users(Arc<Mm>);

impl Drop for Users {
    fn drop(&mut self) {
        self.0.reporting.stop_and_join();
        self.0.mobility.kcompactd.stop_and_join();
    }
}

impl PageAllocator {
    /// Build an allocator: map the arena, lay out nodes and zones, free every page.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the setting that cannot work, or the mapping
    /// that failed.
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        let core = Mm::new(cfg)?;
        if core.reporting.enabled() {
            reporting::start_reporter(&core);
        }
        let users = Arc::new(Users(Arc::clone(&core)));
        Ok(Self { core, _users: users })
    }

    /// The settings this allocator was built with.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.core.cfg
    }

    /// Pages in the arena (all of them are managed: there are no holes).
    #[must_use]
    pub fn nr_pages(&self) -> u64 {
        self.core.frames().nr_pages()
    }

    /// Pages the allocator manages: the arena's, less those still in
    /// [`Config::holes`](crate::Config::holes).
    #[must_use]
    pub fn managed_pages(&self) -> u64 {
        self.core.frames().managed_pages()
    }

    /// Free pages in the buddy lists outside isolated blocks (NR_FREE_PAGES),
    /// read without locks. Pages on per-CPU lists are not counted.
    #[must_use]
    pub fn nr_free_pages(&self) -> u64 {
        self.core.frames().nr_free_pages()
    }

    /// Number of nodes.
    #[must_use]
    pub fn nr_nodes(&self) -> u32 {
        self.core.nodes.len() as u32
    }

    /// True when hugepage backing was asked for and the kernel refused it.
    #[must_use]
    pub fn hugepage_fallback(&self) -> bool {
        self.core.mm.hugepage_fallback
    }

    /// The memory of a frame (`None` without backing or out of range). A raw
    /// pointer: dereferencing it is the caller's business (`unsafe`); a
    /// [`crate::Pages`] handle gives safe access to the memory it owns.
    #[inline]
    #[must_use]
    pub fn page_address(&self, pfn: Pfn) -> Option<NonNull<u8>> {
        self.core.mm.page_address(pfn)
    }

    /// The node a pfn belongs to (`None` out of range).
    #[must_use]
    pub fn pfn_to_nid(&self, pfn: Pfn) -> Option<NodeId> {
        (pfn.as_u64() < self.nr_pages()).then(|| NodeId(self.core.zone_of(pfn.as_u64()).nid))
    }

    /// The node the calling thread prefers (its CPU's node; fake NUMA maps CPUs
    /// round-robin onto nodes).
    #[inline]
    #[must_use]
    pub fn numa_node_id(&self) -> u32 {
        self.core.numa_node_id()
    }

    /// Allocate `1 << order` contiguous pages on the caller's node (or, failing
    /// that, another unless `Gfp::THISNODE`).
    ///
    /// An order-0 request that this thread's front cache can serve is handled
    /// inline in the caller; everything else is a call.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`] when no zone can serve it (a normal result),
    /// [`AllocError::InvalidOrder`] above [`crate::MAX_ORDER`].
    #[inline(always)]
    pub fn alloc_pages(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        self.core.frames().alloc(gfp, order)
    }

    /// Allocate `1 << order` contiguous pages, preferring node `nid` (a
    /// [`NodeId`], so a node cannot be passed where an order is meant).
    ///
    /// # Errors
    /// As [`PageAllocator::alloc_pages`], and [`AllocError::InvalidNode`].
    pub fn alloc_pages_node(&self, nid: NodeId, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        self.core.alloc_node(nid.0, gfp, order, flags::HEAD)
    }

    /// Free a block allocated with `alloc_pages*` of the same order. Misuse is
    /// reported without changing anything, also when it races other threads
    /// (two frees of one block: exactly one succeeds).
    ///
    /// An order-0 page that this thread's front cache can take is handled
    /// inline in the caller; everything else (misuse included) is a call.
    ///
    /// # Errors
    /// A [`FreeError`] naming the pfn: out of range, misaligned, wrong order,
    /// double free, inside another block, never allocated, locked, under
    /// writeback, or owned by a [`crate::Pages`] handle.
    #[inline(always)]
    pub fn free_pages(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.core.frames().free(pfn, order)
    }

    /// Fill the `None` slots of `slots` with order-0 pages (populated slots are
    /// left alone) and return how many leading slots are now populated. A
    /// full slice returns its length without allocating; an empty one
    /// returns 0. On memory shortage it stops early: the return value tells
    /// where the first hole is. It never writes outside `slots`.
    ///
    /// A small request that this thread's front cache can fill is handled inline
    /// in the caller; the rest is a call.
    #[inline(always)]
    pub fn alloc_pages_bulk(&self, gfp: Gfp, slots: &mut [Option<Pfn>]) -> usize {
        self.core.alloc_pages_bulk(gfp, slots)
    }

    /// Allocate up to `nr` order-0 pages onto the end of `out` (the list form of
    /// the bulk allocator). Returns how many were added.
    #[inline(always)]
    pub fn alloc_pages_bulk_list(&self, gfp: Gfp, nr: usize, out: &mut Vec<Pfn>) -> usize {
        self.core.alloc_pages_bulk_list(gfp, nr, out)
    }

    /// Free order-0 pages in one pass. Invalid entries (the same classes as
    /// [`PageAllocator::free_pages`]) are skipped and reported with their
    /// indexes; every valid one is freed.
    ///
    /// # Errors
    /// [`BulkFreeError`] listing every skipped entry.
    #[inline(always)]
    pub fn free_pages_bulk(&self, pfns: &[Pfn]) -> Result<(), BulkFreeError> {
        self.core.free_pages_bulk(pfns)
    }

    /// Free every populated slot of an array filled by
    /// [`PageAllocator::alloc_pages_bulk`] (order-0 pages) and empty it.
    /// Empty slots are skipped; invalid entries stay in their slots and are
    /// reported with their indexes, every valid one is freed.
    ///
    /// # Errors
    /// [`BulkFreeError`] listing every skipped entry.
    #[inline(always)]
    pub fn free_pages_bulk_slots(&self, slots: &mut [Option<Pfn>]) -> Result<(), BulkFreeError> {
        self.core.free_pages_bulk_slots(slots)
    }

    /// The unique id of this allocator in the process (clones share it).
    #[cfg_attr(not(feature = "fail-inject"), allow(dead_code))]
    pub(crate) fn id(&self) -> u64 {
        self.core.id
    }
}

#[cfg(feature = "fail-inject")]
impl pagealloc_core::failinject::FailTarget for PageAllocator {
    fn fail_target_id(&self) -> u64 {
        self.id()
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<PageAllocator>();
};
