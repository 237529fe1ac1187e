//! The slow path's calls into the layers above the core: reclaim (kswapd
//! and direct reclaim) and compaction. The core knows them only through
//! [`SlowPathHooks`], which the allocator that builds those layers
//! implements and registers when it builds the core (tcmalloc's
//! `Forwarder` and the kernel's `compaction.h` separate the allocator from
//! what it may call the same way).
//!
//! Only the slow path calls a hook, so the indirect call and the upgrade of
//! the registration (two atomic updates) cost nothing on the fast paths. A
//! core built alone (a kernel's frame allocator) has no hooks: every call
//! gets the default answer, which is "nothing to do".

use crate::types::{Gfp, Order, ZoneIdx};

/// What the allocation slow path may ask of reclaim and compaction. Every
/// method has a default that does nothing.
///
/// Each method receives the request's zonelist `zl` (the zones it may use,
/// in order). A hook may allocate and free through the core (reclaim frees
/// pages, compaction moves them), but must not hold a zone lock when it
/// returns.
pub trait SlowPathHooks: Send + Sync {
    /// Wake background reclaim for the nodes whose zones in `zl` are short
    /// of free pages, or of a free block of `order` (the kernel's
    /// `wake_all_kswapds`). Called once as the slow path begins.
    fn wake_background_reclaim(&self, zl: &[ZoneIdx], order: Order) {
        let _ = (zl, order);
    }

    /// Whether a background reclaimer of a node of `zl` has been woken and
    /// has not run yet: the slow path then yields once before reclaiming.
    fn background_reclaim_pending(&self, zl: &[ZoneIdx]) -> bool {
        let _ = zl;
        false
    }

    /// Whether a background reclaimer of a node of `zl` is woken or
    /// reclaiming: the slow path then gives it the CPU a few times.
    fn background_reclaim_active(&self, zl: &[ZoneIdx]) -> bool {
        let _ = zl;
        false
    }

    /// Direct compaction for a request of `order` > 0 that failed: compact
    /// the zones of `zl`, and after each, try `alloc` (which takes a block
    /// of `order` from the zone it is given, or returns `None`). The block
    /// `alloc` returned, if any.
    fn direct_compact(
        &self,
        zl: &[ZoneIdx],
        order: Order,
        gfp: Gfp,
        alloc: &mut dyn FnMut(ZoneIdx) -> Option<u64>,
    ) -> Option<u64> {
        let _ = (zl, order, gfp, alloc);
        None
    }

    /// Direct reclaim for a request of `order`: whether it freed pages.
    fn direct_reclaim(&self, order: Order, gfp: Gfp) -> bool {
        let _ = (order, gfp);
        false
    }

    /// Direct reclaim freed pages although background reclaim runs: it was
    /// late, so make it start earlier (the kernel's watermark boost).
    fn direct_reclaim_succeeded(&self, zl: &[ZoneIdx]) {
        let _ = zl;
    }
}

/// The hooks of a core built alone.
pub(crate) struct NoHooks;

impl SlowPathHooks for NoHooks {}
