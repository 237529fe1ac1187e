//! Edges of the bulk free paths, through the public API and the reference
//! model (`tests/refmodel/`):
//!
//! - the inline small bulk free (`front_give_fast`: one front stack per inner
//!   loop, a stack switch when a page's pageblock key changes);
//! - the large bulk free (`free_chunk`: up to 64 claims per pass, entries
//!   needing full checks put aside, runs of one pageblock key handed to a
//!   `Giver`, isolated and HighAtomic pageblocks freed to the buddy).
//!
//! Every bulk free is checked by the model against its sequential meaning: it
//! rejects exactly the entries that a loop of `free_pages(p, 0)` would
//! reject, with the same errors, in input order; every other entry is freed
//! exactly once (census and pgfree). After each step the model's checks run;
//! at the end everything is freed and drained and the allocator must be
//! whole again.

use crate::refmodel;

use pagealloc::{Config, FreeError, Gfp, MigrateType, Pfn, PAGEBLOCK_PAGES};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use refmodel::{Drain, Model};
use std::collections::HashSet;

const TYPES: [Gfp; 3] = [Gfp::KERNEL, Gfp::MOVABLE, Gfp::RECLAIMABLE];

// ------------------------------------------- 1. small frees, types and zones

#[test]
fn small_bulk_frees_mixing_types_and_zones_free_each_page_once() {
    let cfg = Config::small(64 << 20).movable_zone_bytes(8 << 20);
    let mut m = Model::new(cfg).unwrap();
    let a = m.a().clone();
    assert_eq!(a.stats().zoneinfo().zones.len(), 2, "a Normal and a Movable zone");
    let mut rng = StdRng::seed_from_u64(1);
    // Types interleaved until Movable-type pages come from both zones (the
    // Movable zone fills first).
    let mut movable_in = [0usize; 2];
    let mut i = 0;
    while movable_in[0] < 200 {
        let gfp = TYPES[i % 3];
        let p = m.alloc(gfp, 0, None).unwrap();
        if gfp == Gfp::MOVABLE {
            movable_in[m.zone_of(p.as_u64())] += 1;
        }
        i += 1;
    }
    assert!(movable_in[1] > 1000, "{movable_in:?}");
    m.check("the allocations");
    // Only the interesting part of the Movable zone takes part in the frees;
    // the rest stays allocated so Movable allocations keep spilling over.
    let by_kind = |m: &Model, kind: usize| -> Vec<Pfn> {
        m.blocks()
            .iter()
            .filter(|(&p, b)| {
                let (z, mt) = (m.zone_of(p), b.mt);
                match kind {
                    0 => z == 0 && mt == MigrateType::Unmovable,
                    1 => z == 0 && mt == MigrateType::Movable,
                    2 => z == 0 && mt == MigrateType::Reclaimable,
                    _ => z == 1,
                }
            })
            .map(|(&p, _)| Pfn::new(p))
            .collect()
    };
    let mut zone_kinds = [0u64; 4];
    for round in 0..400 {
        // Refill the pool now and then (the pages come back off front stacks).
        if round % 25 == 24 {
            for gfp in TYPES {
                let mut v = Vec::new();
                let n = rng.gen_range(1..=40);
                assert_eq!(m.bulk_list(gfp, n, &mut v), n);
            }
        }
        // Pick up to 32 entries, several kinds; arranged at random, in runs
        // of one kind, or alternating so every entry switches stacks or zones.
        let mut pools: Vec<Vec<Pfn>> = (0..4).map(|k| by_kind(&m, k)).collect();
        for pool in &mut pools {
            pool.shuffle(&mut rng);
        }
        let k = rng.gen_range(1..=32usize);
        let mut picked = Vec::new();
        let kinds: Vec<usize> = (0..4).filter(|&k| !pools[k].is_empty()).collect();
        for j in 0..k {
            let kind = match round % 3 {
                0 => kinds[rng.gen_range(0..kinds.len())],
                1 => kinds[(j * kinds.len() / k).min(kinds.len() - 1)],
                _ => kinds[j % kinds.len()],
            };
            if let Some(p) = pools[kind].pop() {
                zone_kinds[kind] += 1;
                picked.push(p);
            }
        }
        if round % 2 == 0 {
            let got = m.bulk_free(&picked);
            assert!(got.is_empty(), "{got:?}");
        } else {
            // Holes among the entries, the whole call still at most 32 slots.
            let mut slots: Vec<Option<Pfn>> = picked.iter().map(|&p| Some(p)).collect();
            while slots.len() < 32 && rng.gen_bool(0.3) {
                let at = rng.gen_range(0..=slots.len());
                slots.insert(at, None);
            }
            let got = m.slots_free(&mut slots);
            assert!(got.is_empty(), "{got:?}");
        }
        // A second free of each is rejected, every entry, in order.
        let again = m.bulk_free(&picked);
        assert_eq!(again.len(), picked.len());
        assert!(again.iter().all(|(_, e)| matches!(e, FreeError::DoubleFree { .. })));
        m.check(&format!("round {round}"));
        if round % 50 == 49 {
            m.drain(Drain::All);
            m.check(&format!("round {round}, drained"));
        }
    }
    assert!(zone_kinds.iter().all(|&n| n > 150), "every kind took part: {zone_kinds:?}");
    m.finish();
}

