//! Edges of the rewritten order-0 fast paths, through the public API:
//!
//! - the inline small bulk free (`front_give_fast`: one front stack per inner
//!   loop, a stack switch when a page's pageblock key changes, half of a full
//!   stack flushed to the per-CPU lists in the middle of a call);
//! - the large bulk free (`free_chunk`: up to 64 claims per pass, entries
//!   needing full checks put aside, runs of one pageblock key handed to a
//!   `Giver`, isolated and HighAtomic pageblocks freed to the buddy);
//! - array bulk allocation (`fill_holes`, scalar and wide).
//!
//! Every scenario is checked against the sequential meaning of the calls: a
//! bulk free rejects exactly the entries that a loop of `free_pages(p, 0)`
//! would reject, with the same errors, in input order; every other entry is
//! freed exactly once. After each scenario the allocator's own invariants must
//! hold and, once everything is freed and drained, it must be whole again.

use pagealloc::{BulkFreeError, Config, FreeError, Gfp, MigrateType, PageAllocator, Pfn, PAGEBLOCK_PAGES};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};

const TYPES: [Gfp; 3] = [Gfp::KERNEL, Gfp::MOVABLE, Gfp::RECLAIMABLE];

/// What the caller holds: head pfn -> (order, the type it was allocated for).
type Model = BTreeMap<u64, (u32, MigrateType)>;

// ------------------------------------------------------------------ helpers

/// Everything is free, nothing is parked, and the free count is that of a
/// fresh allocator of the same configuration.
fn whole(a: &PageAllocator) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!((c.allocated, c.pcp, c.isolated_free), (0, 0, 0), "after freeing everything and draining: {c:?}");
    assert!(a.pcp_report().iter().all(|r| r.count == 0), "drain_all_pages left pages on per-CPU lists");
    let fresh = PageAllocator::new(a.config().clone()).unwrap();
    assert_eq!(a.nr_free_pages(), fresh.nr_free_pages(), "pages leaked");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages leaked");
}

/// Pages handed out and pages freed, as the event counters have them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Events {
    alloc: u64,
    free: u64,
}

fn events(a: &PageAllocator) -> Events {
    let v = a.vmstat();
    Events {
        alloc: v.get("pgalloc_normal").unwrap() + v.get("pgalloc_movable").unwrap(),
        free: v.get("pgfree").unwrap(),
    }
}

/// Pages on per-CPU lists (front caches not included).
fn on_pcp_lists(a: &PageAllocator) -> u64 {
    a.pcp_report().iter().map(|r| r.count as u64).sum()
}

/// `[start, end)` of each zone.
fn zone_spans(a: &PageAllocator) -> Vec<(u64, u64)> {
    a.zoneinfo().zones.iter().map(|z| (z.start_pfn, z.start_pfn + z.spanned)).collect()
}

fn zone_index(spans: &[(u64, u64)], p: Pfn) -> usize {
    spans.iter().position(|&(s, e)| (s..e).contains(&p.as_u64())).expect("pfn in no zone")
}

/// Does this allocator put freed order-0 pages in a thread front cache? (Off
/// by configuration, or where the kernel has no membarrier.)
fn front_cache_on(cfg: &Config) -> bool {
    let a = PageAllocator::new(cfg.clone()).unwrap();
    let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    a.drain_all_pages();
    a.free_pages(p, 0).unwrap();
    a.census().pcp == 1 && on_pcp_lists(&a) == 0
}

/// What `free_pages(p, 0)` must answer, given what the caller holds.
fn expect_free(a: &PageAllocator, model: &Model, p: Pfn) -> Result<(), FreeError> {
    let q = p.as_u64();
    if q >= a.nr_pages() {
        return Err(FreeError::OutOfRange { pfn: p, nr_pages: a.nr_pages() });
    }
    match model.range(..=q).next_back() {
        Some((&h, &(0, _))) if h == q => Ok(()),
        Some((&h, &(o, _))) if h == q => Err(FreeError::WrongOrder { pfn: p, order: 0, actual: o }),
        Some((&h, &(o, _))) if q < h + (1 << o) => Err(FreeError::InsideBlock { pfn: p, head: Pfn::new(h) }),
        // Free memory: in the buddy, on a per-CPU list or in a front cache.
        _ => Err(FreeError::DoubleFree { pfn: p }),
    }
}

/// The sequential meaning of an order-0 bulk free of `entries` (None: a hole,
/// skipped): the rejections, in input order, with `model` updated as the
/// frees happen. `pinned` overrides the answer for pages held in a state that
/// forbids freeing (locked, under writeback).
fn simulate(
    a: &PageAllocator,
    model: &mut Model,
    entries: &[Option<Pfn>],
    pinned: &dyn Fn(Pfn) -> Option<FreeError>,
) -> Vec<(usize, FreeError)> {
    let mut rejected = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Some(p) = *e else {
            continue;
        };
        match pinned(p).map_or_else(|| expect_free(a, model, p), Err) {
            Ok(()) => {
                model.remove(&p.as_u64());
            }
            Err(e) => rejected.push((i, e)),
        }
    }
    rejected
}

