//! Free page reporting (issue 18): released blocks read zero and skip the
//! zeroing of `Gfp::ZERO`, the REPORTED mark through merge and split, the
//! delay's hysteresis, failed releases, and a multi-threaded stress with an
//! aggressive reporter racing allocations and frees.

use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn, ReportCallback, PAGE_SIZE};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn fill(a: &PageAllocator, pfn: Pfn, order: u32, byte: u8) {
    let p = a.page_address(pfn).unwrap();
    // SAFETY: the block is allocated to this test and inside the arena.
    unsafe { std::ptr::write_bytes(p.as_ptr(), byte, PAGE_SIZE << order) };
}

fn all_bytes(a: &PageAllocator, pfn: Pfn, order: u32, byte: u8) -> bool {
    let p = a.page_address(pfn).unwrap();
    // SAFETY: the block is inside the arena's mapping (allocated, or free and
    // untouched by anyone while this single-threaded test looks).
    let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), PAGE_SIZE << order) };
    s.iter().all(|&b| b == byte)
}

fn reported(a: &PageAllocator) -> u64 {
    a.reporting().residency().iter().map(|z| z.reported).sum()
}

/// One pageblock, anonymous backing, no per-CPU lists, no background thread:
/// every allocation is deterministic.
fn tiny() -> PageAllocator {
    PageAllocator::new(Config::new().arena_bytes(2 << 20).pcp_lists(false).page_reporting(false)).unwrap()
}