#[test]
fn small_bulk_free_of_one_type_from_two_zones_in_one_call() {
    // The Movable front stack adopts the zone of the first page it takes; a
    // Movable-type page of the other zone in the same call must still be freed.
    let mut m = Model::new(Config::small(16 << 20).movable_zone_bytes(4 << 20)).unwrap();
    let mut by_zone = [Vec::new(), Vec::new()];
    while by_zone[0].len() < 40 {
        let p = m.alloc(Gfp::MOVABLE, 0, None).unwrap();
        by_zone[m.zone_of(p.as_u64())].push(p);
    }
    for pattern in 0..6usize {
        let mut entries = Vec::new();
        for j in 0..32usize {
            let z = match pattern {
                0 => j % 2,
                1 => usize::from(j >= 16),
                2 => usize::from(j < 16),
                3 => usize::from(j == 31),
                4 => usize::from(j != 0),
                _ => usize::from(j % 5 == 0),
            };
            entries.push(by_zone[z].pop().unwrap());
        }
        m.drain(Drain::All);
        assert!(m.bulk_free(&entries).is_empty());
        let again = m.bulk_free(&entries);
        assert_eq!(again.len(), 32);
        m.check(&format!("pattern {pattern}"));
        // And back: reallocate so the next pattern has pages in both zones.
        for _ in 0..32 {
            let p = m.alloc(Gfp::MOVABLE, 0, None).unwrap();
            by_zone[m.zone_of(p.as_u64())].push(p);
        }
        while by_zone[0].len() < 40 {
            let p = m.alloc(Gfp::MOVABLE, 0, None).unwrap();
            by_zone[m.zone_of(p.as_u64())].push(p);
        }
    }
    m.finish();
}

// ----------------------------------------- 2. large frees with every misuse

