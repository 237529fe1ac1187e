//! `PageArray`: the array form with owned slots. Its pages are refused to
//! every pfn-taking call (free, bulk free, lock, reference, contiguous
//! allocation) while the array holds them, come back with the release or
//! the drop, and can be handed out as `Pages` or raw pages; hostile threads
//! naming its pfns while it fills and releases change nothing. Every test
//! ends with the invariants and the free page count of its start.

use crate::common;
use pagealloc::{AllocError, Backing, BulkFreeError, Config, FreeError, Gfp, PageAllocator, PageStateError, Pfn};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn start() -> (PageAllocator, u64) {
    let a = PageAllocator::new(Config::small(16 << 20).backing(Backing::Anonymous)).unwrap();
    let free0 = common::drained_free_pages(&a);
    (a, free0)
}

fn end(a: &PageAllocator, free0: u64) {
    common::ends_where_it_began(a, free0);
}

#[test]
fn fill_gives_distinct_pages_and_release_gives_them_all_back() {
    let (a, free0) = start();
    for n in [0usize, 1, 2, 3, 4, 8, 31, 32, 33, 64, 100, 128, 1000] {
        let mut arr = a.page_array(n).unwrap();
        assert_eq!(arr.len(), n);
        assert_eq!(arr.fill(Gfp::KERNEL), n, "fill of {n}");
        let pfns: HashSet<Pfn> = arr.slots().iter().map(|s| s.unwrap()).collect();
        assert_eq!(pfns.len(), n, "{n} slots, a page twice");
        // Held pages count as allocated in the invariants' census.
        a.check_invariants().unwrap();
        // A second fill of a full array allocates nothing.
        let free = a.nr_free_pages();
        assert_eq!(arr.fill(Gfp::KERNEL), n);
        assert_eq!(a.nr_free_pages(), free);
        arr.release();
        assert_eq!(arr.populated(), 0);
        a.check_invariants().unwrap();
        // Refilled after a release, and dropped full.
        assert_eq!(arr.fill(Gfp::KERNEL), n);
    }
    end(&a, free0);
}

#[test]
fn every_pfn_taking_call_refuses_an_arrays_page_and_changes_nothing() {
    let (a, free0) = start();
    for n in [1usize, 2, 16, 40, 128] {
        let mut arr = a.page_array(n).unwrap();
        assert_eq!(arr.fill(Gfp::KERNEL), n);
        let before = a.nr_free_pages();
        for &p in arr.slots().iter().flatten() {
            assert_eq!(a.free_pages(p, 0), Err(FreeError::Owned { pfn: p }));
            assert_eq!(a.page_locks().lock_page(p), Err(PageStateError::NotAllocated { pfn: p }));
            assert!(!a.page_locks().trylock_page(p));
            assert_eq!(a.get_page(p).err(), Some(PageStateError::NotAllocated { pfn: p }));
            assert!(a.page_locks().set_page_writeback(p).is_err());
            assert!(a.page_locks().set_page_uptodate(p).is_err());
            assert!(a.page_locks().unlock_page(p).is_err());
            assert!(a.page_locks().end_page_writeback(p).is_err());
        }
        let pfns: Vec<Pfn> = arr.slots().iter().flatten().copied().collect();
        match a.free_pages_bulk(&pfns) {
            Err(BulkFreeError { rejected }) => {
                assert_eq!(rejected.len(), n, "every entry refused");
                assert!(rejected.iter().all(|(i, e)| *e == FreeError::Owned { pfn: pfns[*i] }));
            }
            Ok(()) => panic!("a bulk free of an array's pages was accepted"),
        }
        let mut copy: Vec<Option<Pfn>> = pfns.iter().map(|&p| Some(p)).collect();
        assert!(a.free_pages_bulk_slots(&mut copy).is_err());
        assert_eq!(copy.iter().flatten().count(), n, "refused slots keep their pages");
        assert_eq!(a.nr_free_pages(), before, "a refused call changed state");
        a.check_invariants().unwrap();
        drop(arr);
    }
    end(&a, free0);
}

