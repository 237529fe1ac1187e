//! Draining a CPU's lists into the buddy (the kernel's `free_pcppages_bulk`).
//!
//! Today's design: the zone lock sees blocks, not pages. The drain picks its
//! pages off the lists, sorts them by pfn and merges the buddies it holds
//! itself (pages freed together were often allocated together, so a page's
//! buddy is often in the same batch), all under this CPU's list lock only.
//! The zone lock then frees the merged blocks, and each merges further only
//! with the buddies the zone's lists hold. Worked: a batch of pfns
//! 7 4 6 5 9 sorts to 4 5 6 7 9; 4 and 5 make the order-1 block at 4, 6 and
//! 7 the one at 6, and those two the order-2 block at 4. The zone lock frees
//! two blocks, (4, order 2) and (9, order 0), instead of five pages.
//!
//! Why merging before the zone lock is safe: the picked blocks are off every
//! list and their marks are cleared, so they are the drainer's alone (a free
//! of one of their pfns finds no allocated head and is refused; a lock, a
//! compaction or isolation scan sees a page that is neither free nor
//! allocated and leaves it). Joining two blocks that are both the drainer's
//! reads and writes nobody else's state. Merging stops at the pageblock
//! order: two blocks inside one pageblock share its type, but above it the
//! types of the two pageblocks decide, and only the zone lock reads them
//! stably.
//!
//! The old designs (`seed-variants` only): `DrainMode::SinglePass` picks and
//! merges under the zone lock, as the kernel does today; `DrainMode::TwoPass`
//! picks before it, as seed 1's patch did, and merges only runs that come
//! off the lists in ascending order. With the migratetype cache (seed 2's old
//! design) the type cached on each page at free decides what may merge, so
//! those merges wait for the zone lock.

use super::{block_key, unkey, Pcp, PcpLists, NR_PCP_LISTS};
use crate::config::Config;
use crate::lockstat::Batch;
use crate::memmap::MemMap;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{MigrateType, Order, MIGRATE_PCPTYPES, PAGEBLOCK_ORDER};
use crate::vmevent::VmEvent;
use crate::zone::{Wmark, Zone, ZoneGuard};

impl PcpLists {
    /// Free `nr` pages (at least) from list tails: order-0 pages parked in
    /// the zone's depot while it has room, the rest into the buddy,
    /// round-robin over lists, starting with `first` (see the module doc).
    /// `pcp` is the set whose lists these are. Returns the pages freed.
    pub fn drain(&mut self, pcp: &Pcp, zone: &Zone, mm: &MemMap, nr: u32, cfg: &Config, first: usize) -> u32 {
        let nr = nr.min(self.count);
        if nr == 0 {
            return 0;
        }
        let parked = self.park(pcp, zone, mm, nr, first);
        let freed = parked + if parked < nr { self.drain_to_buddy(zone, mm, nr - parked, cfg, first) } else { 0 };
        self.count -= freed;
        self.tune_on_drain();
        freed
    }

    /// Park up to `nr` order-0 pages from the cold ends of this set's
    /// order-0 lists in the zone's depot, the list `first` first (see
    /// `zone::Depot`). Returns the pages parked. When the zone's buddy is
    /// below its low watermark, nothing is parked and the depot is emptied
    /// into the buddy instead: its pages merge there, for higher orders and
    /// for reclaim's view of the zone.
    fn park(&mut self, pcp: &Pcp, zone: &Zone, mm: &MemMap, nr: u32, first: usize) -> u32 {
        let depot = &zone.depot;
        if !depot.on() {
            return 0;
        }
        if zone.buddy_free_pages_racy() < zone.wmark[Wmark::Low as usize] {
            flush_depot(zone, mm);
            return 0;
        }
        let isolating = || zone.stats.block_count[MigrateType::Isolate.index()].get_racy() != 0;
        let t0 = if super::pindex_order(first % NR_PCP_LISTS) == Order::ZERO { first % MIGRATE_PCPTYPES } else { 0 };
        let mut parked = 0u32;
        for t in (t0..MIGRATE_PCPTYPES).chain(0..t0) {
            let list = &mut self.lists[super::pindex_raw(Order::ZERO, t)];
            parked += depot.try_push(t, list, (nr - parked) as usize, isolating) as u32;
            if parked == nr {
                break;
            }
        }
        if parked > 0 {
            pcp.events.add_owner(VmEvent::DepotPark, parked as u64);
        }
        parked
    }

