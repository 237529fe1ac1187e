//! The bulk allocator's linked list form: pages threaded through their
//! descriptors, walked back by the caller, freed from the chain.
#![cfg(feature = "seed-variants")]

use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use std::collections::HashSet;

fn allocator() -> PageAllocator {
    PageAllocator::new(Config::small(16 << 20)).unwrap()
}

#[test]
fn a_chain_holds_exactly_its_pages_and_gives_them_all_back() {
    let a = allocator();
    a.drain_all_pages();
    let free0 = a.nr_free_pages();
    for nr in [0usize, 1, 2, 3, 4, 8, 63, 64, 65, 128, 1000] {
        let c = a.alloc_pages_bulk_linked(Gfp::KERNEL, nr);
        assert_eq!(c.len(), nr);
        let pages: Vec<Pfn> = a.chain_iter(&c).collect();
        assert_eq!(pages.len(), nr);
        assert_eq!(pages.iter().collect::<HashSet<_>>().len(), nr, "a page twice on the chain");
        // Every page is allocated: a second allocation never returns one.
        let other = a.alloc_pages_bulk_linked(Gfp::KERNEL, 16);
        let others: HashSet<Pfn> = a.chain_iter(&other).collect();
        assert!(pages.iter().all(|p| !others.contains(p)));
        a.check_invariants().unwrap();
        a.free_pages_bulk_linked(other).unwrap();
        a.free_pages_bulk_linked(c).unwrap();
        a.check_invariants().unwrap();
    }
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), free0, "pages lost or made up");
}

#[test]
fn a_chain_whose_page_was_freed_on_its_own_loses_nothing() {
    let a = allocator();
    a.drain_all_pages();
    let free0 = a.nr_free_pages();
    let c = a.alloc_pages_bulk_linked(Gfp::KERNEL, 100);
    let pages: Vec<Pfn> = a.chain_iter(&c).collect();
    // Freed separately (its links are its own again once it is on a list).
    a.free_pages(pages[70], 0).unwrap();
    let walked: Vec<Pfn> = a.chain_iter(&c).take(70).collect();
    assert_eq!(walked, pages[..70]);
    // The walk past a freed page is not trusted: free what the chain held
    // before the freed page by hand and check nothing leaks.
    for p in &pages[71..] {
        a.free_pages(*p, 0).unwrap();
    }
    let head: Vec<Pfn> = pages[..70].to_vec();
    a.free_pages_bulk(&head).unwrap();
    drop(c);
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), free0);
}

#[test]
fn another_allocators_chain_is_refused_whole() {
    let (a, b) = (allocator(), allocator());
    let c = a.alloc_pages_bulk_linked(Gfp::KERNEL, 10);
    assert_eq!(b.chain_iter(&c).count(), 0);
    let free_b = b.nr_free_pages();
    // Refused whole: nothing of `b` freed, and `a` still owns the pages.
    let c2 = a.alloc_pages_bulk_linked(Gfp::KERNEL, 10);
    assert_eq!(b.free_pages_bulk_linked(c2).unwrap_err().rejected.len(), 1);
    assert_eq!(b.nr_free_pages(), free_b);
    a.free_pages_bulk_linked(c).unwrap();
    a.check_invariants().unwrap();
    b.check_invariants().unwrap();
}

#[test]
fn a_small_chain_comes_off_the_front_cache_hottest_first() {
    let a = allocator();
    // Four pages freed one at a time go on this thread's front cache, the
    // last one freed on top; the chain gives them back in the order single
    // allocations would: the hottest first.
    let pages: Vec<Pfn> = (0..4).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    for &p in &pages {
        a.free_pages(p, 0).unwrap();
    }
    let c = a.alloc_pages_bulk_linked(Gfp::KERNEL, 4);
    let got: Vec<Pfn> = a.chain_iter(&c).collect();
    let want: Vec<Pfn> = pages.iter().rev().copied().collect();
    assert_eq!(got, want);
    // Each page allocated exactly once: a single free of one succeeds, the
    // chain's free then refuses that one and frees the rest.
    a.free_pages(got[1], 0).unwrap();
    let e = a.free_pages_bulk_linked(c).unwrap_err();
    assert_eq!(e.rejected.len(), 1);
    a.check_invariants().unwrap();
}

#[test]
fn a_small_array_of_two_types_is_freed_whole() {
    let a = allocator();
    a.drain_all_pages();
    let free0 = a.nr_free_pages();
    for _ in 0..50 {
        // Alternating types: the inline free takes the first page's stack
        // and leaves the rest to the full path; every page is freed.
        let mut slots: Vec<Option<Pfn>> = (0..8)
            .map(|i| Some(a.alloc_pages(if i % 2 == 0 { Gfp::KERNEL } else { Gfp::MOVABLE }, 0).unwrap()))
            .collect();
        let pfns: Vec<Pfn> = slots.iter().flatten().copied().collect();
        a.free_pages_bulk_slots(&mut slots).unwrap();
        assert!(slots.iter().all(Option::is_none));
        for p in pfns {
            assert!(a.free_pages(p, 0).is_err(), "page {p:?} still allocated");
        }
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), free0, "pages lost or made up");
}
