//! Memory compaction (the kernel's mm/compaction.c), per zone: a migrate
//! scanner walks pageblocks up from the zone's start taking registered
//! movable pages and page-cache pages on the LRU lists, a free scanner walks down from its end taking free pages
//! as targets; the pages move up, the low pageblocks empty and merge.
//!
//! - The scanners work in pageblocks and stop when they meet, or, for a
//!   request of some order, as soon as the zone has a free block of that
//!   order (checked after each migrate-scanner pageblock).
//! - The free scanner only takes from Movable pageblocks that are not
//!   isolated and not wholly free (order >= pageblock order is left alone).
//!   Free pages it takes become allocated order-0 pages held by the
//!   compactor (conservation stays exact at every instant); those not used
//!   are freed back at the end.
//! - Pageblock skip hints: a block where a scanner found nothing to take is
//!   marked and skipped by later direct compactions; a direct compaction
//!   that ends with the scanners met clears the zone's hints (the next pass
//!   looks at everything); `compact_memory` ignores and clears them.
//! - `compaction_suitable`: enough free memory above the low watermark
//!   (plus twice the request), and for orders above 3 a fragmentation index
//!   above `extfrag_threshold` (at or below it, failure means lack of
//!   memory, not fragmentation).
//! - Direct compaction (from the slow path) runs only when some owner has
//!   registered movable operations (otherwise there is nothing to move), for
//!   orders above 0, and never for `Gfp::HIGH` or `Gfp::NO_COMPACT`.
//! - An owner's panic in a migration callback, kept for the caller to
//!   resume (see `migrate::OwnerPanic`), stops the pass: the targets go
//!   back as at any end. A background thread's pass drops it and goes on.
//!
//! Reports: `extfrag_index` and `unusable_index` in the debugfs formats.

pub mod contig;
mod index;
#[cfg_attr(loom, allow(dead_code))] // the threads do not run under loom
pub mod kcompactd;

pub use index::FragIndexReport;
pub(crate) use index::{fragmentation_index, FragInfo};

use crate::migrate::{Moved, OwnerPanic};
use crate::{Compaction, CompactionHost};
use pagealloc_core::page::flags;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{MigrateType, Order, ZoneIdx, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};
use pagealloc_core::vmevent::VmEvent;
use pagealloc_core::zone::{AllocFlags, Wmark, Zone};

/// The kernel's PAGE_ALLOC_COSTLY_ORDER.
const COSTLY_ORDER: u32 = 3;

/// What one compaction pass achieved.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let out = a.compaction().compact_zone(0, 3).unwrap(); // zone 0, until an order-3 block is free
/// assert!(out.success && out.migrated == 0); // one was free already: nothing moved
/// assert!(a.compaction().compact_zone(9, 3).is_none()); // there is no zone 9
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CompactOutcome {
    /// Pages migrated.
    pub migrated: u64,
    /// Pages the migrate scanner looked at.
    pub migrate_scanned: u64,
    /// Pages the free scanner looked at.
    pub free_scanned: u64,
    /// Whether a free block of the requested order existed at the end
    /// (always false for a whole-zone `compact_memory`).
    pub success: bool,
}