#[test]
fn a_contiguous_allocation_over_an_arrays_pages_fails_and_leaves_them() {
    let (a, free0) = start();
    let mut arr = a.page_array(64).unwrap();
    assert_eq!(arr.fill(Gfp::MOVABLE), 64);
    let p = arr.get(0).unwrap();
    let s = Pfn::new(p.as_u64() & !(pagealloc::PAGEBLOCK_PAGES - 1));
    assert!(a.contig().alloc_contig_range(s, pagealloc::PAGEBLOCK_PAGES, Gfp::MOVABLE).is_err());
    // The page is still the array's.
    assert_eq!(a.free_pages(p, 0), Err(FreeError::Owned { pfn: p }));
    a.check_invariants().unwrap();
    drop(arr);
    end(&a, free0);
}

#[test]
fn take_hands_out_an_owned_or_a_raw_page() {
    let (a, free0) = start();
    let mut arr = a.page_array(8).unwrap();
    assert_eq!(arr.fill(Gfp::KERNEL), 8);
    let raw = arr.take_pfn(3).unwrap();
    assert_eq!((arr.get(3), arr.take_pfn(3), arr.take(3).is_none()), (None, None, true));
    // A raw page: lockable, freeable by pfn.
    a.page_locks().lock_page(raw).unwrap();
    assert_eq!(a.free_pages(raw, 0), Err(FreeError::Locked { pfn: raw }));
    a.page_locks().unlock_page(raw).unwrap();
    let h = arr.take(5).unwrap();
    assert_eq!(a.free_pages(h.pfn(), 0), Err(FreeError::Owned { pfn: h.pfn() }));
    // Refilled: the two holes only.
    assert_eq!(arr.fill(Gfp::KERNEL), 8);
    assert!(!arr.slots().contains(&Some(raw)) && !arr.slots().contains(&Some(h.pfn())));
    drop(arr);
    drop(h);
    a.free_pages(raw, 0).unwrap();
    assert_eq!(arr_out_of_range(&a), 0);
    end(&a, free0);
}

/// Slot accessors past the end answer None (and the array of zero slots
/// works).
fn arr_out_of_range(a: &PageAllocator) -> usize {
    let mut arr = a.page_array(2).unwrap();
    assert_eq!(
        (arr.get(2), arr.get(usize::MAX), arr.take(9).is_none(), arr.take_pfn(usize::MAX)),
        (None, None, true, None)
    );
    assert!(arr.frame(2).is_none() && arr.frame_mut(usize::MAX).is_none());
    let mut z = a.page_array(0).unwrap();
    assert_eq!((z.fill(Gfp::KERNEL), z.is_empty()), (0, true));
    z.release();
    arr.populated()
}

#[test]
fn an_array_larger_than_the_arena_is_refused() {
    let (a, free0) = start();
    let nr = a.nr_pages();
    for n in [nr as usize + 1, usize::MAX / 2, usize::MAX] {
        match a.page_array(n) {
            Err(AllocError::ArrayTooLarge { slots, nr_pages }) => assert_eq!((slots, nr_pages), (n, nr)),
            other => panic!("page_array({n}): {other:?}"),
        }
    }
    end(&a, free0);
}

#[test]
fn an_array_of_every_page_fills_short_and_gives_everything_back() {
    let (a, free0) = start();
    let mut arr = a.page_array(a.nr_pages() as usize).unwrap();
    let got = arr.fill(Gfp::KERNEL);
    assert!(got > 0 && got < arr.len(), "filled {got} of {}", arr.len());
    assert_eq!(arr.populated(), got, "holes before the leading count");
    a.check_invariants().unwrap();
    drop(arr);
    end(&a, free0);
}

