//! Per-CPU lists, the bulk allocator, bulk free and isolation, through the
//! public API: semantics, bounds, and both A/B designs.

#[cfg(feature = "seed-variants")]
use pagealloc::DrainMode;
use pagealloc::{BulkFreeError, Config, FreeError, Gfp, PageAllocator, Pfn, PAGEBLOCK_PAGES};
use proptest::prelude::*;

fn small() -> PageAllocator {
    PageAllocator::new(Config::small(16 << 20)).unwrap()
}

fn whole(a: &PageAllocator) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages leaked");
}

fn pcp_within_high(a: &PageAllocator) {
    for r in a.stats().pcp_report() {
        assert!(r.count <= r.high, "cpu {} zone {}: {} pages on lists, high {}", r.cpu, r.zone, r.count, r.high);
    }
}

#[test]
fn freed_pages_park_on_lists_and_drain_all_returns_them() {
    let a = small();
    let pages: Vec<Pfn> = (0..200).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap()).collect();
    for &p in &pages {
        a.free_pages(p, 0).unwrap();
        pcp_within_high(&a);
    }
    a.check_invariants().unwrap();
    a.drain_all_pages();
    assert!(a.stats().pcp_report().iter().all(|r| r.count == 0));
    whole(&a);
}

#[test]
fn pcp_lists_are_lifo_for_cache_warmth() {
    let a = PageAllocator::new(Config::small(16 << 20).front_cache(false)).unwrap();
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    a.free_pages(p, 0).unwrap();
    assert_eq!(a.alloc_pages(Gfp::KERNEL, 0).unwrap(), p, "the page just freed is the next one out");
    a.free_pages(p, 0).unwrap();
    whole(&a);
}

#[test]
fn double_free_through_the_lists_is_caught() {
    let a = small();
    for order in [0, 1, 3, 9] {
        let p = a.alloc_pages(Gfp::MOVABLE, order).unwrap();
        a.free_pages(p, order).unwrap();
        assert_eq!(a.free_pages(p, order), Err(FreeError::DoubleFree { pfn: p }));
        a.check_invariants().unwrap();
    }
    whole(&a);
}

#[test]
fn bulk_fills_only_holes_and_counts_leading_slots() {
    let a = small();
    let keep = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    let mut slots = [None, Some(keep), None, None, Some(keep), None];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 6);
    assert_eq!(slots[1], Some(keep));
    assert_eq!(slots[4], Some(keep));
    let mut full = [Some(keep); 3];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut full), 3);
    let mut empty: [Option<Pfn>; 0] = [];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut empty), 0);
    let fresh: Vec<Pfn> = [0, 2, 3, 5].iter().map(|&i| slots[i].unwrap()).collect();
    a.free_pages_bulk(&fresh).unwrap();
    a.free_pages(keep, 0).unwrap();
    whole(&a);
}

#[test]
fn bulk_list_form_appends() {
    let a = small();
    let mut v = Vec::new();
    assert_eq!(a.alloc_pages_bulk_list(Gfp::MOVABLE, 100, &mut v), 100);
    assert_eq!(a.alloc_pages_bulk_list(Gfp::MOVABLE, 28, &mut v), 28);
    let mut sorted = v.clone();
    sorted.sort_by_key(|p| p.as_u64());
    sorted.dedup();
    assert_eq!(sorted.len(), 128, "a page was handed out twice");
    a.free_pages_bulk(&v).unwrap();
    whole(&a);
}

#[test]
fn bulk_exhaustion_midway_returns_the_leading_count() {
    let a = PageAllocator::new(Config::small(4 << 20).min_free_kbytes(Some(0))).unwrap();
    let mut slots = vec![None; 2000];
    let n = a.alloc_pages_bulk(Gfp::MOVABLE, &mut slots);
    assert_eq!(n as u64, a.managed_pages().min(2000));
    assert!(slots[..n].iter().all(|s| s.is_some()));
    assert!(slots[n..].iter().all(|s| s.is_none()), "a slot past the returned count was written");
    let got: Vec<Pfn> = slots[..n].iter().map(|s| s.unwrap()).collect();
    a.free_pages_bulk(&got).unwrap();
    whole(&a);
}

