//! Edges of the thread front cache under order-0 frees, through the public
//! API and the reference model (`tests/refmodel/`): a front stack holds
//! `STACK_CAP` (128) pages; a page coming to a full one first moves 32 to the per-CPU lists, in
//! the middle of a bulk free (`front_give_fast`) as in a single free. Every
//! free is checked by the model (rejections, census, pgfree), the model's
//! checks run after each call, and at the end the allocator must be whole.

use crate::refmodel;

use pagealloc::ffi::abi::STACK_CAP;
use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use refmodel::Model;

/// Pages on per-CPU lists (front caches not included).
fn on_pcp_lists(a: &PageAllocator) -> u64 {
    a.stats().pcp_report().iter().map(|r| r.count as u64).sum()
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

/// Pages the front stacks flush to the per-CPU lists for a sequence of
/// order-0 frees of one zone's pages of types `types` (stacks start empty):
/// a stack holds `STACK_CAP`; a page coming to a full one first moves 32 to the lists.
fn predicted_flush(types: impl IntoIterator<Item = usize>) -> u64 {
    let (mut len, mut flushed) = ([0usize; 3], 0u64);
    for t in types {
        if len[t] == STACK_CAP {
            flushed += 32;
            len[t] -= 32;
        }
        len[t] += 1;
    }
    flushed
}

#[test]
fn small_bulk_frees_fill_a_front_stack_past_its_capacity() {
    // One CPU slot and a pinned, large `high`: no per-CPU drain interferes
    // with the counts.
    let cfg = Config::small(64 << 20).nr_cpus(Some(1)).percpu_pagelist_high_fraction(8);
    let front = front_cache_on(&cfg);
    eprintln!("FRONT {front}");
    let mut m = Model::new(cfg).unwrap();
    let a = m.a().clone();
    assert!(a.stats().pcp_report().iter().all(|r| r.high >= 1024));
    // Primed with up to a full stack, then 96 more frees in three calls:
    // every case from an empty stack to one that overflows in each call.
    for prime in [
        0usize,
        1,
        2,
        16,
        31,
        32,
        33,
        40,
        47,
        63,
        64,
        STACK_CAP - 97,
        STACK_CAP - 64,
        STACK_CAP - 33,
        STACK_CAP - 1,
        STACK_CAP,
    ] {
        for (form, mixed) in [(0, false), (1, false), (2, false), (0, true), (1, true)] {
            // 16 pages of each type per call when mixed (M K M K ...), else Movable only.
            let gfps: Vec<Gfp> = (0..prime + 96)
                .map(|i| if mixed && i >= prime && i % 2 == 1 { Gfp::KERNEL } else { Gfp::MOVABLE })
                .collect();
            let mut pages = Vec::new();
            for g in &gfps {
                pages.push(m.alloc(*g, 0, None).unwrap());
            }
            a.drain_all_pages();
            let free0 = a.nr_free_pages();
            let c0 = a.census();
            assert_eq!(c0.pcp, 0);
            for &p in &pages[..prime] {
                m.free(p.as_u64(), 0).unwrap();
            }
            for call in 0..3 {
                let range = prime + 32 * call..prime + 32 * (call + 1);
                let batch = &pages[range.clone()];
                match form {
                    0 => assert!(m.bulk_free(batch).is_empty()),
                    1 => {
                        let mut slots: Vec<Option<Pfn>> = batch.iter().map(|&p| Some(p)).collect();
                        assert!(m.slots_free(&mut slots).is_empty());
                    }
                    _ => {
                        for &p in batch {
                            m.free(p.as_u64(), 0).unwrap();
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
                m.check(&format!("prime {prime} form {form} mixed {mixed} call {call}"));
            }
            // Each of them once more: all rejected.
            let again = m.bulk_free(&pages);
            assert_eq!(again.len(), pages.len());
            a.drain_all_pages();
            assert_eq!(a.nr_free_pages(), free0 + pages.len() as u64);
            m.check(&format!("prime {prime} form {form} mixed {mixed}, drained"));
        }
    }
    m.finish();
}
