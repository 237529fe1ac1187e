//! The hugepage filler's bookkeeping (`Config::hugepage_filler`
//! with hugepage backing): free pages per pageblock on the zone's free
//! lists, so that a per-CPU refill can take its block from the fullest
//! pageblock that has room, as tcmalloc's Temeraire filler takes from the
//! fullest hugepage. Live memory then packs into few 2 MiB pages; the
//! emptiest ones drain as their short-lived pages are freed, become wholly
//! free and can be released.
//!
//! Invariants (under the zone lock): when enabled, `free[b]` is the number
//! of pages of pageblock `b` (counted from the zone's start) in free blocks
//! on the zone's lists, whatever their type (isolated ones included): every
//! block enters and leaves the lists through `add_to_free_list_marked` and
//! `del_from_free_list`, which count it here. A block above the pageblock
//! order counts a whole pageblock in each of its pageblocks. Disabled (the
//! vector empty), nothing is counted and nothing reads it.

use super::{Zone, ZoneGuard};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{MigrateType, Order, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};

/// Free pages per pageblock of one zone (empty: the filler is off).
#[derive(Debug, Default)]
pub(crate) struct PageblockFree {
    free: Vec<u16>,
}

/// Blocks of one list a refill compares before it takes the one in the
/// fullest pageblock (the lists are not sorted by fullness: a bounded look,
/// each block a descriptor load, likely a cache miss). `bench
/// hugepage-filler` packed as well with 4 as with 16, and its churn cost
/// 15% more with 16 and within the noise of the filler off with 4.
const SCAN: usize = 4;

impl PageblockFree {
    /// Counting from now on, for `nblocks` pageblocks with no free page yet.
    pub fn enable(&mut self, nblocks: usize) {
        self.free = vec![0; nblocks];
    }

    #[inline(always)]
    pub fn on(&self) -> bool {
        !self.free.is_empty()
    }
}

impl Zone {
    /// Count free pages per pageblock for the hugepage filler from now on
    /// (before any page is freed into the zone).
    pub(crate) fn enable_filler(&self) {
        self.free.lock().pb_free.enable(self.nr_pageblocks());
    }
}

impl ZoneGuard<'_> {
    /// Count a block of `order` at `pfn` entering (`add`) or leaving the
    /// free lists.
    #[inline(always)]
    pub(crate) fn filler_account(&mut self, pfn: u64, order: Order, add: bool) {
        if !self.area.pb_free.on() {
            return;
        }
        let first = ((pfn - self.zone.start) >> PAGEBLOCK_ORDER) as usize;
        let (n, each) = if order.get() >= PAGEBLOCK_ORDER {
            (1usize << (order.get() - PAGEBLOCK_ORDER), PAGEBLOCK_PAGES as u16)
        } else {
            (1, order.pages() as u16)
        };
        for c in &mut self.area.pb_free.free[first..first + n] {
            *c = if add { *c + each } else { *c - each };
        }
    }

    /// Take a block of `order` from `mt`'s own lists out of the fullest
    /// pageblock with room: at the smallest order below the pageblock's that
    /// has a block of at least `order`, among the first [`SCAN`] blocks of
    /// its list, the one whose pageblock has the fewest free pages; without
    /// any such block, as `rmqueue_smallest`. Best fit by free range first
    /// (Temeraire's first criterion too), then fullness.
    pub(crate) fn rmqueue_fullest(&mut self, order: Order, mt: MigrateType) -> Option<u64> {
        for cur in order.and_above().take_while(|o| o.get() < PAGEBLOCK_ORDER) {
            let list = self.area.lists[cur.idx()][mt.index()];
            let best = list.iter(self.mm).take(SCAN).min_by_key(|&p| {
                let b = ((p - self.zone.start) >> PAGEBLOCK_ORDER) as usize;
                self.area.pb_free.free[b]
            });
            if let Some(pfn) = best {
                let reported = self.del_from_free_list(pfn, cur);
                self.expand(pfn, order, cur, mt, reported);
                return Some(pfn);
            }
        }
        self.rmqueue_smallest(order, mt)
    }
}

