//! Zones: a pfn range with free areas, pageblock types, watermarks and
//! lock-free statistics (the kernel's `struct zone`).
//!
//! Locking: the free lists live inside `Zone::free` (the zone lock). The only way
//! to touch them is a [`ZoneGuard`], so every `_locked` operation takes the guard
//! as proof. Statistics are written by the guard holder with plain load+store and
//! read by anyone without the lock.
//!
//! Invariants (each checked by `check_invariants`):
//! - `stats.free_blocks[o][mt]` equals the length of `free.lists[o][mt]`.
//! - `stats.nr_free_pages == sum over o, mt != Isolate of free_blocks[o][mt] << o`.
//! - `stats.block_count[mt]` equals the number of pageblocks whose effective type
//!   (Isolate when the isolate bit is set) is `mt`.
//! - Every free block on `lists[o][mt]` lies in pageblocks whose effective type is
//!   `mt` (the hygiene rule).
//! - `stats.nr_reported == sum of `1 << order.get()` over free heads marked REPORTED`
//!   (free page reporting; isolated lists included).
//! - `stats.seq` is even whenever no guard is alive; writers make it odd for the
//!   length of every critical section (a seqcount for consistent snapshots).

mod check;
mod depot;
mod filler;
mod isolate;
mod lock;
mod seqcount;
mod table;
mod wmark;

pub(crate) use check::block_counts_agree;
pub use depot::Depot;
pub(crate) use filler::filler_counts_agree;
pub use table::ZoneTable;
pub(crate) use wmark::{clamp_min_free_kbytes, compute_watermarks, default_min_free_kbytes};

use crate::list::PfnList;
use crate::lockstat::{ticks, Batch, LockStat};
use crate::memmap::{MemMap, Pageblocks};
use crate::sync::{AtomicU64, FutexGuard, FutexMutex, LockedCounter, Ordering};
use crate::types::{
    Gfp, MigrateType, Order, ZoneIdx, ZoneType, MIGRATE_PCPTYPES, MIGRATE_TYPES, NR_ORDERS, PAGEBLOCK_ORDER,
    PAGEBLOCK_PAGES,
};
use crate::vmevent::VmEvent;
use core::sync::atomic::{AtomicU16, AtomicU32};

/// A process-wide coarse clock for the age of free blocks (free page
/// reporting): advanced by reporting passes, read (relaxed) when a block goes
/// on a free list and stored in its head's private word. Units are
/// [`FREE_CLOCK_MS`] milliseconds, compared with wrapping arithmetic.
pub static FREE_CLOCK: AtomicU32 = AtomicU32::new(0);
/// Milliseconds per tick of [`FREE_CLOCK`].
pub const FREE_CLOCK_MS: u64 = 10;

/// The free clock's current tick, as stored in a free head.
#[inline(always)]
pub fn free_clock() -> u16 {
    FREE_CLOCK.load(core::sync::atomic::Ordering::Relaxed) as u16
}

/// Pageblock word: migratetype in bits 0..3 and the isolate bit 3 (written
/// under the zone's lock), the zone's index in bits 8..16 (fixed at build).
const PB_MT_MASK: u16 = 0x7;
const PB_ISOLATE: u16 = 0x8;
const PB_ZONE_SHIFT: u32 = 8;

/// A table for `nblocks` pageblocks, every block Movable in zone 0.
pub(crate) fn new_pageblocks(nblocks: usize) -> Pageblocks {
    (0..nblocks).map(|_| AtomicU16::new(MigrateType::Movable as u16)).collect()
}

/// The zone index in a pageblock word.
#[inline(always)]
pub fn pb_zone(w: u16) -> ZoneIdx {
    ZoneIdx::from_u8((w >> PB_ZONE_SHIFT) as u8)
}

/// The index of a pageblock word's effective type when it is a pcp type (not
/// isolated, not HighAtomic), for indexing per-type arrays: one compare.
#[inline(always)]
pub(crate) fn pb_pcp_index(w: u16) -> Option<usize> {
    let t = (w & (PB_MT_MASK | PB_ISOLATE)) as usize;
    (t < MIGRATE_PCPTYPES).then_some(t)
}

