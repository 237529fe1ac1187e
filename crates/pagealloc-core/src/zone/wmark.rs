//! The zone watermark formulas (the kernel's `__setup_per_zone_wmarks` and
//! `min_free_kbytes` defaults): pure functions of the zone's size; and the
//! free-block counts the watermark checks and their callers read.

use super::Zone;
use crate::types::{Order, ZoneType, MIGRATE_PCPTYPES, NR_ORDERS};

impl Zone {
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
