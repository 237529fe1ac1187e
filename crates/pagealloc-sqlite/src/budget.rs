//! The group's memory account: bytes (and frames) charged for every cache's
//! pages against a soft budget and a hard cap.
//!
//! SQLite's createFlag 1 ("only if cheap") is served within the soft
//! budget; createFlag 2 ("every effort"), when nothing unpinned is left to
//! evict, is served over it up to the hard cap ([`Account::try_charge`]
//! with the cap as the limit): an overdraft, counted (current, peak, the
//! charges that went over) and taken back first as pages unpin (the cache
//! frees a page at unpin while [`Account::overdrawn`]). pcache1 has no
//! global limit and serves createFlag 2 until malloc fails; the hard cap
//! is where this cache stops, and the only way it answers SQLITE_NOMEM.
//!
//! Every change to the counters is made by a thread holding one shard's
//! lock, so that `Group::check_invariants`, holding all of them, reads a
//! consistent account (`in_flight` counts what a fetch charged and is
//! allocating with its lock dropped).
//!
//! Invariants: `charged <= hard`; `charged` and `used` are the sums over
//! the caches plus `in_flight`; `reserved` is one page's charge per open
//! cache and at most `hard`. The `overdrawn` flag is true whenever
//! `charged > soft` once the threads that changed `charged` have returned
//! (the loom model `loom_overdrawn_flag` checks the protocol).

#[cfg(loom)]
use loom::sync::atomic::{fence, AtomicBool, AtomicU64};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
#[cfg(not(loom))]
use std::sync::atomic::{fence, AtomicBool, AtomicU64};

/// The overdraft: bytes over the soft budget now, the most there were, and
/// how many charges left the group over its budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overdraft {
    /// Bytes charged over the budget now.
    pub current: u64,
    /// The most bytes ever charged over the budget.
    pub peak: u64,
    /// Charges (pages created) that left the group over its budget.
    pub times: u64,
}

/// Keeps `overdrawn` apart from the counters every miss writes, so that
/// the read on every unpin hits a line that rarely changes.
#[repr(align(128))]
struct Flag(AtomicBool);

/// See the module documentation.
pub(crate) struct Account {
    /// The budget (bytes): createFlag 1 is served within it.
    pub(crate) soft: u64,
    /// The hard cap (bytes): createFlag 2 is served up to it.
    pub(crate) hard: u64,
    charged: AtomicU64,
    used: AtomicU64,
    /// (frames, bytes) charged for pages in flight: being allocated, or
    /// taken from one cache for another.
    in_flight: [AtomicU64; 2],
    reserved: AtomicU64,
    peak: AtomicU64,
    times: AtomicU64,
    overdrawn: Flag,
}

impl Account {
    pub(crate) fn new(soft: u64, hard: u64) -> Self {
        Self {
            soft,
            hard,
            charged: AtomicU64::new(0),
            used: AtomicU64::new(0),
            in_flight: [AtomicU64::new(0), AtomicU64::new(0)],
            reserved: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            times: AtomicU64::new(0),
            overdrawn: Flag(AtomicBool::new(false)),
        }
    }

    /// Charge `bytes` (and `frames`) if the total stays within `limit`
    /// (the budget, or the hard cap for an overdraft).
    pub(crate) fn try_charge(&self, frames: u64, bytes: u64, limit: u64) -> bool {
        let Ok(old) = self.charged.fetch_update(Relaxed, Relaxed, |c| c.checked_add(bytes).filter(|&n| n <= limit))
        else {
            return false;
        };
        self.used.fetch_add(frames, Relaxed);
        let new = old + bytes;
        if new > self.soft {
            self.times.fetch_add(1, Relaxed);
            self.peak.fetch_max(new - self.soft, Relaxed);
            // Pairs with the fence in `uncharge`: if that fence comes
            // first, this store follows its clearing store in the flag's
            // order; if this one does, its load sees this charge.
            fence(SeqCst);
            self.overdrawn.0.store(true, Relaxed);
        }
        true
    }