/// The bits of a pageblock word that decide where a freed page goes: its
/// zone, and its block's type and isolate bit.
pub const PB_KEY_MASK: u16 = 0xff0f;

/// The key of zone `zi`'s pageblocks of pcp type `t`, not isolated.
#[inline(always)]
pub(crate) fn key_of(zi: ZoneIdx, t: usize) -> u16 {
    ((zi.as_u8() as u16) << PB_ZONE_SHIFT) | t as u16
}

/// The key of a pageblock word (see [`PB_KEY_MASK`]).
#[inline(always)]
pub fn pb_key(w: u16) -> u16 {
    w & PB_KEY_MASK
}

/// The effective type in a pageblock word (Isolate while isolated).
#[inline(always)]
pub(crate) fn pb_mt(w: u16) -> MigrateType {
    if w & PB_ISOLATE != 0 {
        MigrateType::Isolate
    } else {
        MigrateType::from_index((w & PB_MT_MASK) as usize)
    }
}

/// The free lists of one zone (what the zone lock protects).
#[derive(Debug, Default)]
pub struct FreeArea {
    pub lists: [[PfnList; MIGRATE_TYPES]; NR_ORDERS],
    /// Free pages per pageblock, for the hugepage filler (see `filler`).
    pub(crate) pb_free: filler::PageblockFree,
}

/// Counters readable without the zone lock.
#[derive(Debug, Default)]
pub struct ZoneStats {
    /// Seqcount: odd while a writer is inside a critical section.
    pub seq: AtomicU64,
    /// Free blocks per (order, migratetype).
    pub free_blocks: [[LockedCounter; MIGRATE_TYPES]; NR_ORDERS],
    /// Free pages outside isolated lists (NR_FREE_PAGES).
    pub nr_free_pages: LockedCounter,
    /// Pageblocks per effective type.
    pub block_count: [LockedCounter; MIGRATE_TYPES],
    /// Pages in HighAtomic-reserved pageblocks.
    pub nr_reserved_highatomic: LockedCounter,
    /// Free pages on the HighAtomic lists (the kernel's `nr_free_highatomic`):
    /// what a request without access to the reserve cannot use.
    pub nr_free_highatomic: LockedCounter,
    /// Free pages in blocks marked REPORTED (released: not resident).
    pub nr_reported: LockedCounter,
    /// Events counted under this zone's lock.
    pub events: crate::vmevent::EventCounters,
}

/// How a block left the free lists, for event counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Took {
    /// From the requested type's own lists.
    Own,
    /// Fallback that claimed the pageblock for the requested type.
    Claimed,
    /// Fallback that took a block without retagging.
    Stolen,
}

/// Watermark indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wmark {
    Min = 0,
    Low = 1,
    High = 2,
}

/// Internal allocation flags derived from gfp and the pass (the kernel's ALLOC_*).
#[derive(Clone, Copy, Debug)]
pub struct AllocFlags {
    /// The watermark the zone must stay above.
    pub wmark: Wmark,
    /// High priority: may dip below it, and use the HighAtomic reserve.
    pub high: bool,
}

impl AllocFlags {
    /// The fast path's flags: the low watermark, no reserves.
    pub(crate) const FAST: Self = Self { wmark: Wmark::Low, high: false };
}

/// One zone.
pub struct Zone {
    /// Index in the allocator's zone table.
    pub idx: ZoneIdx,
    pub nid: u32,
    pub ztype: ZoneType,
    pub start: u64,
    pub end: u64,
    /// Pages of the zone, holes included (the watermarks' base).
    pub managed: u64,
    pub wmark: [u64; 3],
    /// Pages this zone keeps back from requests that could have used a higher
    /// zone, indexed by the request's highest usable zone type.
    pub lowmem_reserve: [u64; 2],
    free: FutexMutex<FreeArea>,
    pub stats: ZoneStats,
    /// The arena's pageblock table (this zone owns `start >> 9 .. end >> 9`).
    blocks: Pageblocks,
    /// Free order-0 pages parked between the per-CPU lists and the buddy
    /// (see `depot`), counted free beside NR_FREE_PAGES.
    pub depot: Depot,
    /// Zone-lock wait and hold statistics (written under the lock).
    pub lockstat: LockStat,
    /// Times the zone lock was taken (for tests proving readers never take it).
    /// `page_group_by_mobility_disabled`: every request takes
    /// from the Movable lists.
    pub(crate) group_off: bool,
}

