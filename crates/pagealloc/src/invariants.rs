//! `check_invariants`: every identity the module docs state, checked from
//! scratch. Takes each zone lock in turn (never two at once), so it can run while
//! other threads allocate; the identities are per zone.

use crate::allocator::{Inner, PageAllocator};
use crate::error::InvariantError;
use crate::page::flags;
use crate::types::{MigrateType, MAX_ORDER, MIGRATE_TYPES, NR_ORDERS, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};
use crate::zone::Zone;
#[cfg(feature = "debug-checks")]
use crate::zone::ZoneGuard;

/// Page totals of one zone found by a full walk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZoneCensus {
    /// Pages in free blocks on the buddy lists (isolated lists included).
    pub free: u64,
    /// Pages in free blocks on isolated lists.
    pub isolated_free: u64,
    /// Pages on per-CPU lists and front caches.
    pub pcp: u64,
    /// Pages in allocated blocks.
    pub allocated: u64,
}

impl PageAllocator {
    /// Check every invariant; the first broken one is returned with its pfn.
    ///
    /// Holds still, for the duration: every thread's front cache (paused), every
    /// per-CPU list (locked), and each zone in turn (locked). The result is exact
    /// when no other thread allocates or frees meanwhile; run concurrently, it
    /// may report a page that is between its claim and its list (a page being
    /// freed right now) as an error, but it never changes anything.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        let inner = &*self.inner;
        let _d = inner.drain_lock.lock();
        let fronts: Vec<_> = if inner.front_on { inner.fronts.lock().clone() } else { Vec::new() };
        for s in &fronts {
            s.pause();
        }
        let pcps: Vec<_> = inner.pcps.iter().map(|p| p.lists.lock()).collect();
        let r = inner.zones.iter().try_for_each(|z| inner.check_zone(z, &pcps, &fronts));
        drop(pcps);
        for s in &fronts {
            s.resume();
        }
        r
    }

    /// Pages by state, summed over zones (a walk under each zone lock in turn).
    pub fn census(&self) -> ZoneCensus {
        let mut c = ZoneCensus::default();
        for z in self.inner.zones.iter() {
            let _g = z.lock(&self.inner.mm);
            let zc = self.inner.census_zone(z);
            c.free += zc.free;
            c.isolated_free += zc.isolated_free;
            c.pcp += zc.pcp;
            c.allocated += zc.allocated;
        }
        c
    }
}

impl Inner {
    fn census_zone(&self, z: &Zone) -> ZoneCensus {
        let mut c = ZoneCensus::default();
        let mut p = z.start;
        while p < z.end {
            let d = self.mm.page(p);
            let f = d.flags();
            let n = 1u64 << d.order();
            if f & flags::BUDDY != 0 {
                c.free += n;
                if z.pageblock_mt_racy(p) == MigrateType::Isolate {
                    c.isolated_free += n;
                }
            } else if f & flags::PCP != 0 {
                c.pcp += n;
            } else if f & flags::HEAD != 0 {
                c.allocated += n;
            } else {
                p += 1;
                continue;
            }
            p += n;
        }
        c
    }

