//! Issue 19's signal test: a timer thread sends SIGUSR1 to a worker every
//! 50 us; the handler frees and allocates with the no-lock API while the
//! interrupted worker (and a second thread, for lock contention) allocates
//! and frees through the normal API. No deadlock (a watchdog aborts the
//! process if the worker stops making progress), no lost page, conservation
//! exact at the end.
//!
//! Duration: `PAGEALLOC_NOLOCK_SECS` (default 3 s in debug, 15 s with
//! `--release`). Figures: `cargo test --release -p pagealloc --test
//! nolock_signal -- --nocapture`.
//!
//! The only test in this file: the signal handler is process-wide.
//!
//! Not with `debug-checks`: its zone check allocates at lock release, and a
//! handler must not call malloc.
#![cfg(not(feature = "debug-checks"))]

use pagealloc::stats::events::VmEvent;
use pagealloc::{AllocError, Config, Gfp, PageAllocator, Pfn};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Blocks the handler holds between signals: `pfn << 8 | order`, 0 for none
/// (pfn 0 is a valid pfn, so the word stores `pfn + 1`).
const SLOTS: usize = 256;
static HELD: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static CURSOR: AtomicU64 = AtomicU64::new(0);
static ALLOC: AtomicPtr<PageAllocator> = AtomicPtr::new(std::ptr::null_mut());
static H_CALLS: AtomicU64 = AtomicU64::new(0);
static H_ALLOC_OK: AtomicU64 = AtomicU64::new(0);
static H_WOULD_BLOCK: AtomicU64 = AtomicU64::new(0);
static H_NO_MEMORY: AtomicU64 = AtomicU64::new(0);
static H_FREES: AtomicU64 = AtomicU64::new(0);
static H_ERRORS: AtomicU64 = AtomicU64::new(0);
/// Blocks handled per signal (frees and allocations each).
const PER_SIGNAL: u64 = 16;

