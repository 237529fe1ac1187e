//! Holes in the arena and memory given at run time (`Config::holes`,
//! `add_free_memory`), and freeing part of a contiguous range: what a
//! kernel's frame allocator needs at boot.

use pagealloc::{Config, ConfigError, FreeError, Gfp, PageAllocator, PageStateError, Pfn, MAX_ORDER};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::ops::Range;

const ARENA: u64 = 16 << 20; // 4096 pages, four order-10 blocks

fn holes() -> Vec<Range<u64>> {
    vec![100..300, 1024..2048, 4000..4096]
}

/// `ranges` as `Config::holes` takes them.
fn cfg_holes(ranges: &[Range<u64>]) -> Vec<(Pfn, u64)> {
    ranges.iter().map(|r| (Pfn::new(r.start), r.end.wrapping_sub(r.start))).collect()
}

fn in_holes(h: &[Range<u64>], p: u64, order: u32) -> bool {
    h.iter().any(|r| p + (1 << order) > r.start && p < r.end)
}

/// Every page back and the zones' identities whole, with `managed` pages.
fn whole(a: &PageAllocator, managed: u64) {
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.managed_pages(), managed);
    assert_eq!(a.nr_free_pages(), managed);
    let c = a.census();
    assert_eq!((c.free, c.pcp, c.allocated), (managed, 0, 0));
}

/// `r` cut into pieces of random lengths, in random order.
fn pieces(r: Range<u64>, rng: &mut StdRng) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut at = r.start;
    while at < r.end {
        let n = rng.gen_range(1..=(r.end - at).min(300));
        out.push(at..at + n);
        at += n;
    }
    out.shuffle(rng);
    out
}

#[test]
fn holes_are_never_handed_out_and_added_pages_merge() {
    // Abstract frames, and real memory with free page reporting at once.
    holes_round(Config::small(ARENA));
    holes_round(Config::new().arena_bytes(ARENA).page_reporting_delay_ms(0));
}

fn holes_round(cfg: Config) {
    let h = holes();
    let a = PageAllocator::new(cfg.holes(cfg_holes(&h))).unwrap();
    let out: u64 = h.iter().map(|r| r.end - r.start).sum();
    whole(&a, 4096 - out);
    // Everything the allocator has, taken: no block touches a hole.
    let mut got = Vec::new();
    for order in [0u32, 3, 0, 1] {
        while let Ok(p) = a.alloc_pages(Gfp::KERNEL, order) {
            assert!(!in_holes(&h, p.as_u64(), order), "{p:?} order {order} in a hole");
            got.push((p, order));
        }
    }
    for (p, o) in got {
        a.free_pages(p, o).unwrap();
    }
    a.compaction().compact_memory();
    whole(&a, 4096 - out);
    // The holes given back piece by piece, in random order.
    let mut rng = StdRng::seed_from_u64(7);
    let mut managed = 4096 - out;
    let mut all: Vec<Range<u64>> = h.iter().flat_map(|r| pieces(r.clone(), &mut rng)).collect();
    all.shuffle(&mut rng);
    for r in all {
        a.add_free_memory(Pfn::new(r.start), r.end - r.start).unwrap();
        managed += r.end - r.start;
        whole(&a, managed);
    }
    // Merging is maximal: the arena is four order-10 blocks again.
    assert_eq!(a.stats().buddyinfo().zones[0].free[MAX_ORDER as usize], 4);
}

#[test]
fn bad_additions_change_nothing() {
    let a = PageAllocator::new(Config::small(ARENA).holes(cfg_holes(&holes()))).unwrap();
    let managed = a.managed_pages();
    let tries: [(u64, u64); 8] = [
        (150, 0),          // empty
        (4095, 2),         // past the arena
        (u64::MAX - 1, 3), // wraps
        (50, 10),          // never a hole
        (290, 20),         // half in a hole
        (99, 2),           // starts before one
        (300, 724),        // between two holes
        (1000, 2000),      // over a hole and what is around it
    ];
    for (s, n) in tries {
        assert_eq!(a.add_free_memory(Pfn::new(s), n), Err(PageStateError::BadRange { pfn: Pfn::new(s) }), "{s}+{n}");
    }
    whole(&a, managed);
    a.add_free_memory(Pfn::new(1024), 1024).unwrap();
    assert_eq!(a.add_free_memory(Pfn::new(1500), 1), Err(PageStateError::BadRange { pfn: Pfn::new(1500) }));
    whole(&a, managed + 1024);
}