    fn check_zone(
        &self,
        z: &Zone,
        pcps: &[crate::sync::MutexGuard<'_, crate::pcp::PcpLists>],
        fronts: &[std::sync::Arc<crate::front::FrontSlot>],
    ) -> Result<(), InvariantError> {
        let g = z.lock(&self.mm);
        let mm = &self.mm;
        let err =
            |p: u64, s: String| Err(InvariantError::new(p, format!("zone {} node {}: {s}", z.ztype.name(), z.nid)));
        // 1. Lists: marks, orders, alignment, hygiene, counts.
        let mut listed = 0u64;
        let mut free_pages = 0u64;
        for o in 0..NR_ORDERS {
            for mt in MigrateType::ALL {
                let mut n = 0u64;
                for p in g.area.lists[o][mt.index()].iter(mm) {
                    let d = mm.page(p);
                    if !d.is_buddy() || d.order() as usize != o {
                        return err(
                            p,
                            format!(
                                "on free list order {o} {mt} but marked flags {:#x} order {}",
                                d.flags(),
                                d.order()
                            ),
                        );
                    }
                    if p & ((1 << o) - 1) != 0 || !z.contains(p) || p + (1 << o) > z.end {
                        return err(p, format!("free block of order {o} misaligned or outside its zone"));
                    }
                    let mut b = p;
                    while b < p + (1u64 << o) {
                        let bmt = z.pageblock_mt_racy(b);
                        // Seed 2's old design may file a page under a stale pcp type
                        // (its known flaw); today's design never does.
                        let stale_ok = self.cfg.pcp_migratetype_cache && bmt.is_pcptype() && mt.is_pcptype();
                        if bmt != mt && !stale_ok {
                            return err(
                                p,
                                format!("free block on the {mt} list of order {o} lies in a {bmt} pageblock"),
                            );
                        }
                        b += PAGEBLOCK_PAGES;
                    }
                    n += 1;
                    if n > z.spanned() {
                        return err(p, format!("free list order {o} {mt} has a cycle"));
                    }
                }
                let counted = z.stats.free_blocks[o][mt.index()].get_racy();
                if counted != n {
                    return err(z.start, format!("free_blocks[{o}][{mt}] = {counted} but the list has {n}"));
                }
                listed += n;
                if mt != MigrateType::Isolate {
                    free_pages += n << o;
                }
            }
        }
        let nr_free = z.stats.nr_free_pages.get_racy();
        if nr_free != free_pages {
            return err(z.start, format!("NR_FREE_PAGES = {nr_free} but non-isolated lists hold {free_pages}"));
        }
        // 2. Descriptor walk: marks agree with lists, nothing inside a block, maximal merging.
        let mut covered_until = z.start;
        let mut heads = 0u64;
        let mut census = ZoneCensus::default();
        let mut p = z.start;
        while p < z.end {
            let d = mm.page(p);
            let f = d.flags();
            let marks = f & (flags::BUDDY | flags::HEAD | flags::PCP);
            if marks == 0 {
                p += 1;
                continue;
            }
            if marks.count_ones() > 1 {
                return err(p, format!("more than one of BUDDY/HEAD/PCP set: {f:#x}"));
            }
            if p < covered_until {
                return err(p, format!("marked page inside the block that ends at {covered_until:#x}"));
            }
            let o = d.order();
            if o > MAX_ORDER || p & ((1 << o) - 1) != 0 {
                return err(p, format!("head of order {o} misaligned"));
            }
            let n = 1u64 << o;
            if marks == flags::BUDDY {
                heads += 1;
                census.free += n;
                if o < MAX_ORDER {
                    let buddy = p ^ n;
                    if z.contains(buddy) {
                        let bd = mm.page(buddy);
                        if bd.is_buddy() && bd.order() == o {
                            let (a, b) = (z.pageblock_mt_racy(p), z.pageblock_mt_racy(buddy));
                            let may_stay_apart = o >= PAGEBLOCK_ORDER
                                && (a == MigrateType::Isolate || (a != b && !(a.is_pcptype() && b.is_pcptype())));
                            if !may_stay_apart {
                                return err(
                                    p,
                                    format!("free block of order {o} and its free buddy {buddy:#x} were not merged"),
                                );
                            }
                        }
                    }
                }
            } else if marks == flags::PCP {
                census.pcp += n;
            } else {
                census.allocated += n;
            }
            covered_until = p + n;
            p += n;
        }
        if heads != listed {
            return err(z.start, format!("{heads} pages marked free but {listed} on the free lists"));
        }
        // 3. Pageblock counts by effective type.
        let mut counts = [0u64; MIGRATE_TYPES];
        for b in 0..z.nr_pageblocks() as u64 {
            counts[z.pageblock_mt_racy(z.start + b * PAGEBLOCK_PAGES).index()] += 1;
        }
        for mt in MigrateType::ALL {
            let c = z.stats.block_count[mt.index()].get_racy();
            if c != counts[mt.index()] {
                return err(
                    z.start,
                    format!("block_count[{mt}] = {c} but {} pageblocks have that type", counts[mt.index()]),
                );
            }
        }
        // 4. Conservation.
        let pcp = match self.pcp_pages_checked(z, pcps, fronts) {
            Ok(n) => n,
            Err((p, s)) => return err(p, s),
        };
        if census.pcp != pcp {
            return err(z.start, format!("{} pages marked PCP but per-CPU lists hold {pcp}", census.pcp));
        }
        if census.free + census.pcp + census.allocated != z.managed {
            return err(
                z.start,
                format!(
                    "conservation: free {} + pcp {} + allocated {} != managed {}",
                    census.free, census.pcp, census.allocated, z.managed
                ),
            );
        }
        drop(g);
        Ok(())
    }
}

/// How mixed the pageblocks are: the anti-fragmentation figure of merit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fragmentation {
    /// Pageblocks in all zones.
    pub pageblocks: u64,
    /// Pageblocks holding allocated pages of more than one migratetype.
    pub mixed: u64,
    /// Free blocks per order over all zones and types.
    pub free_blocks: [u64; NR_ORDERS],
}