fn no_pins(_: Pfn) -> Option<FreeError> {
    None
}

/// One bulk free (`free`, of `entries` as slots: None is a hole), checked
/// against [`simulate`] and the counters; `what` names it in failures.
fn free_checked(
    a: &PageAllocator,
    model: &mut Model,
    entries: &[Option<Pfn>],
    pinned: &dyn Fn(Pfn) -> Option<FreeError>,
    what: &str,
    free: impl FnOnce() -> Result<(), BulkFreeError>,
) -> Vec<(usize, FreeError)> {
    let held = model.len();
    let expected = simulate(a, model, entries, pinned);
    let freed = (held - model.len()) as u64;
    let (ev, allocated) = (events(a), a.census().allocated);
    let got = match free() {
        Ok(()) => Vec::new(),
        Err(e) => {
            assert!(!e.rejected.is_empty(), "an error with nothing rejected");
            e.rejected
        }
    };
    assert_eq!(got, expected, "rejections of {what}");
    assert_eq!(a.census().allocated, allocated - freed, "pages freed by {what}");
    assert_eq!(events(a), Events { alloc: ev.alloc, free: ev.free + freed }, "pgfree after {what}");
    got
}

/// `free_pages_bulk(entries)`, checked by [`free_checked`].
fn bulk_free_checked(
    a: &PageAllocator,
    model: &mut Model,
    entries: &[Pfn],
    pinned: &dyn Fn(Pfn) -> Option<FreeError>,
) -> Vec<(usize, FreeError)> {
    let as_slots: Vec<Option<Pfn>> = entries.iter().map(|&p| Some(p)).collect();
    let what = format!("a bulk free of {} entries", entries.len());
    free_checked(a, model, &as_slots, pinned, &what, || a.free_pages_bulk(entries))
}

/// `free_pages_bulk_slots(slots)`, checked by [`free_checked`]; also: freed
/// and empty slots end empty, rejected ones keep their pfn.
fn slots_free_checked(
    a: &PageAllocator,
    model: &mut Model,
    slots: &mut [Option<Pfn>],
    pinned: &dyn Fn(Pfn) -> Option<FreeError>,
) -> Vec<(usize, FreeError)> {
    let before = slots.to_vec();
    let what = format!("a slots free of {} slots", before.len());
    let got = free_checked(a, model, &before, pinned, &what, || a.free_pages_bulk_slots(slots));
    let kept: HashSet<usize> = got.iter().map(|r| r.0).collect();
    for (i, (s, b)) in slots.iter().zip(&before).enumerate() {
        if kept.contains(&i) {
            assert_eq!(s, b, "rejected slot {i} changed");
        } else {
            assert_eq!(*s, None, "slot {i} (was {b:?}) not emptied");
        }
    }
    got
}

/// Pageblocks holding the caller's pages of more than one type, by the model;
/// `fragmentation().mixed` reads the same off the descriptors' private words,
/// so the two agree only if every allocated head carries the type it was
/// allocated for.
fn model_mixed(model: &Model) -> u64 {
    let mut per_block: BTreeMap<u64, u32> = BTreeMap::new();
    for (&p, &(_, mt)) in model {
        *per_block.entry(p / PAGEBLOCK_PAGES).or_default() |= 1 << mt.index();
    }
    per_block.values().filter(|m| m.count_ones() > 1).count() as u64
}

fn check_against_model(a: &PageAllocator, model: &Model) {
    a.check_invariants().unwrap();
    let pages: u64 = model.values().map(|&(o, _)| 1u64 << o).sum();
    assert_eq!(a.census().allocated, pages, "allocated pages differ from the model");
    assert_eq!(a.fragmentation().mixed, model_mixed(model), "an allocated head has the wrong type in private");
}

fn add_fresh(model: &mut Model, pages: &[Pfn], gfp: Gfp) {
    for p in pages {
        let old = model.insert(p.as_u64(), (0, gfp.migratetype()));
        assert!(old.is_none(), "{p:?} handed out while already allocated");
    }
}

/// Free everything the model holds (order-0 pages in bulk, the rest singly).
fn free_model(a: &PageAllocator, model: &mut Model) {
    let zeros: Vec<Pfn> = model.iter().filter(|(_, &(o, _))| o == 0).map(|(&p, _)| Pfn::new(p)).collect();
    for chunk in zeros.chunks(100) {
        assert!(bulk_free_checked(a, model, chunk, &no_pins).is_empty());
    }
    for (p, (o, _)) in std::mem::take(model) {
        a.free_pages(Pfn::new(p), o).unwrap();
    }
}