    /// The drain's part for the buddy: `nr` pages (at least; the lists hold
    /// that many) from list tails, round-robin from `first`, freed under one
    /// zone-lock hold (`count` is the caller's to lower). Returns the pages
    /// freed.
    pub(super) fn drain_to_buddy(&mut self, zone: &Zone, mm: &MemMap, nr: u32, cfg: &Config, first: usize) -> u32 {
        if nr == 0 {
            return 0;
        }
        let mut blocks = core::mem::take(&mut self.scratch);
        let cached_mt = cfg.pcp_mt_cache();
        let sorted = !cfg.two_pass_drain() && !cfg.single_pass_drain();
        // Every merge the drainer can do alone, before the zone lock (not
        // with cached types: which of those may merge is read under it).
        let merged_early = !cfg.single_pass_drain() && !cached_mt;
        let (freed, mut g) = if cfg.single_pass_drain() {
            let g = zone.lock_batch(mm);
            (self.pick(nr, first, &mut blocks), g)
        } else {
            let freed = self.pick(nr, first, &mut blocks);
            if sorted {
                // Already ascending or descending in the usual case (pages
                // come off the lists in the order they were freed): the
                // sort finds the one run and is linear then.
                blocks.sort_unstable();
            }
            if merged_early {
                let n = merge(mm, &mut blocks, sorted, |_, _| true);
                blocks.truncate(n);
                prefetch_buddies(mm, &blocks);
            }
            (freed, zone.lock_batch(mm))
        };
        let check_isolate = cached_mt && zone.stats.block_count[MigrateType::Isolate.index()].get_racy() != 0;
        free_merged(&mut g, &mut blocks, cached_mt && !check_isolate, !merged_early, sorted);
        g.batch = Batch::Drain(freed);
        g.zone.stats.events.add_owner(crate::vmevent::VmEvent::PcpDrain, 1);
        drop(g);
        blocks.clear();
        self.scratch = blocks;
        freed
    }

    /// Take at least `nr` pages from list tails into `out`, round-robin over the
    /// non-empty lists from `first`, an equal share per list per visit.
    fn pick(&mut self, nr: u32, first: usize, out: &mut Vec<u64>) -> u32 {
        let nonempty = self.lists.iter().filter(|l| !l.is_empty()).count().max(1) as u32;
        let share = nr.div_ceil(nonempty).max(1);
        let mut freed = 0u32;
        let mut pi = first % NR_PCP_LISTS;
        while freed < nr {
            pi = self.next_nonempty(pi);
            let order = super::pindex_order(pi);
            let mut taken = 0u32;
            while taken < share && freed < nr {
                let Some(pfn) = self.lists[pi].pop_front() else {
                    break;
                };
                out.push(block_key(pfn as u64, order));
                taken += order.pages_u32();
                freed += order.pages_u32();
            }
            pi = (pi + 1) % NR_PCP_LISTS;
        }
        self.next_list = pi;
        freed
    }
}

/// Return drained blocks to the buddy under the zone lock `g`, first merging
/// them among themselves unless the caller did (`merge_now`; `sorted`: they
/// are in pfn order, see [`merge`]).
///
/// The type each block is freed under is its pageblock's, read now under the
/// zone lock (today's design), or with `use_cache` the type cached on the
/// page at free (the old design of the `pcp-flush` experiment). Blocks merge
/// only if both would be freed under the same type, which without the cache
/// they always are (merging never leaves a pageblock).
fn free_merged(g: &mut ZoneGuard<'_>, blocks: &mut Vec<u64>, use_cache: bool, merge_now: bool, sorted: bool) {
    let n = free_merged_slice(g, blocks, use_cache, merge_now, sorted);
    blocks.truncate(n);
}

/// [`free_merged`] on a slice; returns how many merged blocks it freed
/// (the slice's prefix holds their keys).
fn free_merged_slice(
    g: &mut ZoneGuard<'_>,
    blocks: &mut [u64],
    use_cache: bool,
    merge_now: bool,
    sorted: bool,
) -> usize {
    // The cached type may be stale by the time of the drain. A stale pcp type
    // inside a pcp-type block only misfiles the page between pcp types (the old
    // design's known flaw, tolerated by check_invariants in that mode); but a
    // block that has since become HighAtomic or isolated must get its own type,
    // so the old design checks the block's type for that one case.
    let zone = g.zone;
    let mm = g.mm;
    let mt_of = |pfn: u64| {
        let block = zone.pageblock_mt_racy(pfn);
        if use_cache && block.is_pcptype() {
            mm.page(pfn).private_mt()
        } else {
            block
        }
    };
    let n = match (merge_now, use_cache) {
        (false, _) => blocks.len(),
        (true, true) => merge(mm, blocks, sorted, |a, b| mt_of(a) == mt_of(b)),
        (true, false) => merge(mm, blocks, sorted, |_, _| true),
    };
    for &r in &blocks[..n] {
        let (p, k) = unkey(r);
        g.free_one_locked(p, k, mt_of(p));
    }
    n
}

