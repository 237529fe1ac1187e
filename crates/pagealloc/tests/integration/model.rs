//! Randomized operation sequences run through the reference model
//! (`tests/refmodel/`): allocations of every order and type, frees of held
//! blocks, and frees the model knows must be refused (each with its exact
//! error, changing nothing). After every step the model's checks run
//! (`check_invariants`, census, conservation, pgalloc/pgfree, mixed
//! pageblocks); at the end everything is freed and the arena must be whole
//! again (only blocks of at least pageblock order).

use crate::refmodel;

use pagealloc::{Config, FreeError, Gfp, MAX_ORDER};
use proptest::prelude::*;
use refmodel::{Model, Shortage};

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

/// Runs one sequence through the model, then gives everything back.
fn run(cfg: Config, ops: &[Op]) {
    // A single page may fail only with more than half of memory allocated;
    // higher orders may fail to fragmentation.
    let mut m = Model::new(cfg).unwrap().shortage(Shortage::Half);
    for op in ops {
        let held: Vec<(u64, u32)> = m.blocks().iter().map(|(&h, b)| (h, b.order)).collect();
        match *op {
            Op::Alloc { order, gfp: g } => {
                m.alloc(gfp(g), order, None);
            }
            Op::Free { pick } => {
                if !held.is_empty() {
                    m.free_held(held[pick % held.len()].0);
                }
            }
            Op::BadFree { pick, kind } => {
                let (p, order) = if held.is_empty() || kind == 0 {
                    // A pfn the model does not hold as a head.
                    let mut p = (pick as u64) % m.nr_pages();
                    while m.blocks().contains_key(&p) {
                        p = (p + 1) % m.nr_pages();
                    }
                    (p, 0)
                } else {
                    let (h, o) = held[pick % held.len()];
                    match kind {
                        1 => (h, (o + 1) % (MAX_ORDER + 1)),
                        2 if o > 0 => (h + 1, 0),
                        _ => (h, MAX_ORDER + 1),
                    }
                };
                // The model predicts the exact error; a refused free changes nothing.
                let err = m.free(p, order).expect_err("a free the model refuses");
                assert!(err.pfn().as_u64() < (1 << 40));
                assert!(!matches!(err, FreeError::Locked { .. } | FreeError::Writeback { .. }));
            }
        }
        m.check(&format!("{op:?}"));
    }
    m.finish();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_match_the_model(ops in prop::collection::vec(op(), 1..300)) {
        run(Config::small(16 << 20), &ops);
    }

    #[test]
    fn random_sequences_two_nodes_and_movable_zone(ops in prop::collection::vec(op(), 1..200)) {
        let cfg = Config::small(32 << 20).nodes(2).movable_zone_bytes(8 << 20);
        run(cfg, &ops);
    }
}