impl PageAllocator {
    /// Count mixed pageblocks (a walk of the descriptors under each zone lock).
    pub fn fragmentation(&self) -> Fragmentation {
        let mut fr = Fragmentation::default();
        for z in self.inner.zones.iter() {
            let _g = z.lock(&self.inner.mm);
            for (o, n) in fr.free_blocks.iter_mut().enumerate() {
                *n += z.stats.free_blocks[o].iter().map(|c| c.get_racy()).sum::<u64>();
            }
            let mut b = z.start;
            while b < z.end {
                fr.pageblocks += 1;
                let mut seen = 0u32;
                let mut p = b;
                while p < b + PAGEBLOCK_PAGES {
                    let d = self.inner.mm.page(p);
                    let f = d.flags();
                    if f & flags::HEAD != 0 {
                        seen |= 1 << d.private_mt().index();
                        p += 1 << d.order();
                    } else if f & (flags::BUDDY | flags::PCP) != 0 {
                        p += 1 << d.order();
                    } else {
                        p += 1;
                    }
                }
                if seen.count_ones() > 1 {
                    fr.mixed += 1;
                }
                b += PAGEBLOCK_PAGES;
            }
        }
        fr
    }
}

/// Listed free blocks the `debug-checks` check walks per zone-lock release,
/// on average: a zone with more is walked in full only every
/// `blocks / DEBUG_WALK_BUDGET`-th release (counted over all zones).
#[cfg(feature = "debug-checks")]
const DEBUG_WALK_BUDGET: u64 = 32;