extern "C" fn on_signal(_sig: libc::c_int) {
    // SAFETY: errno is this thread's; saved and restored around the handler.
    let errno = unsafe { *libc::__errno_location() };
    let a = ALLOC.load(Ordering::Acquire);
    if !a.is_null() {
        // SAFETY: the pointer is cleared before the allocator is dropped, and
        // the timer thread is joined first, so it is live while set.
        handle(unsafe { &*a });
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The handler's work: no heap, no locks of its own, only atomics and the
/// no-lock API.
fn handle(a: &PageAllocator) {
    H_CALLS.fetch_add(1, Ordering::Relaxed);
    let c = CURSOR.fetch_add(PER_SIGNAL, Ordering::Relaxed);
    for k in 0..PER_SIGNAL {
        let i = ((c + k) % SLOTS as u64) as usize;
        let w = HELD[i].swap(0, Ordering::Relaxed);
        if w != 0 {
            let (pfn, order) = (Pfn::new((w >> 8) - 1), (w & 0xff) as u32);
            match a.free_pages_nolock(pfn, order) {
                Ok(()) => H_FREES.fetch_add(1, Ordering::Relaxed),
                Err(_) => H_ERRORS.fetch_add(1, Ordering::Relaxed),
            };
        }
        let order = [0, 0, 0, 1, 0, 2, 0, 3][(c + k) as usize % 8];
        match a.alloc_pages_nolock(Gfp::KERNEL, order) {
            Ok(p) => {
                H_ALLOC_OK.fetch_add(1, Ordering::Relaxed);
                HELD[i].store(((p.as_u64() + 1) << 8) | order as u64, Ordering::Relaxed);
            }
            Err(AllocError::WouldBlock { .. }) => {
                H_WOULD_BLOCK.fetch_add(1, Ordering::Relaxed);
            }
            Err(AllocError::NoMemory { .. }) => {
                H_NO_MEMORY.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                H_ERRORS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Normal-API churn: keeps up to `keep` blocks of orders 0..=3, freeing in a
/// scrambled order; bumps `progress` each round.
fn churn(a: &PageAllocator, stop: &AtomicBool, progress: &AtomicU64, seed: u64, keep: usize) -> u64 {
    let mut held: Vec<(Pfn, u32)> = Vec::with_capacity(keep);
    let mut x = seed | 1;
    let mut ops = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if held.len() < keep && !x.is_multiple_of(3) {
                let order = [0, 0, 0, 0, 1, 2, 3, 0][(x >> 8) as usize % 8];
                if let Ok(p) = a.alloc_pages(Gfp::KERNEL, order) {
                    held.push((p, order));
                }
            } else if !held.is_empty() {
                let i = (x >> 16) as usize % held.len();
                let (p, o) = held.swap_remove(i);
                a.free_pages(p, o).unwrap();
            }
            ops += 1;
        }
        if x.is_multiple_of(512) {
            a.drain_local_pages();
        }
        progress.fetch_add(1, Ordering::Relaxed);
    }
    for (p, o) in held {
        a.free_pages(p, o).unwrap();
    }
    ops
}

#[test]
fn signal_handler_nolock_alloc_free_against_normal_api() {
    let secs: f64 = std::env::var("PAGEALLOC_NOLOCK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 3.0 } else { 15.0 });
    let a = Arc::new(PageAllocator::new(Config::small(64 << 20)).unwrap());
    let managed = a.managed_pages();
    ALLOC.store(Arc::as_ptr(&a) as *mut PageAllocator, Ordering::Release);

    // SAFETY: a plain handler (no SA_SIGINFO) with an empty mask; SA_RESTART
    // so the interrupted thread's own syscalls (membarrier, futex) resume.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let (a, stop, progress) = (a.clone(), stop.clone(), progress.clone());
        std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() } as u64).unwrap();
            churn(&a, &stop, &progress, 0x9e37_79b9_7f4a_7c15, 4096)
        })
    };
    let target = rx.recv().unwrap() as libc::pthread_t;
    let other = {
        let (a, stop) = (a.clone(), stop.clone());
        let p = Arc::new(AtomicU64::new(0));
        std::thread::spawn(move || churn(&a, &stop, &p, 0x2545_f491_4f6c_dd1d, 2048))
    };
    let sent = Arc::new(AtomicU64::new(0));
    let timer = {
        let (stop, sent) = (stop.clone(), sent.clone());
        let target = target as u64;
        std::thread::spawn(move || {
            // Absolute deadlines: a sleep's overshoot is caught up (a
            // backlog over 10 ms, a descheduled timer, is dropped).
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the worker is joined only after this thread stops.
                unsafe { libc::pthread_kill(target as libc::pthread_t, libc::SIGUSR1) };
                sent.fetch_add(1, Ordering::Relaxed);
                next += Duration::from_micros(50);
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else if now - next > Duration::from_millis(10) {
                    next = now;
                }
            }
        })
    };
    // Watchdog: the worker must make progress every few seconds.
    let t0 = Instant::now();
    let mut last = (0u64, Instant::now());
    while t0.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_millis(100));
        let p = progress.load(Ordering::Relaxed);
        if p != last.0 {
            last = (p, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(10) {
            eprintln!("DEADLOCK: the worker made no progress for 10 s");
            std::process::abort();
        }
    }
    stop.store(true, Ordering::Relaxed);
    timer.join().unwrap();
    let ops = worker.join().unwrap() + other.join().unwrap();
    ALLOC.store(std::ptr::null_mut(), Ordering::Release);
    let elapsed = t0.elapsed().as_secs_f64();

    // The handler's leftovers, freed from here (normal API).
    for s in HELD.iter() {
        let w = s.swap(0, Ordering::Relaxed);
        if w != 0 {
            a.free_pages(Pfn::new((w >> 8) - 1), (w & 0xff) as u32).unwrap();
        }
    }
    assert_eq!(H_ERRORS.load(Ordering::Relaxed), 0, "a no-lock call failed with an unexpected error");
    let (ok, wb, nomem) = (
        H_ALLOC_OK.load(Ordering::Relaxed),
        H_WOULD_BLOCK.load(Ordering::Relaxed),
        H_NO_MEMORY.load(Ordering::Relaxed),
    );
    assert_eq!(a.stats().event_count(VmEvent::NolockAlloc), ok);
    assert_eq!(a.stats().event_count(VmEvent::NolockAllocFail), wb + nomem);
    assert_eq!(a.stats().event_count(VmEvent::NolockFree), H_FREES.load(Ordering::Relaxed));
    let deferred = a.stats().event_count(VmEvent::NolockDeferred);
    let trylock_fail = a.stats().event_count(VmEvent::NolockTrylockFail);
    let calls = H_CALLS.load(Ordering::Relaxed);
    eprintln!(
        "nolock signal test: {elapsed:.1} s, {} signals sent, {calls} handler runs, {} handler allocations \
         tried: {ok} ok ({:.2}%), {wb} would-block, {nomem} no-memory; {} handler frees, {deferred} deferred; \
         {trylock_fail} trylock failures ({:.3} per no-lock call); {ops} normal-API ops",
        sent.load(Ordering::Relaxed),
        ok + wb + nomem,
        100.0 * ok as f64 / (ok + wb + nomem).max(1) as f64,
        H_FREES.load(Ordering::Relaxed),
        trylock_fail as f64 / (ok + wb + nomem + H_FREES.load(Ordering::Relaxed)).max(1) as f64,
    );
    assert!(calls > 0 && ok > 0, "the handler never allocated");

    // Conservation: everything is back; the deferred list included.
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.allocated, 0, "{c:?}");
    assert_eq!(c.free + c.pcp, managed, "{c:?}");
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!((c.free, c.pcp, c.allocated), (managed, 0, 0), "{c:?}");
    assert_eq!(a.nr_free_pages(), managed);
}
