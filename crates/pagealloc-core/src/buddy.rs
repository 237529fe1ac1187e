//! The buddy algorithm: merge on free, split on allocation, fallback with claim
//! and steal, and the HighAtomic reserve (the kernel's `__free_one_page`,
//! `__rmqueue_smallest`, `__rmqueue_claim`, `__rmqueue_steal`,
//! `reserve_highatomic_pageblock`). Every function here runs with the zone lock
//! held: they are methods of [`ZoneGuard`].
//!
//! The buddy arithmetic, worked: the block of order O at pfn B1 has its buddy at
//! B2 = B1 ^ (1 << O). Freeing pfn 0x28 at order 3: the buddy is 0x28 ^ 8 = 0x20.
//! If 0x20 is a free head of order 3, unlink it; the pair is the order-4 block at
//! 0x28 & 0x20 = 0x20, whose buddy is 0x20 ^ 16 = 0x30, and so on up to order 10.
//!
//! Invariants this module keeps (beside those of `zone`):
//! - Below pageblock order, no free block has a free buddy of the same order in
//!   the same zone (merging is maximal). At or above it, two blocks stay apart
//!   only when their types differ and one of them is not a pcp type.
//! - A free block never spans pageblocks of different effective types.
//! - REPORTED (free page reporting): a merged block is marked only when both
//!   halves were; both halves of a split block keep the mark of the block.

use crate::page::NIL;
use crate::types::{MigrateType, Order, MIGRATE_PCPTYPES, PAGEBLOCK_PAGES};
use crate::vmevent::VmEvent;
use crate::zone::{Took, ZoneGuard};

impl<'a> ZoneGuard<'a> {
    /// Free a block whose head the caller has already unmarked, merging with free
    /// buddies (the kernel's `__free_one_page`). `mt` is the pageblock's type.
    pub fn free_one_locked(&mut self, pfn: u64, order: Order, mt: MigrateType) {
        self.free_one_marked_locked(pfn, order, mt, false);
    }

    /// [`ZoneGuard::free_one_locked`] for a block that may carry the REPORTED
    /// mark (`reported`): the merged block keeps it only if every part had it.
    pub(crate) fn free_one_marked_locked(
        &mut self,
        mut pfn: u64,
        mut order: Order,
        mt: MigrateType,
        mut reported: bool,
    ) {
        let zone = self.zone;
        let orig = pfn;
        while let Some(up) = order.next() {
            let buddy = pfn ^ order.pages();
            if !zone.contains(buddy) {
                break;
            }
            let bd = self.mm.page(buddy);
            if !bd.is_buddy() || bd.order() != order.get() {
                break;
            }
            // Within a pageblock the buddy's recorded list type; across pageblocks
            // the type of the buddy's pageblock.
            let buddy_mt = if order >= Order::PAGEBLOCK { zone.pageblock_mt_racy(buddy) } else { bd.private_mt() };
            // Isolated pageblocks never merge across a pageblock boundary (not even
            // with each other), so undoing part of an isolation never has to split.
            let isolated = order >= Order::PAGEBLOCK && buddy_mt == MigrateType::Isolate;
            if isolated || (buddy_mt != mt && !(mt.is_pcptype() && buddy_mt.is_pcptype())) {
                break;
            }
            reported &= self.del_from_free_list(buddy, order);
            if buddy_mt != mt && order >= Order::PAGEBLOCK {
                // Match the buddy's blocks to ours, so a later split puts the
                // halves on the right lists.
                self.retag_range_locked(buddy, order, mt);
            }
            pfn &= buddy;
            order = up;
        }
        if pfn != orig {
            self.mm.page(orig).clear();
        }
        let tail = self.merge_likely(pfn, order);
        self.add_to_free_list_marked(pfn, order, mt, tail, reported);
    }