#[test]
fn bulk_free_reports_bad_entries_and_frees_the_rest() {
    let a = small();
    let mut v = Vec::new();
    a.alloc_pages_bulk_list(Gfp::KERNEL, 8, &mut v);
    let big = a.alloc_pages(Gfp::KERNEL, 2).unwrap();
    let mut input = v.clone();
    input.insert(2, Pfn::new(1 << 40)); // out of range
    input.insert(5, v[0]); // double free within the same call
    input.push(big.add(1)); // inside another block
    input.push(big); // wrong order (order-0 bulk free of an order-2 block)
    let err: BulkFreeError = a.free_pages_bulk(&input).unwrap_err();
    let idx: Vec<usize> = err.rejected.iter().map(|(i, _)| *i).collect();
    assert_eq!(idx, vec![2, 5, 10, 11]);
    assert!(matches!(err.rejected[0].1, FreeError::OutOfRange { .. }));
    assert!(matches!(err.rejected[1].1, FreeError::DoubleFree { .. }));
    assert!(matches!(err.rejected[2].1, FreeError::InsideBlock { .. }));
    assert!(matches!(err.rejected[3].1, FreeError::WrongOrder { .. }));
    a.check_invariants().unwrap();
    a.free_pages(big, 2).unwrap();
    whole(&a);
}

#[test]
fn isolation_catches_pages_parked_on_lists() {
    let a = small();
    // Park pages of the first pageblock on the per-CPU lists.
    let mut v = Vec::new();
    a.alloc_pages_bulk_list(Gfp::MOVABLE, 64, &mut v);
    let start = Pfn::new(v[0].as_u64() & !(PAGEBLOCK_PAGES - 1));
    a.free_pages_bulk(&v).unwrap();
    let free_before = a.nr_free_pages();
    a.contig().isolate_range(start, PAGEBLOCK_PAGES).unwrap();
    assert!(a.contig().test_pages_isolated(start, PAGEBLOCK_PAGES), "a parked page escaped the isolation");
    assert!(a.nr_free_pages() < free_before + 64, "isolated pages are not counted free");
    assert!(matches!(a.contig().isolate_range(start, 1), Err(pagealloc::PageStateError::AlreadyIsolated { .. })));
    // A free into an isolated block bypasses the lists.
    a.check_invariants().unwrap();
    a.contig().undo_isolate_range(start, PAGEBLOCK_PAGES).unwrap();
    assert!(matches!(a.contig().undo_isolate_range(start, 1), Err(pagealloc::PageStateError::NotIsolated { .. })));
    whole(&a);
}

#[test]
fn contiguous_allocation_takes_free_ranges_only() {
    let a = small();
    let p = a.contig().alloc_contig_pages(700, Gfp::MOVABLE).unwrap();
    a.check_invariants().unwrap();
    for i in (0..700).step_by(2) {
        assert_eq!(a.free_pages(p.add(i), 1), Err(FreeError::WrongOrder { pfn: p.add(i), order: 1, actual: 0 }));
    }
    let q = a.contig().alloc_contig_pages(100, Gfp::KERNEL).unwrap();
    assert!(q.as_u64() + 100 <= p.as_u64() || q.as_u64() >= p.as_u64() + 700, "ranges overlap");
    a.contig().free_contig_range(p, 700).unwrap();
    a.contig().free_contig_range(q, 100).unwrap();
    whole(&a);
}

#[cfg(feature = "seed-variants")]
#[test]
fn both_drain_designs_leave_identical_buddy_state() {
    let run = |cfg: Config| {
        let a = PageAllocator::new(cfg.nr_cpus(Some(1)).front_cache(false)).unwrap();
        let mut held = Vec::new();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if x >> 62 != 0 || held.is_empty() {
                if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, ((x >> 40) % 4) as u32) {
                    held.push((p, ((x >> 40) % 4) as u32));
                }
            } else {
                let (p, o) = held.swap_remove((x >> 20) as usize % held.len());
                a.free_pages(p, o).unwrap();
            }
        }
        a.check_invariants().unwrap();
        (held, a.stats().fragmentation().free_blocks, a.nr_free_pages())
    };
    let single = run(Config::small(16 << 20).drain_mode(DrainMode::SinglePass));
    let two = run(Config::small(16 << 20).drain_mode(DrainMode::TwoPass));
    let cached = run(Config::small(16 << 20).drain_mode(DrainMode::SinglePass).pcp_migratetype_cache(true));
    assert_eq!(single, two);
    assert_eq!(single, cached);
}