fn large_bulk_free_mixed_misuse(cfg: Config, n: usize, slots_form: bool, seed: u64) {
    let mut m = Model::new(cfg).unwrap();
    let a = m.a().clone();
    let mut rng = StdRng::seed_from_u64(seed);
    // A whole pageblock of allocated order-0 pages, to isolate.
    let block = m.contig(Gfp::MOVABLE, PAGEBLOCK_PAGES).unwrap();
    assert_eq!(block.as_u64() % PAGEBLOCK_PAGES, 0);
    let block_pages: Vec<Pfn> = (0..PAGEBLOCK_PAGES).map(|i| block.add(i)).collect();
    // Plain pages of every type, singly and in bulk.
    let mut plain = Vec::new();
    for i in 0..n {
        let g = TYPES[i % 3];
        let p = if i % 2 == 0 {
            m.alloc(g, 0, None).unwrap()
        } else {
            let mut v = Vec::new();
            assert_eq!(m.bulk_list(g, 1, &mut v), 1);
            v[0]
        };
        plain.push(p);
    }
    // The model knows these two are pinned: a free of either is refused.
    let locked = plain[1];
    m.lock_page(locked);
    let writeback = plain[2];
    m.writeback(writeback.as_u64(), true);
    let big = m.alloc(Gfp::KERNEL, 2, None).unwrap();
    assert_eq!(m.blocks()[&big.as_u64()].mt, MigrateType::Unmovable);
    m.isolate(block.as_u64(), PAGEBLOCK_PAGES).unwrap();
    m.check("the setup");
    let isolated_before = a.census().isolated_free;
    assert_eq!(isolated_before, 0, "the isolated block is all allocated");

    // The entries: mostly plain pages, then every kind of trouble at random
    // places (chunks are 64 entries: duplicates land in the same and in
    // earlier chunks).
    let iso: Vec<Pfn> = block_pages.choose_multiple(&mut rng, n / 8).copied().collect();
    let mut trouble: Vec<Pfn> = iso.clone();
    trouble.extend([locked, locked, writeback, big, big.add(1), big.add(3)]);
    trouble.extend([Pfn::new(a.nr_pages()), Pfn::new(a.nr_pages() + 1), Pfn::new(1 << 40), Pfn::MAX]);
    let dups = 2 + n / 10;
    let mut entries: Vec<Pfn> = plain.clone();
    entries.shuffle(&mut rng);
    entries.truncate(n - trouble.len() - dups);
    for &t in &trouble {
        let at = rng.gen_range(0..=entries.len());
        entries.insert(at, t);
    }
    for k in 0..dups {
        // Duplicates of an earlier entry (of an isolated page, then of
        // anything), near it and far from it.
        let src = if k == 0 {
            entries.iter().position(|p| iso.contains(p)).unwrap()
        } else {
            rng.gen_range(0..entries.len())
        };
        let at = if k % 2 == 0 { (src + rng.gen_range(1..8)).min(entries.len()) } else { entries.len() };
        let dup = entries[src];
        entries.insert(at, dup);
    }
    assert_eq!(entries.len(), n);
    let iso_freed: HashSet<Pfn> = entries.iter().filter(|p| iso.contains(p)).copied().collect();

    let free_before = a.nr_free_pages();
    let pcp_before = a.census().pcp;
    let rejected = if slots_form {
        let mut slots: Vec<Option<Pfn>> = entries.iter().map(|&p| Some(p)).collect();
        for _ in 0..n / 10 {
            let at = rng.gen_range(0..=slots.len());
            slots.insert(at, None);
        }
        m.slots_free(&mut slots)
    } else {
        m.bulk_free(&entries)
    };
    // Each kind of trouble was rejected with its own error (the exact list was
    // compared with the sequential meaning above).
    let has = |f: &dyn Fn(&FreeError) -> bool| rejected.iter().any(|(_, e)| f(e));
    if entries.contains(&locked) {
        assert!(has(&|e| *e == FreeError::Locked { pfn: locked }));
    }
    assert!(has(&|e| matches!(e, FreeError::OutOfRange { .. })));
    assert!(has(&|e| matches!(e, FreeError::DoubleFree { .. })));
    // Pages of the isolated block went to its isolated free lists, nothing
    // else reached the buddy lists counted free (the per-CPU lists may drain).
    assert_eq!(a.census().isolated_free, iso_freed.len() as u64, "isolated pages freed to the Isolate lists");
    a.check_invariants().unwrap();
    assert!(a.nr_free_pages() >= free_before);
    assert!(a.census().pcp + a.nr_free_pages() - free_before <= pcp_before + entries.len() as u64);
    // The locked and writeback pages are still allocated.
    assert_eq!(m.free(locked.as_u64(), 0), Err(FreeError::Locked { pfn: locked }));
    assert_eq!(m.free(writeback.as_u64(), 0), Err(FreeError::Writeback { pfn: writeback }));
    m.unlock(locked.as_u64(), false).unwrap();
    m.writeback(writeback.as_u64(), false);
    assert!(m.bulk_free(&[locked, writeback]).is_empty());
    assert_eq!(m.free(locked.as_u64(), 0), Err(FreeError::DoubleFree { pfn: locked }));
    m.check("the pinned pages' frees");
    // The rest of the isolated block, in one large free: the block is then
    // wholly free and isolated.
    let rest: Vec<Pfn> = m.held_of(&block_pages);
    assert!(m.bulk_free(&rest).is_empty());
    assert!(m.test_isolated(block.as_u64(), PAGEBLOCK_PAGES), "a page of the isolated block escaped");
    assert_eq!(a.census().isolated_free, PAGEBLOCK_PAGES);
    m.undo_isolate(block.as_u64(), PAGEBLOCK_PAGES).unwrap();
    m.check("the isolated block's frees");
    m.finish();
}

