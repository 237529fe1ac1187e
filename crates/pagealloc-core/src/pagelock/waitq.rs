//! Hashed wait queues: where page-lock and writeback waiters sleep (the kernel's
//! `page_wait_table` and the queueing half of `folio_wait_bit_common` /
//! `folio_wake_bit`).
//!
//! The interface is `parking_lot_core`'s: [`WaitTable::park`] runs a `validate`
//! callback under the bucket lock and sleeps only if it says so;
//! [`WaitTable::unpark_filter`] walks the page's waiters under the bucket lock,
//! lets a filter pick whom to wake, and hands a callback the result (did any
//! waiter for this page stay queued?) before anyone runs.
//!
//! Why not `parking_lot_core` itself: its table is sized at three buckets per
//! live thread (8 to 32 on a small machine, not the 256 the design asks for), it
//! is shared with every parking_lot mutex in the process (the zone locks once parked
//! there too), its hash is private so an experiment cannot build pages that
//! collide, and it has no loom model. The protocol here is the same, in about 250
//! lines; the table is [`WAIT_TABLE_BUCKETS`] cache-line aligned buckets, and the
//! same code runs under loom with loom's mutex and thread parking.
//!
//! A waiter is a node on the parking thread's stack, linked by pointer into its
//! bucket's FIFO while it sleeps. Invariants:
//! - A node is in its bucket's queue iff its `state` is `WAITING`; both change
//!   only under the bucket lock.
//! - Only the holder of the bucket lock dereferences a queued node. A waker
//!   removes the node, clones its thread handle, and stores the wake token last:
//!   from that store on the node may be gone, and the waker uses only its clone.
//! - The owner of a node leaves [`WaitTable::park`] only after seeing
//!   `state != WAITING`, or after taking the bucket lock and unlinking the node
//!   itself (timeout, cancellation).

use super::CancelToken;
use crate::platform::Instant;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{thread, AtomicUsize, Mutex, Ordering};
use alloc::collections::VecDeque;
use core::ptr::NonNull;

/// Buckets in the page wait table (the kernel's `PAGE_WAIT_TABLE_SIZE` is 256).
#[cfg_attr(loom, allow(dead_code))]
pub const WAIT_TABLE_BUCKETS: usize = 256;

/// `state` of a node that is still queued. Wake tokens are never 0.
const WAITING: usize = 0;

/// What an unpark filter decides for one waiter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FilterOp {
    /// Dequeue and wake it.
    Unpark,
    /// Leave it queued.
    Skip,
}

/// What an unpark did, as its callback sees it (under the bucket lock).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UnparkResult {
    /// Waiters dequeued to be woken.
    pub unparked: usize,
    /// Some waiter for the same key is still queued.
    pub(crate) have_more_threads: bool,
}

/// How a park ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParkResult {
    /// Woken by `unpark_filter`, with its callback's token.
    Unparked(usize),
    /// `validate` said not to sleep.
    Invalid,
    /// The deadline passed while queued.
    TimedOut,
    /// The cancel token fired while queued (or before).
    Cancelled,
}

/// A sleeping thread, on its own stack.
struct Waiter {
    key: usize,
    token: usize,
    thread: thread::Thread,
    /// `WAITING` while queued, then the wake token.
    state: AtomicUsize,
}

/// A queued node.
struct WaiterRef(NonNull<Waiter>);

// SAFETY: a `WaiterRef` is dereferenced only by the holder of its bucket's lock
// while the node is queued, hence alive (module invariants); the node's fields
// (a thread handle and an atomic) may be used from any thread.
unsafe impl Send for WaiterRef {}

/// One hash bucket, alone on its cache line(s).
#[repr(align(64))]
struct Bucket {
    queue: Mutex<VecDeque<WaiterRef>>,
}

/// A table of hashed wait queues keyed by address.
pub struct WaitTable {
    buckets: Box<[Bucket]>,
    bits: u32,
}

/// The process-wide table every page of every allocator hashes into.
#[cfg(not(loom))]
pub fn page_wait_table() -> &'static WaitTable {
    static TABLE: spin::Once<WaitTable> = spin::Once::new();
    TABLE.call_once(|| WaitTable::new(WAIT_TABLE_BUCKETS))
}

/// Under loom: one table per model execution (its bucket locks are loom's,
/// which live only as long as one execution), with two buckets so that pages
/// still collide as hash-mates do.
#[cfg(loom)]
pub fn page_wait_table() -> &'static WaitTable {
    loom::lazy_static! {
        static ref TABLE: WaitTable = WaitTable::new(2);
    }
    &TABLE
}