#[test]
fn released_blocks_read_zero_and_skip_zeroing() {
    let a = tiny();
    let p = a.alloc_pages(Gfp::MOVABLE, 4).unwrap();
    fill(&a, p, 4, 0xab);
    a.free_pages(p, 4).unwrap();
    assert_eq!(reported(&a), 0, "the freed block merged with the released rest: the mark is lost");
    let r = a.reporting().report_free_pages_now();
    assert_eq!((r.blocks, r.pages, r.errors), (1, 512, 0));
    assert_eq!(reported(&a), 512);
    let before = a.reporting().page_reporting_stats().zeroing_skipped;
    let q = a.alloc_pages(Gfp::MOVABLE | Gfp::ZERO, 4).unwrap();
    assert_eq!(q, p);
    assert_eq!(
        a.reporting().page_reporting_stats().zeroing_skipped - before,
        16,
        "no zeroing pass on a released block"
    );
    assert!(all_bytes(&a, q, 4, 0), "a released block reads zero");
    assert_eq!(reported(&a), 512 - 16, "the split halves keep the mark");
    a.check_invariants().unwrap();
    // An unreleased block is zeroed as before.
    fill(&a, q, 4, 0xcd);
    a.free_pages(q, 4).unwrap();
    let q2 = a.alloc_pages(Gfp::MOVABLE | Gfp::ZERO, 4).unwrap();
    assert_eq!(q2, p);
    assert_eq!(a.reporting().page_reporting_stats().zeroing_skipped - before, 16);
    assert!(all_bytes(&a, q2, 4, 0));
    a.free_pages(q2, 4).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn a_fresh_arena_starts_released() {
    let a = tiny();
    assert_eq!(reported(&a), a.managed_pages());
    let r = a.reporting().residency();
    assert_eq!(r[0].free_resident, 0);
    assert_eq!(r[0].resident, 0);
    let p = a.alloc_pages(Gfp::MOVABLE | Gfp::ZERO, 0).unwrap();
    assert_eq!(a.reporting().page_reporting_stats().zeroing_skipped, 1, "fresh memory is zero: not zeroed again");
    assert_eq!(a.reporting().residency()[0].resident, 1);
    a.free_pages(p, 0).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn merge_keeps_the_mark_only_when_both_halves_had_it() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    let cb = ReportCallback(Arc::new(move |pfn: Pfn, order: u32| {
        c.lock().unwrap().push((pfn.as_u64(), order));
        true
    }));
    let a = PageAllocator::new(
        Config::small(4 << 20).pcp_lists(false).page_reporting(false).page_reporting_callback(Some(cb)),
    )
    .unwrap();
    assert_eq!(reported(&a), 1024);
    let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    assert_eq!(reported(&a), 1023, "every half of the split keeps the mark");
    let q = a.alloc_pages(Gfp::MOVABLE, 9).unwrap();
    assert_eq!(reported(&a), 511);
    a.free_pages(p, 0).unwrap();
    assert_eq!(reported(&a), 0, "merged with an unreported page: unreported");
    assert_eq!(a.reporting().report_free_pages_now().blocks, 1);
    assert_eq!(*calls.lock().unwrap(), vec![(p.as_u64(), 9)]);
    assert_eq!(reported(&a), 512);
    assert_eq!(a.reporting().report_free_pages_now().blocks, 0, "a released block is not released again");
    a.free_pages(q, 9).unwrap();
    assert_eq!(reported(&a), 0);
    a.check_invariants().unwrap();
    assert_eq!(a.reporting().report_free_pages_now().pages, 1024);
    assert_eq!(*calls.lock().unwrap().last().unwrap(), (0, 10));
    a.check_invariants().unwrap();
}

/// A report callback that panics is a failed release: the pass returns
/// (counting the error) instead of unwinding through the zone lock, the
/// block stays unreported, and the next pass releases it.
#[test]
fn a_panicking_report_callback_is_a_failed_release() {
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let c = calls.clone();
    let cb = ReportCallback(Arc::new(move |_: Pfn, _: u32| {
        let n = c.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        assert!(n != 1, "injected panic in a report callback");
        true
    }));
    let a = PageAllocator::new(
        Config::small(4 << 20).pcp_lists(false).page_reporting(false).page_reporting_callback(Some(cb)),
    )
    .unwrap();
    let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let q = a.alloc_pages(Gfp::MOVABLE, 9).unwrap();
    a.free_pages(p, 0).unwrap();
    assert_eq!(reported(&a), 0);
    let first = a.reporting().report_free_pages_now();
    assert_eq!((first.blocks, first.errors), (0, 1), "{first:?}");
    assert_eq!(reported(&a), 0, "a failed release marks nothing");
    a.check_invariants().unwrap();
    assert_eq!(a.reporting().report_free_pages_now().pages, 512);
    assert_eq!(reported(&a), 512);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 2);
    a.free_pages(q, 9).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn young_blocks_wait_for_the_delay_and_the_order_is_respected() {
    let a = PageAllocator::new(
        Config::new().arena_bytes(2 << 20).pcp_lists(false).page_reporting(false).page_reporting_delay_ms(60_000),
    )
    .unwrap();
    let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let q = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    fill(&a, p, 0, 1);
    a.free_pages(p, 0).unwrap();
    assert_eq!(a.reporting().report_aged_free_pages().blocks, 0, "freed just now: kept resident");
    a.reporting().tune_page_reporting(1, 0, 32).unwrap();
    assert_eq!(a.reporting().report_aged_free_pages().blocks, 0, "order 0 is below the reporting order");
    a.reporting().tune_page_reporting(0, 0, 32).unwrap();
    assert_eq!(a.reporting().report_aged_free_pages().pages, 1);
    assert!(a.reporting().tune_page_reporting(11, 0, 32).is_err());
    assert!(a.reporting().tune_page_reporting(0, 0, 0).is_err());
    a.free_pages(q, 0).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn failed_releases_leave_blocks_unreported_and_intact() {
    let a = tiny();
    let keep = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let p = a.alloc_pages(Gfp::MOVABLE, 3).unwrap();
    fill(&a, p, 3, 0x5a);
    a.free_pages(p, 3).unwrap();
    let before = reported(&a);
    a.reporting().inject_report_errors(1);
    let r1 = a.reporting().report_free_pages_now();
    assert_eq!(r1.blocks, 0);
    assert!(r1.errors >= 1);
    assert_eq!(reported(&a), before);
    assert!(all_bytes(&a, p, 3, 0x5a), "a failed release changes nothing");
    a.check_invariants().unwrap();
    a.reporting().inject_report_errors(0);
    let r = a.reporting().report_free_pages_now();
    assert_eq!(r.errors, 0);
    assert!(r.blocks >= 1);
    assert!(all_bytes(&a, p, 3, 0), "released now");
    a.free_pages(keep, 0).unwrap();
    a.check_invariants().unwrap();
    assert_eq!(a.reporting().page_reporting_stats().errors, r1.errors);
}

#[test]
fn resident_backing_and_none_without_callback_cannot_report() {
    let a = PageAllocator::new(Config::small(2 << 20)).unwrap();
    assert!(!a.reporting().page_reporting_stats().enabled);
    assert!(!a.reporting().set_page_reporting(true));
    assert!(a.reporting().set_page_reporting(false));
    let b = PageAllocator::new(Config::new().arena_bytes(2 << 20).backing(Backing::Resident)).unwrap();
    assert_eq!(reported(&b), 0, "populated up front: resident");
    assert_eq!(b.reporting().report_free_pages_now().blocks, 0);
}

/// A checksum of a block's pattern: every 8-byte word is `seed ^ index`.
fn write_pattern(a: &PageAllocator, pfn: Pfn, order: u32, seed: u64) {
    let p = a.page_address(pfn).unwrap().as_ptr().cast::<u64>();
    for i in 0..(PAGE_SIZE << order) / 8 {
        // SAFETY: the block is allocated to this thread.
        unsafe { p.add(i).write(seed ^ i as u64) };
    }
}

fn pattern_ok(a: &PageAllocator, pfn: Pfn, order: u32, seed: u64) -> bool {
    let p = a.page_address(pfn).unwrap().as_ptr().cast::<u64>();
    // SAFETY: as above.
    (0..(PAGE_SIZE << order) / 8).all(|i| unsafe { p.add(i).read() } == seed ^ i as u64)
}

#[test]
fn stress_with_an_aggressive_reporter_loses_nothing() {
    let cfg = Config::new()
        .arena_bytes(32 << 20)
        .page_reporting_order(Some(0))
        .page_reporting_delay_ms(0)
        .page_reporting_batch(4);
    let a = PageAllocator::new(cfg).unwrap();
    assert!(a.reporting().page_reporting_stats().enabled);
    a.reporting().inject_report_errors(7);
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        // A second reporter beside the background one, synchronous passes.
        let (a2, stop2) = (a.clone(), stop.clone());
        s.spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                a2.reporting().report_free_pages_now();
                std::thread::yield_now();
            }
        });
        let workers: Vec<_> = (0..4u64)
            .map(|t| {
                let (a, bad) = (a.clone(), bad.clone());
                s.spawn(move || {
                    let mut live: Vec<(Pfn, u32, u64)> = Vec::new();
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                    for i in 0..3000u64 {
                        // Frees stay on the per-CPU lists until these
                        // overflow, which a few dozen live pages never make
                        // them do: without drains the reporter may find
                        // nothing to release while the workers run (it
                        // released nothing in 3 of 5 quiet runs).
                        if i % 256 == 255 {
                            a.drain_all_pages();
                        }
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if live.len() < 64 && (!x.is_multiple_of(3) || live.is_empty()) {
                            let order = (x >> 8) as u32 % 4;
                            let gfp = if x & 1 == 0 { Gfp::MOVABLE } else { Gfp::MOVABLE | Gfp::ZERO };
                            if let Ok(p) = a.alloc_pages(gfp, order) {
                                if gfp.contains(Gfp::ZERO) && !all_bytes(&a, p, order, 0) {
                                    bad.fetch_add(1, Ordering::Relaxed);
                                }
                                let seed = (t << 40) ^ i;
                                write_pattern(&a, p, order, seed);
                                live.push((p, order, seed));
                            }
                        } else {
                            let (p, order, seed) = live.swap_remove((x >> 16) as usize % live.len());
                            if !pattern_ok(&a, p, order, seed) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                            a.free_pages(p, order).unwrap();
                        }
                    }
                    live
                })
            })
            .collect();
        let lives: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        a.drain_all_pages();
        a.check_invariants().unwrap();
        let held: u64 = lives.iter().flatten().map(|&(_, o, _)| 1u64 << o).sum();
        let c = a.census();
        assert_eq!(c.allocated, held, "exact conservation: the census counts what the threads hold");
        assert_eq!(c.free + c.pcp + c.allocated, a.managed_pages());
        for (p, o, seed) in lives.into_iter().flatten() {
            assert!(pattern_ok(&a, p, o, seed), "live data intact at {p:?}");
            a.free_pages(p, o).unwrap();
        }
    });
    assert_eq!(bad.load(Ordering::Relaxed), 0, "no live page lost its data, every zeroed page read zero");
    let st = a.reporting().page_reporting_stats();
    assert!(st.released_blocks > 0 && st.errors > 0, "{st:?}");
    a.reporting().inject_report_errors(0);
    a.drain_all_pages();
    a.reporting().report_free_pages_now();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.allocated, 0);
    assert_eq!(c.free + c.pcp, a.managed_pages());
}