/// Free claimed blocks of zone `z` (their keys in `blocks`; off every list,
/// marks still set) to the buddy the way today's drain does: sorted and
/// merged among themselves, then freed under one zone-lock hold, each under
/// its pageblock's type. The hold counts as a drain of `pages` pages, and
/// `events` are counted under it. What a batch of frees that cannot go to a
/// per-CPU list calls (its lock was busy, or its pageblocks are isolated or
/// reserved), instead of taking the zone lock once a page.
pub(crate) fn free_blocks_to_buddy(z: &Zone, mm: &MemMap, blocks: &mut [u64], pages: u32, events: &[(VmEvent, u64)]) {
    blocks.sort_unstable();
    let n = merge(mm, blocks, true, |_, _| true);
    prefetch_buddies(mm, &blocks[..n]);
    let mut g = z.lock_batch(mm);
    free_merged_slice(&mut g, &mut blocks[..n], false, false, true);
    g.batch = Batch::Drain(pages);
    z.stats.events.add_owner(VmEvent::PcpDrain, 1);
    for &(ev, k) in events.iter().filter(|e| e.1 != 0) {
        z.stats.events.add_owner(ev, k);
    }
}

/// Before the zone lock: bring in the descriptors of each merged block's
/// buddy (and of the block's buddy one order up), which the merge under
/// the lock reads first. Another CPU often wrote them last (it allocated
/// those pages); their misses would otherwise be served inside the hold.
fn prefetch_buddies(mm: &MemMap, blocks: &[u64]) {
    for &r in blocks {
        let (p, k) = unkey(r);
        let o = k.get();
        mm.prefetch_desc(p ^ (1 << o));
        if o + 1 < PAGEBLOCK_ORDER {
            mm.prefetch_desc((p & !((2 << o) - 1)) ^ (2 << o));
        }
    }
}

/// Empty the zone's depot into the buddy (waiting for its lock): its pages
/// merged among themselves and freed under one zone-lock hold. What
/// `drain_all_pages` and the low watermark do.
pub fn flush_depot(zone: &Zone, mm: &MemMap) {
    if zone.depot.pages_racy() == 0 {
        return;
    }
    let mut pages = Vec::new();
    let taken = zone.depot.take_all(&mut pages);
    if pages.is_empty() {
        return;
    }
    let mut keys: Vec<u64> = pages.iter().map(|&p| block_key(p as u64, Order::ZERO)).collect();
    let n = keys.len() as u32;
    free_blocks_to_buddy(zone, mm, &mut keys, n, &[]);
    zone.depot.settle(taken);
}

/// Merge picked blocks among themselves (in place: `blocks` ends as the
/// merged blocks' keys) and clear every picked page's mark: they become
/// free blocks' heads and tails. Two blocks merge only when `same` accepts
/// their heads as freed under one type, and never past the pageblock order.
/// Needs no zone lock: the caller holds the pages (off every list, under
/// its pcp lock). `sorted`: the keys ascend, and every pair of buddies the
/// batch holds merges ([`merge_sorted`]); otherwise only runs in pick order
/// do ([`coalesce_runs`], the old designs').
fn merge(mm: &MemMap, blocks: &mut [u64], sorted: bool, same: impl Fn(u64, u64) -> bool) -> usize {
    if sorted {
        merge_sorted(mm, blocks, same)
    } else {
        coalesce_runs(mm, blocks, same)
    }
}

/// [`merge`] of blocks in ascending pfn order: a binary counter over the
/// batch. Each block is pushed on a stack (the front of `blocks`, written
/// behind the reads); while the block on top and the one below it are
/// buddies of one order, they pop as their parent, which may in turn be the
/// buddy of the block below it. Linear: each block is pushed once and
/// popped at most once.
fn merge_sorted(mm: &MemMap, blocks: &mut [u64], same: impl Fn(u64, u64) -> bool) -> usize {
    let mut w = 0;
    for i in 0..blocks.len() {
        let (mut p, mut o) = unkey(blocks[i]);
        mm.page(p).clear();
        while w > 0 && o < Order::PAGEBLOCK {
            let (q, k) = unkey(blocks[w - 1]);
            // The block just below, of the same order, whose buddy `p` is
            // (so `q` is the pair's lower, aligned half).
            if k != o || q != p ^ o.pages() || !same(q, p) {
                break;
            }
            let Some(up) = o.next() else {
                break;
            };
            (p, o) = (q, up);
            w -= 1;
        }
        blocks[w] = block_key(p, o);
        w += 1;
    }
    w
}