    /// Is the next-order buddy free? Then this block will likely merge soon, so it
    /// goes to the list tail where allocations reach it last. Never for the
    /// top two orders (no block above them to merge into).
    #[inline]
    fn merge_likely(&self, pfn: u64, order: Order) -> bool {
        let Some(up) = order.next().filter(|&u| u < Order::MAX) else {
            return false;
        };
        let higher = (pfn & !(up.pages() - 1)) ^ up.pages();
        self.zone.contains(higher) && {
            let d = self.mm.page(higher);
            d.is_buddy() && d.order() == up.get()
        }
    }

    /// Free an allocated block (any order): blocks above a pageblock are freed one
    /// pageblock at a time, each under its own block's type. Returns the pages.
    pub fn free_block_locked(&mut self, pfn: u64, order: Order) {
        if order <= Order::PAGEBLOCK {
            let mt = self.zone.pageblock_mt_racy(pfn);
            self.free_one_locked(pfn, order, mt);
        } else {
            let mut p = pfn;
            while p < pfn + order.pages() {
                if p != pfn {
                    self.mm.page(p).clear();
                }
                let mt = self.zone.pageblock_mt_racy(p);
                self.free_one_locked(p, Order::PAGEBLOCK, mt);
                p += PAGEBLOCK_PAGES;
            }
        }
    }

    /// Split `pfn` (a block of order `high` already off the lists) down to `low`,
    /// putting each upper half on `lists[..][mt]` (the kernel's `expand`).
    /// `reported`: the block's REPORTED mark, which every half keeps (and
    /// which [`ZoneGuard::took_reported`] remembers for the caller).
    pub fn expand(&mut self, pfn: u64, low: Order, high: Order, mt: MigrateType, reported: bool) {
        self.took_reported = reported;
        for half in Order::ALL[low.idx()..high.idx()].iter().rev().copied() {
            self.add_to_free_list_marked(pfn + half.pages(), half, mt, false, reported);
        }
    }

    /// Take the smallest suitable block from `mt`'s own lists.
    #[inline]
    pub fn rmqueue_smallest(&mut self, order: Order, mt: MigrateType) -> Option<u64> {
        for cur in order.and_above() {
            if let Some(pfn) = self.first_free(cur, mt) {
                let reported = self.del_from_free_list(pfn, cur);
                self.expand(pfn, order, cur, mt, reported);
                return Some(pfn);
            }
        }
        None
    }

    /// Take up to `max` blocks of `order` off the head of `mt`'s own list
    /// while they are resident (not REPORTED: released blocks sit at a
    /// list's tail), handing each pfn to `out`; returns how many. One walk,
    /// one head update and one update of each counter, where taking them
    /// one at a time unlinks each and updates every counter each time. For
    /// a refill that wants single blocks: no split, no merge to undo.
    pub(crate) fn take_resident_heads(
        &mut self,
        order: Order,
        mt: MigrateType,
        max: u32,
        mut out: impl FnMut(u64),
    ) -> u32 {
        let mm = self.mm;
        let mut k = 0u32;
        let mut p = self.first_free(order, mt).map_or(NIL, |p| p as u32);
        while k < max && p != NIL {
            let d = mm.page(p as u64);
            if d.flags() & crate::page::flags::REPORTED != 0 {
                break;
            }
            let next = d.next.get();
            // No longer a free head: a merge looking at its buddy skips it.
            d.clear();
            self.filler_account(p as u64, order, false);
            out(p as u64);
            k += 1;
            p = next;
        }
        if k > 0 {
            self.area.lists[order.idx()][mt.index()].cut_head(mm, p);
            self.account_n(order, mt, k as u64, false);
            self.ops = self.ops.wrapping_add(k);
        }
        k
    }

    /// The kernel's `__rmqueue`: own lists, then claim a fallback block, then steal.
    #[inline]
    pub(crate) fn rmqueue_locked(&mut self, order: Order, mt: MigrateType) -> Option<(u64, Took)> {
        if let Some(p) = self.rmqueue_smallest(order, mt) {
            return Some((p, Took::Own));
        }
        self.rmqueue_fallback(order, mt)
    }

