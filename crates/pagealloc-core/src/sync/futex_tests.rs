//! The futex mutex: exclusion, wake-ups, `try_lock`, and an unlock from a
//! signal handler that interrupted a thread asleep on another futex lock.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wait until `f` holds, failing the test after `secs` (a hang would
/// otherwise stall the whole test run).
fn wait_for(what: &str, secs: u64, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_micros(50));
    }
}

#[test]
fn try_lock_states() {
    let m = FutexMutex::new(5u32);
    assert_eq!(m.state(), UNLOCKED);
    let mut g = m.try_lock().expect("free lock");
    assert_eq!(m.state(), LOCKED);
    *g += 1;
    assert!(m.try_lock().is_none(), "a held lock cannot be try-locked");
    drop(g);
    assert_eq!(m.state(), UNLOCKED);
    assert_eq!(*m.lock(), 6);
    assert_eq!(m.state(), UNLOCKED);
}

/// A non-atomic read-modify-write under the lock from many threads: any lapse
/// of exclusion loses increments.
#[test]
fn exclusion_counter() {
    const THREADS: usize = 8;
    const ITERS: u64 = 20_000;
    let m = Arc::new(FutexMutex::new((0u64, 0u64)));
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..ITERS {
                    let mut g = if (i + t as u64).is_multiple_of(4) {
                        loop {
                            if let Some(g) = m.try_lock() {
                                break g;
                            }
                            std::hint::spin_loop();
                        }
                    } else {
                        m.lock()
                    };
                    // Two words, read and written apart: a second holder
                    // would make them disagree.
                    let a = g.0;
                    std::hint::black_box(&mut *g);
                    g.0 = a + 1;
                    g.1 += 1;
                    assert_eq!(g.0, g.1);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let g = m.lock();
    assert_eq!(g.0, THREADS as u64 * ITERS);
    assert_eq!(g.1, THREADS as u64 * ITERS);
    drop(g);
    assert_eq!(m.state(), UNLOCKED);
}

/// Waiters that sleep (the holder keeps the lock far longer than the spin)
/// are all woken, one unlock at a time.
#[test]
fn contended_wake() {
    let m = Arc::new(FutexMutex::new(0u32));
    let g = m.lock();
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || *m.lock() += 1)
        })
        .collect();
    // The waiters announce themselves with CONTENDED before they sleep.
    wait_for("a waiter to mark the lock contended", 10, || m.state() == CONTENDED);
    std::thread::sleep(Duration::from_millis(20));
    drop(g);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let joiner = std::thread::spawn(move || {
        for h in hs {
            h.join().unwrap();
        }
        d.store(true, Ordering::Release);
    });
    wait_for("every waiter to be woken", 10, || done.load(Ordering::Acquire));
    joiner.join().unwrap();
    assert_eq!(*m.lock(), 4);
    assert_eq!(m.state(), UNLOCKED);
}

static SIG_LOCK: FutexMutex<u64> = FutexMutex::new(0);
static OTHER_LOCK: FutexMutex<()> = FutexMutex::new(());
static HANDLER_HOLDS: AtomicBool = AtomicBool::new(false);
static HANDLER_DONE: AtomicBool = AtomicBool::new(false);
static HANDLER_WOKE: AtomicU64 = AtomicU64::new(0);

/// Try-lock `SIG_LOCK`, hold it until a waiter sleeps on it (bounded), then
/// unlock: the unlock must wake that waiter from signal context.
extern "C" fn handler(_: libc::c_int) {
    if let Some(mut g) = SIG_LOCK.try_lock() {
        HANDLER_HOLDS.store(true, Ordering::Release);
        let mut n = 0u64;
        while SIG_LOCK.state() != CONTENDED && n < 2_000_000_000 {
            std::hint::spin_loop();
            n += 1;
        }
        if SIG_LOCK.state() == CONTENDED {
            HANDLER_WOKE.store(1, Ordering::Relaxed);
        }
        *g += 1;
    }
    HANDLER_DONE.store(true, Ordering::Release);
}

/// The property the no-lock paths need: a handler's unlock of a lock another
/// thread sleeps on wakes it, while the handler's own thread was interrupted
/// asleep inside another futex lock's `lock` (where parking_lot's unlock
/// could need the very table bucket the interrupted thread holds). Thread
/// `i` sleeps on `OTHER_LOCK`; it gets SIGUSR2; its handler takes
/// `SIG_LOCK`; thread `w` sleeps on `SIG_LOCK`; the handler unlocks. Nothing
/// may hang (every wait is bounded).
#[test]
fn unlock_from_signal_handler_wakes_sleeper() {
    // SAFETY: installing a handler for SIGUSR2, which no other test uses;
    // the handler only touches statics and atomics.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    let other = OTHER_LOCK.lock();
    let tid = Arc::new(AtomicU64::new(0));
    let t = tid.clone();
    let i = std::thread::spawn(move || {
        // SAFETY: pthread_self has no preconditions.
        t.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
        drop(OTHER_LOCK.lock());
    });
    wait_for("thread i to sleep on OTHER_LOCK", 10, || OTHER_LOCK.state() == CONTENDED);
    std::thread::sleep(Duration::from_millis(10));
    let w = std::thread::spawn(|| {
        wait_for("the handler to hold SIG_LOCK", 10, || HANDLER_HOLDS.load(Ordering::Acquire));
        *SIG_LOCK.lock() += 10;
    });
    // SAFETY: thread i is alive (it waits on OTHER_LOCK, which we hold).
    assert_eq!(unsafe { libc::pthread_kill(tid.load(Ordering::Acquire) as libc::pthread_t, libc::SIGUSR2) }, 0);
    wait_for("the handler to finish", 10, || HANDLER_DONE.load(Ordering::Acquire));
    wait_for("thread w to be woken by the handler's unlock", 10, || w.is_finished());
    w.join().unwrap();
    assert_eq!(HANDLER_WOKE.load(Ordering::Relaxed), 1, "thread w never slept on SIG_LOCK");
    assert_eq!(*SIG_LOCK.lock(), 11);
    drop(other);
    wait_for("thread i to take OTHER_LOCK after the signal", 10, || i.is_finished());
    i.join().unwrap();
    assert_eq!(OTHER_LOCK.state(), UNLOCKED);
    assert_eq!(SIG_LOCK.state(), UNLOCKED);
}
