//! The `debug-checks` feature's zone check: the identities the zone lock
//! protects, checked by every [`ZoneGuard`] as it is dropped (see
//! [`check_zone_locked`]). It lives in the zone layer because it runs inside
//! it, under the zone lock, and needs nothing above it.

use super::Zone;
#[cfg(feature = "debug-checks")]
use super::ZoneGuard;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{MigrateType, MIGRATE_TYPES, PAGEBLOCK_PAGES};
#[cfg(feature = "debug-checks")]
use crate::types::{MAX_ORDER, NR_ORDERS, PAGEBLOCK_ORDER};

/// Listed free blocks the `debug-checks` check walks per zone-lock release,
/// on average: a zone with more is walked in full only every
/// `blocks / DEBUG_WALK_BUDGET`-th release (counted over all zones).
#[cfg(feature = "debug-checks")]
const DEBUG_WALK_BUDGET: u64 = 32;

/// Zone-lock releases seen by the `debug-checks` check (for its sampling).
#[cfg(feature = "debug-checks")]
static DEBUG_RELEASES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

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
/// a pageblock of another (the old per-CPU migratetype cache,
/// `Config::pcp_migratetype_cache`, may do that, and
/// the guard cannot see the configuration; `check_invariants` applies the
/// exact rule).
#[cfg(feature = "debug-checks")]
pub fn check_zone_locked(g: &ZoneGuard<'_>) {
    // A guard dropped while unwinding: the state may be half-changed.
    #[cfg(feature = "std")]
    if std::thread::panicking() {
        return;
    }
    let blocks = check_counters(g);
    // The full walk, sampled when the lists are long.
    let k = DEBUG_RELEASES.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    if blocks > DEBUG_WALK_BUDGET && !k.is_multiple_of(blocks.div_ceil(DEBUG_WALK_BUDGET)) {
        return;
    }
    walk_lists(g, blocks);
}

/// Panic naming the zone and the pfn.
#[cfg(feature = "debug-checks")]
fn fail(z: &Zone, p: u64, s: String) -> ! {
    panic!("debug-checks: zone {} node {} pfn {p:#x}: {s}", z.ztype.name(), z.nid)
}

/// One listed block: marks, order, alignment, bounds, hygiene.
#[cfg(feature = "debug-checks")]
fn check_block(g: &ZoneGuard<'_>, p: u64, o: usize, mt: MigrateType) {
    let z = g.zone;
    let d = g.mm.page(p);
    if !d.is_buddy() || d.order() as usize != o {
        fail(z, p, format!("on free list order {o} {mt} but marked flags {:#x} order {}", d.flags(), d.order()));
    }
    if p & ((1 << o) - 1) != 0 || !z.contains(p) || p + (1 << o) > z.end {
        fail(z, p, format!("free block of order {o} misaligned or outside its zone"));
    }
    let mut b = p;
    while b < p + (1u64 << o) {
        let bmt = z.pageblock_mt_racy(b);
        if bmt != mt && !(bmt.is_pcptype() && mt.is_pcptype()) {
            fail(z, p, format!("free block on the {mt} list of order {o} lies in a {bmt} pageblock"));
        }
        b += PAGEBLOCK_PAGES;
    }
}

/// The counters at every release: each list's first block and emptiness
/// against its counter, NR_FREE_PAGES, block counts. Returns the number of
/// listed free blocks.
#[cfg(feature = "debug-checks")]
fn check_counters(g: &ZoneGuard<'_>) -> u64 {
    let z = g.zone;
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
                Some(p) => check_block(g, p, o, mt),
                None if n != 0 => fail(z, z.start, format!("free_blocks[{o}][{mt}] = {n} but the list is empty")),
                None => {}
            }
        }
    }
    let nr_free = z.stats.nr_free_pages.get_racy();
    if nr_free != free_pages {
        fail(z, z.start, format!("NR_FREE_PAGES = {nr_free} but the free_blocks counters hold {free_pages}"));
    }
    if let Err((p, s)) = block_counts_agree(z) {
        fail(z, p, s);
    }
    blocks
}

/// The full walk of the free lists: every block, no cycle, list lengths
/// against counters, no overlap, listed free buddies merged.
#[cfg(feature = "debug-checks")]
fn walk_lists(g: &ZoneGuard<'_>, blocks: u64) {
    let z = g.zone;
    let mut listed: Vec<(u64, u32)> = Vec::with_capacity(blocks as usize);
    for o in 0..NR_ORDERS {
        for mt in MigrateType::ALL {
            let mut n = 0u64;
            for p in g.area.lists[o][mt.index()].iter(g.mm) {
                check_block(g, p, o, mt);
                n += 1;
                if n > z.spanned() {
                    fail(z, p, format!("free list order {o} {mt} has a cycle"));
                }
                listed.push((p, o as u32));
            }
            let counted = z.stats.free_blocks[o][mt.index()].get_racy();
            if counted != n {
                fail(z, z.start, format!("free_blocks[{o}][{mt}] = {counted} but the list has {n}"));
            }
        }
    }
    listed.sort_unstable();
    for w in listed.windows(2) {
        let ((p, o), (q, _)) = (w[0], w[1]);
        if p + (1u64 << o) > q {
            fail(z, q, format!("listed free block overlaps the order-{o} free block at {p:#x}"));
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
            fail(z, p, format!("free block of order {o} and its free buddy {buddy:#x} were not merged"));
        }
    }
}

/// The zone's pageblock counts by effective type against the pageblock
/// table (`check_invariants` and the debug check share it). Reads only
/// words the zone lock protects.
pub(crate) fn block_counts_agree(z: &Zone) -> Result<(), (u64, String)> {
    let mut counts = [0u64; MIGRATE_TYPES];
    for b in 0..z.nr_pageblocks() as u64 {
        counts[z.pageblock_mt_racy(z.start + b * PAGEBLOCK_PAGES).index()] += 1;
    }
    for mt in MigrateType::ALL {
        let c = z.stats.block_count[mt.index()].get_racy();
        if c != counts[mt.index()] {
            return Err((
                z.start,
                format!("block_count[{mt}] = {c} but {} pageblocks have that type", counts[mt.index()]),
            ));
        }
    }
    Ok(())
}