/// An array's pages are allocated pages to the mobility census (pinned:
/// nothing moves them) and to the fragmentation count (of the type they were
/// allocated for), as raw pages are.
#[test]
fn an_arrays_pages_are_pinned_and_typed_in_the_censuses() {
    let (a, free0) = start();
    // A raw movable page is pinned too: nothing registered a way to move it.
    let movable = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let pinned0 = a.compaction().mobility_census().pinned;
    let mut arr = a.page_array(a.nr_pages() as usize).unwrap();
    let got = arr.fill(Gfp::KERNEL) as u64;
    assert_eq!(a.compaction().mobility_census().pinned, pinned0 + got, "an array's pages are allocated and pinned");
    // The movable page's pageblock is mixed if the unmovable fill took a page
    // of it; no other block holds two types.
    let block = |p: Pfn| p.as_u64() / pagealloc::PAGEBLOCK_PAGES;
    let shared = arr.slots().iter().flatten().any(|&p| block(p) == block(movable));
    assert!(shared, "the fill of every page left the movable page's block alone: the test proves nothing");
    assert_eq!(a.stats().fragmentation().mixed, 1, "the array's pages count by their type");
    drop(arr);
    assert_eq!((a.compaction().mobility_census().pinned, a.stats().fragmentation().mixed), (pinned0, 0));
    a.free_pages(movable, 0).unwrap();
    end(&a, free0);
}

#[test]
fn frames_are_the_arrays_own_memory() {
    let (a, free0) = start();
    let mut arr = a.page_array(16).unwrap();
    assert_eq!(arr.fill(Gfp::ZERO), 16);
    for i in 0..16 {
        let f = arr.frame_mut(i).unwrap();
        assert!(f.iter().all(|&b| b == 0), "Gfp::ZERO page {i} not zeroed");
        f.fill(i as u8 + 1);
    }
    for i in 0..16 {
        assert!(arr.frame(i).unwrap().iter().all(|&b| b == i as u8 + 1), "page {i} written by someone else");
    }
    drop(arr);
    end(&a, free0);
}

/// Hostile threads name random pfns (the array's among them) to free, bulk
/// free, lock and reference while owners fill and release arrays, more
/// threads than cores. No call may succeed on an array's page; at the end
/// nothing is lost.
#[test]
fn hostile_pfn_calls_race_array_fills_and_releases() {
    let (a, free0) = start();
    let a = Arc::new(a);
    let stop = Arc::new(AtomicBool::new(false));
    // The pfns the owners hold now (a hint for the hostile threads).
    let hint = Arc::new(AtomicU64::new(0));
    let nr = a.nr_pages();
    let hostile: Vec<_> = (0..3)
        .map(|t| {
            let (a, stop, hint) = (a.clone(), stop.clone(), hint.clone());
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                let mut wins = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let h = hint.load(Ordering::Relaxed);
                    let p = Pfn::new(if x & 1 == 0 && h != 0 { h + (x >> 8) % 4 } else { x % nr });
                    // Any success here would be on a page somebody holds
                    // (the owners hold every allocated page), or a free one.
                    wins += u64::from(a.free_pages(p, 0).is_ok());
                    wins += u64::from(a.free_pages_bulk(&[p]).is_ok());
                    if a.page_locks().trylock_page(p) {
                        wins += 1;
                        let _ = a.page_locks().unlock_page(p);
                    }
                    if let Ok(r) = a.get_page(p) {
                        wins += 1;
                        drop(r);
                    }
                }
                wins
            })
        })
        .collect();
    let owners: Vec<_> = (0..3)
        .map(|t| {
            let (a, hint) = (a.clone(), hint.clone());
            std::thread::spawn(move || {
                let mut arr = a.page_array([2, 33, 128][t]).unwrap();
                for round in 0..3000u32 {
                    let n = arr.fill(Gfp::KERNEL);
                    assert_eq!(n, arr.len());
                    hint.store(arr.get(round as usize % n).unwrap().as_u64(), Ordering::Relaxed);
                    for i in 0..n {
                        let f = arr.frame_mut(i).unwrap();
                        f[0] = t as u8;
                        f[4095] = round as u8;
                    }
                    for i in 0..n {
                        let f = arr.frame(i).unwrap();
                        assert_eq!((f[0], f[4095]), (t as u8, round as u8), "a frame changed under its array");
                    }
                    arr.release();
                }
            })
        })
        .collect();
    for o in owners {
        o.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let wins: u64 = hostile.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(wins, 0, "a pfn-taking call succeeded with every allocated page in an array");
    let a = Arc::try_unwrap(a).ok().unwrap();
    end(&a, free0);
}