#[test]
fn init_on_alloc_zeroes_every_path_and_skips_released_blocks() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20).page_reporting(false).init_on_alloc(true)).unwrap();
    // Dirty some pages through every allocation path, free them, take them again.
    for round in 0..2u8 {
        let single: Vec<_> = (0..40).map(|i| a.alloc_pages(Gfp::MOVABLE, i % 3).map(|p| (p, i % 3)).unwrap()).collect();
        let mut slots = vec![None; 20];
        assert_eq!(a.alloc_pages_bulk(Gfp::MOVABLE, &mut slots), 20);
        let mut list = Vec::new();
        assert_eq!(a.alloc_pages_bulk_list(Gfp::MOVABLE, 100, &mut list), 100);
        // The linked list form, within the front cache's batch and over it.
        #[allow(unused_mut)]
        let mut linked: Vec<Pfn> = Vec::new();
        #[cfg(feature = "seed-variants")]
        for nr in [20, 100] {
            let c = a.alloc_pages_bulk_linked(Gfp::MOVABLE, nr);
            assert_eq!(c.len(), nr);
            linked.extend(a.chain_iter(&c));
            drop(c);
        }
        let all: Vec<(Pfn, u32)> = single
            .into_iter()
            .chain(slots.into_iter().flatten().map(|p| (p, 0)))
            .chain(list.into_iter().map(|p| (p, 0)))
            .chain(linked.into_iter().map(|p| (p, 0)))
            .collect();
        for &(p, o) in &all {
            assert!(all_bytes(&a, p, o, 0), "round {round}: {p:?} order {o} not zeroed");
            fill(&a, p, o, 0xee);
        }
        for (p, o) in all {
            a.free_pages(p, o).unwrap();
        }
    }
    assert!(
        a.reporting().page_reporting_stats().zeroing_skipped > 0,
        "the fresh (released) arena was not zeroed again"
    );
    a.check_invariants().unwrap();
}