// ------------------------------------------- 1. small frees, types and zones

#[test]
fn small_bulk_frees_mixing_types_and_zones_free_each_page_once() {
    let cfg = Config::small(64 << 20).movable_zone_bytes(8 << 20);
    let a = PageAllocator::new(cfg).unwrap();
    let spans = zone_spans(&a);
    assert_eq!(spans.len(), 2, "a Normal and a Movable zone");
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(1);
    // Types interleaved until Movable-type pages come from both zones (the
    // Movable zone fills first).
    let mut movable_in = [0usize; 2];
    let mut i = 0;
    while movable_in[0] < 200 {
        let gfp = TYPES[i % 3];
        let p = a.alloc_pages(gfp, 0).unwrap();
        if gfp == Gfp::MOVABLE {
            movable_in[zone_index(&spans, p)] += 1;
        }
        add_fresh(&mut model, &[p], gfp);
        i += 1;
    }
    assert!(movable_in[1] > 1000, "{movable_in:?}");
    check_against_model(&a, &model);
    // Only the interesting part of the Movable zone takes part in the frees;
    // the rest stays allocated so Movable allocations keep spilling over.
    let by_kind = |model: &Model, kind: usize| -> Vec<Pfn> {
        model
            .iter()
            .filter(|(&p, &(_, mt))| {
                let z = zone_index(&spans, Pfn::new(p));
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
                assert_eq!(a.alloc_pages_bulk_list(gfp, n, &mut v), n);
                add_fresh(&mut model, &v, gfp);
            }
        }
        // Pick up to 32 entries, several kinds; arranged at random, in runs
        // of one kind, or alternating so every entry switches stacks or zones.
        let mut pools: Vec<Vec<Pfn>> = (0..4).map(|k| by_kind(&model, k)).collect();
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
            let got = bulk_free_checked(&a, &mut model, &picked, &no_pins);
            assert!(got.is_empty(), "{got:?}");
        } else {
            // Holes among the entries, the whole call still at most 32 slots.
            let mut slots: Vec<Option<Pfn>> = picked.iter().map(|&p| Some(p)).collect();
            while slots.len() < 32 && rng.gen_bool(0.3) {
                let at = rng.gen_range(0..=slots.len());
                slots.insert(at, None);
            }
            let got = slots_free_checked(&a, &mut model, &mut slots, &no_pins);
            assert!(got.is_empty(), "{got:?}");
        }
        // A second free of each is rejected, every entry, in order.
        let again = bulk_free_checked(&a, &mut model, &picked, &no_pins);
        assert_eq!(again.len(), picked.len());
        assert!(again.iter().all(|(_, e)| matches!(e, FreeError::DoubleFree { .. })));
        check_against_model(&a, &model);
        if round % 50 == 49 {
            a.drain_all_pages();
            check_against_model(&a, &model);
        }
    }
    assert!(zone_kinds.iter().all(|&n| n > 150), "every kind took part: {zone_kinds:?}");
    free_model(&a, &mut model);
    whole(&a);
}

#[test]
fn small_bulk_free_of_one_type_from_two_zones_in_one_call() {
    // The Movable front stack adopts the zone of the first page it takes; a
    // Movable-type page of the other zone in the same call must still be freed.
    let a = PageAllocator::new(Config::small(16 << 20).movable_zone_bytes(4 << 20)).unwrap();
    let spans = zone_spans(&a);
    let mut model = Model::new();
    let mut by_zone = [Vec::new(), Vec::new()];
    while by_zone[0].len() < 40 {
        let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
        add_fresh(&mut model, &[p], Gfp::MOVABLE);
        by_zone[zone_index(&spans, p)].push(p);
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
        a.drain_all_pages();
        assert!(bulk_free_checked(&a, &mut model, &entries, &no_pins).is_empty());
        let again = bulk_free_checked(&a, &mut model, &entries, &no_pins);
        assert_eq!(again.len(), 32);
        check_against_model(&a, &model);
        // And back: reallocate so the next pattern has pages in both zones.
        for _ in 0..32 {
            let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            add_fresh(&mut model, &[p], Gfp::MOVABLE);
            by_zone[zone_index(&spans, p)].push(p);
        }
        while by_zone[0].len() < 40 {
            let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            add_fresh(&mut model, &[p], Gfp::MOVABLE);
            by_zone[zone_index(&spans, p)].push(p);
        }
    }
    free_model(&a, &mut model);
    whole(&a);
}

// ----------------------------------------------- 2. a front stack overflows

/// Pages the front stacks flush to the per-CPU lists for a sequence of
/// order-0 frees of one zone's pages of types `types` (stacks start empty):
/// a stack holds 64; a page coming to a full one first moves 32 to the lists.
fn predicted_flush(types: impl IntoIterator<Item = usize>) -> u64 {
    let (mut len, mut flushed) = ([0u32; 3], 0u64);
    for t in types {
        if len[t] == 64 {
            flushed += 32;
            len[t] = 32;
        }
        len[t] += 1;
    }
    flushed
}

