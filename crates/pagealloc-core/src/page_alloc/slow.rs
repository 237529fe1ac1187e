//! The allocation slow path (the kernel's `__alloc_pages_slowpath`), entered
//! when no zone of the zonelist could serve the request above its low
//! watermark.
//!
//! Steps, in order (the kernel's: compaction for costly orders first, then
//! reclaim):
//! 0. wake the kswapd of every node whose zone in the zonelist is below its
//!    low watermark (`wake_all_kswapds`; a flag test when a wakeup is
//!    pending already), so background reclaim starts before allocations
//!    reach the min watermark;
//! 1. retry every zone against the min watermark (high-priority requests may
//!    dip below it and use the HighAtomic reserve);
//! 2. the first time round, for order > Order::ZERO: direct compaction (when movable
//!    pages are registered and `Gfp::NO_COMPACT` is not given), then retry the
//!    compacted zone;
//! 3. the first time round, for requests that may reclaim (not
//!    high-priority ones), if a kswapd it (or anyone) woke has not run yet:
//!    yield the CPU once and go back to 1, so that a kswapd waiting for this
//!    CPU reclaims instead of us (on a busy machine its wakeup can take
//!    milliseconds, long enough for allocators to use up the headroom
//!    between the low and min watermarks); then, once per request, while
//!    kswapd is still woken or in a run, yield up to [`GIVE_WAY`] more
//!    times, retrying the zones after each (the kernel's
//!    `throttle_direct_reclaim` makes direct reclaimers wait for kswapd):
//!    on a machine whose CPUs are all busy, kswapd's share of the reclaim in
//!    `bench lru-file-readonce` fell to 89.5% in 1 of 20 runs without this,
//!    stayed at 92.8% or more with it;
//! 4. direct reclaim: the shrinkers, the page cache's LRU among them, are
//!    asked for pages; when it frees pages, raise kswapd's boost (kswapd
//!    was late, so it wakes earlier and reclaims further from now on) and go
//!    back to 1, for as long as reclaim makes progress: other allocators
//!    may take what one round freed, and the kernel's `should_reclaim_retry`
//!    retries while reclaim progresses. [`MAX_RECLAIM_ROUNDS`] bounds the
//!    rounds only against a livelock (shrinkers that always free a little
//!    while others always take it);
//! 5. when reclaim frees nothing, once: bring back pages parked on per-CPU
//!    lists and front caches, and give HighAtomic reserves back to ordinary
//!    use, then go back to 1;
//! 6. fail with `NoMemory` (counted). Nothing here ever aborts.
//!
//! Reclaim, kswapd and compaction are the layers above the core: every step
//! that needs them goes through the registered [`SlowPathHooks`], and a
//! core built alone skips those steps.

use super::hooks::{NoHooks, SlowPathHooks};
use super::Core;
use crate::error::AllocError;
use crate::types::{Gfp, Order, Pfn, ZoneIdx};
use crate::vmevent::VmEvent;
use crate::zone::{AllocFlags, Wmark};

/// Rounds of the slow path (each one reclaim attempt that made progress)
/// before it gives up: a bound against livelock only, far above what a
/// request that can succeed needs.
pub const MAX_RECLAIM_ROUNDS: u32 = 256;

/// Times an allocation below the min watermark yields to a woken or
/// reclaiming kswapd before it reclaims itself (step 3 of the module doc).
pub const GIVE_WAY: u32 = 8;

