//! Randomized operation sequences against a reference model of what is allocated.
//!
//! The model is a map from head pfn to order. After every step the allocator's
//! own invariants must hold and its answers must agree with the model: a free of
//! a block the model holds succeeds, a free of anything else fails with a typed
//! error and changes nothing. At the end everything is freed and the arena must be
//! whole again (only max-order blocks).

use pagealloc::{Config, FreeError, Gfp, PageAllocator, Pfn, MAX_ORDER, PAGEBLOCK_ORDER};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Alloc { order: u32, gfp: u8 },
    Free { pick: usize },
    BadFree { pick: usize, kind: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..=MAX_ORDER, 0u8..4).prop_map(|(order, gfp)| Op::Alloc { order, gfp }),
        4 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => (any::<usize>(), 0u8..4).prop_map(|(pick, kind)| Op::BadFree { pick, kind }),
    ]
}

fn gfp(code: u8) -> Gfp {
    match code {
        0 => Gfp::KERNEL,
        1 => Gfp::MOVABLE,
        2 => Gfp::RECLAIMABLE,
        _ => Gfp::ATOMIC,
    }
}

/// Runs one sequence; returns the allocator for end-of-run checks.
fn run(cfg: Config, ops: &[Op]) -> PageAllocator {
    let a = PageAllocator::new(cfg).unwrap();
    let mut model: BTreeMap<u64, u32> = BTreeMap::new();
    for op in ops {
        match *op {
            Op::Alloc { order, gfp: g } => match a.alloc_pages(gfp(g), order) {
                Ok(pfn) => {
                    assert_eq!(pfn.as_u64() % (1 << order), 0, "misaligned block {pfn:?} order {order}");
                    // No overlap with anything the model holds.
                    let end = pfn.as_u64() + (1 << order);
                    if let Some((&h, &o)) = model.range(..end).next_back() {
                        assert!(h + (1 << o) <= pfn.as_u64(), "{pfn:?} overlaps block {h} order {o}");
                    }
                    model.insert(pfn.as_u64(), order);
                }
                Err(e) if order == 0 => {
                    // Higher orders may fail to fragmentation; a single page only when memory is short.
                    let held: u64 = model.values().map(|o| 1u64 << o).sum();
                    assert!(held > a.managed_pages() / 2, "allocation failed with little in use: {e}");
                }
                Err(_) => {}
            },
            Op::Free { pick } => {
                if model.is_empty() {
                    continue;
                }
                let (&h, &o) = model.iter().nth(pick % model.len()).unwrap();
                a.free_pages(Pfn::new(h), o).unwrap();
                model.remove(&h);
            }
            Op::BadFree { pick, kind } => {
                let before = a.nr_free_pages();
                let err = if model.is_empty() || kind == 0 {
                    // A pfn the model does not hold as a head.
                    let mut p = (pick as u64) % a.nr_pages();
                    while model.contains_key(&p) {
                        p = (p + 1) % a.nr_pages();
                    }
                    a.free_pages(Pfn::new(p), 0).expect_err("free of a pfn nobody holds as a head")
                } else {
                    let (&h, &o) = model.iter().nth(pick % model.len()).unwrap();
                    match kind {
                        1 => a.free_pages(Pfn::new(h), (o + 1) % (MAX_ORDER + 1)).expect_err("wrong order"),
                        2 if o > 0 => a.free_pages(Pfn::new(h + 1), 0).expect_err("inside block"),
                        _ => a.free_pages(Pfn::new(h), MAX_ORDER + 1).expect_err("invalid order"),
                    }
                };
                assert!(err.pfn().as_u64() < (1 << 40));
                assert!(!matches!(err, FreeError::Locked { .. } | FreeError::Writeback { .. }));
                assert_eq!(a.nr_free_pages(), before, "a rejected free changed state: {err}");
            }
        }
        a.check_invariants().unwrap_or_else(|e| panic!("after {op:?}: {e}"));
    }
    for (&h, &o) in &model {
        a.free_pages(Pfn::new(h), o).unwrap();
    }
    a
}

fn assert_whole(a: &PageAllocator) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    assert!(a.pcp_report().iter().all(|r| r.count == 0), "drain_all_pages left pages on per-CPU lists");
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    let fr = a.fragmentation();
    // Below pageblock order everything merged; at pageblock order two halves may
    // stay apart only across a type boundary (a HighAtomic reserve outlives its
    // allocations, as in the kernel), which check_invariants has verified.
    for (order, n) in fr.free_blocks.iter().enumerate().take(PAGEBLOCK_ORDER as usize) {
        assert_eq!(*n, 0, "order-{order} blocks left after freeing everything: not fully coalesced");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_match_the_model(ops in prop::collection::vec(op(), 1..300)) {
        let a = run(Config::small(16 << 20), &ops);
        assert_whole(&a);
    }

    #[test]
    fn random_sequences_two_nodes_and_movable_zone(ops in prop::collection::vec(op(), 1..200)) {
        let cfg = Config::small(32 << 20).nodes(2).movable_zone_bytes(8 << 20);
        let a = run(cfg, &ops);
        assert_whole(&a);
    }
}