/// Zone-lock releases seen by the `debug-checks` check (for its sampling).
#[cfg(feature = "debug-checks")]
static DEBUG_RELEASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The `debug-checks` feature's check, run by every [`ZoneGuard`] as it is
/// dropped (with the zone lock still held, before the seqcount goes even):
/// the identities that need only the zone lock. Panics naming the zone and
/// the pfn on a broken one. Takes no other lock.
///
/// At every release: NR_FREE_PAGES against the `free_blocks` counters;
/// `block_count` per effective type against the pageblock table; each free
/// list's first block (marks, order, alignment, zone bounds, hygiene), and
/// a list empty exactly when its counter is zero. The full walk of the free lists (the same for every block,
/// plus: no cycle, `free_blocks` equal to the list lengths, no two listed
/// blocks overlapping, listed free buddies merged as far as they may be)
/// runs at every release while the zone has at most [`DEBUG_WALK_BUDGET`]
/// free blocks, and at every `n / DEBUG_WALK_BUDGET`-th release with `n`
/// free blocks: O(pageblocks + DEBUG_WALK_BUDGET log DEBUG_WALK_BUDGET)
/// per release on average, so heavily fragmented multi-threaded tests stay
/// usable (a full walk at each release made the 16-thread bulk test about
/// 50 times slower; sampled, about 4 times).
///
/// Pages outside the lists are not looked at: a page in transit (taken off a
/// list, not yet marked; claimed by a free, not yet listed) is legitimately
/// in neither state here. Hygiene allows a free block of one per-CPU type in
/// a pageblock of another (seed 2's old migratetype cache may do that, and
/// the guard cannot see the configuration; `check_invariants` applies the
/// exact rule).
#[cfg(feature = "debug-checks")]
pub(crate) fn check_zone_locked(g: &ZoneGuard<'_>) {
    if std::thread::panicking() {
        return;
    }
    let (z, mm) = (g.zone, g.mm);
    let fail =
        |p: u64, s: String| -> ! { panic!("debug-checks: zone {} node {} pfn {p:#x}: {s}", z.ztype.name(), z.nid) };
    // One listed block: marks, order, alignment, bounds, hygiene.
    let check_block = |p: u64, o: usize, mt: MigrateType| {
        let d = mm.page(p);
        if !d.is_buddy() || d.order() as usize != o {
            fail(p, format!("on free list order {o} {mt} but marked flags {:#x} order {}", d.flags(), d.order()));
        }
        if p & ((1 << o) - 1) != 0 || !z.contains(p) || p + (1 << o) > z.end {
            fail(p, format!("free block of order {o} misaligned or outside its zone"));
        }
        let mut b = p;
        while b < p + (1u64 << o) {
            let bmt = z.pageblock_mt_racy(b);
            if bmt != mt && !(bmt.is_pcptype() && mt.is_pcptype()) {
                fail(p, format!("free block on the {mt} list of order {o} lies in a {bmt} pageblock"));
            }
            b += PAGEBLOCK_PAGES;
        }
    };
    // Counters.
    let mut blocks = 0u64;
    let mut free_pages = 0u64;
    for o in 0..NR_ORDERS {
        for mt in MigrateType::ALL {
            let n = z.stats.free_blocks[o][mt.index()].get_racy();
            blocks += n;
            if mt != MigrateType::Isolate {
                free_pages += n << o;
            }
            match g.area.lists[o][mt.index()].first() {
                Some(p) => check_block(p, o, mt),
                None if n != 0 => fail(z.start, format!("free_blocks[{o}][{mt}] = {n} but the list is empty")),
                None => {}
            }
        }
    }
    let nr_free = z.stats.nr_free_pages.get_racy();
    if nr_free != free_pages {
        fail(z.start, format!("NR_FREE_PAGES = {nr_free} but the free_blocks counters hold {free_pages}"));
    }
    let mut counts = [0u64; MIGRATE_TYPES];
    for b in 0..z.nr_pageblocks() as u64 {
        counts[z.pageblock_mt_racy(z.start + b * PAGEBLOCK_PAGES).index()] += 1;
    }
    for mt in MigrateType::ALL {
        let c = z.stats.block_count[mt.index()].get_racy();
        if c != counts[mt.index()] {
            fail(z.start, format!("block_count[{mt}] = {c} but {} pageblocks have that type", counts[mt.index()]));
        }
    }
    // The full walk, sampled when the lists are long.
    let k = DEBUG_RELEASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if blocks > DEBUG_WALK_BUDGET && !k.is_multiple_of(blocks.div_ceil(DEBUG_WALK_BUDGET)) {
        return;
    }
    let mut listed: Vec<(u64, u32)> = Vec::with_capacity(blocks as usize);
    for o in 0..NR_ORDERS {
        for mt in MigrateType::ALL {
            let mut n = 0u64;
            for p in g.area.lists[o][mt.index()].iter(mm) {
                check_block(p, o, mt);
                n += 1;
                if n > z.spanned() {
                    fail(p, format!("free list order {o} {mt} has a cycle"));
                }
                listed.push((p, o as u32));
            }
            let counted = z.stats.free_blocks[o][mt.index()].get_racy();
            if counted != n {
                fail(z.start, format!("free_blocks[{o}][{mt}] = {counted} but the list has {n}"));
            }
        }
    }
    listed.sort_unstable();
    for w in listed.windows(2) {
        let ((p, o), (q, _)) = (w[0], w[1]);
        if p + (1u64 << o) > q {
            fail(q, format!("listed free block overlaps the order-{o} free block at {p:#x}"));
        }
    }
    for &(p, o) in &listed {
        if o >= MAX_ORDER {
            continue;
        }
        let buddy = p ^ (1u64 << o);
        if !z.contains(buddy) || listed.binary_search(&(buddy, o)).is_err() {
            continue;
        }
        let (a, b) = (z.pageblock_mt_racy(p), z.pageblock_mt_racy(buddy));
        let may_stay_apart =
            o >= PAGEBLOCK_ORDER && (a == MigrateType::Isolate || (a != b && !(a.is_pcptype() && b.is_pcptype())));
        if !may_stay_apart {
            fail(p, format!("free block of order {o} and its free buddy {buddy:#x} were not merged"));
        }
    }
}

#[cfg(all(test, feature = "debug-checks"))]
mod debug_checks_tests {
    use crate::{Config, MigrateType, PageAllocator};

    #[test]
    #[should_panic(expected = "debug-checks: zone Normal node 0 pfn 0x0: NR_FREE_PAGES")]
    fn a_counter_broken_under_the_zone_lock_panics_at_its_release() {
        let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
        let z = &a.inner.zones[0];
        let g = z.lock(&a.inner.mm);
        z.stats.nr_free_pages.add_locked(1);
        drop(g);
    }

    #[test]
    #[should_panic(expected = "free_blocks[0][Movable] = 1 but the list")]
    fn a_list_count_off_by_one_panics_at_the_release() {
        let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
        let z = &a.inner.zones[0];
        let g = z.lock(&a.inner.mm);
        z.stats.free_blocks[0][MigrateType::Movable.index()].add_locked(1);
        z.stats.nr_free_pages.add_locked(1);
        drop(g);
    }
}