#[test]
fn small_bulk_frees_fill_a_front_stack_past_64_pages() {
    // One CPU slot and a pinned, large `high`: no per-CPU drain interferes
    // with the counts.
    let cfg = Config::small(64 << 20).nr_cpus(Some(1)).percpu_pagelist_high_fraction(8);
    let front = front_cache_on(&cfg);
    eprintln!("FRONT {front}");
    let a = PageAllocator::new(cfg).unwrap();
    assert!(a.pcp_report().iter().all(|r| r.high >= 1024));
    let mut model = Model::new();
    for prime in [0usize, 1, 2, 16, 31, 32, 33, 40, 47, 63, 64] {
        for (form, mixed) in [(0, false), (1, false), (2, false), (0, true), (1, true)] {
            // 16 pages of each type per call when mixed (M K M K ...), else Movable only.
            let gfps: Vec<Gfp> = (0..prime + 96)
                .map(|i| if mixed && i >= prime && i % 2 == 1 { Gfp::KERNEL } else { Gfp::MOVABLE })
                .collect();
            let mut pages = Vec::new();
            for g in &gfps {
                let p = a.alloc_pages(*g, 0).unwrap();
                add_fresh(&mut model, &[p], *g);
                pages.push(p);
            }
            a.drain_all_pages();
            let free0 = a.nr_free_pages();
            let c0 = a.census();
            assert_eq!(c0.pcp, 0);
            for &p in &pages[..prime] {
                a.free_pages(p, 0).unwrap();
                model.remove(&p.as_u64());
            }
            for call in 0..3 {
                let range = prime + 32 * call..prime + 32 * (call + 1);
                let batch = &pages[range.clone()];
                match form {
                    0 => assert!(bulk_free_checked(&a, &mut model, batch, &no_pins).is_empty()),
                    1 => {
                        let mut slots: Vec<Option<Pfn>> = batch.iter().map(|&p| Some(p)).collect();
                        assert!(slots_free_checked(&a, &mut model, &mut slots, &no_pins).is_empty());
                    }
                    _ => {
                        for &p in batch {
                            a.free_pages(p, 0).unwrap();
                            model.remove(&p.as_u64());
                        }
                    }
                }
                let f = range.end as u64;
                let c = a.census();
                assert_eq!(c.pcp, f, "prime {prime} form {form} call {call}: freed pages not all parked");
                assert_eq!(a.nr_free_pages(), free0, "a page reached the buddy");
                let types = gfps[..range.end].iter().map(|g| g.migratetype().index());
                let want = if front { predicted_flush(types) } else { f };
                assert_eq!(
                    on_pcp_lists(&a),
                    want,
                    "prime {prime} form {form} mixed {mixed} call {call}: pages flushed to the lists"
                );
                check_against_model(&a, &model);
            }
            // Each of them once more: all rejected.
            let again = bulk_free_checked(&a, &mut model, &pages, &no_pins);
            assert_eq!(again.len(), pages.len());
            a.drain_all_pages();
            assert_eq!(a.nr_free_pages(), free0 + pages.len() as u64);
            check_against_model(&a, &model);
        }
    }
    free_model(&a, &mut model);
    whole(&a);
}

// ----------------------------------------- 3. large frees with every misuse

