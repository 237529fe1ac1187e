//! Loom models of the protocols that move pages between the per-CPU lists,
//! the depot and the buddy with the zone lock dropped: a refill marks the
//! run it took after the zone lock, a drain merges its pages before it, and
//! the depot hands batches from one CPU's drain to another's refill. In each,
//! a stale or double free races the move: it must be refused or land whole,
//! and every page must come back exactly once.

use crate::{Config, FrameAllocator, Gfp, Pfn};
use loom::sync::Arc;

/// One pageblock, one CPU slot (every thread shares its lists, so their
/// try-locks collide and the busy paths run too), no front cache, `high`
/// at its floor of four pages and a depot of eight.
fn tiny() -> Arc<FrameAllocator> {
    let cfg = Config::small(2 << 20)
        .nr_cpus(Some(1))
        .min_free_kbytes(Some(0))
        .front_cache(false)
        .pcp_batch(Some(1))
        .percpu_pagelist_high_fraction(128)
        .depot_fraction(64);
    Arc::new(FrameAllocator::new(cfg).unwrap())
}

fn all_back(f: &FrameAllocator) {
    f.check_invariants().unwrap();
    f.drain();
    assert_eq!(f.nr_free_pages(), f.nr_pages());
    assert_eq!(f.core.zones[crate::types::ZoneIdx::FIRST].depot.pages_racy(), 0, "drain_all empties the depot");
}

/// A drain parks pages in the depot; one thread's allocation takes them
/// back (a refill from the depot) while another empties the depot into the
/// buddy (`drain_all_pages`). Each page ends in exactly one place.
#[test]
fn loom_depot_exchange_races_drain_all() {
    loom::model(|| {
        let f = tiny();
        let pages: Vec<Pfn> = (0..6).map(|_| f.alloc(Gfp::KERNEL, 0).unwrap()).collect();
        for &p in &pages[..5] {
            f.free(p, 0).unwrap();
        }
        assert!(f.core.zones[crate::types::ZoneIdx::FIRST].depot.pages_racy() > 0, "the frees past high parked pages");
        let g = Arc::clone(&f);
        let t = loom::thread::spawn(move || {
            let q: Vec<Pfn> = (0..2).map(|_| g.alloc(Gfp::KERNEL, 0).unwrap()).collect();
            for p in q {
                g.free(p, 0).unwrap();
            }
        });
        f.drain();
        t.join().unwrap();
        f.free(pages[5], 0).unwrap();
        all_back(&f);
    });
}

/// A refill takes a run off the buddy lists, drops the zone lock and marks
/// its pages for the list; a stale free of a page of that run races it. The
/// free is refused, unless the page was handed out again meanwhile (then
/// the free lands on it and the owner's own free is refused instead).
#[test]
fn loom_refill_marks_outside_the_lock_racing_a_stale_free() {
    loom::model(|| {
        let f = tiny();
        let x = f.alloc(Gfp::KERNEL, 0).unwrap();
        f.free(x, 0).unwrap();
        f.drain(); // x back in the buddy, merged into the pageblock
        let g = Arc::clone(&f);
        let t = loom::thread::spawn(move || g.free(x, 0).is_ok());
        let q = f.alloc(Gfp::KERNEL, 0).unwrap();
        let stale_landed = t.join().unwrap();
        assert!(!stale_landed || q == x, "a stale free landed on a page nobody held");
        assert_eq!(f.free(q, 0).is_ok(), !stale_landed, "exactly one free of q");
        all_back(&f);
    });
}

/// A drain merges two buddies it holds before the zone lock (their marks
/// cleared, on no list); a double free of one of them races it and is
/// refused whenever it runs.
#[test]
fn loom_drain_merges_outside_the_lock_racing_a_double_free() {
    loom::model(|| {
        let f = tiny();
        let a = f.alloc(Gfp::KERNEL, 0).unwrap();
        let b = f.alloc(Gfp::KERNEL, 0).unwrap();
        f.free(a, 0).unwrap();
        f.free(b, 0).unwrap();
        let g = Arc::clone(&f);
        let t = loom::thread::spawn(move || g.free(a, 0).is_err());
        f.drain();
        assert!(t.join().unwrap(), "a double free succeeded");
        all_back(&f);
    });
}