/// init_on_alloc reaches `alloc_pages_nolock` too: a page written, freed
/// and taken back by it reads zero, and a page fresh from the released
/// arena is not zeroed again (counted as skipped). One CPU, so the freed page
/// waits on the one per-CPU list the next allocation pops (or, without
/// per-CPU lists, merges back into the block the next allocation splits).
#[test]
fn init_on_alloc_zeroes_nolock_allocations() {
    for (pcp, order) in [(true, 0), (true, 2), (false, 0), (false, 2)] {
        let cfg = Config::new().arena_bytes(8 << 20).page_reporting(false).nr_cpus(Some(1)).pcp_lists(pcp);
        let a = PageAllocator::new(cfg.init_on_alloc(true)).unwrap();
        let p = a.alloc_pages_nolock(Gfp::MOVABLE, order).unwrap();
        assert!(all_bytes(&a, p, order, 0), "pcp {pcp}: a fresh page reads zero");
        let st = a.reporting().page_reporting_stats();
        assert_eq!(st.zeroing_skipped, 1 << order, "pcp {pcp}: the released block was not zeroed");
        fill(&a, p, order, 0x5a);
        a.free_pages_nolock(p, order).unwrap();
        let mut held = Vec::new();
        let q = loop {
            let q = a.alloc_pages_nolock(Gfp::MOVABLE, order).unwrap();
            if q == p || held.len() == 64 {
                break q;
            }
            held.push(q);
        };
        assert_eq!(q, p, "pcp {pcp} order {order}: the written page came back");
        assert!(all_bytes(&a, q, order, 0), "pcp {pcp} order {order}: init_on_alloc zeroed it");
        assert_eq!(a.reporting().page_reporting_stats().zeroing_skipped, 1 << order, "a written page is never skipped");
        for r in held.into_iter().chain([q]) {
            a.free_pages_nolock(r, order).unwrap();
        }
        a.drain_all_pages();
        a.check_invariants().unwrap();
    }
}