fn large_bulk_free_mixed_misuse(cfg: Config, n: usize, slots_form: bool, seed: u64) {
    let a = PageAllocator::new(cfg).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    // A whole pageblock of allocated order-0 pages, to isolate.
    let block = a.alloc_contig_pages(PAGEBLOCK_PAGES, Gfp::MOVABLE).unwrap();
    assert_eq!(block.as_u64() % PAGEBLOCK_PAGES, 0);
    let block_pages: Vec<Pfn> = (0..PAGEBLOCK_PAGES).map(|i| block.add(i)).collect();
    add_fresh(&mut model, &block_pages, Gfp::MOVABLE);
    // Plain pages of every type, singly and in bulk.
    let mut plain = Vec::new();
    for i in 0..n {
        let g = TYPES[i % 3];
        let p = if i % 2 == 0 {
            a.alloc_pages(g, 0).unwrap()
        } else {
            let mut v = Vec::new();
            assert_eq!(a.alloc_pages_bulk_list(g, 1, &mut v), 1);
            v[0]
        };
        add_fresh(&mut model, &[p], g);
        plain.push(p);
    }
    let locked = plain[1];
    a.lock_page(locked).unwrap();
    let writeback = plain[2];
    assert!(a.set_page_writeback(writeback).unwrap());
    let big = a.alloc_pages(Gfp::KERNEL, 2).unwrap();
    model.insert(big.as_u64(), (2, MigrateType::Unmovable));
    a.isolate_range(block, PAGEBLOCK_PAGES).unwrap();
    check_against_model(&a, &model);
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

    let pinned = |p: Pfn| match p {
        p if p == locked => Some(FreeError::Locked { pfn: p }),
        p if p == writeback => Some(FreeError::Writeback { pfn: p }),
        _ => None,
    };
    let free_before = a.nr_free_pages();
    let pcp_before = a.census().pcp;
    let rejected = if slots_form {
        let mut slots: Vec<Option<Pfn>> = entries.iter().map(|&p| Some(p)).collect();
        for _ in 0..n / 10 {
            let at = rng.gen_range(0..=slots.len());
            slots.insert(at, None);
        }
        slots_free_checked(&a, &mut model, &mut slots, &pinned)
    } else {
        bulk_free_checked(&a, &mut model, &entries, &pinned)
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
    assert_eq!(a.free_pages(locked, 0), Err(FreeError::Locked { pfn: locked }));
    assert_eq!(a.free_pages(writeback, 0), Err(FreeError::Writeback { pfn: writeback }));
    a.unlock_page(locked).unwrap();
    a.end_page_writeback(writeback).unwrap();
    assert!(bulk_free_checked(&a, &mut model, &[locked, writeback], &no_pins).is_empty());
    assert_eq!(a.free_pages(locked, 0), Err(FreeError::DoubleFree { pfn: locked }));
    check_against_model(&a, &model);
    // The rest of the isolated block, in one large free: the block is then
    // wholly free and isolated.
    let rest: Vec<Pfn> = block_pages.iter().filter(|p| model.contains_key(&p.as_u64())).copied().collect();
    assert!(bulk_free_checked(&a, &mut model, &rest, &no_pins).is_empty());
    assert!(a.test_pages_isolated(block, PAGEBLOCK_PAGES), "a page of the isolated block escaped");
    assert_eq!(a.census().isolated_free, PAGEBLOCK_PAGES);
    a.undo_isolate_range(block, PAGEBLOCK_PAGES).unwrap();
    check_against_model(&a, &model);
    free_model(&a, &mut model);
    whole(&a);
}

#[test]
fn large_bulk_frees_with_duplicates_bad_pfns_locked_and_isolated_pages() {
    let configs = [
        Config::small(32 << 20),
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
    let a = PageAllocator::new(cfg).unwrap();
    let mut model = Model::new();
    while let Ok(p) = a.alloc_pages(Gfp::KERNEL, 0) {
        add_fresh(&mut model, &[p], Gfp::KERNEL);
    }
    // Free one aligned group of four in the middle of a block of Unmovable
    // pages: the free order-2 block the request below will find first.
    let group = (PAGEBLOCK_PAGES * 3 + 64..).step_by(4).find(|&q| (q..q + 4).all(|p| model.contains_key(&p))).unwrap();
    let four: Vec<Pfn> = (group..group + 4).map(Pfn::new).collect();
    assert!(bulk_free_checked(&a, &mut model, &four, &no_pins).is_empty());
    a.drain_all_pages();
    let big = a.alloc_pages(Gfp::ATOMIC, 2).unwrap();
    model.insert(big.as_u64(), (2, MigrateType::Unmovable));
    assert!(a.pagetypeinfo().zones[0].blocks[MigrateType::HighAtomic.index()] >= 1);
    let ha_block = big.as_u64() / PAGEBLOCK_PAGES;
    let (mut ha, mut other): (Vec<Pfn>, Vec<Pfn>) = model
        .iter()
        .filter(|(_, &(o, _))| o == 0)
        .map(|(&p, _)| Pfn::new(p))
        .partition(|p| p.as_u64() / PAGEBLOCK_PAGES == ha_block);
    assert!(ha.len() >= 40, "only {} order-0 pages in the HighAtomic block", ha.len());
    check_against_model(&a, &model);
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
        assert!(bulk_free_checked(&a, &mut model, &entries, &no_pins).is_empty());
        assert_eq!(a.nr_free_pages() - free0, n_ha as u64, "HighAtomic pages not freed to the buddy");
        assert_eq!(a.census().pcp - pcp0, n_other as u64);
        check_against_model(&a, &model);
    }
    free_model(&a, &mut model);
    whole(&a);
}

// ---------------------------------------------------- 4. array allocation

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
    let a = PageAllocator::new(cfg).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let mut model = Model::new();
    // Pages for the populated slots.
    let mut pool = Vec::new();
    assert_eq!(a.alloc_pages_bulk_list(Gfp::RECLAIMABLE, 150, &mut pool), 150);
    add_fresh(&mut model, &pool, Gfp::RECLAIMABLE);
    let junk = Pfn::MAX;
    let mut iteration = 0u64;
    for len in (1..=40usize).chain(100..=140) {
        for kind in 0..11 {
            iteration += 1;
            let gfp =
                TYPES[(iteration % 3) as usize] | if iteration.is_multiple_of(13) { Gfp::ZERO } else { Gfp::empty() };
            // Leave 0, a few or many pages in this thread's front stack.
            match iteration % 4 {
                0 => a.drain_all_pages(),
                1 => {
                    let mut v = Vec::new();
                    a.alloc_pages_bulk_list(gfp, rng.gen_range(1..=12), &mut v);
                    add_fresh(&mut model, &v, gfp);
                    assert!(bulk_free_checked(&a, &mut model, &v, &no_pins).is_empty());
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
            let n = a.alloc_pages_bulk(gfp, &mut slots);
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
            add_fresh(&mut model, &fresh, gfp);
            assert_eq!(events(&a).alloc, ev.alloc + holes as u64, "pgalloc after filling {holes} holes");
            check_against_model(&a, &model);
            // Empty the array; the junk entries are rejected and stay, the
            // pool pages are freed (and reallocated below).
            let mut freeing = slots.clone();
            let rejected = slots_free_checked(&a, &mut model, &mut freeing, &no_pins);
            let junk_at: Vec<usize> =
                before.iter().enumerate().filter(|(_, s)| **s == Some(junk)).map(|(i, _)| i).collect();
            assert_eq!(
                rejected.iter().map(|r| r.0).collect::<Vec<_>>(),
                junk_at,
                "len {len} kind {kind} {rejected:?} {before:?}"
            );
            // Each of the freed pages once more: all rejected.
            let freed: Vec<Pfn> = slots.iter().flatten().copied().filter(|&p| p != junk).collect();
            let again = bulk_free_checked(&a, &mut model, &freed, &no_pins);
            assert_eq!(again.len(), freed.len());
            // Replace the pool pages just freed.
            let gone: Vec<usize> = (0..pool.len()).filter(|&i| !model.contains_key(&pool[i].as_u64())).collect();
            for i in gone {
                pool[i] = a.alloc_pages(Gfp::RECLAIMABLE, 0).unwrap();
                add_fresh(&mut model, &[pool[i]], Gfp::RECLAIMABLE);
            }
            check_against_model(&a, &model);
        }
    }
    free_model(&a, &mut model);
    whole(&a);
}

#[test]
fn array_bulk_allocation_past_the_end_of_memory_writes_nothing_after_the_first_hole() {
    for len in [3usize, 20, 33, 64, 140] {
        let a = PageAllocator::new(Config::small(4 << 20).min_free_kbytes(Some(0))).unwrap();
        let mut model = Model::new();
        // Take all but `left` pages.
        let left = (len / 2) as u64;
        let mut hog = Vec::new();
        while a.nr_free_pages() + a.census().pcp > left {
            let mut v = Vec::new();
            let want = (a.nr_free_pages() + a.census().pcp - left).min(100) as usize;
            if a.alloc_pages_bulk_list(Gfp::MOVABLE, want, &mut v) == 0 {
                break;
            }
            hog.extend_from_slice(&v);
        }
        add_fresh(&mut model, &hog, Gfp::MOVABLE);
        let marker = hog.pop().unwrap();
        let mut slots: Vec<Option<Pfn>> = (0..len).map(|i| (i % 3 == 1).then_some(marker)).collect();
        let before = slots.clone();
        let n = a.alloc_pages_bulk(Gfp::MOVABLE, &mut slots);
        assert_eq!(n, slots.iter().take_while(|s| s.is_some()).count());
        assert!(n < len, "len {len}: more holes than free pages, yet all filled");
        for (s, b) in slots[n..].iter().zip(&before[n..]) {
            assert_eq!(s, b, "a slot past the first hole left was written");
        }
        let fresh: Vec<Pfn> = slots.iter().zip(&before).filter(|(_, b)| b.is_none()).filter_map(|(s, _)| *s).collect();
        add_fresh(&mut model, &fresh, Gfp::MOVABLE);
        check_against_model(&a, &model);
        free_model(&a, &mut model);
        whole(&a);
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
            let a = PageAllocator::new(cfg.clone()).unwrap();
            let mut model = Model::new();
            // Movable pages freed one by one fill the lists towards `high`;
            // a Reclaimable allocation's refill then tops them up to it.
            let mut v = Vec::new();
            a.alloc_pages_bulk_list(Gfp::MOVABLE, 160, &mut v);
            for p in v.drain(held_back..) {
                a.free_pages(p, 0).unwrap();
            }
            add_fresh(&mut model, &v, Gfp::MOVABLE);
            let r = a.alloc_pages(Gfp::RECLAIMABLE, 0).unwrap();
            add_fresh(&mut model, &[r], Gfp::RECLAIMABLE);
            let marker = Pfn::new(u64::MAX >> 1);
            let mut slots: Vec<Option<Pfn>> = vec![None; holes];
            slots.extend([Some(marker); 3]);
            let n = a.alloc_pages_bulk(Gfp::KERNEL, &mut slots);
            assert_eq!(n, slots.len(), "held back {held_back}, {holes} holes");
            assert!(slots[holes..].iter().all(|s| *s == Some(marker)), "a populated slot was written");
            for r in a.pcp_report() {
                assert!(
                    r.count <= r.high,
                    "held back {held_back}, {holes} holes: cpu {} zone {} has {} pages over high {}",
                    r.cpu,
                    r.zone,
                    r.count,
                    r.high
                );
            }
            let fresh: Vec<Pfn> = slots[..holes].iter().map(|s| s.unwrap()).collect();
            add_fresh(&mut model, &fresh, Gfp::KERNEL);
            check_against_model(&a, &model);
            free_model(&a, &mut model);
            whole(&a);
        }
    }
}

// ------------------------------------------------------ 5. random sequences

#[derive(Debug, Clone)]
enum Op {
    Alloc { ty: u8, order: u32 },
    Free { pick: usize },
    BadFree { pick: u64 },
    ListAlloc { ty: u8, n: usize },
    ListFree { n: usize, seed: u64 },
    ArrayAlloc { ty: u8, len: usize, seed: u64 },
    SlotsFree { len: usize, seed: u64 },
    Drain { all: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..5, prop::sample::select(vec![0u32, 0, 0, 1, 3])).prop_map(|(ty, order)| Op::Alloc { ty, order }),
        2 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => any::<u64>().prop_map(|pick| Op::BadFree { pick }),
        3 => (0u8..5, 0usize..150).prop_map(|(ty, n)| Op::ListAlloc { ty, n }),
        3 => (0usize..150, any::<u64>()).prop_map(|(n, seed)| Op::ListFree { n, seed }),
        3 => (0u8..5, 0usize..150, any::<u64>()).prop_map(|(ty, len, seed)| Op::ArrayAlloc { ty, len, seed }),
        3 => (0usize..150, any::<u64>()).prop_map(|(len, seed)| Op::SlotsFree { len, seed }),
        1 => any::<bool>().prop_map(|all| Op::Drain { all }),
    ]
}