/// [`merge`] in pick order (the old designs): each run of consecutive blocks
/// that exactly fills an aligned larger block within one pageblock, and
/// whose heads `same` accepts as freed under one type, becomes one key of
/// that larger block. Pages freed in address order (munmap, bulk free, a
/// batch freed as it was allocated) come off the lists in address order.
fn coalesce_runs(mm: &MemMap, blocks: &mut [u64], same: impl Fn(u64, u64) -> bool) -> usize {
    let n = blocks.len();
    let (mut i, mut w) = (0, 0);
    while i < n {
        let (p, o) = unkey(blocks[i]);
        let mut k = o;
        let mut j = i + 1;
        while let Some(up) = k.next().filter(|&u| u <= Order::PAGEBLOCK && p & (u.pages() - 1) == 0) {
            let need = 1usize << (k.get() - o.get());
            if j + need > n {
                break;
            }
            let half = p + k.pages();
            let fits = (0..need)
                .all(|t| blocks[j + t] == block_key(half + t as u64 * o.pages(), o) && same(p, unkey(blocks[j + t]).0));
            if !fits {
                break;
            }
            j += need;
            k = up;
        }
        for &b in &blocks[i..j] {
            mm.page(unkey(b).0).clear();
        }
        blocks[w] = block_key(p, k);
        w += 1;
        i = j;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::new_pageblocks;

    fn keys(v: &[(u64, u32)]) -> Vec<u64> {
        v.iter().map(|&(p, o)| block_key(p, Order::new(o).unwrap())).collect()
    }

    #[test]
    fn sorted_batches_merge_every_buddy_pair_they_hold() {
        let mm = MemMap::new(2048, crate::Backing::None, new_pageblocks(4)).unwrap();
        // The module doc's example, sorted.
        let mut b = keys(&[(4, 0), (5, 0), (6, 0), (7, 0), (9, 0)]);
        let n = merge_sorted(&mm, &mut b, |_, _| true);
        b.truncate(n);
        assert_eq!(b, keys(&[(4, 2), (9, 0)]));
        // Mixed orders: 0+1 (order 0 each) make (0,1), which merges with
        // (2,1) into (0,2); (8,2) has no buddy (12) here.
        let mut b = keys(&[(0, 0), (1, 0), (2, 1), (8, 2), (16, 3)]);
        let n = merge_sorted(&mm, &mut b, |_, _| true);
        b.truncate(n);
        assert_eq!(b, keys(&[(0, 2), (8, 2), (16, 3)]));
        // Neighbours that are not buddies stay apart: 1 and 2 are adjacent
        // but (1,0)'s buddy is 0.
        let mut b = keys(&[(1, 0), (2, 0), (3, 0)]);
        let n = merge_sorted(&mm, &mut b, |_, _| true);
        b.truncate(n);
        assert_eq!(b, keys(&[(1, 0), (2, 1)]));
        // A whole pageblock's pages merge up to the pageblock, never past it.
        let mut b: Vec<u64> = (0..1024).map(|p| block_key(p, Order::ZERO)).collect();
        let n = merge_sorted(&mm, &mut b, |_, _| true);
        b.truncate(n);
        assert_eq!(b, keys(&[(0, 9), (512, 9)]));
        // `same` refusing keeps them apart.
        let mut b = keys(&[(4, 0), (5, 0)]);
        let n = merge_sorted(&mm, &mut b, |_, _| false);
        b.truncate(n);
        assert_eq!(b, keys(&[(4, 0), (5, 0)]));
    }

    /// Against a brute-force reference: random subsets of a range, each
    /// page at order 0, merged; the result must cover exactly the input's
    /// pages with aligned blocks, and no two of them may be buddies below
    /// the pageblock order (the merge is maximal).
    #[test]
    fn merge_sorted_is_exact_and_maximal() {
        let mm = MemMap::new(2048, crate::Backing::None, new_pageblocks(4)).unwrap();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let density = x % 100;
            let mut pages = Vec::new();
            let mut y = x;
            for p in 0..2048u64 {
                y = y.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (y >> 33) % 100 < density {
                    pages.push(p);
                }
            }
            let mut b: Vec<u64> = pages.iter().map(|&p| block_key(p, Order::ZERO)).collect();
            let n = merge_sorted(&mm, &mut b, |_, _| true);
            b.truncate(n);
            let mut covered = Vec::new();
            for &k in &b {
                let (p, o) = unkey(k);
                assert_eq!(p & (o.pages() - 1), 0, "unaligned block {p} order {o}");
                assert!(o <= Order::PAGEBLOCK);
                covered.extend(p..p + o.pages());
            }
            assert_eq!(covered, pages, "merged blocks must cover exactly the batch");
            let set: std::collections::HashSet<u64> = b.iter().copied().collect();
            for &k in &b {
                let (p, o) = unkey(k);
                if o < Order::PAGEBLOCK {
                    assert!(!set.contains(&block_key(p ^ o.pages(), o)), "buddies {p} order {o} left apart");
                }
            }
        }
    }
}
