//! The depot between the per-CPU lists and the buddy: pages a drain parks
//! there are free in every count and report, a refill takes them back
//! without the zone lock, and everything that needs the buddy to see every
//! free page (drain_all_pages, isolation, contiguous allocation, a high
//! order that only merging can make, the low watermark) empties it first.

use pagealloc::{Config, Gfp, PageAllocator, Pfn, PAGEBLOCK_PAGES};

/// A 16 MiB arena (4096 pages) with lists kept small, so frees overflow
/// them quickly, no front cache (every free reaches the lists), one CPU
/// slot, and a depot of up to a sixteenth of the zone (256 pages).
fn small(depot_fraction: u32) -> PageAllocator {
    let cfg = Config::small(16 << 20)
        .front_cache(false)
        .nr_cpus(Some(1))
        .pcp_batch(Some(8))
        .percpu_pagelist_high_fraction(128)
        .depot_fraction(depot_fraction);
    PageAllocator::new(cfg).unwrap()
}

/// Allocate `n` order-0 pages, then free them one by one: the frees past
/// `high` drain, and the drains park in the depot while it has room.
fn churn(a: &PageAllocator, n: usize) {
    let pages: Vec<Pfn> = (0..n).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    for p in pages {
        a.free_pages(p, 0).unwrap();
    }
}

#[test]
fn parked_pages_are_free_in_every_count_and_report() {
    let a = small(16);
    let managed = a.managed_pages();
    churn(&a, 1000);
    let st = a.stats().pcpstat();
    assert!(st.nr_depot > 0 && st.pcp_depot_park >= st.nr_depot, "{st:?}");
    assert!(st.nr_depot <= managed / 16, "over the cap: {}", st.nr_depot);
    a.check_invariants().unwrap();
    // Census: the depot's pages are free ones.
    let c = a.census();
    assert_eq!(c.depot, st.nr_depot);
    assert_eq!(c.free + c.pcp + c.allocated, managed);
    assert_eq!(a.nr_free_pages(), c.free - c.isolated_free);
    // Reports: order 0 of buddyinfo and pagetypeinfo holds them, vmstat and
    // zoneinfo's free counts too.
    let snap = a.stats().snapshot_consistent();
    assert_eq!(snap.zones[0].depot_pages, st.nr_depot);
    assert!(snap.zones[0].free_blocks_of_order(0) >= st.nr_depot);
    assert_eq!(a.stats().buddyinfo().zones[0].free[0], snap.zones[0].free_blocks_of_order(0));
    assert_eq!(a.stats().vmstat().get("nr_free_pages"), Some(a.nr_free_pages()));
    // drain_all_pages empties it: every free page in the buddy, none lost.
    let pcp_pages = c.pcp;
    let free = a.nr_free_pages();
    a.drain_all_pages();
    assert_eq!(a.stats().pcpstat().nr_depot, 0);
    assert_eq!(a.census().depot, 0);
    assert_eq!(a.nr_free_pages(), free + pcp_pages);
    assert_eq!(a.nr_free_pages(), managed);
    a.check_invariants().unwrap();
}

#[test]
fn a_refill_takes_the_parked_pages_without_the_zone_lock() {
    let a = small(16);
    churn(&a, 1000);
    let parked = a.stats().pcpstat().nr_depot;
    assert!(parked > 0);
    let before = a.stats().lockstat().zones[0].acquisitions;
    // Fewer pages than the depot holds plus what the list holds: every
    // refill is served by the depot.
    let n = (parked as usize).min(64);
    let pages: Vec<Pfn> = (0..n).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    let st = a.stats().pcpstat();
    assert!(st.pcp_depot_take > 0, "{st:?}");
    assert_eq!(a.stats().lockstat().zones[0].acquisitions, before, "a refill from the depot took the zone lock");
    for p in pages {
        a.free_pages(p, 0).unwrap();
    }
    a.check_invariants().unwrap();
}

#[test]
fn without_a_depot_nothing_is_parked() {
    let a = small(0);
    churn(&a, 1000);
    let st = a.stats().pcpstat();
    assert_eq!((st.nr_depot, st.pcp_depot_park, st.pcp_depot_take), (0, 0, 0));
    assert!(st.pcp_drain > 0);
    a.check_invariants().unwrap();
}