fn gfp_of(ty: u8) -> Gfp {
    match ty {
        0 => Gfp::KERNEL,
        1 => Gfp::MOVABLE,
        2 => Gfp::RECLAIMABLE,
        3 => Gfp::MOVABLE | Gfp::ZERO,
        _ => Gfp::ATOMIC,
    }
}

fn config_of(c: u8) -> Config {
    match c {
        0 => Config::small(32 << 20),
        1 => Config::small(32 << 20).movable_zone_bytes(8 << 20),
        2 => Config::small(32 << 20).nodes(2).movable_zone_bytes(4 << 20),
        3 => Config::small(32 << 20).front_cache(false),
        4 => Config::small(32 << 20).page_lock_waiters_bit(false),
        _ => Config::small(32 << 20).pcp_lists(false),
    }
}

/// Entries for a bulk free: mostly the model's order-0 pages, with now and
/// then a duplicate, a head of a larger block, a pfn inside one, a free pfn
/// or one out of range.
fn bulk_entries(a: &PageAllocator, model: &Model, n: usize, rng: &mut StdRng) -> Vec<Pfn> {
    let mut zeros: Vec<Pfn> = model.iter().filter(|(_, &(o, _))| o == 0).map(|(&p, _)| Pfn::new(p)).collect();
    zeros.shuffle(rng);
    let bigs: Vec<(u64, u32)> = model.iter().filter(|(_, &(o, _))| o > 0).map(|(&p, &(o, _))| (p, o)).collect();
    let junk_rate = if rng.gen_bool(0.5) { 0.0 } else { rng.gen_range(0.0..0.2) };
    let mut out: Vec<Pfn> = Vec::with_capacity(n);
    for _ in 0..n {
        if rng.gen_bool(junk_rate) || zeros.is_empty() {
            out.push(match rng.gen_range(0..5) {
                0 if !out.is_empty() => out[rng.gen_range(0..out.len())],
                1 if !bigs.is_empty() => Pfn::new(bigs[rng.gen_range(0..bigs.len())].0),
                2 if !bigs.is_empty() => {
                    let (h, o) = bigs[rng.gen_range(0..bigs.len())];
                    Pfn::new(h + rng.gen_range(1..1u64 << o))
                }
                3 => Pfn::new(a.nr_pages() + rng.gen_range(0..3)),
                _ => Pfn::new(rng.gen_range(0..a.nr_pages())),
            });
        } else {
            out.push(zeros.pop().unwrap());
        }
    }
    out
}