#[test]
fn a_hole_page_is_no_ones() {
    let a = PageAllocator::new(Config::small(ARENA).holes(cfg_holes(&holes()))).unwrap();
    let p = Pfn::new(1024);
    assert!(a.free_pages(p, 0).is_err());
    assert!(a.free_pages(p, 10).is_err());
    assert!(a.page_locks().lock_page(p).is_err());
    assert!(a.get_page(p).is_err());
    assert!(!a.page_locks().trylock_page(p));
    assert!(a.contig().free_contig_range(Pfn::new(1020), 8).is_err());
    assert!(a.contig().alloc_contig_range(Pfn::new(1000), 100, Gfp::MOVABLE).is_err());
    whole(&a, a.managed_pages());
}

#[test]
fn bad_holes_are_config_errors() {
    let p = Pfn::new;
    let many: Vec<(Pfn, u64)> = (0..4097).map(|i| (p(i), 1)).collect();
    let bad = [vec![(p(10), 0)], vec![(p(4000), 97)], vec![(p(10), 10), (p(15), 15)], vec![(p(5), u64::MAX)], many];
    for h in bad {
        let e = PageAllocator::new(Config::small(ARENA).holes(h.clone())).err();
        assert!(matches!(e, Some(ConfigError::Invalid { field: "holes", .. })), "{:?}: {e:?}", &h[..h.len().min(3)]);
    }
    // Unsorted but disjoint is fine; so is the whole arena.
    PageAllocator::new(Config::small(ARENA).holes(vec![(p(2000), 100), (p(10), 10)])).unwrap();
    let empty = PageAllocator::new(Config::small(ARENA).holes(vec![(p(0), 4096)])).unwrap();
    assert_eq!((empty.managed_pages(), empty.nr_free_pages()), (0, 0));
    assert!(empty.alloc_pages(Gfp::KERNEL, 0).is_err());
    empty.add_free_memory(Pfn::new(0), 4096).unwrap();
    whole(&empty, 4096);
}

/// Additions racing allocations and frees on more threads than cores.
#[test]
fn additions_race_allocations() {
    let h = holes();
    let a = PageAllocator::new(Config::small(ARENA).holes(cfg_holes(&h))).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let adds: Vec<Range<u64>> = h.iter().flat_map(|r| pieces(r.clone(), &mut rng)).collect();
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let a = &a;
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                let mut held = Vec::new();
                for _ in 0..3000 {
                    if rng.gen_bool(0.55) {
                        let o = rng.gen_range(0..4);
                        if let Ok(p) = a.alloc_pages(Gfp::KERNEL, o) {
                            held.push((p, o));
                        }
                    } else if let Some((p, o)) = held.pop() {
                        a.free_pages(p, o).unwrap();
                    }
                }
                for (p, o) in held {
                    a.free_pages(p, o).unwrap();
                }
            });
        }
        s.spawn(|| {
            for r in &adds {
                a.add_free_memory(Pfn::new(r.start), r.end - r.start).unwrap();
                std::thread::yield_now();
            }
        });
    });
    whole(&a, 4096);
    assert_eq!(a.stats().buddyinfo().zones[0].free[MAX_ORDER as usize], 4);
}

/// A contiguous range's pages are order-0 allocations: any part of it can
/// go back on its own, as a kernel frees part of a `Layout` it allocated.
#[test]
fn part_of_a_contiguous_range_frees_alone() {
    let a = PageAllocator::new(Config::small(ARENA)).unwrap();
    let p = a.contig().alloc_contig_pages(700, Gfp::MOVABLE).unwrap();
    a.contig().free_contig_range(p.add(100), 300).unwrap();
    a.check_invariants().unwrap();
    assert_eq!(a.census().allocated, 400);
    let again = a.contig().free_contig_range(p.add(350), 100);
    assert!(matches!(again, Err(FreeError::DoubleFree { .. })), "{again:?}");
    assert_eq!(a.census().allocated, 400); // all or nothing
    a.contig().free_contig_range(p, 100).unwrap();
    a.contig().free_contig_range(p.add(400), 300).unwrap();
    whole(&a, 4096);
}
