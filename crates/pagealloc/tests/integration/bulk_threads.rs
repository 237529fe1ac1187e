//! Sixteen threads mixing every order-0 bulk and single call on one
//! allocator, with entries a thread may not free put in its bulk frees: every
//! page is handed out to one holder at a time, every bad entry is rejected
//! with its own error, and at the end the allocator is whole. (Concurrent, so
//! not run through the sequential reference model; the ownership table plays
//! its part.)

use pagealloc::{Config, FreeError, Gfp, PageAllocator, Pfn};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU8, Ordering};

const TYPES: [Gfp; 3] = [Gfp::KERNEL, Gfp::MOVABLE, Gfp::RECLAIMABLE];

/// Everything is free, nothing is parked, every page handed out was freed
/// (pgalloc == pgfree), and the free count is that of a fresh allocator of
/// the same configuration.
fn whole(a: &PageAllocator) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!((c.allocated, c.pcp, c.isolated_free), (0, 0, 0), "after freeing everything and draining: {c:?}");
    assert!(a.stats().pcp_report().iter().all(|r| r.count == 0), "drain_all_pages left pages on per-CPU lists");
    let fresh = PageAllocator::new(a.config().clone()).unwrap();
    assert_eq!(a.nr_free_pages(), fresh.nr_free_pages(), "pages leaked");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages leaked");
    let v = a.stats().vmstat();
    let alloc = v.get("pgalloc_normal").unwrap() + v.get("pgalloc_movable").unwrap();
    assert_eq!(alloc, v.get("pgfree").unwrap(), "pgalloc and pgfree disagree with nothing allocated");
}

#[test]
fn sixteen_threads_bulk_alloc_and_free_mixed_types() {
    let a = PageAllocator::new(Config::small(64 << 20).movable_zone_bytes(16 << 20)).unwrap();
    // Who holds each pfn: a second hand-out of a held page is caught at once.
    let owner: Vec<AtomicU8> = (0..a.nr_pages()).map(|_| AtomicU8::new(0)).collect();
    let take = |p: Pfn| {
        assert_eq!(owner[p.as_u64() as usize].swap(1, Ordering::Relaxed), 0, "{p:?} handed out twice");
    };
    let give = |p: Pfn| {
        assert_eq!(owner[p.as_u64() as usize].swap(0, Ordering::Relaxed), 1, "{p:?} freed while not held");
    };
    std::thread::scope(|s| {
        for t in 0..16u64 {
            let a = &a;
            let (take, give) = (&take, &give);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(1000 + t);
                let mut held: Vec<Pfn> = Vec::new();
                let big = a.alloc_pages(Gfp::KERNEL, 2).unwrap();
                for i in 0..2500 {
                    let gfp = TYPES[rng.gen_range(0..3)];
                    match rng.gen_range(0..8) {
                        0 | 1 => {
                            let n = if rng.gen_bool(0.7) { rng.gen_range(1..=32) } else { rng.gen_range(33..150) };
                            let mut v = Vec::new();
                            a.alloc_pages_bulk_list(gfp, n, &mut v);
                            v.iter().for_each(|&p| take(p));
                            held.extend_from_slice(&v);
                        }
                        2 => {
                            let len = if rng.gen_bool(0.7) { rng.gen_range(1..=40) } else { rng.gen_range(41..150) };
                            let mut slots: Vec<Option<Pfn>> =
                                (0..len).map(|_| rng.gen_bool(0.2).then_some(Pfn::MAX)).collect();
                            let before = slots.clone();
                            let n = a.alloc_pages_bulk(gfp, &mut slots);
                            assert_eq!(n, slots.iter().take_while(|s| s.is_some()).count());
                            for (s, b) in slots.iter().zip(&before) {
                                match (s, b) {
                                    (_, Some(_)) => assert_eq!(s, b),
                                    (Some(p), None) => {
                                        take(*p);
                                        held.push(*p);
                                    }
                                    (None, None) => {}
                                }
                            }
                        }
                        3 | 4 => {
                            let n = if rng.gen_bool(0.6) { rng.gen_range(0..=32) } else { rng.gen_range(33..150) };
                            held.shuffle(&mut rng);
                            let mut v: Vec<Pfn> = held.split_off(held.len().saturating_sub(n));
                            v.iter().for_each(|&p| give(p));
                            // Entries this thread may not free, at random places: the
                            // head of its order-2 block, a pfn inside it, one out of range.
                            // (No duplicates: once the first copy is freed, another
                            // thread may own the page by the time the second is read.)
                            let mut bad = Vec::new();
                            if rng.gen_bool(0.3) {
                                for (j, p) in [big, big.add(1), Pfn::new(1 << 40)].into_iter().enumerate() {
                                    if rng.gen_bool(0.5) {
                                        let at = rng.gen_range(0..=v.len());
                                        v.insert(at, p);
                                        bad.push((p, j));
                                    }
                                }
                            }
                            let expected: Vec<(usize, FreeError)> = v
                                .iter()
                                .enumerate()
                                .filter_map(|(i, &p)| {
                                    let j = bad.iter().find(|b| b.0 == p)?.1;
                                    Some((
                                        i,
                                        match j {
                                            0 => FreeError::WrongOrder { pfn: p, order: 0, actual: 2 },
                                            1 => FreeError::InsideBlock { pfn: p, head: big },
                                            _ => FreeError::OutOfRange { pfn: p, nr_pages: a.nr_pages() },
                                        },
                                    ))
                                })
                                .collect();
                            match a.free_pages_bulk(&v) {
                                Ok(()) => assert!(expected.is_empty(), "thread {t}: {expected:?} not rejected"),
                                Err(e) => assert_eq!(e.rejected, expected, "thread {t}"),
                            }
                        }
                        5 => {
                            let n = rng.gen_range(0..150).min(held.len());
                            let mut slots: Vec<Option<Pfn>> =
                                held.split_off(held.len() - n).into_iter().map(Some).collect();
                            slots.iter().flatten().for_each(|&p| give(p));
                            let at = rng.gen_range(0..=slots.len());
                            slots.insert(at, Some(Pfn::new(1 << 40)));
                            let e = a.free_pages_bulk_slots(&mut slots).unwrap_err();
                            assert_eq!(e.rejected.len(), 1);
                            assert_eq!(e.rejected[0].0, at);
                            assert!(slots.iter().enumerate().all(|(i, s)| (i == at) == s.is_some()));
                        }
                        6 => {
                            if let Ok(p) = a.alloc_pages(gfp, 0) {
                                take(p);
                                held.push(p);
                            }
                            if let Some(p) = held.pop() {
                                give(p);
                                a.free_pages(p, 0).unwrap();
                            }
                        }
                        _ if i % 400 == 0 => a.drain_all_pages(),
                        _ => a.drain_local_pages(),
                    }
                    if held.len() > 400 {
                        let v = held.split_off(200);
                        v.iter().for_each(|&p| give(p));
                        a.free_pages_bulk(&v).unwrap();
                    }
                }
                held.iter().for_each(|&p| give(p));
                a.free_pages_bulk(&held).unwrap();
                a.free_pages(big, 2).unwrap();
            });
        }
    });
    assert!(owner.iter().all(|o| o.load(Ordering::Relaxed) == 0));
    whole(&a);
}
