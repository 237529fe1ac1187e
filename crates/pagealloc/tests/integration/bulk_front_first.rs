//! Bulk requests over the front cache's batch (32 pages) take what this
//! thread's front cache holds first, and the array form's large free fills
//! the front cache while it has room, the per-CPU lists taking the rest; a
//! small bulk free claims its first page before it enters the front cache,
//! so a page it then cannot push (a full stack) is still freed. Every test
//! ends with the invariants and the free page count of its start.

use crate::common;
use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use std::collections::HashSet;

fn allocator() -> PageAllocator {
    PageAllocator::new(Config::small(16 << 20)).unwrap()
}

/// A fresh allocator, drained, and its free page count (what `end` checks).
fn start() -> (PageAllocator, u64) {
    let a = allocator();
    let free0 = common::drained_free_pages(&a);
    (a, free0)
}

/// After a drain, `n` single pages allocated and freed: this thread's
/// front cache then holds exactly them (an empty stack refills in batches
/// of 32, so 64 allocations leave it empty and 64 frees fill it without a
/// flush). Returns them in the order they were freed.
fn fill_front(a: &PageAllocator, n: usize) -> Vec<Pfn> {
    a.drain_all_pages();
    let pages: Vec<Pfn> = (0..n).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    for &p in &pages {
        a.free_pages(p, 0).unwrap();
    }
    pages
}

fn end(a: &PageAllocator, free0: u64) {
    common::ends_where_it_began(a, free0);
}

#[cfg(feature = "seed-variants")]
#[test]
fn a_large_linked_request_takes_the_front_cache_first() {
    let (a, free0) = start();
    for nr in [33usize, 64, 128, 200] {
        let cached = fill_front(&a, 64);
        let c = a.alloc_pages_bulk_linked(Gfp::KERNEL, nr);
        assert_eq!(c.len(), nr);
        let got: Vec<Pfn> = a.chain_iter(&c).collect();
        assert_eq!(got.len(), nr);
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), nr, "a page twice on the chain");
        // The hottest cached page (the last freed) first, then the rest of
        // the cache in stack order, then the per-CPU lists' pages.
        let k = nr.min(64);
        let expect: Vec<Pfn> = cached.iter().rev().take(k).copied().collect();
        assert_eq!(got[..k], expect[..], "nr {nr}: the chain does not start with the cached pages");
        assert!(got[k..].iter().all(|p| !cached.contains(p)));
        a.check_invariants().unwrap();
        // Walked and freed page by page, as the kernel's list form's caller.
        for p in got {
            a.free_pages(p, 0).unwrap();
        }
        drop(c);
        a.check_invariants().unwrap();
    }
    end(&a, free0);
}

#[test]
fn a_large_array_request_takes_the_front_cache_first() {
    let (a, free0) = start();
    for n in [33usize, 64, 128] {
        let cached = fill_front(&a, 64);
        let mut slots = vec![None; n];
        // A populated slot is left alone and skipped.
        let keep = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
        slots[1] = Some(keep);
        assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), n);
        assert_eq!(slots[1], Some(keep));
        let got: Vec<Pfn> = slots.iter().map(|s| s.unwrap()).collect();
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), n, "a page twice in the array");
        // `keep` came off the cache first (its hottest page). When the
        // cache still holds a page for every slot (63 for 33 slots) the
        // holes are filled back to front, the last hole getting the hottest
        // page; otherwise front to back, hottest first, then the per-CPU
        // lists' pages.
        let holes: Vec<usize> = (0..n).filter(|&i| i != 1).collect();
        let k = holes.len().min(63);
        let hot: Vec<Pfn> = cached.iter().rev().skip(1).take(k).copied().collect();
        let mut expect = vec![None; n];
        if 63 >= n {
            for (&i, &p) in holes.iter().rev().zip(&hot) {
                expect[i] = Some(p);
            }
        } else {
            for (&i, &p) in holes.iter().zip(&hot) {
                expect[i] = Some(p);
            }
        }
        for (i, e) in expect.iter().enumerate() {
            if let Some(e) = e {
                assert_eq!(got[i], *e, "n {n}: slot {i} does not hold the cached page expected");
            }
        }
        assert!(
            (0..n).filter(|&i| i != 1 && expect[i].is_none()).all(|i| !cached.contains(&got[i])),
            "n {n}: a slot past the cached pages holds one"
        );
        a.check_invariants().unwrap();
        a.free_pages_bulk_slots(&mut slots).unwrap();
        assert!(slots.iter().all(Option::is_none), "the free empties every slot");
        a.check_invariants().unwrap();
    }
    end(&a, free0);
}