impl Core {
    /// See the module doc. `zl` is the request's zonelist, `head` the flags
    /// word of the new allocation.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc_slow(&self, zl: &[ZoneIdx], order: Order, gfp: Gfp, head: u32) -> Result<Pfn, AllocError> {
        let af = AllocFlags { wmark: Wmark::Min, high: gfp.contains(Gfp::HIGH) };
        let hooks = self.hooks();
        let hooks: &dyn SlowPathHooks = hooks.as_deref().unwrap_or(&NoHooks);
        hooks.wake_background_reclaim(zl, order);
        let try_zone = |zi: ZoneIdx| {
            let z = &self.zones[zi];
            z.watermark_ok(order, af, gfp).then(|| z.rmqueue(&self.mm, order, gfp, af, false)).flatten()
        };
        // Every zone of the list in turn; the first block found, prepared.
        let take = || zl.iter().find_map(|&zi| try_zone(zi)).map(|p| self.prep_new_page(p, order, gfp, head));
        let (mut drained, mut gave_way) = (false, false);
        for round in 0..MAX_RECLAIM_ROUNDS {
            if let Some(p) = take() {
                return Ok(p);
            }
            if round == 0 {
                // ---- Direct compaction: order > 0, unless Gfp::NO_COMPACT;
                // high-priority (atomic) requests never compact, as in the
                // kernel, where they may not enter reclaim or compaction. ----
                if order > Order::ZERO && !gfp.intersects(Gfp::NO_COMPACT | Gfp::HIGH) {
                    if let Some(p) = hooks.direct_compact(zl, order, gfp, &mut |zi| try_zone(zi)) {
                        return Ok(self.prep_new_page(p, order, gfp, head));
                    }
                }
            }
            if round == 0 && !af.high && hooks.background_reclaim_pending(zl) {
                // kswapd has been woken but has not run yet (its CPU is
                // busy, maybe with us): give it the CPU once and look again
                // before reclaiming ourselves, as the kernel's retry loop
                // gives way (`cond_resched`) to the reclaim it woke.
                crate::platform::relax();
                continue;
            }
            if !gave_way && !af.high {
                gave_way = true;
                if let Some(p) = self.give_way_to_kswapd(hooks, zl, &take) {
                    return Ok(p);
                }
            }
            // ---- Direct reclaim: shrink the LRU lists and shrinkers; retry
            // while it makes progress. ----
            if !gfp.contains(Gfp::HIGH) && hooks.direct_reclaim(order, gfp) {
                hooks.direct_reclaim_succeeded(zl);
                continue;
            }
            if drained || !self.reclaim_parked(zl, gfp) {
                break;
            }
            drained = true;
        }
        // Out of rounds with reclaim still freeing pages that others took:
        // the parked pages are the last resort.
        if !drained && self.reclaim_parked(zl, gfp) {
            if let Some(p) = take() {
                return Ok(p);
            }
        }
        if let Some(p) = self.last_look(zl, order, gfp, af) {
            return Ok(self.prep_new_page(p, order, gfp, head));
        }
        self.events.count(VmEvent::AllocFail, 1);
        Err(AllocError::NoMemory { order: order.get() })
    }

    /// The slow path's last look before it fails: a block from the first
    /// zone of `zl` that can give one, read as below.
    fn last_look(&self, zl: &[ZoneIdx], order: Order, gfp: Gfp, af: AllocFlags) -> Option<u64> {
        // Every check so far read the zone counters without the lock, and a
        // free or an allocation in progress on another thread changes them
        // piece by piece under it (a merge takes each buddy off its list
        // before the merged block goes on): one preempted there shows the
        // zone nearly empty while it is not. Before failing, each zone once
        // more on counters of one instant (loom model
        // `tests::loom_models::stale_free_races_reallocation_at_another_order`
        // found an order-0 request failing on an all-free arena): a zone
        // whose seqcount-consistent counters say no is passed over without
        // its lock (a request refused in one zone before falling back to
        // the next took every zone's lock to fail); the others are tried
        // with the lock held, where the counters are exact.
        zl.iter().find_map(|&zi| {
            let z = &self.zones[zi];
            if z.watermark_ok_consistent(order, af, gfp) == Some(false) {
                return None;
            }
            let g = z.lock(&self.mm);
            z.watermark_ok(order, af, gfp).then(|| z.rmqueue_in(g, order, gfp, af, false)).flatten()
        })
    }

    /// Background reclaim is still woken or reclaiming: give it the CPU up
    /// to GIVE_WAY times, looking after each, before reclaiming ourselves
    /// (the kernel's `throttle_direct_reclaim` makes direct reclaimers wait
    /// while kswapd works).
    fn give_way_to_kswapd(
        &self,
        hooks: &dyn SlowPathHooks,
        zl: &[ZoneIdx],
        take: &impl Fn() -> Option<Pfn>,
    ) -> Option<Pfn> {
        for _ in 0..GIVE_WAY {
            if !hooks.background_reclaim_active(zl) {
                return None;
            }
            crate::platform::relax();
            if let Some(p) = take() {
                return Some(p);
            }
        }
        None
    }

    /// Pages parked on per-CPU lists and front caches count as free memory
    /// the request may have: bring them back, and unreserve HighAtomic
    /// blocks. False when there was nothing to try.
    fn reclaim_parked(&self, zl: &[ZoneIdx], gfp: Gfp) -> bool {
        let mut any = self.pcp_on;
        if self.pcp_on {
            self.drain_all();
        }
        for &zi in zl {
            let z = &self.zones[zi];
            // A zone with no reserve has nothing to give back: no lock for
            // it (a reserve is made only under the lock, by an allocation
            // that succeeded; one made since this read waits for the next
            // failing request, as the kernel's lockless check lets it).
            if z.stats.nr_reserved_highatomic.get_racy() != 0 {
                any |= z.lock(&self.mm).unreserve_highatomic_locked(gfp.migratetype(), true);
            }
        }
        any
    }
}