/// After frees scattered between live pages, each run of adjacent free blocks
/// (whatever their orders) is released by one `madvise` call, and never a
/// live page with it.
#[test]
fn adjacent_free_blocks_are_released_by_one_call() {
    let a = tiny();
    let pfns: Vec<Pfn> = (0..64).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap()).collect();
    let base = pfns[0].as_u64();
    assert!(base.is_multiple_of(64), "precondition: the pages are split from one aligned block");
    for (i, p) in pfns.iter().enumerate() {
        assert_eq!(p.as_u64(), base + i as u64, "precondition: the pages are in address order");
        fill(&a, *p, 0, 0x77);
    }
    // Keep every fourth page and the last: the free pages form 15 runs of an
    // order-0 and an order-1 block (3 pages) and one run of two order-0 blocks.
    let live = |i: usize| i.is_multiple_of(4) || i == 63;
    for (i, p) in pfns.iter().enumerate() {
        if !live(i) {
            a.free_pages(*p, 0).unwrap();
        }
    }
    a.check_invariants().unwrap();
    let r = a.reporting().report_free_pages_now();
    assert_eq!((r.blocks, r.pages, r.releases, r.errors), (32, 47, 16, 0), "{r:?}");
    assert_eq!(a.reporting().page_reporting_stats().release_calls, 16);
    assert_eq!(reported(&a), a.managed_pages() - 17);
    for (i, p) in pfns.iter().enumerate() {
        let want = if live(i) { 0x77 } else { 0 };
        assert!(all_bytes(&a, *p, 0, want), "page {i}: live data kept, released pages read zero");
    }
    a.check_invariants().unwrap();
    for (i, p) in pfns.iter().enumerate() {
        if live(i) {
            a.free_pages(*p, 0).unwrap();
        }
    }
    // The last frees merge everything back into one unreported block.
    assert_eq!(a.reporting().report_free_pages_now().pages, a.managed_pages());
    assert_eq!(reported(&a), a.managed_pages());
    a.check_invariants().unwrap();
}

/// Failed merged releases: every block of the run stays unreported and keeps
/// its data; conservation holds.
#[test]
fn a_failed_merged_release_leaves_every_block_of_its_run() {
    let a = tiny();
    let pfns: Vec<Pfn> = (0..16).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap()).collect();
    for p in &pfns {
        fill(&a, *p, 0, 0x33);
    }
    for (i, p) in pfns.iter().enumerate() {
        if !i.is_multiple_of(4) && i != 15 {
            a.free_pages(*p, 0).unwrap();
        }
    }
    let before = reported(&a);
    a.reporting().inject_report_errors(1);
    let r = a.reporting().report_free_pages_now();
    // One failed run (two blocks) per list with eligible blocks (orders 1 and
    // 0): a failure ends the list's walk for the pass.
    assert_eq!((r.blocks, r.errors, r.releases), (0, 4, 2), "{r:?}");
    assert_eq!(reported(&a), before);
    for p in &pfns {
        assert!(all_bytes(&a, *p, 0, 0x33), "a failed release changes nothing");
    }
    a.check_invariants().unwrap();
    a.reporting().inject_report_errors(0);
    assert_eq!(a.reporting().report_free_pages_now().pages, 11);
    for (i, p) in pfns.iter().enumerate() {
        if i.is_multiple_of(4) || i == 15 {
            a.free_pages(*p, 0).unwrap();
        }
    }
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.allocated, 0);
    assert_eq!(c.free + c.pcp, a.managed_pages());
}

/// The background reporter alone (nothing called by the user): after a burst
/// freed in random order, once the allocator has been idle for the delay it
/// drains the per-CPU lists and front caches and releases every free page,
/// live pages intact. Polls with a generous limit; asserts counters only.
#[test]
fn the_idle_reporter_drains_per_cpu_lists_and_releases_every_free_page() {
    let a = PageAllocator::new(Config::new().arena_bytes(16 << 20).page_reporting_delay_ms(50)).unwrap();
    let mut pages: Vec<(Pfn, u8)> = (0..2000u32)
        .map(|i| {
            let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            let byte = (i % 255) as u8 + 1;
            fill(&a, p, 0, byte);
            (p, byte)
        })
        .collect();
    let mut x = 0x1234_5678_9abc_def1u64;
    for i in (1..pages.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pages.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let live: Vec<(Pfn, u8)> = pages.drain(..500).collect();
    for (p, _) in pages {
        a.free_pages(p, 0).unwrap();
    }
    let cached = |a: &PageAllocator| a.stats().pcp_report().iter().map(|c| u64::from(c.count)).sum::<u64>();
    let want = a.managed_pages() - live.len() as u64;
    let t0 = std::time::Instant::now();
    while (reported(&a) != want || cached(&a) != 0) && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(cached(&a), 0, "the idle reporter drained the per-CPU lists");
    assert_eq!(reported(&a), want, "every free page released");
    let st = a.reporting().page_reporting_stats();
    assert!(st.release_calls > 0 && st.release_calls <= st.released_blocks, "{st:?}");
    for &(p, byte) in &live {
        assert!(all_bytes(&a, p, 0, byte), "live data intact at {p:?}");
    }
    a.check_invariants().unwrap();
    for (p, _) in live {
        a.free_pages(p, 0).unwrap();
    }
    a.check_invariants().unwrap();
}
