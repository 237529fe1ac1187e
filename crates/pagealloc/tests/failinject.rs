//! Failure injection (`--features fail-inject`): allocations fail as configured
//! with `AllocError::Injected`, forced per-CPU trylock failures send requests
//! down the buddy fallback paths, and a multi-threaded workload under both
//! loses no page (conservation after all frees).
//!
//! Run with `cargo test -p pagealloc --features fail-inject --test failinject`.
#![cfg(feature = "fail-inject")]

use pagealloc::failinject::{self, FailConfig};
use pagealloc::{AllocError, Config, Gfp, MovableOps, PageAllocator, Pfn};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The injection settings are process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn small() -> PageAllocator {
    PageAllocator::new(Config::small(16 << 20).nr_cpus(Some(2))).unwrap()
}

#[test]
fn fails_after_n_calls_at_most_times() {
    let _s = serial();
    let a = small();
    failinject::configure(FailConfig { alloc_after: Some(5), alloc_times: Some(3), ..FailConfig::new() }.only(&a));
    let r: Vec<_> = (0..10).map(|_| a.alloc_pages(Gfp::KERNEL, 0)).collect();
    failinject::disable();
    let injected = r.iter().filter(|x| **x == Err(AllocError::Injected)).count();
    assert!(r[..5].iter().all(|x| x.is_ok()), "{r:?}");
    assert!(r[5..8].iter().all(|x| *x == Err(AllocError::Injected)), "{r:?}");
    assert!(r[8..].iter().all(|x| x.is_ok()), "{r:?}");
    assert_eq!(injected, 3);
    assert_eq!(failinject::stats().alloc_injected, 3);
    for p in r.into_iter().flatten() {
        a.free_pages(p, 0).unwrap();
    }
    a.check_invariants().unwrap();
}

#[test]
fn interval_min_order_and_other_allocators() {
    let _s = serial();
    let a = small();
    let other = small();
    failinject::configure(FailConfig { alloc_interval: 2, min_order: 1, ..FailConfig::new() }.only(&a));
    // Order 0 is below min_order: never fails, never counted.
    for _ in 0..10 {
        let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
        a.free_pages(p, 0).unwrap();
    }
    // Every second call of order >= 1 fails.
    let r: Vec<_> = (0..6).map(|_| a.alloc_pages(Gfp::MOVABLE, 2)).collect();
    assert_eq!(r.iter().filter(|x| **x == Err(AllocError::Injected)).count(), 3, "{r:?}");
    // Another allocator is untouched.
    for _ in 0..6 {
        let p = other.alloc_pages(Gfp::MOVABLE, 2).unwrap();
        other.free_pages(p, 2).unwrap();
    }
    failinject::disable();
    for p in r.into_iter().flatten() {
        a.free_pages(p, 2).unwrap();
    }
    a.check_invariants().unwrap();
}

#[test]
fn forced_trylock_failures_take_the_buddy_paths() {
    let _s = serial();
    // No front cache, so every order-0 request meets the per-CPU trylock.
    let a = PageAllocator::new(Config::small(16 << 20).nr_cpus(Some(2)).front_cache(false)).unwrap();
    failinject::configure(FailConfig { trylock_rate_ppm: 1_000_000, ..FailConfig::new() }.only(&a));
    let pages: Vec<Pfn> = (0..100).map(|_| a.alloc_pages(Gfp::KERNEL, 0).unwrap()).collect();
    for &p in &pages {
        a.free_pages(p, 0).unwrap();
    }
    let s = failinject::stats();
    failinject::disable();
    assert!(s.trylock_injected >= 200, "{s:?}");
    // Every page went to and came from the buddy: nothing on per-CPU lists.
    assert!(a.stats().pcp_report().iter().all(|r| r.count == 0));
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    assert!(a.stats().pcpstat().pcp_trylock_fail >= 200);
    a.check_invariants().unwrap();
}