#[test]
fn sixteen_threads_mix_everything() {
    let a = PageAllocator::new(Config::small(64 << 20)).unwrap();
    std::thread::scope(|s| {
        for t in 0..16u64 {
            let a = a.clone();
            s.spawn(move || {
                let mut x = t.wrapping_mul(0x9e3779b97f4a7c15) | 1;
                let mut held: Vec<(Pfn, u32)> = Vec::new();
                for i in 0..4000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    match x % 10 {
                        0..=4 => {
                            let order = [0, 0, 0, 1, 2, 3, 5, 9][(x >> 8) as usize % 8];
                            if let Ok(p) = a.alloc_pages([Gfp::KERNEL, Gfp::MOVABLE][(x >> 4) as usize % 2], order) {
                                held.push((p, order));
                            }
                        }
                        5 => {
                            let mut slots = [None; 16];
                            let n = a.alloc_pages_bulk(Gfp::MOVABLE, &mut slots);
                            held.extend(slots[..n].iter().map(|s| (s.unwrap(), 0)));
                        }
                        6 => {
                            let zeros: Vec<Pfn> = held.iter().filter(|h| h.1 == 0).map(|h| h.0).collect();
                            held.retain(|h| h.1 != 0);
                            a.free_pages_bulk(&zeros).unwrap();
                        }
                        7 if i % 500 == 0 => a.drain_all_pages(),
                        7 => a.drain_local_pages(),
                        8 if t == 0 && i % 200 == 0 => {
                            if let Ok(p) = a.contig().alloc_contig_pages(64, Gfp::MOVABLE) {
                                a.contig().free_contig_range(p, 64).unwrap();
                            }
                        }
                        _ => {
                            if let Some((p, o)) = held.pop() {
                                a.free_pages(p, o).unwrap();
                            }
                        }
                    }
                }
                for (p, o) in held {
                    a.free_pages(p, o).unwrap();
                }
            });
        }
    });
    whole(&a);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random slot patterns: the returned count is the leading populated run, no
    /// pre-populated slot changes, and nothing past the first hole left is written.
    #[test]
    fn bulk_slot_semantics(pattern in prop::collection::vec(any::<bool>(), 0..80), limit in 0u64..300) {
        let a = PageAllocator::new(Config::small(4 << 20).min_free_kbytes(Some(0))).unwrap();
        let marker = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
        // Use up memory so that only `limit` pages remain (exhaustion midway).
        let mut hog = Vec::new();
        a.drain_all_pages();
        while a.nr_free_pages() > limit {
            match a.alloc_pages(Gfp::KERNEL, 0) { Ok(p) => hog.push(p), Err(_) => break }
        }
        let mut slots: Vec<Option<Pfn>> = pattern.iter().map(|&b| b.then_some(marker)).collect();
        let before = slots.clone();
        let n = a.alloc_pages_bulk(Gfp::KERNEL, &mut slots);
        prop_assert_eq!(n, slots.iter().take_while(|s| s.is_some()).count());
        for (s, b) in slots.iter().zip(&before) {
            if b.is_some() { prop_assert_eq!(s, b); }
        }
        if n < slots.len() {
            // Past the first remaining hole, no new page was written.
            for (s, b) in slots[n..].iter().zip(&before[n..]) { prop_assert_eq!(s, b); }
        }
        let got: Vec<Pfn> = slots.iter().zip(&before).filter(|(s, b)| s.is_some() && b.is_none()).map(|(s, _)| s.unwrap()).collect();
        a.free_pages_bulk(&got).unwrap();
        a.free_pages_bulk(&hog).unwrap();
        a.free_pages(marker, 0).unwrap();
        whole(&a);
    }
}

#[test]
fn bulk_free_of_slots_empties_them_and_keeps_bad_entries() {
    let a = small();
    let mut slots = [None; 16];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 16);
    let keep = slots[3].unwrap();
    let hole = slots[5].take(); // a hole: skipped
    let lost = slots[7].replace(Pfn::new(1 << 40)); // a bad entry: stays, reported
    let err = a.free_pages_bulk_slots(&mut slots).unwrap_err();
    assert_eq!(err.rejected.len(), 1);
    assert_eq!(err.rejected[0].0, 7);
    assert!(matches!(err.rejected[0].1, FreeError::OutOfRange { .. }));
    assert_eq!(slots[7], Some(Pfn::new(1 << 40)));
    assert!(slots.iter().enumerate().all(|(i, s)| i == 7 || s.is_none()));
    assert_eq!(a.free_pages(keep, 0), Err(FreeError::DoubleFree { pfn: keep }));
    // The pages taken out of slots 5 and 7 before the call are still ours.
    a.free_pages(hole.unwrap(), 0).unwrap();
    a.free_pages(lost.unwrap(), 0).unwrap();
    let mut fresh = [None; 4];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut fresh), 4);
    a.free_pages_bulk_slots(&mut fresh).unwrap();
    assert_eq!(fresh, [None; 4]);
    whole(&a);
}