    #[cold]
    fn rmqueue_fallback(&mut self, order: Order, mt: MigrateType) -> Option<(u64, Took)> {
        if !mt.is_pcptype() {
            return None;
        }
        if let Some((p, from)) = self.rmqueue_claim(order, mt) {
            self.count_fragmenting(from);
            return Some((p, Took::Claimed));
        }
        let (p, from) = self.rmqueue_steal(order, mt)?;
        self.count_fragmenting(from);
        Some((p, Took::Stolen))
    }

    /// A fallback from a block below pageblock order mixes types within a
    /// pageblock: what the kernel's extfrag event calls fragmenting.
    #[inline]
    fn count_fragmenting(&self, from: Order) {
        if from < Order::PAGEBLOCK {
            self.zone.stats.events.add_owner(VmEvent::FallbackFragmenting, 1);
        }
    }

    /// Would claiming a block for `mt` at this order be worth it?
    fn should_try_claim(order: Order, mt: MigrateType) -> bool {
        order.get() >= Order::PAGEBLOCK.get() / 2 || mt == MigrateType::Reclaimable || mt == MigrateType::Unmovable
    }

    fn find_fallback(&self, order: Order, mt: MigrateType) -> Option<MigrateType> {
        let fb = &self.zone.stats.free_blocks[order.idx()];
        mt.fallbacks().into_iter().find(|f| fb[f.index()].get_racy() != 0)
    }

    /// Scan fallback lists from the largest order down and try to claim the
    /// block; the block taken and the order of the fallback block it came from.
    fn rmqueue_claim(&mut self, order: Order, mt: MigrateType) -> Option<(u64, Order)> {
        for cur in order.and_above().rev() {
            if !Self::should_try_claim(cur, mt) {
                break;
            }
            let Some(fmt) = self.find_fallback(cur, mt) else {
                continue;
            };
            let pfn = self.first_free(cur, fmt)?;
            if let Some(p) = self.try_claim_block(pfn, cur, order, mt, fmt) {
                return Some((p, cur));
            }
        }
        None
    }

    fn try_claim_block(
        &mut self,
        pfn: u64,
        cur: Order,
        order: Order,
        mt: MigrateType,
        block_mt: MigrateType,
    ) -> Option<u64> {
        if cur >= Order::PAGEBLOCK {
            let reported = self.del_from_free_list(pfn, cur);
            self.retag_range_locked(pfn, cur, mt);
            self.expand(pfn, order, cur, mt, reported);
            return Some(pfn);
        }
        let start = pfn & !(PAGEBLOCK_PAGES - 1);
        if !self.zone.contains(start) || !self.zone.contains(start + PAGEBLOCK_PAGES - 1) {
            return None;
        }
        let (free, movable) = self.count_block_locked(start);
        let alike = if mt == MigrateType::Movable {
            movable
        } else if block_mt == MigrateType::Movable {
            PAGEBLOCK_PAGES - (free + movable)
        } else {
            0
        };
        if free + alike >= PAGEBLOCK_PAGES / 2 {
            self.move_freepages_block_locked(start, mt);
            self.set_pageblock_mt_locked(start, mt);
            return self.rmqueue_smallest(order, mt);
        }
        None
    }

    /// Take the smallest fallback block without retagging its pageblock; the
    /// block and the order it came from.
    fn rmqueue_steal(&mut self, order: Order, mt: MigrateType) -> Option<(u64, Order)> {
        for cur in order.and_above() {
            let Some(fmt) = self.find_fallback(cur, mt) else {
                continue;
            };
            let pfn = self.first_free(cur, fmt)?;
            let reported = self.del_from_free_list(pfn, cur);
            self.expand(pfn, order, cur, fmt, reported);
            return Some((pfn, cur));
        }
        None
    }