fn run_ops(cfg: Config, ops: &[Op]) {
    let a = PageAllocator::new(cfg).unwrap();
    let managed = a.managed_pages();
    let mut model = Model::new();
    let held = |model: &Model| -> u64 { model.values().map(|&(o, _)| 1u64 << o).sum() };
    // Failures are fine only with a fair part of memory held.
    let short = |model: &Model| held(model) > managed / 4;
    for op in ops {
        let ev = events(&a);
        let pages_before = held(&model);
        match *op {
            Op::Alloc { ty, order } => match a.alloc_pages(gfp_of(ty), order) {
                Ok(p) => {
                    assert_eq!(p.as_u64() % (1 << order), 0);
                    let end = p.as_u64() + (1 << order);
                    if let Some((&h, &(o, _))) = model.range(..end).next_back() {
                        assert!(h + (1 << o) <= p.as_u64(), "{p:?} overlaps a held block");
                    }
                    model.insert(p.as_u64(), (order, gfp_of(ty).migratetype()));
                }
                Err(e) => assert!(short(&model), "{e} with {} pages held", held(&model)),
            },
            Op::Free { pick } => {
                if let Some((&h, &(o, _))) = model.iter().nth(pick % model.len().max(1)) {
                    a.free_pages(Pfn::new(h), o).unwrap();
                    model.remove(&h);
                }
            }
            Op::BadFree { pick } => {
                let mut p = pick % (a.nr_pages() + 4);
                while model.get(&p).is_some_and(|&(o, _)| o == 0) {
                    p = (p + 1) % a.nr_pages();
                }
                let want = expect_free(&a, &model, Pfn::new(p)).unwrap_err();
                assert_eq!(a.free_pages(Pfn::new(p), 0), Err(want));
            }
            Op::ListAlloc { ty, n } => {
                let mut v = vec![Pfn::new(7)];
                let got = a.alloc_pages_bulk_list(gfp_of(ty), n, &mut v);
                assert_eq!(v[0], Pfn::new(7), "the list form overwrote an existing entry");
                assert_eq!(v.len(), 1 + got);
                assert!(got == n || short(&model), "{got} of {n} with {} pages held", held(&model));
                add_fresh(&mut model, &v[1..], gfp_of(ty));
            }
            Op::ListFree { n, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let entries = bulk_entries(&a, &model, n, &mut rng);
                bulk_free_checked(&a, &mut model, &entries, &no_pins);
            }
            Op::ArrayAlloc { ty, len, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let density = rng.gen_range(0.0..1.0);
                let held_pfns: Vec<u64> = model.keys().copied().collect();
                let mut slots: Vec<Option<Pfn>> = (0..len)
                    .map(|_| {
                        rng.gen_bool(density).then(|| match held_pfns.choose(&mut rng) {
                            Some(&p) if rng.gen_bool(0.8) => Pfn::new(p),
                            _ => Pfn::MAX,
                        })
                    })
                    .collect();
                let before = slots.clone();
                let n = a.alloc_pages_bulk(gfp_of(ty), &mut slots);
                assert_eq!(n, slots.iter().take_while(|s| s.is_some()).count());
                assert!(n == len || short(&model), "{n} of {len} with {} pages held", held(&model));
                for (s, b) in slots.iter().zip(&before) {
                    if b.is_some() {
                        assert_eq!(s, b, "a populated slot changed");
                    }
                }
                for (s, b) in slots[n..].iter().zip(&before[n..]) {
                    assert_eq!(s, b, "a slot past the first hole left was written");
                }
                let fresh: Vec<Pfn> =
                    slots.iter().zip(&before).filter(|(_, b)| b.is_none()).filter_map(|(s, _)| *s).collect();
                add_fresh(&mut model, &fresh, gfp_of(ty));
            }
            Op::SlotsFree { len, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut slots: Vec<Option<Pfn>> =
                    bulk_entries(&a, &model, len, &mut rng).into_iter().map(Some).collect();
                for s in slots.iter_mut() {
                    if rng.gen_bool(0.15) {
                        *s = None;
                    }
                }
                slots_free_checked(&a, &mut model, &mut slots, &no_pins);
            }
            Op::Drain { all } => {
                if all {
                    a.drain_all_pages();
                } else {
                    a.drain_local_pages();
                }
            }
        }
        // Every page handed out is counted as allocated, every page freed as freed.
        let pages_after = held(&model);
        let e = events(&a);
        // (No op both allocates and frees.)
        assert_eq!(e.alloc - ev.alloc, pages_after.saturating_sub(pages_before), "pgalloc after {op:?}");
        assert_eq!(e.free - ev.free, pages_before.saturating_sub(pages_after), "pgfree after {op:?}");
        check_against_model(&a, &model);
    }
    free_model(&a, &mut model);
    whole(&a);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_fast_path_sequences_match_the_model(cfg in 0u8..6, ops in prop::collection::vec(op(), 1..40)) {
        run_ops(config_of(cfg), &ops);
    }
}

// ------------------------------------------------------------- 6. threads

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