    /// Give back `bytes` and `frames` charged earlier.
    pub(crate) fn uncharge(&self, frames: u64, bytes: u64) {
        self.used.fetch_sub(frames, Relaxed);
        let new = self.charged.fetch_sub(bytes, Relaxed) - bytes;
        // (A stale `true` read here leaves the flag set: `overdrawn` also
        // reads the bytes charged, so a set flag is only a hint.)
        if new <= self.soft && self.overdrawn.0.load(Relaxed) {
            self.overdrawn.0.store(false, Relaxed);
            // Pairs with the fence in `try_charge`: a charge over the
            // budget racing with this clearing is seen by the load below,
            // or sets the flag after this store.
            fence(SeqCst);
            if self.charged.load(Relaxed) > self.soft {
                self.overdrawn.0.store(true, Relaxed);
            }
        }
    }

    /// Whether the group is over its budget (a page unpinned now is freed).
    #[inline]
    pub(crate) fn overdrawn(&self) -> bool {
        self.overdrawn.0.load(Relaxed) && self.charged.load(Relaxed) > self.soft
    }

    /// Move (frames, bytes) into (`true`) or out of the in-flight count.
    pub(crate) fn in_flight(&self, frames: u64, bytes: u64, into: bool) {
        if into {
            self.in_flight[0].fetch_add(frames, Relaxed);
            self.in_flight[1].fetch_add(bytes, Relaxed);
        } else {
            self.in_flight[0].fetch_sub(frames, Relaxed);
            self.in_flight[1].fetch_sub(bytes, Relaxed);
        }
    }

    /// Reserve one page's charge for a new cache, within the hard cap;
    /// `Err(need)` with the bytes that would be reserved.
    pub(crate) fn reserve(&self, bytes: u64) -> Result<(), u64> {
        self.reserved
            .fetch_update(Relaxed, Relaxed, |r| r.checked_add(bytes).filter(|&n| n <= self.hard))
            .map(drop)
            .map_err(|r| r + bytes)
    }

    pub(crate) fn unreserve(&self, bytes: u64) {
        self.reserved.fetch_sub(bytes, Relaxed);
    }

    /// (charged, used, in-flight frames, in-flight bytes, reserved).
    pub(crate) fn snapshot(&self) -> (u64, u64, u64, u64, u64) {
        (
            self.charged.load(Relaxed),
            self.used.load(Relaxed),
            self.in_flight[0].load(Relaxed),
            self.in_flight[1].load(Relaxed),
            self.reserved.load(Relaxed),
        )
    }

    pub(crate) fn charged(&self) -> u64 {
        self.charged.load(Relaxed)
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }

    pub(crate) fn overdraft(&self) -> Overdraft {
        Overdraft {
            current: self.charged.load(Relaxed).saturating_sub(self.soft),
            peak: self.peak.load(Relaxed),
            times: self.times.load(Relaxed),
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::Account;
    use loom::sync::Arc;

    /// One thread charges over the budget while another gives back what
    /// brought it under: whatever the interleaving, once both return the
    /// flag says whether the group is over its budget.
    #[test]
    fn loom_overdrawn_flag() {
        loom::model(|| {
            let a = Arc::new(Account::new(10, 100));
            assert!(a.try_charge(0, 12, 100));
            let b = Arc::clone(&a);
            let t = loom::thread::spawn(move || assert!(b.try_charge(0, 5, 100)));
            a.uncharge(0, 12);
            t.join().unwrap();
            assert_eq!(a.charged(), 5);
            assert!(!a.overdrawn());
            assert!(a.try_charge(0, 7, 100));
            let b = Arc::clone(&a);
            let t = loom::thread::spawn(move || b.uncharge(0, 5));
            assert!(a.try_charge(0, 4, 100));
            t.join().unwrap();
            assert_eq!(a.overdrawn(), a.charged() > 10, "charged {}", a.charged());
        });
    }
}