    /// Free pages and movable allocated pages in one pageblock.
    fn count_block_locked(&self, start: u64) -> (u64, u64) {
        use crate::page::flags;
        let (mut free, mut movable) = (0, 0);
        let mut p = start;
        while p < start + PAGEBLOCK_PAGES {
            let d = self.mm.page(p);
            let f = d.flags();
            if f & flags::BUDDY != 0 {
                free += 1 << d.order();
                p += 1 << d.order();
            } else if flags::typed_allocation(f) {
                // An allocated head or a `PageArray`'s page, by the type it
                // was allocated for.
                if d.private_mt() == MigrateType::Movable {
                    movable += 1 << d.order();
                }
                p += 1 << d.order();
            } else {
                p += 1;
            }
        }
        (free, movable)
    }

    /// Move every free block inside the pageblock at `start` from `from`'s lists
    /// to `to`'s (the kernel's `__move_freepages_block`). Returns pages moved.
    pub fn move_freepages_block_locked(&mut self, start: u64, to: MigrateType) -> u64 {
        let mut moved = 0;
        let mut p = start;
        while p < start + PAGEBLOCK_PAGES {
            let d = self.mm.page(p);
            if d.is_buddy() {
                let o = d.buddy_order();
                self.move_to_free_list(p, o, to);
                moved += o.pages();
                p += o.pages();
            } else {
                p += 1;
            }
        }
        moved
    }

    /// Retag every pageblock in a block of `order` (>= pageblock order, or the
    /// containing block when smaller).
    pub(crate) fn retag_range_locked(&mut self, pfn: u64, order: Order, mt: MigrateType) {
        let start = pfn & !(PAGEBLOCK_PAGES - 1);
        let n = order.pages().max(PAGEBLOCK_PAGES);
        let mut p = start;
        while p < start + n {
            self.set_pageblock_mt_locked(p, mt);
            p += PAGEBLOCK_PAGES;
        }
    }

    /// Turn the pageblock holding `pfn` into a HighAtomic reserve, if the zone has
    /// room (about 1% of it) and the block is of a pcp type.
    pub(crate) fn reserve_highatomic_locked(&mut self, pfn: u64, order: Order) -> bool {
        let zone = self.zone;
        let max = zone.managed / 100 + PAGEBLOCK_PAGES;
        let reserved = &zone.stats.nr_reserved_highatomic;
        if reserved.get_racy() >= max {
            return false;
        }
        let mt = zone.pageblock_mt_racy(pfn);
        if !mt.is_pcptype() {
            return false;
        }
        if order < Order::PAGEBLOCK {
            let start = pfn & !(PAGEBLOCK_PAGES - 1);
            self.move_freepages_block_locked(start, MigrateType::HighAtomic);
            self.set_pageblock_mt_locked(start, MigrateType::HighAtomic);
            reserved.add_locked(PAGEBLOCK_PAGES);
        } else {
            self.retag_range_locked(pfn, order, MigrateType::HighAtomic);
            reserved.add_locked(order.pages());
        }
        true
    }

    /// Give one HighAtomic block back to `mt` (before an allocation fails). With
    /// `force` false, the last reserved pageblock is kept.
    pub(crate) fn unreserve_highatomic_locked(&mut self, mt: MigrateType, force: bool) -> bool {
        let reserved = &self.zone.stats.nr_reserved_highatomic;
        if !force && reserved.get_racy() <= PAGEBLOCK_PAGES {
            return false;
        }
        let target = if mt.is_pcptype() { mt } else { MigrateType::Unmovable };
        for order in Order::ALL {
            let Some(pfn) = self.first_free(order, MigrateType::HighAtomic) else {
                continue;
            };
            if self.zone.pageblock_mt_racy(pfn) != MigrateType::HighAtomic {
                continue;
            }
            let size = order.pages().max(PAGEBLOCK_PAGES);
            reserved.sub_locked(size.min(reserved.get_racy()));
            if order < Order::PAGEBLOCK {
                let start = pfn & !(PAGEBLOCK_PAGES - 1);
                self.move_freepages_block_locked(start, target);
                self.set_pageblock_mt_locked(start, target);
            } else {
                // A whole free block: retag it and free it again, so it merges
                // with a buddy of a pcp type that it could not join before.
                let reported = self.del_from_free_list(pfn, order);
                self.retag_range_locked(pfn, order, target);
                self.free_one_marked_locked(pfn, order, target, reported);
            }
            return true;
        }
        false
    }