/// `compaction_suitable`'s verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suitable {
    /// Not worth it (too little free memory, or not fragmentation).
    Skip,
    /// Compact.
    Go,
}

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// The kernel's `compaction_suitable` for zone `zi` and `order`.
    pub fn compaction_suitable(&self, zi: ZoneIdx, order: Order) -> Suitable {
        let z = &self.zones[zi];
        let gap = 2u64 << order.get();
        let af = AllocFlags { wmark: Wmark::Low, high: false };
        // Order-0 watermark with the gap: migration needs free targets.
        if z.free_pages_racy() < z.wmark[af.wmark as usize] + gap {
            return Suitable::Skip;
        }
        if order.get() > COSTLY_ORDER {
            let idx = fragmentation_index(&FragInfo::of(&z.free_blocks_racy(), order.get()));
            if idx >= 0 && idx <= self.cfg.extfrag_threshold as i32 {
                return Suitable::Skip;
            }
        }
        Suitable::Go
    }

    /// Compact zone `zi` for `order` (None: the whole zone). See the module
    /// doc; an owner's panic ends the pass early, caught in `caught`.
    pub fn compact_zone(&self, zi: ZoneIdx, order: Option<Order>, caught: &mut OwnerPanic) -> CompactOutcome {
        self.compact_zone_until(zi, order, None, caught)
    }

    /// The free scanner: isolate free pages from the pageblock at `f`
    /// downwards, while `targets` is empty and the scanners (`m` below, `f`
    /// above) have not met.
    pub(crate) fn free_scan(
        &self,
        z: &Zone,
        m: u64,
        f: &mut u64,
        use_hints: bool,
        targets: &mut Vec<u64>,
        out: &mut CompactOutcome,
    ) {
        while targets.is_empty() && m < *f {
            if !(use_hints && self.mobility().skip_hint((*f >> PAGEBLOCK_ORDER) as usize)) {
                let before = targets.len();
                out.free_scanned += self.isolate_freepages_block(z, *f, targets);
                let got = (targets.len() - before) as u64;
                if got == 0 {
                    self.mobility().set_skip_hint((*f >> PAGEBLOCK_ORDER) as usize, true);
                }
                self.events.count(VmEvent::CompactIsolated, got);
            }
            *f -= PAGEBLOCK_PAGES;
        }
    }

    /// [`Compaction::compact_zone`], also stopping (after a pageblock) once the
    /// zone's fragmentation score is at or below `score` (proactive
    /// compaction).
    pub fn compact_zone_until(
        &self,
        zi: ZoneIdx,
        order: Option<Order>,
        score: Option<u64>,
        caught: &mut OwnerPanic,
    ) -> CompactOutcome {
        let z = &self.zones[zi];
        let mut out = CompactOutcome::default();
        let use_hints = order.is_some();
        if !use_hints {
            self.clear_skip_hints(z);
        }
        // Free pages parked on per-CPU lists merge only in the buddy; page-cache
        // pages in per-CPU LRU batches are migratable only once listed.
        self.drain_all();
        if self.mobility().lru_ops().is_some() {
            self.lru_add_drain_all();
        }
        if order.is_some_and(|o| z.has_free_order(o)) {
            out.success = true;
            return out;
        }
        let mut targets: Vec<u64> = Vec::new();
        let mut m = z.start;
        let mut f = z.end - PAGEBLOCK_PAGES;
        let mut cand = Vec::with_capacity(PAGEBLOCK_PAGES as usize);
        'scan: while m < f {
            if use_hints && self.mobility().skip_hint((m >> PAGEBLOCK_ORDER) as usize) {
                m += PAGEBLOCK_PAGES;
                continue;
            }
            cand.clear();
            out.migrate_scanned += self.scan_movable(m, &mut cand);
            if cand.is_empty() {
                self.mobility().set_skip_hint((m >> PAGEBLOCK_ORDER) as usize, true);
                m += PAGEBLOCK_PAGES;
                continue;
            }
            self.events.count(VmEvent::CompactIsolated, cand.len() as u64);
            for &c in &cand {
                // The free scanner runs when the targets run out.
                self.free_scan(z, m, &mut f, use_hints, &mut targets, &mut out);
                let Some(t) = targets.pop() else {
                    break;
                };
                match self.migrate_page(c, t, caught) {
                    Moved::Yes => out.migrated += 1,
                    Moved::Busy | Moved::Failed => targets.push(t),
                }
                if caught.is_set() {
                    break 'scan;
                }
            }
            m += PAGEBLOCK_PAGES;
            if order.is_some_and(|o| z.has_free_order(o)) {
                out.success = true;
                break;
            }
            // Proactive runs are kcompactd's: they also end when it is told
            // to stop (the last user handle waits for it).
            if score.is_some_and(|w| {
                self.fragmentation_score_zone(zi) <= w || self.mobility().kcompactd.stop.load(Ordering::Relaxed)
            }) {
                break;
            }
        }
        self.end_pass(z, targets, order, m >= f, &mut out);
        out
    }

    /// The end of every pass of [`Core::compact_zone_until`] past its first
    /// check: the targets not used go back, a pass for an order whose
    /// scanners `met` without success clears the zone's skip hints, the
    /// scan counters, and whether a block of the order is free now.
    pub(crate) fn end_pass(
        &self,
        z: &Zone,
        targets: Vec<u64>,
        order: Option<Order>,
        met: bool,
        out: &mut CompactOutcome,
    ) {
        for t in targets {
            z.free_to_buddy(&self.mm, t, Order::ZERO, false, false);
        }
        if order.is_some() && met && !out.success {
            self.clear_skip_hints(z);
        }
        self.events.count(VmEvent::CompactMigrateScanned, out.migrate_scanned);
        self.events.count(VmEvent::CompactFreeScanned, out.free_scanned);
        if let Some(o) = order {
            out.success = out.success || z.has_free_order(o);
        }
    }

    pub(crate) fn clear_skip_hints(&self, z: &Zone) {
        let first = (z.start >> PAGEBLOCK_ORDER) as usize;
        for b in first..first + z.nr_pageblocks() {
            self.mobility().set_skip_hint(b, false);
        }
    }

    /// The registered movable pages of the pageblock at `start` into `out`;
    /// the number of pages looked at.
    pub(crate) fn scan_movable(&self, start: u64, out: &mut Vec<u64>) -> u64 {
        let mut p = start;
        let mut scanned = 0;
        while p < start + PAGEBLOCK_PAGES {
            scanned += 1;
            let d = self.mm.page(p);
            let f = d.flags();
            if self.is_migratable_racy(p) {
                out.push(p);
                p += 1;
            } else if f & (flags::BUDDY | flags::HEAD | flags::PCP) != 0 {
                // Racy order: clamp so a torn read cannot jump out of the block.
                p += (1u64 << d.order().min(PAGEBLOCK_ORDER)).max(1);
            } else {
                p += 1;
            }
        }
        scanned
    }

    /// The free scanner on one pageblock: take its free blocks (below
    /// pageblock order, Movable blocks only) as allocated order-0 pages into
    /// `out`; the number of pages looked at.
    pub(crate) fn isolate_freepages_block(&self, z: &Zone, start: u64, out: &mut Vec<u64>) -> u64 {
        let mut g = z.lock(&self.mm);
        if z.pageblock_mt_racy(start) != MigrateType::Movable {
            return 1;
        }
        let mut p = start;
        let mut scanned = 0;
        while p < start + PAGEBLOCK_PAGES {
            scanned += 1;
            let d = self.mm.page(p);
            let f = d.flags();
            if f & flags::BUDDY != 0 {
                let o = d.buddy_order();
                if o >= Order::PAGEBLOCK {
                    return scanned;
                }
                g.del_from_free_list(p, o);
                for q in p..p + o.pages() {
                    self.mm.page(q).set_migrate_target();
                    out.push(q);
                }
                p += o.pages();
            } else if f & (flags::HEAD | flags::PCP) != 0 {
                p += 1u64 << d.order().min(PAGEBLOCK_ORDER);
            } else {
                p += 1;
            }
        }
        scanned
    }

    /// Direct compaction for a failing request of `order` > 0 (the slow
    /// path's hook). Some(pfn) when compaction made the allocation succeed.
    pub fn try_direct_compact(
        &self,
        zl: &[ZoneIdx],
        order: Order,
        mut alloc: impl FnMut(ZoneIdx) -> Option<u64>,
    ) -> Option<u64> {
        // Which requests may compact is the slow path's call (order > 0, not
        // NO_COMPACT or HIGH); here only whether anything can move.
        if !self.mobility().any_registered() {
            return None;
        }
        let mut stalled = false;
        for &zi in zl {
            if self.compaction_suitable(zi, order) == Suitable::Skip {
                continue;
            }
            if !stalled {
                self.events.count(VmEvent::CompactStall, 1);
                stalled = true;
            }
            let mut caught = OwnerPanic::default();
            self.compact_zone(zi, Some(order), &mut caught);
            if caught.is_set() {
                // The allocating thread started this compaction: an
                // owner's panic goes on in it, the zone's state restored.
                self.events.count(VmEvent::CompactFail, 1);
                caught.resume();
                return None;
            }
            if let Some(p) = alloc(zi) {
                self.events.count(VmEvent::CompactSuccess, 1);
                return Some(p);
            }
        }
        if stalled {
            self.events.count(VmEvent::CompactFail, 1);
        }
        None
    }

    /// Compact every zone fully (`/proc/sys/vm/compact_memory`), stopping
    /// at an owner's panic (caught in `caught`).
    pub fn compact_memory(&self, caught: &mut OwnerPanic) -> CompactOutcome {
        let mut sum = CompactOutcome::default();
        for zi in self.zones.iter().map(|z| z.idx) {
            let o = self.compact_zone(zi, None, caught);
            sum.migrated += o.migrated;
            sum.migrate_scanned += o.migrate_scanned;
            sum.free_scanned += o.free_scanned;
            if caught.is_set() {
                break;
            }
        }
        sum
    }
}