impl Zone {
    /// A zone over `start..end`, claiming its blocks in `blocks` (marked Movable).
    pub(crate) fn new(idx: ZoneIdx, nid: u32, ztype: ZoneType, start: u64, end: u64, blocks: &Pageblocks) -> Self {
        debug_assert!(start.is_multiple_of(PAGEBLOCK_PAGES) && end.is_multiple_of(PAGEBLOCK_PAGES) && end > start);
        let nblocks = ((end - start) / PAGEBLOCK_PAGES) as usize;
        let first = (start / PAGEBLOCK_PAGES) as usize;
        for b in &blocks[first..first + nblocks] {
            b.store(((idx.as_u8() as u16) << PB_ZONE_SHIFT) | MigrateType::Movable as u16, Ordering::Relaxed);
        }
        let stats = ZoneStats::default();
        // Every block starts Movable, as the kernel's memmap_init does.
        stats.block_count[MigrateType::Movable.index()].add_locked(nblocks as u64);
        Self {
            idx,
            nid,
            ztype,
            start,
            end,
            managed: end - start,
            wmark: [0; 3],
            lowmem_reserve: [0; 2],
            free: FutexMutex::new(FreeArea::default()),
            stats,
            blocks: blocks.clone(),
            depot: Depot::default(),
            lockstat: LockStat::new(false),
            group_off: false,
        }
    }

    #[inline(always)]
    pub fn spanned(&self) -> u64 {
        self.end - self.start
    }

    #[inline(always)]
    pub fn contains(&self, pfn: u64) -> bool {
        pfn >= self.start && pfn < self.end
    }

    #[inline(always)]
    pub fn nr_pageblocks(&self) -> usize {
        ((self.end - self.start) / PAGEBLOCK_PAGES) as usize
    }

    #[inline(always)]
    fn block(&self, pfn: u64) -> &AtomicU16 {
        debug_assert!(self.contains(pfn));
        &self.blocks[(pfn >> PAGEBLOCK_ORDER) as usize]
    }

    /// The effective type of the pageblock holding `pfn` (Isolate while isolated).
    /// Lock-free: a concurrent retag may or may not be seen.
    #[inline(always)]
    pub fn pageblock_mt_racy(&self, pfn: u64) -> MigrateType {
        pb_mt(self.block(pfn).load(Ordering::Relaxed))
    }

    /// The stored type ignoring the isolate bit.
    #[cfg(test)]
    pub(crate) fn pageblock_base_mt_racy(&self, pfn: u64) -> MigrateType {
        MigrateType::from_index((self.block(pfn).load(Ordering::Relaxed) & PB_MT_MASK) as usize)
    }

    #[inline(always)]
    pub fn pageblock_isolated_racy(&self, pfn: u64) -> bool {
        self.block(pfn).load(Ordering::Relaxed) & PB_ISOLATE != 0
    }

    /// Free pages readable without the lock: the buddy's (NR_FREE_PAGES)
    /// and the depot's, which are free in every watermark check.
    #[inline(always)]
    pub fn free_pages_racy(&self) -> u64 {
        self.stats.nr_free_pages.get_racy() + self.depot.pages_racy()
    }

    /// Free pages on the buddy lists alone (NR_FREE_PAGES), lock-free.
    #[inline(always)]
    pub fn buddy_free_pages_racy(&self) -> u64 {
        self.stats.nr_free_pages.get_racy()
    }

    /// The event an allocation from this zone counts (pgalloc_normal, pgalloc_movable).
    #[inline(always)]
    pub(crate) fn alloc_event(&self) -> VmEvent {
        if self.ztype == ZoneType::Movable {
            VmEvent::PgallocMovable
        } else {
            VmEvent::PgallocNormal
        }
    }

