//! The allocator with the layers above its core: the core (`page_alloc`)
//! and, beside it, the state of reclaim (`vmscan`), compaction
//! (`movable`, `compaction`) and free page reporting (`reporting`).
//!
//! [`Mm`] dereferences to the core, so the upper layers call the core's
//! paths directly; the core calls back only through the slow-path hooks
//! ([`SlowPathHooks`]), which `Mm` implements here. The core holds a weak
//! reference to its `Mm` (made with [`Arc::new_cyclic`]), so there is no
//! cycle of strong references and a core built alone runs without it.

pub(crate) mod vmscan;

use crate::mm::vmscan::Vmscan;
use pagealloc_compaction::movable::Mobility;
use pagealloc_core::config::Config;
use pagealloc_core::error::ConfigError;
use pagealloc_core::page_alloc::hooks::SlowPathHooks;
use pagealloc_core::page_alloc::Core;
use pagealloc_core::types::{Gfp, Order, ZoneIdx};
use pagealloc_core::vmevent::VmEvent;
use pagealloc_core::zone::Wmark;
use pagealloc_core::FrameAllocator;
use pagealloc_reporting::Reporting;
use std::sync::{Arc, Weak};

/// One allocator: its core and the state of the layers above it. Crate
/// private, as are its fields: its dereference to the core is this crate's
/// one way into the core's internals.
pub(crate) struct Mm {
    /// The core, built as a kernel builds it, with this allocator's layers
    /// registered as its slow-path hooks.
    frames: FrameAllocator,
    /// Free page reporting.
    pub(crate) reporting: Reporting,
    /// LRU lists, LRU batches, shrinkers and reclaim gauges.
    pub(crate) vmscan: Vmscan,
    /// Movable operations and compaction state.
    pub(crate) mobility: Mobility,
}

impl std::ops::Deref for Mm {
    type Target = Core;
    #[inline(always)]
    fn deref(&self) -> &Core {
        // SAFETY: `Mm` is this crate's and never leaves it (crate-private
        // type, fields and constructor; `PageAllocator` holds it in a private
        // field): only this crate's code reaches the core through here, and
        // it keeps the core's invariants, which is the door's contract.
        unsafe { self.frames.core() }
    }
}

impl Mm {
    /// Build the core and the layers over it, and register the layers as
    /// the core's slow-path hooks.
    pub(crate) fn new(cfg: Config) -> Result<Arc<Self>, ConfigError> {
        let mut frames = FrameAllocator::new(cfg)?;
        // SAFETY: a read of the core's layout only (see `deref`).
        let core = unsafe { frames.core() };
        let cfg = &core.cfg;
        let nr_nodes = cfg.nodes as usize;
        let nblocks = core.pageblocks.len();
        let reporting = Reporting::new(cfg);
        let vmscan = Vmscan::new(nr_nodes, core.zones.len(), core.pcp.nr_cpus());
        let mobility = Mobility::new(nblocks, nr_nodes);
        Ok(Arc::new_cyclic(|me: &Weak<Mm>| {
            frames.set_slow_path_hooks(me.clone());
            Mm { frames, reporting, vmscan, mobility }
        }))
    }
}

impl Mm {
    /// The core as a kernel has it: `PageAllocator` builds on it.
    #[inline(always)]
    pub(crate) fn frames(&self) -> &FrameAllocator {
        &self.frames
    }

    /// The compaction layer's operations on this allocator.
    #[inline]
    pub fn compaction(&self) -> pagealloc_compaction::Compaction<'_, Mm> {
        pagealloc_compaction::Compaction::new(self)
    }
}

impl pagealloc_compaction::CompactionHost for Mm {
    fn mobility(&self) -> &Mobility {
        &self.mobility
    }

    fn lru_add_drain_all(&self) {
        Mm::lru_add_drain_all(self);
    }
}

impl SlowPathHooks for Mm {
    fn wake_background_reclaim(&self, zl: &[ZoneIdx], order: Order) {
        let k = &self.vmscan.kswapd;
        if !k.running() {
            return;
        }
        for &zi in zl {
            let z = &self.zones[zi];
            if z.free_pages_racy() < z.wmark[Wmark::Low as usize] || (order > Order::ZERO && !z.has_free_order(order)) {
                k.wake_order(z.nid as usize, order.get());
            }
        }
    }

    fn background_reclaim_pending(&self, zl: &[ZoneIdx]) -> bool {
        let k = &self.vmscan.kswapd;
        k.running() && zl.iter().any(|&zi| k.pending(self.zones[zi].nid as usize))
    }

    fn background_reclaim_active(&self, zl: &[ZoneIdx]) -> bool {
        let k = &self.vmscan.kswapd;
        k.running() && zl.iter().any(|&zi| k.active(self.zones[zi].nid as usize))
    }

    fn direct_compact(
        &self,
        zl: &[ZoneIdx],
        order: Order,
        _gfp: Gfp, // the slow path already refused the requests that may not compact
        alloc: &mut dyn FnMut(ZoneIdx) -> Option<u64>,
    ) -> Option<u64> {
        self.compaction().try_direct_compact(zl, order, alloc)
    }

    /// Direct reclaim through the shrinkers (the page cache is one), counted
    /// as an `allocstall_*`.
    fn direct_reclaim(&self, order: Order, gfp: Gfp) -> bool {
        if !self.vmscan.has_shrinkers() {
            return false;
        }
        let ev = if gfp.contains(Gfp::MOVABLE) { VmEvent::AllocstallMovable } else { VmEvent::AllocstallNormal };
        self.events.count(ev, 1);
        self.vmscan.direct_reclaim(order)
    }

    /// Raise the boost of each node of `zl` by `SWAP_CLUSTER_MAX` pages, up
    /// to 150% of the zone's high watermark (the kernel's default
    /// `watermark_boost_factor`).
    fn direct_reclaim_succeeded(&self, zl: &[ZoneIdx]) {
        let k = &self.vmscan.kswapd;
        if !k.running() {
            return;
        }
        for &zi in zl {
            let z = &self.zones[zi];
            k.boost(z.nid as usize, 32, z.wmark[Wmark::High as usize] * 3 / 2);
        }
    }
}
