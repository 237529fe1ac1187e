//! Randomized sequences of order-0 fast-path calls (single and bulk
//! allocations and frees, array and list forms, drains) over six
//! configurations, run through the reference model (`tests/refmodel/`). Bulk
//! frees carry now and then a duplicate, a head or the inside of a larger
//! block, a free pfn or one out of range: the model predicts the exact
//! rejections. After every step the model's checks run (`check_invariants`,
//! census, mixed pageblocks, pgalloc/pgfree); at the end everything is freed
//! and the allocator must be whole. (These sequences were the proptest of
//! `fastpath_edges.rs`; its regression seeds are kept in
//! `bulk_sequences.proptest-regressions`, the strategy unchanged.)

use crate::refmodel;

use pagealloc::{Config, Gfp, Pfn};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use refmodel::{Drain, Model, Shortage};

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
        #[cfg(feature = "seed-variants")]
        4 => Config::small(32 << 20).page_lock_waiters_bit(false),
        _ => Config::small(32 << 20).pcp_lists(false),
    }
}

/// Entries for a bulk free: mostly the model's order-0 pages, with now and
/// then a duplicate, a head of a larger block, a pfn inside one, a free pfn
/// or one out of range.
fn bulk_entries(m: &Model, n: usize, rng: &mut StdRng) -> Vec<Pfn> {
    let mut zeros: Vec<Pfn> = m.order0_pages();
    zeros.shuffle(rng);
    let bigs: Vec<(u64, u32)> = m.blocks().iter().filter(|(_, b)| b.order > 0).map(|(&p, b)| (p, b.order)).collect();
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
                3 => Pfn::new(m.nr_pages() + rng.gen_range(0..3)),
                _ => Pfn::new(rng.gen_range(0..m.nr_pages())),
            });
        } else {
            out.push(zeros.pop().unwrap());
        }
    }
    out
}

fn run_ops(cfg: Config, ops: &[Op]) {
    // Any allocation may come back short only with a quarter of memory held.
    let mut m = Model::new(cfg).unwrap().shortage(Shortage::Quarter);
    for op in ops {
        match *op {
            Op::Alloc { ty, order } => {
                m.alloc(gfp_of(ty), order, None);
            }
            Op::Free { pick } => {
                let heads: Vec<u64> = m.blocks().keys().copied().collect();
                if !heads.is_empty() {
                    m.free_held(heads[pick % heads.len()]);
                }
            }
            Op::BadFree { pick } => {
                let mut p = pick % (m.nr_pages() + 4);
                while m.blocks().get(&p).is_some_and(|b| b.order == 0) {
                    p = (p + 1) % m.nr_pages();
                }
                m.free(p, 0).expect_err("a free of a pfn that is no held order-0 page");
            }
            Op::ListAlloc { ty, n } => {
                // An entry already there stays (the model checks it).
                let mut v = vec![Pfn::new(7)];
                m.bulk_list(gfp_of(ty), n, &mut v);
            }
            Op::ListFree { n, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let entries = bulk_entries(&m, n, &mut rng);
                m.bulk_free(&entries);
            }
            Op::ArrayAlloc { ty, len, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let density = rng.gen_range(0.0..1.0);
                let held_pfns: Vec<u64> = m.blocks().keys().copied().collect();
                let mut slots: Vec<Option<Pfn>> = (0..len)
                    .map(|_| {
                        rng.gen_bool(density).then(|| match held_pfns.choose(&mut rng) {
                            Some(&p) if rng.gen_bool(0.8) => Pfn::new(p),
                            _ => Pfn::MAX,
                        })
                    })
                    .collect();
                m.bulk_alloc(gfp_of(ty), &mut slots);
            }
            Op::SlotsFree { len, seed } => {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut slots: Vec<Option<Pfn>> = bulk_entries(&m, len, &mut rng).into_iter().map(Some).collect();
                for s in slots.iter_mut() {
                    if rng.gen_bool(0.15) {
                        *s = None;
                    }
                }
                m.slots_free(&mut slots);
            }
            Op::Drain { all } => m.drain(if all { Drain::All } else { Drain::Local }),
        }
        // Includes: every page handed out counted in pgalloc, every page freed in pgfree.
        m.check(&format!("{op:?}"));
    }
    m.finish();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_fast_path_sequences_match_the_model(cfg in 0u8..6, ops in prop::collection::vec(op(), 1..40)) {
        run_ops(config_of(cfg), &ops);
    }
}