    /// Take a block of `order` for `gfp` from the buddy lists under the zone
    /// lock (HighAtomic reserve first for high-priority orders above 0, and
    /// reserving a block for them). `trylock_failed`: the request came here
    /// because a per-CPU lock was busy (counted).
    #[inline]
    pub fn rmqueue(&self, mm: &MemMap, order: Order, gfp: Gfp, af: AllocFlags, trylock_failed: bool) -> Option<u64> {
        self.rmqueue_in(self.lock(mm), order, gfp, af, trylock_failed)
    }

    /// [`Zone::rmqueue`] under a zone lock the caller already holds (`g`,
    /// released on return): what the no-lock path calls after a
    /// [`Zone::try_lock`] succeeded.
    #[inline]
    pub(crate) fn rmqueue_in(
        &self,
        mut g: ZoneGuard<'_>,
        order: Order,
        gfp: Gfp,
        af: AllocFlags,
        trylock_failed: bool,
    ) -> Option<u64> {
        let mt = if self.group_off { MigrateType::Movable } else { gfp.migratetype() };
        let highatomic = af.high && order > Order::ZERO;
        let mut took = None;
        if highatomic {
            took = g.rmqueue_smallest(order, MigrateType::HighAtomic).map(|p| (p, Took::Own));
        }
        if took.is_none() {
            took = g.rmqueue_locked(order, mt);
        }
        let ev = &self.stats.events;
        if trylock_failed {
            ev.add_owner(VmEvent::PcpTrylockFail, 1);
        }
        let (pfn, how) = took?;
        if g.took_reported {
            // Transient: the caller's prep_new_page reads it (Gfp::ZERO
            // skips zeroing a released block) and overwrites the word.
            g.mm.page(pfn).set_flags(crate::page::flags::REPORTED);
        }
        g.count_fallback(how);
        if highatomic
            && self.pageblock_mt_racy(pfn) != MigrateType::HighAtomic
            && g.reserve_highatomic_locked(pfn, order)
        {
            ev.add_owner(VmEvent::HighatomicReserve, 1);
        }
        ev.add_owner(self.alloc_event(), 1 << order.get());
        Some(pfn)
    }

    /// Free an unmarked block of `order` straight to the buddy lists under the
    /// zone lock. `count_free`: count pgfree; `trylock_failed`: the free came
    /// here because a per-CPU lock was busy (counted).
    pub fn free_to_buddy(&self, mm: &MemMap, p: u64, order: Order, count_free: bool, trylock_failed: bool) {
        let mut g = self.lock(mm);
        mm.page(p).clear();
        g.free_block_locked(p, order);
        let ev = &self.stats.events;
        if count_free {
            ev.add_owner(VmEvent::Pgfree, 1 << order.get());
        }
        if trylock_failed {
            ev.add_owner(VmEvent::PcpTrylockFail, 1);
        }
    }
}

/// Proof that the zone lock is held; all free-list changes go through it.
pub struct ZoneGuard<'a> {
    pub zone: &'a Zone,
    pub mm: &'a MemMap,
    pub area: FutexGuard<'a, FreeArea>,
    /// Whether the block the last `rmqueue_*` took was marked REPORTED.
    pub took_reported: bool,
    /// When the lock was taken (0: not timed, statistics were off).
    entered: u64,
    /// What this hold moves between a per-CPU list and the buddy, for the
    /// lock statistics (set by the drain or refill that holds it).
    pub batch: Batch,
    /// Free-list operations this hold did (lock statistics).
    pub(crate) ops: u32,
}

impl<'a> ZoneGuard<'a> {
    #[inline(always)]
    fn enter(zone: &'a Zone, mm: &'a MemMap, area: FutexGuard<'a, FreeArea>, entered: u64) -> Self {
        seqcount::write_begin(&zone.stats.seq);
        Self { zone, mm, area, took_reported: false, entered, batch: Batch::None, ops: 0 }
    }

