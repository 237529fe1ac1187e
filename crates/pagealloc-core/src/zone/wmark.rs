//! The zone watermark formulas (the kernel's `__setup_per_zone_wmarks` and
//! `min_free_kbytes` defaults): pure functions of the zone's size; the
//! watermark checks; and the free-block counts they and their callers read.

use super::{AllocFlags, Zone, ZoneGuard};
use crate::types::{Gfp, Order, ZoneType, MIGRATE_PCPTYPES, NR_ORDERS};

impl Zone {
    /// The kernel's `__zone_watermark_ok`, on lock-free counters: would the
    /// zone stay above the watermark of `af` after giving a block of `order`
    /// to a request with `gfp`?
    #[inline]
    pub(crate) fn watermark_ok(&self, order: Order, af: AllocFlags, gfp: Gfp) -> bool {
        let mut min = self.wmark[af.wmark as usize];
        let highest = if gfp.contains(Gfp::MOVABLE) { ZoneType::Movable } else { ZoneType::Normal };
        let mut free = self.free_pages_racy() as i64 - ((order.pages() as i64) - 1);
        if af.high {
            min -= min / 2;
            min -= min / 4;
        } else {
            // Only the reserve's free pages are out of reach (as the kernel
            // since it counts `nr_free_highatomic`): subtracting the whole
            // reserve failed order-0 requests with free pages in other blocks
            // once the reserved blocks were in use.
            free -= self.stats.nr_free_highatomic.get_racy() as i64;
        }
        if free <= (min + self.lowmem_reserve[highest as usize]) as i64 {
            return false;
        }
        order == Order::ZERO || ZoneGuard::has_free_block_racy(self, order, af.high)
    }

    /// [`Zone::watermark_ok`] on counters of one instant: read while no
    /// writer is inside the zone lock's critical section (the seqcount is
    /// even and unchanged across the read), so never on a merge or split
    /// caught halfway, and without taking the lock. None when writers kept
    /// it busy for every try.
    pub fn watermark_ok_consistent(&self, order: Order, af: AllocFlags, gfp: Gfp) -> Option<bool> {
        // Under loom the counters are not modelled (see `seqcount`): no
        // answer, and the caller takes the lock.
        if cfg!(loom) {
            return None;
        }
        super::seqcount::read(&self.stats.seq, 4, || self.watermark_ok(order, af, gfp))
    }

    /// Free blocks per order (isolated included, as the kernel's
    /// `nr_free`), read without the lock.
    pub fn free_blocks_racy(&self) -> [u64; NR_ORDERS] {
        core::array::from_fn(|o| self.stats.free_blocks[o].iter().map(|c| c.get_racy()).sum())
    }

    /// Whether a free block of at least `order` sits on a list of a per-CPU
    /// type, read without the lock.
    pub fn has_free_order(&self, order: Order) -> bool {
        order.and_above().any(|o| self.stats.free_blocks[o.idx()][..MIGRATE_PCPTYPES].iter().any(|c| c.get_racy() != 0))
    }
}

/// Zone watermarks as the kernel's `__setup_per_zone_wmarks` computes them.
///
/// `min_pages` is the arena-wide minimum (min_free_kbytes in pages), shared out in
/// proportion to managed pages; Movable zones get a small fixed minimum.
pub(crate) fn compute_watermarks(zone: &Zone, min_pages: u64, lowmem_pages: u64, scale_factor: u32) -> [u64; 3] {
    let managed = zone.managed;
    let share = min_pages * managed / lowmem_pages.max(1);
    let min = if zone.ztype == ZoneType::Movable { (managed / 1024).clamp(32, 128) } else { share };
    let delta = (share / 4).max(managed * scale_factor as u64 / 10000);
    [min, min + delta, min + 2 * delta]
}

/// The kernel's default `min_free_kbytes`: sqrt(lowmem_kbytes * 16), clamped.
pub fn default_min_free_kbytes(lowmem_pages: u64) -> u64 {
    let kbytes = lowmem_pages * 4;
    (kbytes * 16).isqrt()
}

/// Clamp applied to `default_min_free_kbytes` (the kernel's 128 KiB..256 MiB).
pub(crate) fn clamp_min_free_kbytes(k: u64) -> u64 {
    k.clamp(128, 262_144)
}