#[test]
fn small_bulk_free_into_an_isolated_block_bypasses_the_front_cache() {
    let a = small();
    let mut v = Vec::new();
    assert_eq!(a.alloc_pages_bulk_list(Gfp::MOVABLE, 8, &mut v), 8);
    let block = |p: &Pfn| p.as_u64() & !(PAGEBLOCK_PAGES - 1);
    let start = Pfn::new(block(&v[0]));
    let (mine, others): (Vec<Pfn>, Vec<Pfn>) = v.iter().partition(|p| block(p) == start.as_u64());
    a.contig().isolate_range(start, PAGEBLOCK_PAGES).unwrap();
    // A small bulk free goes through this thread's front cache, except pages
    // of isolated blocks, which must reach the isolate list.
    a.free_pages_bulk(&mine).unwrap();
    assert!(a.contig().test_pages_isolated(start, PAGEBLOCK_PAGES), "a page freed in bulk escaped the isolation");
    a.check_invariants().unwrap();
    a.free_pages_bulk(&others).unwrap();
    a.contig().undo_isolate_range(start, PAGEBLOCK_PAGES).unwrap();
    whole(&a);
}

#[test]
fn small_bulk_round_trips_keep_lists_within_high_and_lose_nothing() {
    let a = small();
    let mut slots = [None; 5];
    let mut list = Vec::new();
    for round in 0..2000 {
        let k = 2 + round % 4;
        assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots[..k]), k);
        assert_eq!(a.alloc_pages_bulk_list(Gfp::MOVABLE, k, &mut list), k);
        a.free_pages_bulk_slots(&mut slots[..k]).unwrap();
        a.free_pages_bulk(&list).unwrap();
        list.clear();
        pcp_within_high(&a);
    }
    assert!(slots.iter().all(|s| s.is_none()));
    whole(&a);
}

#[test]
fn small_bulk_free_with_a_bad_entry_midway_frees_each_valid_page_once() {
    let a = small();
    let mut v = Vec::new();
    assert_eq!(a.alloc_pages_bulk_list(Gfp::KERNEL, 4, &mut v), 4);
    // The inline front-cache path takes the first two, stops at the bad entry,
    // and the full path must go on from there (not from the start).
    let list = [v[0], v[1], Pfn::new(1 << 40), v[2], v[3]];
    let err = a.free_pages_bulk(&list).unwrap_err();
    assert_eq!(err.rejected.len(), 1, "{err:?}");
    assert_eq!(err.rejected[0].0, 2);
    assert!(matches!(err.rejected[0].1, FreeError::OutOfRange { .. }));
    for p in &v {
        assert_eq!(a.free_pages(*p, 0), Err(FreeError::DoubleFree { pfn: *p }));
    }
    // The same through slots: the freed ones are emptied, the bad one stays.
    let mut slots = [None; 5];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 5);
    let bad = slots[3].replace(Pfn::new(1 << 40)).unwrap();
    let err = a.free_pages_bulk_slots(&mut slots).unwrap_err();
    assert_eq!(err.rejected.iter().map(|r| r.0).collect::<Vec<_>>(), [3]);
    assert_eq!(slots, [None, None, None, Some(Pfn::new(1 << 40)), None]);
    a.free_pages(bad, 0).unwrap();
    whole(&a);
}

#[test]
fn refills_double_during_a_run_of_allocations_and_drains_grow_with_frees() {
    // The kernel's alloc_factor and free_count: a long run of allocations
    // refills in growing batches, a long run of frees drains in large ones.
    let a = PageAllocator::new(Config::small(256 << 20).front_cache(false)).unwrap();
    let r = a.stats().pcp_report()[0];
    let batch = r.batch as u64;
    // More than the lists may ever hold, so the frees must drain.
    let n = 3 * r.high_max as u64;
    let refills0 = a.stats().pcpstat().get("pcp_refill").unwrap();
    let pages: Vec<Pfn> = (0..n).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    let refills = a.stats().pcpstat().get("pcp_refill").unwrap() - refills0;
    assert!(refills < n / batch / 2, "{refills} refills for {n} pages in batches of {batch}: no scaling");
    pcp_within_high(&a);
    let drains0 = a.stats().pcpstat().get("pcp_drain").unwrap();
    for p in pages {
        a.free_pages(p, 0).unwrap();
        pcp_within_high(&a);
    }
    let drains = a.stats().pcpstat().get("pcp_drain").unwrap() - drains0;
    assert!(drains >= 1 && drains < n / batch / 2, "{drains} drains for {n} frees in batches of {batch}");
    whole(&a);
}