    /// Set a pageblock's stored type, keeping block counts right.
    pub(crate) fn set_pageblock_mt_locked(&mut self, pfn: u64, mt: MigrateType) {
        debug_assert!(mt != MigrateType::Isolate);
        let b = self.zone.block(pfn);
        let old = b.load(Ordering::Relaxed);
        let new = (old & !PB_MT_MASK) | mt as u16;
        if old & PB_ISOLATE == 0 {
            let old_mt = (old & PB_MT_MASK) as usize;
            self.zone.stats.block_count[old_mt].sub_locked(1);
            self.zone.stats.block_count[mt.index()].add_locked(1);
        }
        b.store(new, Ordering::Relaxed);
    }

    /// Set or clear a pageblock's isolate bit, keeping block counts right.
    pub fn set_pageblock_isolate_locked(&mut self, pfn: u64, isolate: bool) {
        let b = self.zone.block(pfn);
        let old = b.load(Ordering::Relaxed);
        if (old & PB_ISOLATE != 0) == isolate {
            return;
        }
        let base = (old & PB_MT_MASK) as usize;
        let iso = MigrateType::Isolate.index();
        let (from, to) = if isolate { (base, iso) } else { (iso, base) };
        self.zone.stats.block_count[from].sub_locked(1);
        self.zone.stats.block_count[to].add_locked(1);
        b.store(if isolate { old | PB_ISOLATE } else { old & !PB_ISOLATE }, Ordering::Relaxed);
    }

    #[inline(always)]
    fn account(&self, order: Order, mt: MigrateType, add: bool) {
        self.account_n(order, mt, 1, add);
    }

    /// [`Self::account`] for `n` blocks of `order` at once.
    #[inline(always)]
    pub(crate) fn account_n(&self, order: Order, mt: MigrateType, n: u64, add: bool) {
        let s = &self.zone.stats;
        let fb = &s.free_blocks[order.idx()][mt.index()];
        let pages = n << order.get();
        if add {
            fb.add_locked(n);
            if mt != MigrateType::Isolate {
                s.nr_free_pages.add_locked(pages);
            }
            if mt == MigrateType::HighAtomic {
                s.nr_free_highatomic.add_locked(pages);
            }
        } else {
            fb.sub_locked(n);
            if mt != MigrateType::Isolate {
                s.nr_free_pages.sub_locked(pages);
            }
            if mt == MigrateType::HighAtomic {
                s.nr_free_highatomic.sub_locked(pages);
            }
        }
    }

    /// Mark `pfn` a free head of `order` and link it on `lists[order][mt]`.
    #[inline(always)]
    pub fn add_to_free_list(&mut self, pfn: u64, order: Order, mt: MigrateType, tail: bool) {
        self.add_to_free_list_marked(pfn, order, mt, tail, false);
    }

    /// [`ZoneGuard::add_to_free_list`] with the REPORTED mark. The reporter
    /// puts the blocks it released at the tail (`tail`), where allocations
    /// reach them last: resident blocks are preferred.
    #[inline(always)]
    pub fn add_to_free_list_marked(&mut self, pfn: u64, order: Order, mt: MigrateType, tail: bool, reported: bool) {
        debug_assert!(
            {
                let bmt = self.zone.pageblock_mt_racy(pfn);
                bmt == mt || (bmt.is_pcptype() && mt.is_pcptype())
            },
            "hygiene: pfn {pfn:#x} order {order} {mt}"
        );
        let extra = if reported {
            self.zone.stats.nr_reported.add_locked(order.pages());
            crate::page::flags::REPORTED
        } else {
            0
        };
        self.mm.page(pfn).set_buddy(order, mt, extra, free_clock());
        self.filler_account(pfn, order, true);
        self.ops = self.ops.wrapping_add(1);
        let l = &mut self.area.lists[order.idx()][mt.index()];
        if tail {
            l.push_tail(self.mm, pfn);
        } else {
            l.push_head(self.mm, pfn);
        }
        self.account(order, mt, true);
    }

