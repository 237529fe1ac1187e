//! The per-CPU list lock's guard: the futex guard plus the hold timing of
//! the lock statistics (`crate::lockstat`'s per-CPU part).
//!
//! Invariants: a hold is timed exactly when it was sampled (or, for a
//! blocking acquisition, when counting was on) as the lock was taken
//! (`entered != 0`, a tick count with its low bit set), and its time
//! is written to the set's `PcpLockStat` (inside the locked `PcpLists`)
//! before the lock goes (the guard's own drop runs before its futex guard's). With counting off, taking the
//! lock costs one load and one predictable branch more than the bare futex
//! lock, and releasing it one predictable branch; the clock is never read.

use super::PcpLists;
use crate::sync::FutexGuard;
use core::ops::{Deref, DerefMut};

/// Proof that a set's list lock is held; dropping it counts the hold (when
/// timed) and unlocks. One word, as the bare futex guard: the timing state
/// lives in the locked data.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct PcpGuard<'a> {
    l: FutexGuard<'a, PcpLists>,
}

impl<'a> PcpGuard<'a> {
    /// Wrap a freshly taken (try-)lock: counted, and timed when sampled.
    #[inline(always)]
    pub(super) fn new(mut l: FutexGuard<'a, PcpLists>) -> Self {
        l.lockstat.acquired();
        Self { l }
    }

    /// Wrap a lock taken by a blocking wait that began at tick `t0` (0: not
    /// counted, statistics off): the wait is counted now, the hold at release.
    #[inline]
    pub(super) fn waited(mut l: FutexGuard<'a, PcpLists>, t0: u64) -> Self {
        if t0 != 0 {
            l.lockstat.waited(t0);
        }
        Self { l }
    }
}

impl Deref for PcpGuard<'_> {
    type Target = PcpLists;
    #[inline(always)]
    fn deref(&self) -> &PcpLists {
        &self.l
    }
}

impl DerefMut for PcpGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut PcpLists {
        &mut self.l
    }
}

impl Drop for PcpGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Still under the lock: `l` is dropped after this body.
        self.l.lockstat.released();
    }
}
