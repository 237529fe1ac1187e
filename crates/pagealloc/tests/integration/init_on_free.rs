//! init_on_free (issue 18): every free path zeroes the block before it
//! reaches a list or cache, `Gfp::ZERO` then zeroes nothing (counted), a
//! contiguous free refused part-way zeroes nothing, and migration zeroes the
//! page it empties.

use pagealloc::{Config, Gfp, MovableOps, PageAllocator, Pfn, PAGE_SIZE};
use std::sync::{Arc, Mutex};

fn fill(a: &PageAllocator, pfn: Pfn, pages: u64, byte: u8) {
    let p = a.page_address(pfn).unwrap();
    // SAFETY: the pages are allocated to this test and inside the arena.
    unsafe { std::ptr::write_bytes(p.as_ptr(), byte, PAGE_SIZE * pages as usize) };
}

fn all_bytes(a: &PageAllocator, pfn: Pfn, pages: u64, byte: u8) -> bool {
    let p = a.page_address(pfn).unwrap();
    // SAFETY: inside the arena's mapping; this single-threaded test is the
    // allocator's only user, so nobody writes these pages while it reads.
    let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), PAGE_SIZE * pages as usize) };
    s.iter().all(|&b| b == byte)
}

fn arena(init_on_free: bool) -> PageAllocator {
    PageAllocator::new(Config::new().arena_bytes(8 << 20).page_reporting(false).init_on_free(init_on_free)).unwrap()
}

#[test]
fn every_free_path_zeroes_and_zero_allocations_skip_zeroing() {
    let a = arena(true);
    // free_pages (order 0 and 3), free_pages_bulk, free_pages_nolock.
    let p0 = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let p3 = a.alloc_pages(Gfp::MOVABLE, 3).unwrap();
    let bulk: Vec<Pfn> = (0..40).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap()).collect();
    let nl = a.alloc_pages(Gfp::MOVABLE, 2).unwrap();
    fill(&a, p0, 1, 0xa1);
    fill(&a, p3, 8, 0xa3);
    for &b in &bulk {
        fill(&a, b, 1, 0xb0);
    }
    fill(&a, nl, 4, 0xc4);
    a.free_pages(p0, 0).unwrap();
    a.free_pages(p3, 3).unwrap();
    a.free_pages_bulk(&bulk).unwrap();
    a.free_pages_nolock(nl, 2).unwrap();
    assert!(all_bytes(&a, p0, 1, 0), "free_pages zeroed order 0");
    assert!(all_bytes(&a, p3, 8, 0), "free_pages zeroed order 3");
    assert!(bulk.iter().all(|&b| all_bytes(&a, b, 1, 0)), "free_pages_bulk zeroed");
    assert!(all_bytes(&a, nl, 4, 0), "free_pages_nolock zeroed");
    let st = a.reporting().page_reporting_stats();
    assert_eq!(st.zeroed_on_free, 1 + 8 + 40 + 4);
    // Gfp::ZERO zeroes nothing now: every free page reads zero.
    let before = st.zeroing_skipped;
    let z: Vec<Pfn> = (0..64).map(|_| a.alloc_pages(Gfp::MOVABLE | Gfp::ZERO, 0).unwrap()).collect();
    assert_eq!(a.reporting().page_reporting_stats().zeroing_skipped - before, 64, "no zeroing pass, counted");
    assert!(z.iter().all(|&p| all_bytes(&a, p, 1, 0)), "and the memory reads zero");
    a.free_pages_bulk(&z).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn without_it_freed_memory_keeps_its_bytes_and_zero_allocations_zero() {
    let a = arena(false);
    let p = a.alloc_pages(Gfp::MOVABLE, 3).unwrap();
    fill(&a, p, 8, 0x5a);
    a.free_pages(p, 3).unwrap();
    assert!(all_bytes(&a, p, 8, 0x5a), "no zeroing on free by default");
    assert_eq!(a.reporting().page_reporting_stats().zeroed_on_free, 0);
    let q = a.alloc_pages(Gfp::MOVABLE | Gfp::ZERO, 3).unwrap();
    assert_eq!(q, p);
    assert!(all_bytes(&a, q, 8, 0));
    assert_eq!(a.reporting().page_reporting_stats().zeroing_skipped, 0, "zeroed by the allocation");
    a.free_pages(q, 3).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn a_refused_contiguous_free_zeroes_nothing() {
    let a = arena(true);
    let s = a.contig().alloc_contig_pages(16, Gfp::MOVABLE).unwrap();
    fill(&a, s, 16, 0x77);
    let hole = Pfn::new(s.as_u64() + 9);
    a.free_pages(hole, 0).unwrap();
    assert!(a.contig().free_contig_range(s, 16).is_err(), "page 9 is free already");
    for i in (0..16).filter(|&i| i != 9) {
        assert!(all_bytes(&a, Pfn::new(s.as_u64() + i), 1, 0x77), "page {i} still holds its data");
    }
    a.contig().free_contig_range(s, 9).unwrap();
    a.contig().free_contig_range(Pfn::new(s.as_u64() + 10), 6).unwrap();
    assert!(all_bytes(&a, s, 16, 0), "freed: zero");
    a.check_invariants().unwrap();
}

struct Follow(Mutex<Vec<u64>>);

impl MovableOps for Follow {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut v = self.0.lock().unwrap();
        match v.iter_mut().find(|p| **p == from.as_u64()) {
            Some(p) => {
                *p = to.as_u64();
                true
            }
            None => false,
        }
    }
}

#[test]
fn migration_zeroes_the_page_it_empties() {
    let a = arena(true);
    let o = Arc::new(Follow(Mutex::new(Vec::new())));
    let id = a.compaction().register_movable_ops(o.clone());
    // Every page allocated: movable pages kept at the zone's start (where
    // the migrate scanner begins), pinned ones every other page at its end
    // (the free scanner's targets are the holes between them), the rest freed.
    let mut pages: Vec<Pfn> = std::iter::from_fn(|| a.alloc_pages(Gfp::MOVABLE, 0).ok()).collect();
    pages.sort();
    let n = pages.len();
    let mut keep = Vec::new();
    let mut pinned = Vec::new();
    for (i, &p) in pages.iter().enumerate() {
        if i < 512 && i % 4 == 0 {
            fill(&a, p, 1, 0x3c);
            a.compaction().set_page_movable(p, id).unwrap();
            o.0.lock().unwrap().push(p.as_u64());
            keep.push(p);
        } else if i >= n - 1024 && i % 2 == 0 {
            pinned.push(p);
        } else {
            a.free_pages(p, 0).unwrap();
        }
    }
    let out = a.compaction().compact_memory();
    let now = o.0.lock().unwrap().clone();
    let moved: Vec<u64> = keep.iter().map(|p| p.as_u64()).filter(|p| !now.contains(p)).collect();
    assert!(out.migrated > 0 && !moved.is_empty(), "{out:?}");
    for &p in &moved {
        assert!(all_bytes(&a, Pfn::new(p), 1, 0), "the emptied page {p:#x} reads zero");
    }
    for &p in &now {
        assert!(all_bytes(&a, Pfn::new(p), 1, 0x3c), "the moved data at {p:#x}");
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    a.free_pages_bulk(&pinned).unwrap();
    a.check_invariants().unwrap();
}