#[test]
fn large_bulk_frees_with_duplicates_bad_pfns_locked_and_isolated_pages() {
    let configs = [
        Config::small(32 << 20),
        #[cfg(feature = "seed-variants")]
        Config::small(32 << 20).page_lock_waiters_bit(false),
        Config::small(32 << 20).front_cache(false),
        Config::small(32 << 20).pcp_lists(false),
        Config::small(32 << 20).movable_zone_bytes(8 << 20).nr_cpus(Some(1)),
    ];
    for (c, cfg) in configs.iter().enumerate() {
        for (k, n) in [200usize, 63, 64, 65, 129].into_iter().enumerate() {
            for slots_form in [false, true] {
                large_bulk_free_mixed_misuse(cfg.clone(), n, slots_form, (c * 100 + k) as u64);
            }
        }
    }
}

#[test]
fn bulk_frees_into_a_highatomic_pageblock_go_to_the_buddy() {
    // Pressure makes a high-priority order-2 request reserve its pageblock as
    // HighAtomic; order-0 pages allocated there before keep their place.
    let cfg = Config::small(32 << 20).min_free_kbytes(Some(4096)).nr_cpus(Some(1)).percpu_pagelist_high_fraction(8);
    let mut m = Model::new(cfg).unwrap();
    let a = m.a().clone();
    while m.alloc(Gfp::KERNEL, 0, None).is_some() {}
    // Free one aligned group of four in the middle of a block of Unmovable
    // pages: the free order-2 block the request below will find first.
    let group = (PAGEBLOCK_PAGES * 3 + 64..).step_by(4).find(|&q| (q..q + 4).all(|p| m.holds(Pfn::new(p)))).unwrap();
    let four: Vec<Pfn> = (group..group + 4).map(Pfn::new).collect();
    assert!(m.bulk_free(&four).is_empty());
    a.drain_all_pages();
    let big = m.alloc(Gfp::ATOMIC, 2, None).unwrap();
    assert_eq!(m.blocks()[&big.as_u64()].mt, MigrateType::Unmovable);
    assert!(a.stats().pagetypeinfo().zones[0].blocks[MigrateType::HighAtomic.index()] >= 1);
    let ha_block = big.as_u64() / PAGEBLOCK_PAGES;
    let (mut ha, mut other): (Vec<Pfn>, Vec<Pfn>) =
        m.order0_pages().into_iter().partition(|p| p.as_u64() / PAGEBLOCK_PAGES == ha_block);
    assert!(ha.len() >= 40, "only {} order-0 pages in the HighAtomic block", ha.len());
    m.check("the HighAtomic reserve");
    let mut rng = StdRng::seed_from_u64(7);
    ha.shuffle(&mut rng);
    other.shuffle(&mut rng);
    // Small calls (through the inline path) and a large one: the HighAtomic
    // pages reach the buddy (counted free at once), the others park.
    for (n_ha, n_other) in [(1, 0), (1, 5), (3, 3), (8, 24), (0, 8), (16, 200)] {
        let mut entries: Vec<Pfn> = ha.drain(..n_ha).chain(other.drain(..n_other)).collect();
        entries.shuffle(&mut rng);
        let free0 = a.nr_free_pages();
        let pcp0 = a.census().pcp;
        assert!(m.bulk_free(&entries).is_empty());
        assert_eq!(a.nr_free_pages() - free0, n_ha as u64, "HighAtomic pages not freed to the buddy");
        assert_eq!(a.census().pcp - pcp0, n_other as u64);
        m.check(&format!("a free of {n_ha} HighAtomic and {n_other} other pages"));
    }
    m.finish();
}
