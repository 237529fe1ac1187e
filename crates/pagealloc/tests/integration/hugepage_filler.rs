//! The hugepage filler (issue 18, `Config::hugepage_filler`): per-CPU
//! refills take from the fullest pageblock with room. Its per-pageblock free
//! counts are checked by `check_invariants` against the free lists.

use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn, PAGEBLOCK_PAGES};
use std::collections::HashSet;

fn rng(x: &mut u64, n: usize) -> usize {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    (*x % n.max(1) as u64) as usize
}

/// Short- and long-lived pages churned, at several orders, with drains
/// between rounds: the counts agree with the lists at every check, and
/// conservation holds.
#[test]
fn counts_follow_churn_at_every_order() {
    let a = PageAllocator::new(Config::new().arena_bytes(16 << 20).backing(Backing::HugePages).page_reporting(false))
        .unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut live: Vec<(Pfn, u32)> = Vec::new();
    for round in 0..30 {
        for _ in 0..300 {
            let order = [0, 0, 0, 1, 2, 3, 9][rng(&mut x, 7)];
            if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, order) {
                live.push((p, order));
            }
        }
        for _ in 0..live.len() / 2 {
            let (p, o) = live.swap_remove(rng(&mut x, live.len()));
            a.free_pages(p, o).unwrap();
        }
        if round % 3 == 0 {
            a.drain_all_pages();
        }
        a.check_invariants().unwrap();
    }
    for (p, o) in live {
        a.free_pages(p, o).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// A pageblock nearly full and the rest of the arena free: after the per-CPU
/// caches are drained, the next refill fills the nearly full pageblock's
/// holes before it splits a wholly free pageblock (the filler off takes
/// the most recently freed blocks, here the other pageblock's).
#[test]
fn refills_fill_holes_in_used_pageblocks_first() {
    let cfg = Config::new().arena_bytes(8 << 20).backing(Backing::HugePages).page_reporting(false).front_cache(false);
    let a = PageAllocator::new(cfg).unwrap();
    let all: Vec<Pfn> = (0..a.managed_pages()).map_while(|_| a.alloc_pages(Gfp::MOVABLE, 0).ok()).collect();
    let block = |p: &Pfn| p.as_u64() / PAGEBLOCK_PAGES;
    let first = block(&all[0]);
    // Pageblock `first`: 8 pages freed (holes); every other page freed
    // afterwards, so the other pageblocks' blocks head the free lists.
    let (holes, rest): (Vec<Pfn>, Vec<Pfn>) =
        all.iter().partition(|p| block(p) == first && p.as_u64() % (PAGEBLOCK_PAGES / 8) == 0);
    let kept: Vec<Pfn> = rest.iter().filter(|p| block(p) == first).copied().collect();
    for p in &holes {
        a.free_pages(*p, 0).unwrap();
    }
    for p in rest.iter().filter(|p| block(p) != first) {
        a.free_pages(*p, 0).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let again: Vec<Pfn> = (0..8).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap()).collect();
    let got: HashSet<u64> = again.iter().map(|p| p.as_u64()).collect();
    let want: HashSet<u64> = holes.iter().map(|p| p.as_u64()).collect();
    assert_eq!(got, want, "the used pageblock's holes, before any free pageblock is split");
    a.free_pages_bulk(&again).unwrap();
    a.free_pages_bulk(&kept).unwrap();
    a.check_invariants().unwrap();
}
