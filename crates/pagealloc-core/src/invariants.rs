//! `check_invariants`: every identity the module docs state, checked from
//! scratch. Takes each zone lock in turn (never two at once), so it can run while
//! other threads allocate; the identities are per zone.

use crate::error::InvariantError;
use crate::front::Paused;
use crate::page::flags;
use crate::page_alloc::Core;
use crate::pcp::{self, PcpLists};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::FutexGuard;
use crate::types::{MigrateType, MAX_ORDER, NR_ORDERS, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};
use crate::zone::{Zone, ZoneGuard};

/// Page totals of one zone found by a full walk.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let _pfn = a.alloc_pages(Gfp::KERNEL, 4).unwrap();
/// let c = a.census();
/// assert_eq!(c.allocated, 16);
/// assert_eq!(c.free + c.pcp + c.allocated, a.managed_pages()); // every page is somewhere
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZoneCensus {
    /// Free pages: in free blocks on the buddy lists (isolated lists
    /// included), and parked in the zone's depot.
    pub free: u64,
    /// Pages in free blocks on isolated lists.
    pub isolated_free: u64,
    /// Of the free pages, those parked in the depot between the per-CPU
    /// lists and the buddy.
    pub depot: u64,
    /// Pages on per-CPU lists and front caches, and blocks parked on the
    /// no-lock frees' deferred list.
    pub pcp: u64,
    /// Pages in allocated blocks.
    pub allocated: u64,
}

impl Core {
    /// Every event counter: the per-CPU blocks plus the per-zone blocks.
    pub fn event_totals(&self) -> [u64; crate::vmevent::NR_VM_EVENTS] {
        let mut sum = [0u64; crate::vmevent::NR_VM_EVENTS];
        self.events.sum_into(&mut sum);
        for z in self.zones.iter() {
            z.stats.events.sum_into(&mut sum);
        }
        for p in self.pcp.iter() {
            p.events.sum_into(&mut sum);
        }
        self.fronts.sum_events(&mut sum);
        sum
    }

    /// Check every invariant; the first broken one is returned with its pfn.
    ///
    /// Holds still, for the duration: every thread's front cache (paused), every
    /// per-CPU list (locked), and each zone in turn (locked). The result is exact
    /// when no other thread allocates or frees meanwhile; run concurrently, it
    /// may report a page that is between its claim and its list (a page being
    /// freed right now) as an error, but it never changes anything.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        let mut fronts = self.fronts.pause_all();
        let pcps: Vec<_> = self.pcp.iter().map(|p| p.lists.lock()).collect();
        let r = self.zones.iter().try_for_each(|z| self.check_zone(z, &pcps, &mut fronts));
        drop(pcps);
        r
    }

    /// Pages by state, summed over zones (a walk under each zone lock in turn).
    pub fn census(&self) -> ZoneCensus {
        let mut c = ZoneCensus::default();
        for z in self.zones.iter() {
            let _g = z.lock(&self.mm);
            // The depot's pages carry the per-CPU lists' mark, but they are
            // free pages: counted with the depot held still for the walk.
            let (depot, mut zc) = z.depot.held_still(|| self.census_zone(z));
            zc.pcp = zc.pcp.saturating_sub(depot);
            c.free += zc.free + depot;
            c.depot += depot;
            c.isolated_free += zc.isolated_free;
            c.pcp += zc.pcp;
            c.allocated += zc.allocated;
        }
        c
    }
}

