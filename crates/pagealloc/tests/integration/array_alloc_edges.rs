//! Edges of array bulk allocation (`alloc_pages_bulk`: `fill_holes`, scalar
//! and wide, the inline path for small arrays), through the public API and
//! the reference model (`tests/refmodel/`): every hole filled and no
//! populated slot touched, nothing written after the first hole left when
//! memory runs out, no per-CPU list left over `high` by a populated tail.
//! The model checks every call (leading count, slots, pages handed out,
//! pgalloc); its checks run after each call and at the end the allocator must
//! be whole again.

use crate::refmodel;

use pagealloc::{Config, Gfp, Pfn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use refmodel::{events, Drain, Model};

const TYPES: [Gfp; 3] = [Gfp::KERNEL, Gfp::MOVABLE, Gfp::RECLAIMABLE];

fn holes_pattern(kind: usize, len: usize, rng: &mut StdRng) -> Vec<bool> {
    // true: populated before the call.
    (0..len)
        .map(|i| match kind {
            0 => false,
            1 => true,
            2 => i % 2 == 0,
            3 => i % 2 == 1,
            4 => i < len / 2,
            5 => i >= len / 2,
            6 => i == 0,
            7 => i + 1 == len,
            8 => i % 7 != 3,
            _ => rng.gen_bool(0.3),
        })
        .collect()
}

#[test]
fn array_bulk_allocation_fills_exactly_the_holes() {
    let cfg = Config::small(16 << 20);
    let mut m = Model::new(cfg).unwrap();
    let a = m.a().clone();
    let mut rng = StdRng::seed_from_u64(3);
    // Pages for the populated slots.
    let mut pool = Vec::new();
    assert_eq!(m.bulk_list(Gfp::RECLAIMABLE, 150, &mut pool), 150);
    let junk = Pfn::MAX;
    let mut iteration = 0u64;
    for len in (1..=40usize).chain(100..=140) {
        for kind in 0..11 {
            iteration += 1;
            let gfp =
                TYPES[(iteration % 3) as usize] | if iteration.is_multiple_of(13) { Gfp::ZERO } else { Gfp::empty() };
            // Leave 0, a few or many pages in this thread's front stack.
            match iteration % 4 {
                0 => m.drain(Drain::All),
                1 => {
                    let mut v = Vec::new();
                    m.bulk_list(gfp, rng.gen_range(1..=12), &mut v);
                    assert!(m.bulk_free(&v).is_empty());
                }
                _ => {}
            }
            let pattern = holes_pattern(kind, len, &mut rng);
            let mut slots: Vec<Option<Pfn>> = pattern
                .iter()
                .enumerate()
                .map(|(i, &full)| full.then(|| if (i + kind) % 11 == 5 { junk } else { pool[i] }))
                .collect();
            let before = slots.clone();
            let holes = before.iter().filter(|s| s.is_none()).count();
            let ev = events(&a);
            // The model checks the slots and takes the pages.
            let n = m.bulk_alloc(gfp, &mut slots);
            assert_eq!(n, len, "len {len} kind {kind}: plenty of memory, every hole filled");
            assert_eq!(n, slots.iter().take_while(|s| s.is_some()).count());
            let mut fresh = Vec::new();
            for (s, b) in slots.iter().zip(&before) {
                match b {
                    Some(_) => assert_eq!(s, b, "len {len} kind {kind}: a populated slot changed"),
                    None => fresh.push(s.unwrap()),
                }
            }
            assert_eq!(fresh.len(), holes);
            assert!(fresh.iter().all(|&p| m.holds(p)));
            assert_eq!(events(&a).alloc, ev.alloc + holes as u64, "pgalloc after filling {holes} holes");
            m.check(&format!("len {len} kind {kind}"));
            // Empty the array; the junk entries are rejected and stay, the
            // pool pages are freed (and reallocated below).
            let mut freeing = slots.clone();
            let rejected = m.slots_free(&mut freeing);
            let junk_at: Vec<usize> =
                before.iter().enumerate().filter(|(_, s)| **s == Some(junk)).map(|(i, _)| i).collect();
            assert_eq!(
                rejected.iter().map(|r| r.0).collect::<Vec<_>>(),
                junk_at,
                "len {len} kind {kind} {rejected:?} {before:?}"
            );
            // Each of the freed pages once more: all rejected.
            let freed: Vec<Pfn> = slots.iter().flatten().copied().filter(|&p| p != junk).collect();
            let again = m.bulk_free(&freed);
            assert_eq!(again.len(), freed.len());
            // Replace the pool pages just freed.
            let gone: Vec<usize> = (0..pool.len()).filter(|&i| !m.holds(pool[i])).collect();
            for i in gone {
                pool[i] = m.alloc(Gfp::RECLAIMABLE, 0, None).unwrap();
            }
            m.check(&format!("len {len} kind {kind}, emptied"));
        }
    }
    m.finish();
}

#[test]
fn array_bulk_allocation_past_the_end_of_memory_writes_nothing_after_the_first_hole() {
    for len in [3usize, 20, 33, 64, 140] {
        let mut m = Model::new(Config::small(4 << 20).min_free_kbytes(Some(0))).unwrap();
        let a = m.a().clone();
        // Take all but `left` pages.
        let left = (len / 2) as u64;
        let mut hog = Vec::new();
        while a.nr_free_pages() + a.census().pcp > left {
            let mut v = Vec::new();
            let want = (a.nr_free_pages() + a.census().pcp - left).min(100) as usize;
            if m.bulk_list(Gfp::MOVABLE, want, &mut v) == 0 {
                break;
            }
            hog.extend_from_slice(&v);
        }
        let marker = hog.pop().unwrap();
        let mut slots: Vec<Option<Pfn>> = (0..len).map(|i| (i % 3 == 1).then_some(marker)).collect();
        let before = slots.clone();
        let n = m.bulk_alloc(Gfp::MOVABLE, &mut slots);
        assert_eq!(n, slots.iter().take_while(|s| s.is_some()).count());
        assert!(n < len, "len {len}: more holes than free pages, yet all filled");
        for (s, b) in slots[n..].iter().zip(&before[n..]) {
            assert_eq!(s, b, "a slot past the first hole left was written");
        }
        let fresh: Vec<Pfn> = slots.iter().zip(&before).filter(|(_, b)| b.is_none()).filter_map(|(s, _)| *s).collect();
        assert!(fresh.iter().all(|&p| m.holds(p)));
        m.check(&format!("len {len}"));
        m.finish();
    }
}

/// A slot array whose holes are followed by populated slots, taken from a
/// per-CPU list already at or near its `high`: the lists may be refilled
/// only for holes, so no list ends a call over `high` (a refill made for the
/// populated tail once left its page behind, one over `high`; found by the
/// fuzzer). Swept over how full the lists are and how many holes there are.
#[test]
fn array_bulk_allocation_with_a_populated_tail_keeps_lists_within_high() {
    // One CPU and 1024 pages: `high` is 128.
    let cfg = Config::small(4 << 20)
        .nr_cpus(Some(1))
        .front_cache(false)
        .pcp_batch(Some(8))
        .percpu_pagelist_high_fraction(8)
        .min_free_kbytes(Some(0));
    for held_back in 0..160usize {
        for holes in 1..12usize {
            let mut m = Model::new(cfg.clone()).unwrap();
            let a = m.a().clone();
            // Movable pages freed one by one fill the lists towards `high`;
            // a Reclaimable allocation's refill then tops them up to it.
            let mut v = Vec::new();
            m.bulk_list(Gfp::MOVABLE, 160, &mut v);
            let back: Vec<Pfn> = v.drain(held_back..).collect();
            for p in back {
                m.free(p.as_u64(), 0).unwrap();
            }
            m.alloc(Gfp::RECLAIMABLE, 0, None).unwrap();
            let marker = Pfn::new(u64::MAX >> 1);
            let mut slots: Vec<Option<Pfn>> = vec![None; holes];
            slots.extend([Some(marker); 3]);
            let n = m.bulk_alloc(Gfp::KERNEL, &mut slots);
            assert_eq!(n, slots.len(), "held back {held_back}, {holes} holes");
            assert!(slots[holes..].iter().all(|s| *s == Some(marker)), "a populated slot was written");
            for r in a.stats().pcp_report() {
                assert!(
                    r.count <= r.high,
                    "held back {held_back}, {holes} holes: cpu {} zone {} has {} pages over high {}",
                    r.cpu,
                    r.zone,
                    r.count,
                    r.high
                );
            }
            assert!(slots[..holes].iter().all(|s| s.is_some_and(|p| m.holds(p))));
            m.check(&format!("held back {held_back}, {holes} holes"));
            m.finish();
        }
    }
}
