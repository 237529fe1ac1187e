//! The allocation slow path (the kernel's `__alloc_pages_slowpath`), entered
//! when no zone of the zonelist could serve the request above its low
//! watermark.
//!
//! Steps, in order (the kernel's: compaction for costly orders first, then
//! reclaim):
//! 1. retry every zone against the min watermark (high-priority requests may
//!    dip below it and use the HighAtomic reserve);
//! 2. for order > 0: direct compaction (when movable pages are registered
//!    and `Gfp::NO_COMPACT` is not given), then retry the compacted zone;
//!    then direct reclaim: the shrinkers, the page cache's LRU among them,
//!    are asked for pages (`Vmscan::direct_reclaim`);
//! 3. bring back pages parked on per-CPU lists and front caches, and give
//!    HighAtomic reserves back to ordinary use, then retry once;
//! 4. fail with `NoMemory` (counted). Nothing here ever aborts.

use super::Core;
use crate::error::AllocError;
use crate::types::{Gfp, Pfn};
use crate::vmevent::VmEvent;
use crate::zone::{AllocFlags, Wmark};

impl Core {
    /// See the module doc. `zl` is the request's zonelist, `head` the flags
    /// word of the new allocation.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc_slow(&self, zl: &[usize], order: u32, gfp: Gfp, head: u32) -> Result<Pfn, AllocError> {
        let af = AllocFlags { wmark: Wmark::Min, high: gfp.contains(Gfp::HIGH) };
        for attempt in 0..2 {
            for &zi in zl {
                let z = &self.zones[zi];
                if z.watermark_ok(order, af, gfp) {
                    if let Some(p) = z.rmqueue(&self.mm, order, gfp, af, false) {
                        return Ok(self.prep_new_page(p, order, gfp, head));
                    }
                }
            }
            if attempt == 0 {
                // ---- Direct compaction (issue 17): order > 0, unless Gfp::NO_COMPACT. ----
                let got = self.try_direct_compact(zl, order, gfp, |zi| {
                    let z = &self.zones[zi];
                    z.watermark_ok(order, af, gfp).then(|| z.rmqueue(&self.mm, order, gfp, af, false)).flatten()
                });
                if let Some(p) = got {
                    return Ok(self.prep_new_page(p, order, gfp, head));
                }
                // ---- Direct reclaim (issue 16, vmscan): shrink the LRU lists
                // and shrinkers before draining and failing. ----
                let reclaimed = self.direct_reclaim(order, gfp);
                if !self.reclaim_parked(zl, gfp) && !reclaimed {
                    break;
                }
            }
        }
        self.events.count(VmEvent::AllocFail, 1);
        Err(AllocError::NoMemory { order })
    }

    /// Direct reclaim through the shrinkers (the page cache is one), counted
    /// as an `allocstall_*`. False when it freed nothing. High-priority
    /// (atomic) requests may not reclaim, as `GFP_ATOMIC` lacks
    /// `__GFP_DIRECT_RECLAIM`.
    fn direct_reclaim(&self, order: u32, gfp: Gfp) -> bool {
        if gfp.contains(Gfp::HIGH) || !self.vmscan.has_shrinkers() {
            return false;
        }
        let ev = if gfp.contains(Gfp::MOVABLE) { VmEvent::AllocstallMovable } else { VmEvent::AllocstallNormal };
        self.events.count(ev, 1);
        self.vmscan.direct_reclaim(order)
    }

    /// Pages parked on per-CPU lists and front caches count as free memory
    /// the request may have: bring them back, and unreserve HighAtomic
    /// blocks. False when there was nothing to try.
    fn reclaim_parked(&self, zl: &[usize], gfp: Gfp) -> bool {
        let mut any = self.pcp_on;
        if self.pcp_on {
            self.drain_all();
        }
        for &zi in zl {
            let z = &self.zones[zi];
            any |= z.lock(&self.mm).unreserve_highatomic_locked(gfp.migratetype(), true);
        }
        any
    }
}