#[test]
fn a_large_array_free_fills_the_front_cache_first() {
    let a = allocator();
    // The thread's front cache registered and its stack adopted (a drain
    // empties it and keeps both).
    fill_front(&a, 64);
    a.drain_all_pages();
    let free0 = a.nr_free_pages();
    // An empty front cache: the per-CPU lists give all 64 pages.
    let mut slots = vec![None; 64];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 64);
    let freed: HashSet<Pfn> = slots.iter().map(|s| s.unwrap()).collect();
    a.free_pages_bulk_slots(&mut slots).unwrap();
    assert!(slots.iter().all(Option::is_none));
    a.check_invariants().unwrap();
    // The front cache took every one of them: the next 64 single pages are
    // exactly those, last freed first.
    let again: Vec<Pfn> = (0..64).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    assert_eq!(again.iter().copied().collect::<HashSet<_>>(), freed);
    for p in again {
        a.free_pages(p, 0).unwrap();
    }
    // 128 slots: the cache holds 64 already, so all 64 it holds go out
    // first and come back first; the rest go to the per-CPU lists.
    let mut slots = vec![None; 128];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 128);
    assert!(slots[..64].iter().all(|s| freed.contains(&s.unwrap())));
    a.free_pages_bulk_slots(&mut slots).unwrap();
    assert!(slots.iter().all(Option::is_none));
    end(&a, free0);
}

#[test]
fn a_small_bulk_free_onto_a_full_stack_frees_every_page() {
    let (a, free0) = start();
    for n in [1usize, 2, 4, 32] {
        // Allocated first, then the stack filled to its 64: the batch's first
        // page is claimed before the cache is entered and then finds no room.
        let mut slots = vec![None; n];
        assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), n);
        let pages: Vec<Pfn> = slots.iter().map(|s| s.unwrap()).collect();
        fill_front(&a, 64);
        a.free_pages_bulk_slots(&mut slots).unwrap();
        assert!(slots.iter().all(Option::is_none));
        a.check_invariants().unwrap();
        // Every one of them is free: a second free is refused, changing nothing.
        for p in &pages {
            assert!(a.free_pages(*p, 0).is_err(), "{p:?} was not freed");
        }
        // The list form the same way.
        let list: Vec<Pfn> = (0..n).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
        fill_front(&a, 64);
        a.free_pages_bulk(&list).unwrap();
        for p in &list {
            assert!(a.free_pages(*p, 0).is_err(), "{p:?} was not freed");
        }
        a.check_invariants().unwrap();
    }
    end(&a, free0);
}

#[test]
fn a_small_bulk_free_with_a_bad_entry_after_the_first_frees_the_rest_and_reports_it() {
    let (a, free0) = start();
    let mut slots = vec![None; 4];
    assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 4);
    // Entry 2 is entry 0 again: the first is claimed and freed, the copy
    // is a double free, reported at its index and left in its slot.
    let first = slots[0];
    let third = slots[2].take();
    slots[2] = first;
    let err = a.free_pages_bulk_slots(&mut slots).unwrap_err();
    assert_eq!(err.rejected.len(), 1);
    assert_eq!(err.rejected[0].0, 2);
    assert_eq!(slots[2], first);
    assert!(slots[0].is_none() && slots[1].is_none() && slots[3].is_none());
    a.free_pages(third.unwrap(), 0).unwrap();
    end(&a, free0);
}

#[test]
fn an_array_freed_in_index_order_leaves_the_front_cache_as_it_found_it() {
    let (a, free0) = start();
    // (slots, pages cached): the stack holds a page for every slot, or (the
    // last case) is full with fewer, when its whole content goes to the
    // first slots and the free pushes only as many back as it holds.
    let cap = pagealloc::ffi::abi::STACK_CAP;
    for (n, c) in [(2usize, 48usize), (3, 48), (8, 48), (32, 48), (cap + 36, cap)] {
        let cached = fill_front(&a, c);
        let mut slots = vec![None; n];
        assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), n);
        // Back to front: the last of the cached pages' slots holds the
        // hottest page.
        let got: Vec<Pfn> = slots.iter().map(|s| s.unwrap()).collect();
        let k = n.min(c);
        let top: Vec<Pfn> = cached[c - k..].to_vec();
        assert_eq!(got[..k], top[..], "n {n}: the array does not start with the stack, coldest first");
        assert!(got[k..].iter().all(|p| !cached.contains(p)), "n {n}: a cached page twice");
        a.free_pages_bulk_slots(&mut slots).unwrap();
        assert!(slots.iter().all(Option::is_none));
        // The round trip kept the stack's order: single allocations now
        // take the same pages, hottest first.
        let again: Vec<Pfn> = (0..k).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
        let hottest_first: Vec<Pfn> = top.iter().rev().copied().collect();
        assert_eq!(again, hottest_first, "n {n}: the round trip changed the stack's order");
        for p in again {
            a.free_pages(p, 0).unwrap();
        }
        a.check_invariants().unwrap();
    }
    end(&a, free0);
}