impl Core {
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
            } else if f & flags::ARRAY_HELD == flags::PCP {
                c.pcp += n;
            } else if f & (flags::HEAD | flags::PCP) != 0 {
                // An allocated head, or a `PageArray`'s page (`ARRAY_HELD`).
                c.allocated += n;
            } else if f & flags::ISOLATED_MIGRATE != 0 {
                // A migration target, or a page in its hand-over: order 0,
                // allocated.
                c.allocated += 1;
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
        pcps: &[FutexGuard<'_, PcpLists>],
        fronts: &mut Paused<'_>,
    ) -> Result<(), InvariantError> {
        let g = z.lock(&self.mm);
        let err =
            |p: u64, s: String| Err(InvariantError::new(p, format!("zone {} node {}: {s}", z.ztype.name(), z.nid)));
        let checked = self.check_lists(&g).and_then(|listed| {
            let (heads, census) = self.walk_descriptors(z)?;
            if heads != listed {
                return Err((z.start, format!("{heads} pages marked free but {listed} on the free lists")));
            }
            crate::zone::block_counts_agree(z)?;
            crate::zone::filler_counts_agree(&g)?;
            Ok(census)
        });
        let census = match checked {
            Ok(c) => c,
            Err((p, s)) => return err(p, s),
        };
        // 4. Conservation.
        let pcp = match self.pcp_pages_checked(z, pcps, fronts) {
            Ok(n) => n,
            Err((p, s)) => return err(p, s),
        };
        if census.pcp != pcp {
            return err(z.start, format!("{} pages marked PCP but per-CPU lists hold {pcp}", census.pcp));
        }
        if census.free + census.pcp + census.allocated != self.managed_now(z) {
            return err(
                z.start,
                format!(
                    "conservation: free {} + pcp {} + allocated {} != managed {} (offline {})",
                    census.free,
                    census.pcp,
                    census.allocated,
                    self.managed_now(z),
                    self.holes.offline(z)
                ),
            );
        }
        drop(g);
        Ok(())
    }

    /// Step 1: every free list's marks, orders, alignment, hygiene and
    /// counters, and NR_FREE_PAGES. Returns the number of listed blocks.
    fn check_lists(&self, g: &ZoneGuard<'_>) -> Result<u64, (u64, String)> {
        let (z, mm) = (g.zone, &self.mm);
        let err = |p: u64, s: String| Err((p, s));
        let mut listed = 0u64;
        let mut free_pages = 0u64;
        let mut free_highatomic = 0u64;
        let mut reported = 0u64;
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
                        // The old migratetype cache may file a page under a stale pcp
                        // type (its known flaw); today's design never does.
                        let stale_ok = self.cfg.pcp_mt_cache() && bmt.is_pcptype() && mt.is_pcptype();
                        if bmt != mt && !stale_ok {
                            return err(
                                p,
                                format!("free block on the {mt} list of order {o} lies in a {bmt} pageblock"),
                            );
                        }
                        b += PAGEBLOCK_PAGES;
                    }
                    if d.flags() & flags::REPORTED != 0 {
                        reported += 1 << o;
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
                if mt == MigrateType::HighAtomic {
                    free_highatomic += n << o;
                }
            }
        }
        let nr_free = z.stats.nr_free_pages.get_racy();
        if nr_free != free_pages {
            return err(z.start, format!("NR_FREE_PAGES = {nr_free} but non-isolated lists hold {free_pages}"));
        }
        let nr_fh = z.stats.nr_free_highatomic.get_racy();
        if nr_fh != free_highatomic {
            return err(
                z.start,
                format!("nr_free_highatomic = {nr_fh} but the HighAtomic lists hold {free_highatomic}"),
            );
        }
        let nr_reported = z.stats.nr_reported.get_racy();
        if nr_reported != reported {
            return err(z.start, format!("nr_reported = {nr_reported} but REPORTED free blocks hold {reported}"));
        }
        Ok(listed)
    }

    /// Step 2: a walk of every descriptor: marks agree with the lists,
    /// nothing is marked inside a block, free buddies are merged as far as
    /// they may be. Returns the free heads seen and the census.
    fn walk_descriptors(&self, z: &Zone) -> Result<(u64, ZoneCensus), (u64, String)> {
        let mm = &self.mm;
        let err = |p: u64, s: String| Err((p, s));
        let mut covered_until = z.start;
        let mut heads = 0u64;
        let mut census = ZoneCensus::default();
        let mut p = z.start;
        while p < z.end {
            let d = mm.page(p);
            let f = d.flags();
            let marks = f & (flags::BUDDY | flags::HEAD | flags::PCP);
            if marks == 0 {
                if f & flags::ISOLATED_MIGRATE != 0 && p >= covered_until {
                    // A migration target, or a page in its hand-over: an
                    // allocated order-0 page.
                    census.allocated += 1;
                    covered_until = p + 1;
                }
                p += 1;
                continue;
            }
            let held = flags::array_held(f);
            if held && (f != flags::ARRAY_HELD || d.order() != 0) {
                return err(p, format!("a PageArray's page with more than its mark, or not order 0: {f:#x}"));
            }
            if f & flags::REPORTED != 0 && marks != flags::BUDDY && marks != flags::PCP {
                return err(p, format!("REPORTED on a page neither free nor on a per-CPU list: {f:#x}"));
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
            } else if marks == flags::PCP && !held {
                census.pcp += n;
            } else {
                census.allocated += n;
            }
            covered_until = p + n;
            p += n;
        }
        Ok((heads, census))
    }
}