    /// Unlink a free head from the list its descriptor records and clear its
    /// mark. Returns whether it was marked REPORTED.
    #[inline(always)]
    pub fn del_from_free_list(&mut self, pfn: u64, order: Order) -> bool {
        let d = self.mm.page(pfn);
        let mt = d.private_mt();
        let reported = d.flags() & crate::page::flags::REPORTED != 0;
        if reported {
            self.zone.stats.nr_reported.sub_locked(order.pages());
        }
        self.ops = self.ops.wrapping_add(1);
        self.area.lists[order.idx()][mt.index()].remove(self.mm, pfn);
        d.clear();
        self.account(order, mt, false);
        self.filler_account(pfn, order, false);
        reported
    }

    /// Move a free head between types' lists (to the tail, as the kernel does).
    #[inline]
    pub(crate) fn move_to_free_list(&mut self, pfn: u64, order: Order, to: MigrateType) {
        let d = self.mm.page(pfn);
        let from = d.private_mt();
        // Keep the free-time stamp (bits above the type) for reporting.
        let stamp = d.private_raw() & !((1 << crate::page::STAMP_SHIFT) - 1);
        d.set_private_raw(crate::page::private_word(order, to) | stamp);
        self.ops = self.ops.wrapping_add(1);
        self.area.lists[order.idx()][from.index()].remove(self.mm, pfn);
        self.account(order, from, false);
        self.area.lists[order.idx()][to.index()].push_tail(self.mm, pfn);
        self.account(order, to, true);
    }

    /// Count a fallback claim or steal.
    #[inline(always)]
    pub(crate) fn count_fallback(&self, how: Took) {
        match how {
            Took::Own => {}
            Took::Claimed => self.zone.stats.events.add_owner(VmEvent::FallbackClaim, 1),
            Took::Stolen => self.zone.stats.events.add_owner(VmEvent::FallbackSteal, 1),
        }
    }

    /// First block on a list, without unlinking it.
    #[inline(always)]
    pub fn first_free(&self, order: Order, mt: MigrateType) -> Option<u64> {
        self.area.lists[order.idx()][mt.index()].first()
    }
}

impl Drop for ZoneGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Every identity the zone lock protects, checked before the lock goes.
        #[cfg(feature = "debug-checks")]
        check::check_zone_locked(self);
        // Timed exactly when the wait was (`entered` is a tick count, never 0).
        if self.entered != 0 {
            self.zone.lockstat.held_locked(ticks().saturating_sub(self.entered), self.batch, self.ops);
        }
        seqcount::write_end(&self.zone.stats.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_follow_the_kernel_formula_for_one_gib() {
        let z = Zone::new(ZoneIdx::FIRST, 0, ZoneType::Normal, 0, 262_144, &new_pageblocks(512));
        let min_kb = clamp_min_free_kbytes(default_min_free_kbytes(262_144));
        assert_eq!(min_kb, 4096);
        let w = compute_watermarks(&z, min_kb / 4, 262_144, 10);
        assert_eq!(w, [1024, 1024 + 262, 1024 + 524]);
    }

    #[test]
    fn isolate_bit_keeps_the_stored_type() {
        let mm = MemMap::new(1024, crate::Backing::None, new_pageblocks(2)).unwrap();
        let z = Zone::new(ZoneIdx::FIRST, 0, ZoneType::Normal, 0, 1024, &new_pageblocks(2));
        let mut g = z.lock(&mm);
        g.set_pageblock_mt_locked(0, MigrateType::Unmovable);
        g.set_pageblock_isolate_locked(0, true);
        assert_eq!(z.pageblock_mt_racy(0), MigrateType::Isolate);
        assert_eq!(z.pageblock_base_mt_racy(0), MigrateType::Unmovable);
        assert_eq!(z.stats.block_count[MigrateType::Isolate.index()].get_racy(), 1);
        g.set_pageblock_isolate_locked(0, false);
        assert_eq!(z.pageblock_mt_racy(0), MigrateType::Unmovable);
        assert_eq!(z.stats.block_count[MigrateType::Unmovable.index()].get_racy(), 1);
        assert_eq!(z.stats.block_count[MigrateType::Movable.index()].get_racy(), 1);
        drop(g);
        assert_eq!(z.stats.seq.load(Ordering::Relaxed) % 2, 0);
    }
}