#[test]
fn isolation_and_contiguous_ranges_see_the_parked_pages() {
    let a = small(8);
    churn(&a, 1500);
    assert!(a.stats().pcpstat().nr_depot > 0);
    // A whole pageblock range, isolated: every page of it must end on the
    // Isolate lists, the depot's included.
    let start = Pfn::new(0);
    a.contig().isolate_range(start, PAGEBLOCK_PAGES).unwrap();
    a.drain_all_pages();
    assert!(a.contig().test_pages_isolated(start, PAGEBLOCK_PAGES));
    a.contig().undo_isolate_range(start, PAGEBLOCK_PAGES).unwrap();
    a.check_invariants().unwrap();
    // And the parked pages count for a contiguous allocation of most of the arena.
    churn(&a, 1500);
    assert!(a.stats().pcpstat().nr_depot > 0);
    let n = 4 * PAGEBLOCK_PAGES;
    let p = a.contig().alloc_contig_pages(n, Gfp::MOVABLE).unwrap();
    a.contig().free_contig_range(p, n).unwrap();
    a.check_invariants().unwrap();
}

/// Order-9 blocks an allocator can hand out, one after another, until none.
fn order9_blocks(a: &PageAllocator) -> Vec<Pfn> {
    std::iter::from_fn(|| a.alloc_pages(Gfp::MOVABLE, 9).ok()).collect()
}

#[test]
fn parked_pages_cost_no_high_order_block() {
    // As many order-9 blocks after the depot filled as on a fresh arena:
    // the slow path empties the depot (with the lists) before it fails, and
    // the pages merge back.
    let fresh = small(4);
    let expect = order9_blocks(&fresh).len();
    let a = small(4);
    churn(&a, 3000);
    assert!(a.stats().pcpstat().nr_depot > 0);
    let got = order9_blocks(&a);
    assert_eq!(got.len(), expect, "order-9 blocks after the depot filled");
    for p in got {
        a.free_pages(p, 9).unwrap();
    }
    a.check_invariants().unwrap();
}

#[test]
fn the_low_watermark_empties_the_depot() {
    let a = small(8);
    churn(&a, 1000);
    let parked = a.stats().pcpstat().nr_depot;
    assert!(parked > 0);
    // Order-3 blocks never come from the depot: take them until the
    // buddy alone is below the low watermark (the depot's pages still count
    // free, so the fast path keeps serving).
    let low = a.stats().zoneinfo().zones[0].low;
    let buddy_free = |a: &PageAllocator| {
        let z = &a.stats().snapshot_consistent().zones[0];
        z.nr_free_pages - z.depot_pages
    };
    let mut held = Vec::new();
    while buddy_free(&a) >= low {
        held.push(a.alloc_pages(Gfp::KERNEL, 3).expect("order 3 above the low watermark"));
    }
    assert_eq!(a.stats().pcpstat().nr_depot, parked, "order 3 took nothing from the depot");
    // Now free order-3 blocks (they go to the per-CPU list of order 3) until
    // the list passes `high` and drains: that drain, below the low
    // watermark, empties the depot into the buddy instead of parking.
    let drains = a.stats().pcpstat().pcp_drain;
    while a.stats().pcpstat().pcp_drain == drains {
        a.free_pages(held.pop().expect("a drain before the last block"), 3).unwrap();
    }
    let z = a.stats().snapshot_consistent().zones.remove(0);
    assert_eq!(z.depot_pages, 0, "depot not emptied below the low watermark: {z:?}");
    for p in held {
        a.free_pages(p, 3).unwrap();
    }
    a.check_invariants().unwrap();
}

#[test]
fn threads_exchange_batches_through_the_depot() {
    // Producer-consumer: two threads free what two others allocate, one
    // CPU slot for all (their list locks collide, busy frees go to the
    // depot), every page accounted for at the end.
    let a = PageAllocator::new(
        Config::small(32 << 20).nr_cpus(Some(1)).pcp_batch(Some(16)).percpu_pagelist_high_fraction(64),
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Pfn>>(64);
    let rx = std::sync::Mutex::new(rx);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (a, tx) = (&a, tx.clone());
            s.spawn(move || {
                for _ in 0..200 {
                    let v: Vec<Pfn> = (0..40).filter_map(|_| a.alloc_pages(Gfp::KERNEL, 0).ok()).collect();
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for _ in 0..2 {
            let (a, rx) = (&a, &rx);
            s.spawn(move || loop {
                let Ok(v) = rx.lock().unwrap().recv() else { break };
                a.free_pages_bulk(&v).unwrap();
            });
        }
    });
    let st = a.stats().pcpstat();
    assert!(st.pcp_depot_park > 0 && st.pcp_depot_take > 0, "{st:?}");
    a.check_invariants().unwrap();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}