/// The stress workload: 8 threads, every order and type, single and bulk,
/// contiguous ranges, cross-thread frees, drains, with 5% of allocations and
/// 20% of per-CPU trylocks failing. Afterwards every page is back.
#[test]
fn stress_with_injection_loses_nothing() {
    let _s = serial();
    let a = PageAllocator::new(Config::small(64 << 20).nr_cpus(Some(4)).nodes(2).movable_zone_bytes(4 << 20)).unwrap();
    failinject::configure(
        FailConfig { alloc_rate_ppm: 50_000, trylock_rate_ppm: 200_000, seed: 7, ..FailConfig::new() }.only(&a),
    );
    let shared: Arc<Mutex<Vec<(Pfn, u32)>>> = Arc::default();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let a = a.clone();
            let shared = shared.clone();
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1).wrapping_mul(0x1234_5678_9abc);
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let mut mine: Vec<(Pfn, u32)> = Vec::new();
                for i in 0..2500 {
                    let r = next();
                    let gfp = Gfp::from_bits_truncate((r >> 32) as u32 & 0xf);
                    match r % 10 {
                        0..=3 => {
                            let order = [0, 0, 0, 1, 2, 3, 4, 9, 10][(r >> 8) as usize % 9];
                            match a.alloc_pages(gfp, order) {
                                Ok(p) => mine.push((p, order)),
                                Err(AllocError::Injected | AllocError::NoMemory { .. }) => {}
                                Err(e) => panic!("{e}"),
                            }
                        }
                        4 => {
                            let mut slots = vec![None; 1 + (r >> 8) as usize % 40];
                            a.alloc_pages_bulk(gfp, &mut slots);
                            mine.extend(slots.into_iter().flatten().map(|p| (p, 0)));
                        }
                        5 => {
                            let take: Vec<Pfn> = mine.iter().filter(|b| b.1 == 0).map(|b| b.0).take(16).collect();
                            mine.retain(|b| !(b.1 == 0 && take.contains(&b.0)));
                            a.free_pages_bulk(&take).unwrap();
                        }
                        6 if i % 50 == 0 => {
                            if let Ok(p) = a.contig().alloc_contig_pages(1 + (r >> 8) % 300, gfp) {
                                let n = 1 + (r >> 8) % 300;
                                a.contig().free_contig_range(p, n).unwrap();
                            }
                        }
                        7 => {
                            if let Some(b) = mine.pop() {
                                shared.lock().unwrap().push(b);
                            }
                            let b = shared.lock().unwrap().pop();
                            if let Some((p, o)) = b {
                                a.free_pages(p, o).unwrap();
                            }
                        }
                        8 if i % 20 == 0 => a.drain_local_pages(),
                        _ => {
                            if let Some((p, o)) = mine.pop() {
                                a.free_pages(p, o).unwrap();
                            }
                        }
                    }
                }
                for (p, o) in mine {
                    a.free_pages(p, o).unwrap();
                }
            });
        }
    });
    let st = failinject::stats();
    failinject::disable();
    for (p, o) in shared.lock().unwrap().drain(..) {
        a.free_pages(p, o).unwrap();
    }
    assert!(st.alloc_injected > 100 && st.trylock_injected > 100, "too little injected: {st:?}");
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!((c.allocated, c.pcp), (0, 0), "{c:?}");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages leaked under injection");
}

/// The arena of the stale-call races: 4 MiB, two CPUs, no reserve, no
/// reporter thread.
fn race_config() -> Config {
    Config::new().arena_bytes(4 << 20).nr_cpus(Some(2)).min_free_kbytes(Some(0)).page_reporting(false)
}

/// A xorshift step: the races' cheap per-thread choices.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Consistent, and every page free once the caches are drained.
fn whole(a: &PageAllocator) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "every page free again");
}

