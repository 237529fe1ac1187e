//! Tests of the page lock: API and bad input, the no-queue-access proof, FIFO
//! handoff, handoff storms on one page and on colliding pages, and a mixed
//! stress of every kind of wait with timeouts and cancellation.

use crate::page::flags;
use crate::pagelock::waitq::{self, page_wait_table};
use crate::*;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The designs under test: the waiters bit, and with `seed-variants` also the
/// old design that looks up the wait queue at every unlock.
const WAITERS_BIT: &[bool] = if cfg!(feature = "seed-variants") { &[true, false] } else { &[true] };

fn small(waiters_bit: bool, unfairness: u32) -> FrameAllocator {
    let cfg = Config::small(16 << 20).page_lock_unfairness(unfairness).pcp_lists(false);
    #[cfg(feature = "seed-variants")]
    let cfg = cfg.page_lock_waiters_bit(waiters_bit);
    #[cfg(not(feature = "seed-variants"))]
    assert!(waiters_bit, "the old lock design needs the seed-variants feature");
    FrameAllocator::new(cfg).unwrap()
}

/// (waiters bit, unfairness) pairs for the handoff tests.
fn handoff_designs() -> impl Iterator<Item = (bool, u32)> {
    [(true, 5), (true, 0), (false, 5)].into_iter().filter(|&(bit, _)| bit || WAITERS_BIT.len() > 1)
}

fn raw_flags(a: &FrameAllocator, pfn: Pfn) -> u32 {
    a.core.page_ref(pfn).unwrap().flags_racy()
}

fn key(a: &FrameAllocator, pfn: Pfn) -> usize {
    a.core.page_ref(pfn).unwrap().key()
}

/// Spin (with sleeps) until `n` waiters are queued on the page.
fn wait_queued(a: &FrameAllocator, pfn: Pfn, n: usize) {
    let t0 = Instant::now();
    while page_wait_table().queued(key(a, pfn)) < n {
        assert!(t0.elapsed() < Duration::from_secs(20), "waiters never queued");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Abort the whole test binary if a test hangs (a lost wakeup shows up as one).
fn watchdog(secs: u64, what: &'static str) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    thread::spawn(move || {
        let t0 = Instant::now();
        while !d.load(Ordering::Relaxed) {
            if t0.elapsed() > Duration::from_secs(secs) {
                eprintln!("watchdog: {what} hung for {secs} s (lost wakeup?)");
                std::process::abort();
            }
            thread::sleep(Duration::from_millis(20));
        }
    });
    done
}

