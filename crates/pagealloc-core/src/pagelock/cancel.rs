//! Cancellation of page waits: the user-space form of the kernel's killable
//! waits. A token wakes every wait registered with it; waits that start after
//! it fired return at once.

#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{thread, AtomicBool, Mutex, Ordering};

/// A cancellation flag for the `_cancellable` waits (the user-space form of the
/// kernel's killable waits). Cancelling wakes every wait using the token; waits
/// started after it return `Cancelled` at once. Share it by reference or `Arc`.
///
/// # Examples
///
/// ```
/// use pagealloc::{CancelToken, Config, Gfp, PageAllocator, WaitError};
/// use std::{thread, time::Duration};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// a.page_locks().lock_page(pfn).unwrap(); // held, and never unlocked below
/// let token = CancelToken::new();
/// thread::scope(|s| {
///     s.spawn(|| { thread::sleep(Duration::from_millis(10)); token.cancel() });
///     assert_eq!(a.page_locks().lock_page_cancellable(pfn, &token), Err(WaitError::Cancelled)); // woken
/// });
/// assert!(token.is_cancelled());
/// ```
#[derive(Debug)]
pub struct CancelToken {
    cancelled: AtomicBool,
    /// Threads sleeping in a wait that uses this token.
    sleepers: Mutex<Vec<thread::Thread>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self { cancelled: AtomicBool::new(false), sleepers: Mutex::new(Vec::new()) }
    }

    /// Cancel: every wait using this token returns `WaitError::Cancelled`
    /// (unless it got what it waited for first).
    pub fn cancel(&self) {
        // Release: pairs with the Acquire in `is_cancelled`. A sleeper that
        // registered before we take the list lock is unparked below; one that
        // registers after it sees the flag (the lock orders the two).
        self.cancelled.store(true, Ordering::Release);
        for t in self.sleepers.lock().iter() {
            t.unpark();
        }
    }

    /// Whether `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Note a thread about to sleep with this token, until the guard drops.
    pub(super) fn register<'a>(&'a self, t: &thread::Thread) -> Registration<'a> {
        self.sleepers.lock().push(t.clone());
        Registration { token: self }
    }
}

/// A sleeper's entry in a [`CancelToken`]'s list; removes it on drop.
pub(super) struct Registration<'a> {
    token: &'a CancelToken,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let me = thread::current().id();
        let mut v = self.token.sleepers.lock();
        if let Some(i) = v.iter().position(|t| t.id() == me) {
            v.swap_remove(i);
        }
    }
}