/// Stale raw frees at every order racing owners who free and reallocate
/// the same pfns at other orders, and `Pages` handles whose frames carry
/// their owner's mark: a free lands on the block as it is when its claim
/// does (see `page_alloc::claim`), so no handle's frame is ever handed out
/// again (each handle finds its mark intact) and the allocator ends whole.
/// The race is rare in real time (the loom model
/// `stale_free_races_reallocation_at_another_order` finds it every time):
/// every free yields the CPU between its checks and its claim here, and
/// there are more threads than cores. With the claims' re-read of the
/// private word taken out, it failed 3 runs of 3 (release), each on
/// `check_invariants` ("free_blocks[0][Movable] = 39 but the list has 33":
/// heads freed at an order they no longer had).
#[test]
fn stale_frees_racing_reallocation_never_free_a_held_frame() {
    let _s = serial();
    failinject::set_claim_window(1);
    let a = Arc::new(PageAllocator::new(race_config()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // The pfns owners freed last, for the stale freers to aim at.
    let recent: Arc<Vec<AtomicU64>> = Arc::new((0..64).map(|_| AtomicU64::new(0)).collect());
    let mut hs = Vec::new();
    for t in 0..3u64 {
        let (a, stop, recent) = (a.clone(), stop.clone(), recent.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = t + 1;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                xorshift(&mut x);
                let order = (x % 3) as u32;
                if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, order) {
                    // A stale free may have taken it already: its own free
                    // is then refused, which is the misuse's cost.
                    let _ = a.free_pages(p, order);
                    recent[i % 64].store(p.as_u64(), Ordering::Relaxed);
                    i += 1;
                }
                if i.is_multiple_of(512) {
                    a.drain_local_pages();
                }
            }
        }));
    }
    for t in 0..2u64 {
        let (a, stop, recent) = (a.clone(), stop.clone(), recent.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = 99 + t;
            while !stop.load(Ordering::Relaxed) {
                xorshift(&mut x);
                let p = Pfn::new(recent[(x % 64) as usize].load(Ordering::Relaxed));
                let _ = a.free_pages(p, ((x >> 8) % 3) as u32);
            }
        }));
    }
    // Two markers with marks of their own (high bit clear, set): a frame
    // one of them holds that the other is handed gets the other's mark.
    let markers: Vec<_> = (0..2u8)
        .map(|m| {
            let (a, stop) = (a.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut checked = 0u64;
                let mut n = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                    let order = u32::from(n % 2);
                    let Ok(mut h) = a.alloc(Gfp::MOVABLE, order) else { continue };
                    let mark = (n & 0x7f) | 1 | (m << 7);
                    h.as_mut_slice().unwrap().fill(mark);
                    std::thread::yield_now();
                    let s = h.as_mut_slice().unwrap();
                    assert!(s.iter().all(|&b| b == mark), "a held frame at {:?} was written by another owner", h.pfn());
                    checked += 1;
                }
                checked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    failinject::set_claim_window(0);
    for h in hs {
        h.join().unwrap();
    }
    for m in markers {
        assert!(m.join().unwrap() > 0);
    }
    whole(&a);
}

/// Takes every migration and remembers the targets (raw pages it then owns).
struct Accept(Mutex<Vec<u64>>);

impl MovableOps for Accept {
    fn migrate(&self, _from: Pfn, to: Pfn) -> bool {
        self.0.lock().unwrap().push(to.as_u64());
        true
    }
}

/// Stale `set_page_movable` calls racing owners who free and reallocate the
/// same pfns at orders 0-2 (a window of live blocks each), while a
/// compactor migrates whatever is marked and every free, mark and isolation
/// yields in its claim window: pages move (the test checks some did), and
/// the allocator ends whole. The mark and the isolation read the page's
/// order before their CAS and check it again after (a block reallocated
/// larger meanwhile is neither marked nor moved: moving it as one page would
/// free its head as order 0). That race needs a stale mark and the
/// compactor's check each to land in their window at once, and this test
/// did not catch it with the checks taken out (3 runs of 3 passed): it is a
/// guard for the rest, not the race's reproducer.
#[test]
fn stale_movable_marks_racing_reallocation_never_move_a_larger_block() {
    let _s = serial();
    failinject::set_claim_window(1);
    let a = Arc::new(PageAllocator::new(race_config().compaction_proactiveness(0)).unwrap());
    let ops = Arc::new(Accept(Mutex::new(Vec::new())));
    let id = a.compaction().register_movable_ops(ops.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let recent: Arc<Vec<AtomicU64>> = Arc::new((0..64).map(|_| AtomicU64::new(0)).collect());
    let mut hs = Vec::new();
    for t in 0..2u64 {
        let (a, stop, recent) = (a.clone(), stop.clone(), recent.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = t + 1;
            let mut i = 0usize;
            // A window of live blocks, oldest freed first: the arena stays
            // fragmented, so the compactor has marked pages to move.
            let mut live = std::collections::VecDeque::new();
            while !stop.load(Ordering::Relaxed) {
                xorshift(&mut x);
                let order = (x % 3) as u32;
                if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, order) {
                    recent[i % 64].store(p.as_u64(), Ordering::Relaxed);
                    i += 1;
                    live.push_back((p, order));
                }
                if live.len() > 128 || (x >> 20) % 4 == 0 {
                    if let Some((p, order)) = live.pop_front() {
                        // Migrated meanwhile (its frame freed), or freed by
                        // a stale call: this free may be refused then.
                        let _ = a.compaction().clear_page_movable(p);
                        let _ = a.free_pages(p, order);
                    }
                }
                if i.is_multiple_of(256) {
                    a.drain_local_pages();
                }
            }
            for (p, order) in live {
                let _ = a.compaction().clear_page_movable(p);
                let _ = a.free_pages(p, order);
            }
        }));
    }
    {
        let (a, stop, recent) = (a.clone(), stop.clone(), recent.clone());
        hs.push(std::thread::spawn(move || {
            let mut x = 7u64;
            while !stop.load(Ordering::Relaxed) {
                xorshift(&mut x);
                let p = Pfn::new(recent[(x % 64) as usize].load(Ordering::Relaxed));
                let _ = a.compaction().set_page_movable(p, id);
            }
        }));
    }
    {
        let (a, stop) = (a.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                a.compaction().compact_memory();
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    failinject::set_claim_window(0);
    for h in hs {
        h.join().unwrap();
    }
    // Migration targets are raw pages nobody else frees (unless freed by a
    // stale free or moved again since: refused then).
    let targets = std::mem::take(&mut *ops.0.lock().unwrap());
    assert!(!targets.is_empty(), "the compactor moved no page: the race was not run");
    for p in targets {
        let _ = a.compaction().clear_page_movable(Pfn::new(p));
        let _ = a.free_pages(Pfn::new(p), 0);
    }
    whole(&a);
}