/// The counts against the free lists (`check_invariants`): Ok when the
/// filler is off or every pageblock's count is what its lists hold.
pub(crate) fn filler_counts_agree(g: &ZoneGuard<'_>) -> Result<(), (u64, String)> {
    if !g.area.pb_free.on() {
        return Ok(());
    }
    let z: &Zone = g.zone;
    let mut want = vec![0u64; g.area.pb_free.free.len()];
    for (o, per_type) in g.area.lists.iter().enumerate() {
        for list in per_type {
            for p in list.iter(g.mm) {
                let first = ((p - z.start) >> PAGEBLOCK_ORDER) as usize;
                let pages = 1u64 << o;
                if pages >= PAGEBLOCK_PAGES {
                    want[first..first + (pages / PAGEBLOCK_PAGES) as usize]
                        .iter_mut()
                        .for_each(|c| *c += PAGEBLOCK_PAGES);
                } else {
                    want[first] += pages;
                }
            }
        }
    }
    for (b, (&have, &want)) in g.area.pb_free.free.iter().zip(&want).enumerate() {
        if have as u64 != want {
            let p = z.start + b as u64 * PAGEBLOCK_PAGES;
            return Err((p, format!("hugepage filler: pageblock counted {have} free pages, its lists hold {want}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memmap::MemMap;
    use crate::types::{ZoneIdx, ZoneType};
    use crate::zone::new_pageblocks;

    /// Pageblock 0 nearly full (8 single free pages), pageblock 1 nearly
    /// empty (all free but 2 single pages, freed last so that its 2 single
    /// free pages head the order-0 list), pageblocks 2 and 3 one free
    /// order-10 block: the filler takes pageblock 0's holes first, then
    /// pageblock 1's, and never splits the wholly free ones while holes
    /// remain; the counts follow every step.
    #[test]
    fn refills_take_the_fullest_pageblock_with_room() {
        let mm = MemMap::new(2048, crate::Backing::None, new_pageblocks(4)).unwrap();
        let z = Zone::new(ZoneIdx::FIRST, 0, ZoneType::Normal, 0, 2048, &new_pageblocks(4));
        z.enable_filler();
        let mut g = z.lock(&mm);
        let mt = MigrateType::Movable;
        let o0 = Order::ZERO;
        g.free_one_locked(1024, Order::new(10).unwrap(), mt);
        for k in 0..8 {
            g.free_one_locked(k * 64, o0, mt);
        }
        for p in 512..1024 {
            if p % 256 != 1 {
                g.free_one_locked(p, o0, mt);
            }
        }
        filler_counts_agree(&g).unwrap();
        assert_eq!(g.area.pb_free.free, [8, 510, 512, 512]);
        let head = g.first_free(o0, mt).unwrap();
        assert!((512..1024).contains(&head), "without the filler the next page comes from pageblock 1 ({head})");
        for _ in 0..8 {
            let p = g.rmqueue_fullest(o0, mt).unwrap();
            assert!(p < 512, "the fullest pageblock with room first: {p}");
            filler_counts_agree(&g).unwrap();
        }
        assert_eq!(g.area.pb_free.free, [0, 510, 512, 512]);
        for _ in 0..510 {
            let p = g.rmqueue_fullest(o0, mt).unwrap();
            assert!((512..1024).contains(&p), "pageblock 1 before the wholly free ones: {p}");
        }
        filler_counts_agree(&g).unwrap();
        assert_eq!(g.area.pb_free.free, [0, 0, 512, 512]);
        let p = g.rmqueue_fullest(o0, mt).unwrap();
        assert!(p >= 1024);
        assert_eq!(g.area.pb_free.free.iter().map(|&c| c as u64).sum::<u64>(), 1023);
        filler_counts_agree(&g).unwrap();
        // A count gone wrong is caught.
        g.area.pb_free.free[3] -= 1;
        assert!(filler_counts_agree(&g).is_err());
        g.area.pb_free.free[3] += 1;
    }
}