    /// Is there a free block of at least `order` usable by a request (pcp types,
    /// plus HighAtomic when allowed)? Reads the lock-free counters.
    pub(crate) fn has_free_block_racy(zone: &crate::zone::Zone, order: Order, highatomic: bool) -> bool {
        order.and_above().any(|o| {
            let fb = &zone.stats.free_blocks[o.idx()];
            fb[..MIGRATE_PCPTYPES].iter().any(|c| c.get_racy() != 0)
                || (highatomic && fb[MigrateType::HighAtomic.index()].get_racy() != 0)
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::memmap::MemMap;
    use crate::page::flags::REPORTED;
    use crate::types::{MigrateType, Order, ZoneIdx, ZoneType};
    use crate::zone::{new_pageblocks, Zone};

    /// Order-0 blocks at the even pfns of 0..2*n (their buddies allocated:
    /// nothing merges), the last `reported` of them released at the tail.
    fn zone_with_singles(n: u64, reported: u64) -> (MemMap, Zone) {
        let mm = MemMap::new(1024, crate::Backing::None, new_pageblocks(2)).unwrap();
        let z = Zone::new(ZoneIdx::FIRST, 0, ZoneType::Normal, 0, 1024, &new_pageblocks(2));
        {
            let mut g = z.lock(&mm);
            for i in 0..n {
                g.add_to_free_list_marked(2 * i, Order::ZERO, MigrateType::Movable, true, i >= n - reported);
            }
        }
        (mm, z)
    }

    /// The list and the counters agree, and hold exactly `want`.
    fn holds(mm: &MemMap, z: &Zone, want: &[u64]) {
        let g = z.lock(mm);
        let on: Vec<u64> = g.area.lists[0][MigrateType::Movable.index()].iter(mm).collect();
        assert_eq!(on, want);
        assert_eq!(z.stats.free_blocks[0][MigrateType::Movable.index()].get_racy(), want.len() as u64);
        assert_eq!(z.stats.nr_free_pages.get_racy(), want.len() as u64);
        let reported = want.iter().filter(|&&p| mm.page(p).flags() & REPORTED != 0).count();
        assert_eq!(z.stats.nr_reported.get_racy(), reported as u64);
    }

    #[test]
    fn resident_heads_stop_at_the_first_released_block() {
        let (mm, z) = zone_with_singles(10, 3);
        let mut got = Vec::new();
        let k = z.lock(&mm).take_resident_heads(Order::ZERO, MigrateType::Movable, 100, |p| got.push(p));
        assert_eq!(k, 7);
        assert_eq!(got, [0, 2, 4, 6, 8, 10, 12]);
        assert!(got.iter().all(|&p| mm.page(p).flags() == 0), "a taken block still looks free");
        holds(&mm, &z, &[14, 16, 18]);
    }

    #[test]
    fn resident_heads_take_at_most_what_is_asked() {
        let (mm, z) = zone_with_singles(5, 0);
        let mut got = Vec::new();
        assert_eq!(z.lock(&mm).take_resident_heads(Order::ZERO, MigrateType::Movable, 2, |p| got.push(p)), 2);
        holds(&mm, &z, &[4, 6, 8]);
        // The rest, to the end of the list (head and tail both emptied).
        assert_eq!(z.lock(&mm).take_resident_heads(Order::ZERO, MigrateType::Movable, 9, |p| got.push(p)), 3);
        assert_eq!(got, [0, 2, 4, 6, 8]);
        holds(&mm, &z, &[]);
        // An empty list, and a list whose head is released: nothing taken.
        assert_eq!(z.lock(&mm).take_resident_heads(Order::ZERO, MigrateType::Movable, 9, |_| unreachable!()), 0);
        let (mm, z) = zone_with_singles(2, 2);
        assert_eq!(z.lock(&mm).take_resident_heads(Order::ZERO, MigrateType::Movable, 9, |_| unreachable!()), 0);
        holds(&mm, &z, &[0, 2]);
    }
}