#[test]
fn lock_unlock_trylock_and_guard() {
    let a = small(true, 5);
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    a.page_locks().lock_page(p).unwrap();
    assert!(a.page_locks().page_locked_racy(p));
    assert!(!a.page_locks().trylock_page(p));
    a.page_locks().unlock_page(p).unwrap();
    assert!(a.page_locks().trylock_page(p));
    a.page_locks().unlock_page(p).unwrap();
    {
        let g = a.page_locks().lock_page_guard(p).unwrap();
        assert_eq!(g.pfn(), p);
        assert!(a.page_locks().page_locked_racy(p));
    }
    assert!(!a.page_locks().page_locked_racy(p));
    assert!(!a.page_locks().page_uptodate(p));
    a.page_locks().lock_page_guard(p).unwrap().unlock_uptodate();
    assert!(a.page_locks().page_uptodate(p) && !a.page_locks().page_locked_racy(p));
    a.page_locks().clear_page_uptodate(p).unwrap();
    assert!(!a.page_locks().page_uptodate(p));
    a.page_locks().set_page_uptodate(p).unwrap();
    assert!(a.page_locks().page_uptodate(p));
    assert_eq!(raw_flags(&a, p) & flags::WAITERS, 0);
    a.free(p, 0).unwrap();
    // A new allocation of the same pfn starts with clean lock state.
    let q = a.alloc(Gfp::KERNEL, 0).unwrap();
    assert!(!a.page_locks().page_uptodate(q) && !a.page_locks().page_locked_racy(q));
    a.free(q, 0).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn writeback_set_end_wait() {
    let a = small(true, 5);
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    assert_eq!(a.page_locks().set_page_writeback(p), Ok(true));
    assert_eq!(a.page_locks().set_page_writeback(p), Ok(false));
    assert!(a.page_locks().page_writeback_racy(p));
    assert_eq!(a.page_locks().wait_on_page_writeback_timeout(p, Duration::from_millis(5)), Err(WaitError::TimedOut));
    // The timed-out waiter was the last: it cleared the waiters bit.
    assert_eq!(raw_flags(&a, p) & flags::WAITERS, 0);
    thread::scope(|s| {
        let h = s.spawn(|| a.page_locks().wait_on_page_writeback(p));
        wait_queued(&a, p, 1);
        a.page_locks().end_page_writeback(p).unwrap();
        h.join().unwrap().unwrap();
    });
    assert_eq!(raw_flags(&a, p) & (flags::WAITERS | flags::WRITEBACK), 0);
    a.page_locks().wait_on_page_writeback(p).unwrap();
    a.free(p, 0).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn bad_input_is_typed_and_harmless() {
    let a = small(true, 5);
    let p = a.alloc(Gfp::KERNEL, 2).unwrap();
    let free_before = a.nr_free_pages();
    // Unlock of an unlocked page.
    assert_eq!(a.page_locks().unlock_page(p), Err(PageStateError::NotLocked { pfn: p }));
    assert_eq!(a.page_locks().unlock_page_uptodate(p), Err(PageStateError::NotLocked { pfn: p }));
    assert!(!a.page_locks().page_uptodate(p));
    // end_page_writeback without writeback.
    assert_eq!(a.page_locks().end_page_writeback(p), Err(PageStateError::NotWriteback { pfn: p }));
    // A tail page of the block, a free page, a pfn out of range.
    assert_eq!(a.page_locks().lock_page(p.add(1)), Err(PageStateError::NotAllocated { pfn: p.add(1) }));
    let free = Pfn::new(p.as_u64() ^ 4); // the order-2 buddy of p is free
    assert_eq!(a.page_locks().lock_page(free), Err(PageStateError::NotAllocated { pfn: free }));
    assert!(!a.page_locks().trylock_page(free));
    assert_eq!(a.page_locks().unlock_page(free), Err(PageStateError::NotAllocated { pfn: free }));
    assert_eq!(a.page_locks().set_page_writeback(free), Err(PageStateError::NotAllocated { pfn: free }));
    assert_eq!(a.page_locks().end_page_writeback(free), Err(PageStateError::NotAllocated { pfn: free }));
    assert_eq!(a.page_locks().set_page_uptodate(free), Err(PageStateError::NotAllocated { pfn: free }));
    assert_eq!(a.page_locks().wait_on_page_locked(free), Err(PageStateError::NotAllocated { pfn: free }));
    assert_eq!(
        a.page_locks().lock_page_timeout(free, Duration::from_millis(1)),
        Err(WaitError::State(PageStateError::NotAllocated { pfn: free }))
    );
    let far = Pfn::new(1 << 40);
    assert_eq!(a.page_locks().lock_page(far), Err(PageStateError::OutOfRange { pfn: far }));
    assert_eq!(a.page_locks().unlock_page(far), Err(PageStateError::OutOfRange { pfn: far }));
    a.check_invariants().unwrap();
    // Free of a locked page, then of a page under writeback: refused, still allocated.
    a.page_locks().lock_page(p).unwrap();
    assert_eq!(a.free(p, 2), Err(FreeError::Locked { pfn: p }));
    assert!(a.page_locks().page_locked_racy(p));
    a.check_invariants().unwrap();
    a.page_locks().unlock_page(p).unwrap();
    a.page_locks().set_page_writeback(p).unwrap();
    assert_eq!(a.free(p, 2), Err(FreeError::Writeback { pfn: p }));
    a.check_invariants().unwrap();
    a.page_locks().end_page_writeback(p).unwrap();
    assert_eq!(a.nr_free_pages(), free_before);
    a.free(p, 2).unwrap();
    assert_eq!(a.page_locks().lock_page(p), Err(PageStateError::NotAllocated { pfn: p }));
    a.check_invariants().unwrap();
}

#[test]
fn free_clears_a_stale_waiters_bit() {
    let a = small(true, 5);
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    // What a hash-mate's waiter can leave behind.
    a.core.page_ref(p).unwrap().flags.fetch_or(flags::WAITERS, Ordering::Relaxed);
    a.page_locks().lock_page(p).unwrap();
    a.page_locks().unlock_page(p).unwrap(); // looks up the queue, finds nobody, clears it
    assert_eq!(raw_flags(&a, p) & flags::WAITERS, 0);
    a.core.page_ref(p).unwrap().flags.fetch_or(flags::WAITERS | flags::UPTODATE, Ordering::Relaxed);
    a.free(p, 0).unwrap();
    a.check_invariants().unwrap();
    let q = a.alloc(Gfp::KERNEL, 0).unwrap();
    assert_eq!(q, p);
    assert_eq!(raw_flags(&a, q), flags::HEAD);
    a.free(q, 0).unwrap();
}

#[test]
fn unlock_without_waiters_never_touches_the_wait_queue() {
    for &waiters_bit in WAITERS_BIT {
        let a = small(waiters_bit, 5);
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        let before = waitq::accesses_on_this_thread();
        for _ in 0..1000 {
            a.page_locks().lock_page(p).unwrap();
            a.page_locks().unlock_page(p).unwrap();
            a.page_locks().lock_page(p).unwrap();
            a.page_locks().unlock_page_uptodate(p).unwrap();
            a.page_locks().set_page_writeback(p).unwrap();
            a.page_locks().end_page_writeback(p).unwrap();
        }
        let accesses = waitq::accesses_on_this_thread() - before;
        if waiters_bit {
            assert_eq!(accesses, 0, "the waiters bit must spare every lookup");
        } else {
            assert_eq!(accesses, 3000, "the old design looks up the queue at every unlock");
        }
        a.free(p, 0).unwrap();
    }
}

#[test]
fn timeout_and_cancel_leave_the_lock_alone() {
    let a = small(true, 5);
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    a.page_locks().lock_page(p).unwrap();
    let t0 = Instant::now();
    assert_eq!(a.page_locks().lock_page_timeout(p, Duration::from_millis(20)), Err(WaitError::TimedOut));
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert_eq!(a.page_locks().wait_on_page_locked_timeout(p, Duration::from_millis(1)), Err(WaitError::TimedOut));
    let tok = CancelToken::new();
    thread::scope(|s| {
        let h1 = s.spawn(|| a.page_locks().lock_page_cancellable(p, &tok));
        let h2 = s.spawn(|| a.page_locks().wait_on_page_locked_cancellable(p, &tok));
        wait_queued(&a, p, 2);
        assert_ne!(raw_flags(&a, p) & flags::WAITERS, 0);
        tok.cancel();
        assert_eq!(h1.join().unwrap(), Err(WaitError::Cancelled));
        assert_eq!(h2.join().unwrap(), Err(WaitError::Cancelled));
    });
    // The last aborting waiter cleared the bit; the lock is still ours.
    assert_eq!(raw_flags(&a, p) & (flags::WAITERS | flags::LOCKED), flags::LOCKED);
    assert_eq!(a.page_locks().lock_page_cancellable(p, &tok), Err(WaitError::Cancelled));
    a.page_locks().unlock_page(p).unwrap();
    assert_eq!(a.page_locks().lock_page_cancellable(p, &tok), Ok(()), "an uncontended lock ignores the token");
    a.page_locks().unlock_page(p).unwrap();
    a.free(p, 0).unwrap();
}

#[test]
fn shared_waiters_all_wake_at_unlock() {
    for &waiters_bit in WAITERS_BIT {
        let a = small(waiters_bit, 5);
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        a.page_locks().lock_page(p).unwrap();
        thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| a.page_locks().wait_on_page_locked(p))).collect();
            wait_queued(&a, p, 4);
            a.page_locks().unlock_page(p).unwrap();
            for h in hs {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(raw_flags(&a, p) & flags::WAITERS, 0);
        a.free(p, 0).unwrap();
    }
}

#[test]
fn unfairness_zero_hands_off_in_arrival_order() {
    for &waiters_bit in WAITERS_BIT {
        let a = small(waiters_bit, 0);
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        let order = Mutex::new(Vec::new());
        a.page_locks().lock_page(p).unwrap();
        thread::scope(|s| {
            let mut hs = Vec::new();
            for i in 0..6 {
                let (a, order) = (&a, &order);
                hs.push(s.spawn(move || {
                    a.page_locks().lock_page(p).unwrap();
                    order.lock().unwrap().push(i);
                    a.page_locks().unlock_page(p).unwrap();
                }));
                wait_queued(a, p, i + 1);
            }
            a.page_locks().unlock_page(p).unwrap();
            for h in hs {
                h.join().unwrap();
            }
        });
        assert_eq!(*order.lock().unwrap(), (0..6).collect::<Vec<_>>());
        assert_eq!(raw_flags(&a, p) & (flags::WAITERS | flags::LOCKED), 0);
        a.free(p, 0).unwrap();
    }
}

/// `threads` threads each take the lock of their page `per_thread` times; a
/// plain counter updated only under the lock must come out exact. Returns the
/// handoffs: acquisitions by another thread than the page's previous owner.
fn handoff_storm(a: &FrameAllocator, pages: &[Pfn], threads: usize, per_thread: u64) -> u64 {
    // Per page: acquisitions and last owner, both written only under the lock.
    let counters: Vec<[AtomicU64; 2]> = pages.iter().map(|_| Default::default()).collect();
    let handoffs = AtomicU64::new(0);
    let done = watchdog(600, "handoff storm");
    let start = Barrier::new(threads);
    thread::scope(|s| {
        for t in 0..threads {
            let (a, counters, start, handoffs) = (a, &counters, &start, &handoffs);
            s.spawn(move || {
                let k = t % pages.len();
                let [count, owner] = &counters[k];
                let mut h = 0;
                start.wait();
                for i in 0..per_thread {
                    a.page_locks().lock_page(pages[k]).unwrap();
                    // A non-atomic increment in effect: exact only under mutual exclusion.
                    count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    if owner.load(Ordering::Relaxed) != t as u64 + 1 {
                        owner.store(t as u64 + 1, Ordering::Relaxed);
                        h += 1;
                    }
                    if i % 64 == 0 {
                        // Hold the lock across a yield now and then, so others queue.
                        thread::yield_now();
                    }
                    a.page_locks().unlock_page(pages[k]).unwrap();
                }
                handoffs.fetch_add(h, Ordering::Relaxed);
            });
        }
    });
    done.store(true, Ordering::Relaxed);
    let total: u64 = counters.iter().map(|c| c[0].load(Ordering::Relaxed)).sum();
    assert_eq!(total, threads as u64 * per_thread);
    for &p in pages {
        assert_eq!(raw_flags(a, p) & (flags::WAITERS | flags::LOCKED), 0, "{p:?} left locked or with waiters");
    }
    handoffs.load(Ordering::Relaxed)
}

/// Pages whose wait-queue bucket is the same (found by search).
fn colliding_pages(a: &FrameAllocator, n: usize) -> Vec<Pfn> {
    let mut by_bucket: std::collections::HashMap<usize, Vec<Pfn>> = Default::default();
    loop {
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        let v = by_bucket.entry(a.page_locks().page_wait_bucket(p).unwrap()).or_default();
        v.push(p);
        if v.len() == n {
            let found = v.clone();
            for (_, v) in by_bucket {
                for q in v.into_iter().filter(|q| !found.contains(q)) {
                    a.free(q, 0).unwrap();
                }
            }
            return found;
        }
    }
}

#[test]
fn handoffs_on_one_page() {
    for (waiters_bit, unfairness) in handoff_designs() {
        let a = small(waiters_bit, unfairness);
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        let per = if unfairness == 0 { 2_000 } else { 20_000 };
        handoff_storm(&a, &[p], 8, per);
        a.free(p, 0).unwrap();
        a.check_invariants().unwrap();
    }
}

#[test]
fn handoffs_on_colliding_pages() {
    for &waiters_bit in WAITERS_BIT {
        let a = small(waiters_bit, 5);
        let pages = colliding_pages(&a, 4);
        handoff_storm(&a, &pages, 8, 10_000);
        for p in pages {
            a.free(p, 0).unwrap();
        }
        a.check_invariants().unwrap();
    }
}

/// The figure: 8 threads, 10 million lock acquisitions on one page, then
/// the same over four colliding pages (two threads per page), for the default,
/// strict-FIFO and old designs. Run with
/// `cargo test --release -p pagealloc ten_million -- --ignored --nocapture`.
#[test]
#[ignore = "long: 10 million acquisitions; run in release"]
fn ten_million_handoffs() {
    for (waiters_bit, unfairness) in handoff_designs() {
        let a = small(waiters_bit, unfairness);
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        let t0 = Instant::now();
        let h = handoff_storm(&a, &[p], 8, 1_250_000);
        eprintln!(
            "waiters_bit={waiters_bit} unfairness={unfairness}: one page: 10M acquisitions, {h} owner changes, {:?}",
            t0.elapsed()
        );
        let pages = colliding_pages(&a, 4);
        let t0 = Instant::now();
        let h = handoff_storm(&a, &pages, 8, 1_250_000);
        eprintln!(
            "waiters_bit={waiters_bit} unfairness={unfairness}: 4 colliding pages: 10M acquisitions, {h} owner changes, {:?}",
            t0.elapsed()
        );
        a.check_invariants().unwrap();
    }
}

/// Every kind of wait at once, on more threads than cores, with timeouts and
/// cancellation: every waiter must return.
#[test]
fn mixed_waiters_stress() {
    let a = small(true, 2);
    let pages: Vec<Pfn> = (0..3).map(|_| a.alloc(Gfp::KERNEL, 0).unwrap()).collect();
    let stop = AtomicBool::new(false);
    let returned = AtomicUsize::new(0);
    let cancels: Vec<CancelToken> = (0..4).map(|_| CancelToken::new()).collect();
    let done = watchdog(60, "mixed waiters stress");
    thread::scope(|s| {
        for t in 0..12usize {
            let (a, pages, stop, returned, cancels) = (&a, &pages, &stop, &returned, &cancels);
            s.spawn(move || {
                let mut rng = t as u64 * 0x9E37_79B9 + 1;
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                while !stop.load(Ordering::Relaxed) {
                    let p = pages[next() as usize % pages.len()];
                    match (t + next() as usize) % 7 {
                        0 | 1 => {
                            a.page_locks().lock_page(p).unwrap();
                            thread::yield_now();
                            a.page_locks().unlock_page(p).unwrap();
                        }
                        2 => {
                            if a.page_locks().lock_page_timeout(p, Duration::from_micros(next() % 300)).is_ok() {
                                a.page_locks().unlock_page(p).unwrap();
                            }
                        }
                        3 => match a.page_locks().lock_page_cancellable(p, &cancels[t % 4]) {
                            Ok(()) => a.page_locks().unlock_page_uptodate(p).unwrap(),
                            Err(e) => assert_eq!(e, WaitError::Cancelled),
                        },
                        4 => {
                            let r = a.page_locks().wait_on_page_locked_cancellable(p, &cancels[(t + 1) % 4]);
                            assert!(matches!(r, Ok(()) | Err(WaitError::Cancelled)));
                        }
                        5 => {
                            if a.page_locks().set_page_writeback(p).unwrap() {
                                thread::yield_now();
                                a.page_locks().end_page_writeback(p).unwrap();
                            } else {
                                let _ = a
                                    .page_locks()
                                    .wait_on_page_writeback_timeout(p, Duration::from_micros(next() % 500));
                            }
                        }
                        _ => a.page_locks().wait_on_page_writeback(p).unwrap_or_else(|e| panic!("{e}")),
                    }
                    returned.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // Cancel tokens now and then; a cancelled token stays cancelled, so swap
        // in fresh behaviour by cancelling each only once, late.
        let (stop, cancels) = (&stop, &cancels);
        s.spawn(move || {
            for c in cancels {
                thread::sleep(Duration::from_millis(150));
                c.cancel();
            }
            thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
        });
    });
    done.store(true, Ordering::Relaxed);
    assert!(returned.load(Ordering::Relaxed) > 100);
    for p in pages {
        // Writeback waiters that ran out of writers all returned; nothing is held.
        assert_eq!(raw_flags(&a, p) & (flags::LOCKED | flags::WRITEBACK), 0);
        a.free(p, 0).unwrap();
    }
    a.check_invariants().unwrap();
}