#[cfg(all(any(test, feature = "testing"), not(loom)))]
thread_local! {
    static ACCESSES: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Count a wait-queue access by this thread (test builds only).
#[inline(always)]
fn note_access() {
    #[cfg(all(any(test, feature = "testing"), not(loom)))]
    ACCESSES.with(|c| c.set(c.get() + 1));
}

/// Wait-queue accesses (park or unpark) made by the calling thread so far.
#[cfg(all(any(test, feature = "testing"), not(loom)))]
pub fn accesses_on_this_thread() -> u64 {
    ACCESSES.with(|c| c.get())
}

impl WaitTable {
    /// A table of `nbuckets` (a power of two) empty buckets.
    pub(crate) fn new(nbuckets: usize) -> Self {
        assert!(nbuckets.is_power_of_two(), "wait table size must be a power of two");
        let buckets = (0..nbuckets).map(|_| Bucket { queue: Mutex::new(VecDeque::new()) }).collect();
        Self { buckets, bits: nbuckets.trailing_zeros() }
    }

    /// The bucket index of a key: Fibonacci hashing, top bits kept.
    #[inline]
    pub fn bucket_of(&self, key: usize) -> usize {
        if self.bits == 0 {
            return 0;
        }
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    #[inline]
    fn bucket(&self, key: usize) -> &Bucket {
        &self.buckets[self.bucket_of(key)]
    }

    /// Waiters queued on `key` right now (tests use it to order arrivals).
    #[cfg(all(any(test, feature = "testing"), not(loom)))]
    pub fn queued(&self, key: usize) -> usize {
        let q = self.bucket(key).queue.lock();
        // SAFETY: queued nodes are alive while we hold their bucket's lock.
        q.iter().filter(|w| unsafe { w.0.as_ref() }.key == key).count()
    }

    /// Sleep on `key` until woken, unless `validate` (run under the bucket lock,
    /// before queueing) returns false. `on_abort(last)` runs under the bucket
    /// lock when a timeout or cancellation unlinks this waiter; `last` says no
    /// other waiter for `key` is left. A wake that races with the abort wins: the
    /// result is then `Unparked`, and the caller owes what a woken waiter owes.
    pub fn park(
        &self,
        key: usize,
        token: usize,
        validate: impl FnOnce() -> bool,
        on_abort: impl FnOnce(bool),
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> ParkResult {
        note_access();
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return ParkResult::Cancelled;
        }
        let bucket = self.bucket(key);
        let node = Waiter { key, token, thread: thread::current(), state: AtomicUsize::new(WAITING) };
        // Registered before the token is looked at again below: a cancel after
        // that look finds this thread in the token's list and unparks it.
        let _registered = cancel.map(|c| c.register(&node.thread));
        {
            let mut q = bucket.queue.lock();
            if !validate() {
                return ParkResult::Invalid;
            }
            q.push_back(WaiterRef(NonNull::from(&node)));
        }
        loop {
            // Acquire: pairs with the waker's Release store of the token, so what
            // the waker did before waking us (an unlock, a handoff) is visible.
            let s = node.state.load(Ordering::Acquire);
            if s != WAITING {
                return ParkResult::Unparked(s);
            }
            let why = if cancel.is_some_and(CancelToken::is_cancelled) {
                Some(ParkResult::Cancelled)
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(ParkResult::TimedOut)
            } else {
                None
            };
            if let Some(why) = why {
                let mut q = bucket.queue.lock();
                let s = node.state.load(Ordering::Acquire);
                if s != WAITING {
                    return ParkResult::Unparked(s);
                }
                let me: *const Waiter = &node;
                let pos = q.iter().position(|w| core::ptr::eq(w.0.as_ptr(), me)).expect("a waiting node is queued");
                q.remove(pos);
                // SAFETY: every node left in `q` is queued, hence alive, and we
                // hold the bucket lock.
                let last = !q.iter().any(|w| unsafe { w.0.as_ref() }.key == key);
                on_abort(last);
                return why;
            }
            sleep(deadline);
        }
    }

    /// Wake waiters on `key` in FIFO order: `filter` sees each one's park token
    /// and picks; `callback` runs under the bucket lock with the result and
    /// returns the wake token every picked waiter receives.
    pub fn unpark_filter(
        &self,
        key: usize,
        mut filter: impl FnMut(usize) -> FilterOp,
        callback: impl FnOnce(UnparkResult) -> usize,
    ) -> UnparkResult {
        note_access();
        let bucket = self.bucket(key);
        let mut q = bucket.queue.lock();
        let mut picked: Vec<WaiterRef> = Vec::new();
        let mut have_more = false;
        let mut i = 0;
        while i < q.len() {
            // SAFETY: queued nodes are alive while we hold their bucket's lock.
            let w = unsafe { q[i].0.as_ref() };
            if w.key == key {
                match filter(w.token) {
                    FilterOp::Unpark => {
                        picked.push(q.remove(i).expect("index is in range"));
                        continue;
                    }
                    FilterOp::Skip => have_more = true,
                }
            }
            i += 1;
        }
        let res = UnparkResult { unparked: picked.len(), have_more_threads: have_more };
        let token = callback(res);
        debug_assert_ne!(token, WAITING, "wake tokens are never 0");
        let threads: Vec<thread::Thread> = picked
            .into_iter()
            .map(|p| {
                // SAFETY: unlinked under the lock we still hold, and its state is
                // still WAITING, so its owner is still inside `park` and cannot
                // free it until the store below (module invariants).
                let w = unsafe { p.0.as_ref() };
                let t = w.thread.clone();
                // Release: pairs with the Acquire load in `park`. The last touch
                // of the node.
                w.state.store(token, Ordering::Release);
                t
            })
            .collect();
        drop(q);
        for t in threads {
            t.unpark();
        }
        res
    }
}

/// Park the calling thread until unparked (or, outside loom, the deadline).
#[inline]
fn sleep(deadline: Option<Instant>) {
    #[cfg(not(loom))]
    match deadline {
        Some(d) => thread::park_timeout(d.saturating_duration_since(Instant::now())),
        None => thread::park(),
    }
    #[cfg(loom)]
    {
        let _ = deadline;
        thread::park();
    }
}
