//! A mutex on one futex word, whose unlock is async-signal-safe: the lock of
//! every structure the no-lock paths (`page_alloc::nolock`) may take from a
//! signal handler, namely the zone locks and the per-CPU list locks.
//!
//! Why not parking_lot's: a handler may take a lock only with `try_lock`, but
//! it must then release it, and releasing a parking_lot mutex that another
//! thread is parked on goes through `parking_lot_core`'s unpark, which locks a
//! bucket of a process-wide hash table. If the handler interrupted its own
//! thread inside `parking_lot_core` while that thread held the same bucket
//! (parking on, or unparking from, any lock that hashes there), the handler
//! spins on a lock its own thread holds: a deadlock. Here the whole state is
//! the word, and the wake is one `futex(FUTEX_WAKE_PRIVATE)` system call, so a
//! release touches nothing that an interrupted thread can be holding.
//!
//! The word (the classic three-state futex mutex):
//! - `0`: unlocked; `1`: locked, no thread asleep on it; `2`: locked, and a
//!   thread may be asleep on it (or about to sleep).
//! - Lock: one compare-exchange `0 -> 1` (Acquire); if that fails, spin a
//!   little while the word is `1`, then swap in `2` (Acquire): the lock is
//!   ours if the old value was `0`, else sleep with `FUTEX_WAIT` on the value
//!   `2` (the kernel sleeps only if the word is still `2`, so no wake between
//!   the swap and the sleep is lost) and try again. A thread that ever slept
//!   takes the lock with `2`, since others may still sleep.
//! - Unlock: swap in `0` (Release); if the old value was `2`, wake one
//!   sleeper. An unlock never waits, never allocates and never takes another
//!   lock, and it preserves `errno` (a handler must not change it under the
//!   interrupted code).
//! - `try_lock`: one compare-exchange `0 -> 1`; never sleeps.
//!
//! Invariants: whoever holds the lock has a guard, and only a guard's drop
//! unlocks; a sleeper is only ever woken by an unlock that saw `2`, or
//! spuriously, and re-checks in both cases. No fairness: a waker's thread
//! may take the lock again before the woken one runs (as parking_lot's
//! unfair unlock). A signal handler may `try_lock` and unlock, but must never
//! `lock` (its own thread may hold the lock).
//!
//! Outside Linux this is parking_lot's mutex (same API, not signal-safe);
//! under loom it is loom's, as [`super::Mutex`] is.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// How many times a contended `lock` re-reads the word before it sleeps.
const SPINS: u32 = 100;

/// A mutual-exclusion lock on one futex word (see the module doc).
pub struct FutexMutex<T> {
    state: AtomicU32,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to the `T`, which may
// therefore move between threads (T: Send) but need not be shareable.
unsafe impl<T: Send> Sync for FutexMutex<T> {}
// SAFETY: owning the mutex is owning the `T`.
unsafe impl<T: Send> Send for FutexMutex<T> {}

impl<T> FutexMutex<T> {
    /// An unlocked mutex holding `v`.
    pub const fn new(v: T) -> Self {
        Self { state: AtomicU32::new(UNLOCKED), data: UnsafeCell::new(v) }
    }

    /// Take the lock, sleeping on the word while another thread holds it.
    /// Never from a signal handler (see the module doc).
    #[inline]
    pub fn lock(&self) -> FutexGuard<'_, T> {
        if self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        FutexGuard { m: self, _t: PhantomData }
    }

    /// Take the lock if it is free right now; never waits. Async-signal-safe.
    #[inline]
    pub fn try_lock(&self) -> Option<FutexGuard<'_, T>> {
        match self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(FutexGuard { m: self, _t: PhantomData }),
            Err(_) => None,
        }
    }

    /// The word's value (tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut s = self.spin();
        if s == UNLOCKED {
            match self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return,
                Err(v) => s = v,
            }
        }
        loop {
            // Announce a sleeper; the lock is ours if it was free.
            if s != CONTENDED && self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                return;
            }
            futex_wait(&self.state, CONTENDED);
            s = self.spin();
        }
    }

    /// Re-read the word while it says "locked, nobody asleep", a bounded
    /// number of times; returns the last value read.
    fn spin(&self) -> u32 {
        let mut n = SPINS;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s != LOCKED || n == 0 {
                return s;
            }
            core::hint::spin_loop();
            n -= 1;
        }
    }

    #[inline]
    fn unlock(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            futex_wake_one(&self.state);
        }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for FutexMutex<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FutexMutex").field("state", &self.state.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

/// Proof that the lock is held; dropping it unlocks (async-signal-safe).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct FutexGuard<'a, T> {
    m: &'a FutexMutex<T>,
    /// Send and Sync exactly when `&mut T` is.
    _t: PhantomData<&'a mut T>,
}

impl<T> Deref for FutexGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the
        // data exists outside this guard's borrows.
        unsafe { &*self.m.data.get() }
    }
}

impl<T> DerefMut for FutexGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T> Drop for FutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.m.unlock();
    }
}

/// Sleep while `*w == v` (returns at once if it is not; may return spuriously).
#[cold]
fn futex_wait(w: &AtomicU32, v: u32) {
    // SAFETY: FUTEX_WAIT on a valid, aligned u32 that lives as long as the
    // call (the mutex is borrowed), no timeout; errors (EAGAIN, EINTR) just
    // send the caller round its loop again.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            v,
            core::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wake one thread sleeping on `w`, leaving `errno` as it was.
#[cold]
#[inline(never)]
fn futex_wake_one(w: &AtomicU32) {
    // SAFETY: `__errno_location` returns this thread's errno slot, valid for
    // the thread's life; FUTEX_WAKE on a valid, aligned u32 touches no memory.
    // Both are async-signal-safe (a system call and a thread-pointer read).
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        *errno = saved;
    }
}

#[cfg(test)]
#[path = "futex_tests.rs"]
mod tests;