/// How mixed the pageblocks are: the anti-fragmentation figure of merit.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let _pfns = (a.alloc_pages(Gfp::KERNEL, 0).unwrap(), a.alloc_pages(Gfp::MOVABLE, 0).unwrap());
/// let f = a.stats().fragmentation();
/// assert_eq!(f.pageblocks, 2); // 4 MiB of 2 MiB pageblocks
/// assert_eq!(f.mixed, 0); // the two types went to different pageblocks
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fragmentation {
    /// Pageblocks in all zones.
    pub pageblocks: u64,
    /// Pageblocks holding allocated pages of more than one migratetype.
    pub mixed: u64,
    /// Free blocks per order over all zones and types.
    pub free_blocks: [u64; NR_ORDERS],
}

impl Core {
    /// Count mixed pageblocks (a walk of the descriptors under each zone lock).
    pub fn fragmentation(&self) -> Fragmentation {
        let mut fr = Fragmentation::default();
        for z in self.zones.iter() {
            let _g = z.lock(&self.mm);
            for (o, n) in fr.free_blocks.iter_mut().enumerate() {
                *n += z.stats.free_blocks[o].iter().map(|c| c.get_racy()).sum::<u64>();
            }
            let mut b = z.start;
            while b < z.end {
                fr.pageblocks += 1;
                let mut seen = 0u32;
                let mut p = b;
                while p < b + PAGEBLOCK_PAGES {
                    let d = self.mm.page(p);
                    let f = d.flags();
                    if flags::typed_allocation(f) {
                        // An allocated head, or a `PageArray`'s order-0 page:
                        // its private word has the type it was allocated for.
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

impl Core {
    /// Pages of zone `z` on per-CPU lists (from the locked sets in `pcps`) and in
    /// the paused front caches, checking each one's marks and each set's counts.
    fn pcp_pages_checked(
        &self,
        z: &Zone,
        pcps: &[FutexGuard<'_, PcpLists>],
        fronts: &mut Paused<'_>,
    ) -> Result<u64, (u64, String)> {
        let nr_cpus = self.pcp.nr_cpus();
        let mut total = 0u64;
        for cpu in 0..nr_cpus {
            let l = &pcps[z.idx.get() * nr_cpus + cpu];
            let mut n = 0u64;
            for (pi, list) in l.lists.iter().enumerate() {
                let order = pcp::pindex_order(pi);
                for &p in list {
                    let p = p as u64;
                    let d = self.mm.page(p);
                    if d.flags() & flags::PCP == 0 || d.order() != order.get() || !z.contains(p) {
                        return Err((
                            p,
                            format!("on cpu {cpu}'s list {pi} but flags {:#x} order {}", d.flags(), d.order()),
                        ));
                    }
                    n += order.pages();
                }
            }
            if n != l.count as u64 {
                return Err((z.start, format!("cpu {cpu}'s count is {} but its lists hold {n}", l.count)));
            }
            if l.count > l.high.max(l.high_max) || l.high < l.high_min || l.high > l.high_max {
                return Err((
                    z.start,
                    format!("cpu {cpu}: count {} high {} bounds {}..{}", l.count, l.high, l.high_min, l.high_max),
                ));
            }
            total += n;
        }
        let mut bad = None;
        fronts.for_each_stack(|st| {
            for &p in st.pages() {
                let p = p as u64;
                if !z.contains(p) || bad.is_some() {
                    continue;
                }
                let d = self.mm.page(p);
                if d.flags() & flags::PCP == 0 || d.order() != 0 {
                    bad = Some((p, format!("in a front cache but flags {:#x} order {}", d.flags(), d.order())));
                }
                total += 1;
            }
        });
        if let Some(b) = bad {
            return Err(b);
        }
        total += self.depot_pages_checked(z)?;
        total += self.deferred_pages_checked(z)?;
        Ok(total)
    }

    /// Pages of zone `z` parked in its depot (its lock held for the walk),
    /// checking each page's marks and type and the depot's counts.
    fn depot_pages_checked(&self, z: &Zone) -> Result<u64, (u64, String)> {
        let mut held = [0u64; crate::types::MIGRATE_PCPTYPES];
        let mut bad = None;
        let counted = z.depot.for_each(|t, p| {
            let p = p as u64;
            held[t] += 1;
            if bad.is_some() {
                return;
            }
            let d = self.mm.page(p);
            if !z.contains(p) || d.flags() & !flags::REPORTED != flags::PCP || d.private_raw() != t as u32 {
                bad = Some((
                    p,
                    format!("in the depot's type {t} stack but flags {:#x} private {:#x}", d.flags(), d.private_raw()),
                ));
            }
        });
        if let Some(b) = bad {
            return Err(b);
        }
        if counted != held {
            return Err((z.start, format!("the depot counts {counted:?} pages but holds {held:?}")));
        }
        if held.iter().sum::<u64>() > z.depot.cap() {
            return Err((z.start, format!("the depot holds {held:?} pages, over its cap of {}", z.depot.cap())));
        }
        Ok(held.iter().sum())
    }

    /// Pages of zone `z` parked on the no-lock deferred list, checking each
    /// block's marks and that the chain ends (no cycle, no block twice).
    fn deferred_pages_checked(&self, z: &Zone) -> Result<u64, (u64, String)> {
        let descs = self.mm.descs();
        let mut total = 0u64;
        let mut bad = None;
        let ended = self.nolock.deferred.for_each(descs, self.mm.nr_pages(), |p| {
            let p = p as u64;
            if !z.contains(p) || bad.is_some() {
                return;
            }
            let d = self.mm.page(p);
            if d.flags() != flags::PCP || p & ((1u64 << d.order()) - 1) != 0 {
                bad = Some((p, format!("on the deferred list but flags {:#x} order {}", d.flags(), d.order())));
            }
            total += 1 << d.order();
        });
        if !ended {
            return Err((z.start, "the deferred list does not end (a cycle, or a block on it twice)".into()));
        }
        bad.map_or(Ok(total), Err)
    }
}

/// The zone-lock identities, broken on purpose under the lock: the
/// `debug-checks` feature must catch each at the lock's release.
#[cfg(all(test, feature = "debug-checks", not(loom)))]
mod debug_checks_tests {
    use crate::{Config, FrameAllocator, MigrateType};

    #[test]
    #[should_panic(expected = "debug-checks: zone Normal node 0 pfn 0x0: NR_FREE_PAGES")]
    fn a_counter_broken_under_the_zone_lock_panics_at_its_release() {
        let a = FrameAllocator::new(Config::small(4 << 20)).unwrap();
        let z = &a.core.zones[crate::types::ZoneIdx::FIRST];
        let g = z.lock(&a.core.mm);
        z.stats.nr_free_pages.add_locked(1);
        drop(g);
    }

    #[test]
    #[should_panic(expected = "free_blocks[0][Movable] = 1 but the list")]
    fn a_list_count_off_by_one_panics_at_the_release() {
        let a = FrameAllocator::new(Config::small(4 << 20)).unwrap();
        let z = &a.core.zones[crate::types::ZoneIdx::FIRST];
        let g = z.lock(&a.core.mm);
        z.stats.free_blocks[0][MigrateType::Movable.index()].add_locked(1);
        z.stats.nr_free_pages.add_locked(1);
        drop(g);
    }
}
