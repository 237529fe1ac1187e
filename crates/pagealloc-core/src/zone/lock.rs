//! Taking the zone lock: the one way to a [`ZoneGuard`], counted in the
//! zone's lock statistics when they are on (every acquisition and wait; the
//! hold of an uncontended acquisition timed one time in `LOCKSTAT_SAMPLE`,
//! every contended one and every per-CPU batch, drain or refill, always).

use super::{Zone, ZoneGuard};
use crate::lockstat::ticks;
use crate::memmap::MemMap;

impl Zone {
    /// Take the zone lock (counting it when lock statistics are on: an
    /// uncontended hold timed one time in `LOCKSTAT_SAMPLE`).
    #[inline]
    pub fn lock<'a>(&'a self, mm: &'a MemMap) -> ZoneGuard<'a> {
        self.lock_timing(mm, false)
    }

    /// [`Zone::lock`] for a per-CPU drain or refill: its hold is always
    /// timed, so the hold time per page counts every batch (a batch moves
    /// many pages a hold: two clock reads are a small part of it).
    #[inline]
    pub(crate) fn lock_batch<'a>(&'a self, mm: &'a MemMap) -> ZoneGuard<'a> {
        self.lock_timing(mm, true)
    }

    #[inline(always)]
    fn lock_timing<'a>(&'a self, mm: &'a MemMap, always: bool) -> ZoneGuard<'a> {
        if !self.lockstat.on.get() {
            let area = self.free.lock();
            return ZoneGuard::enter(self, mm, area, 0);
        }
        // An uncontended lock waited for nothing: no clock read before it, and
        // its hold is sampled (the TSC costs tens of cycles a read).
        if let Some(area) = self.free.try_lock() {
            let timed = self.lockstat.uncontended_locked() || always;
            let t1 = if timed { ticks().max(1) } else { 0 };
            return ZoneGuard::enter(self, mm, area, t1);
        }
        let t0 = ticks();
        let area = self.free.lock();
        let t1 = ticks().max(1);
        self.lockstat.waited_locked(t1.saturating_sub(t0));
        ZoneGuard::enter(self, mm, area, t1)
    }

    /// Take the zone lock only if it is free right now (never waits, never
    /// parks): the no-lock paths' only way in (see `crate::nolock`).
    #[inline]
    pub fn try_lock<'a>(&'a self, mm: &'a MemMap) -> Option<ZoneGuard<'a>> {
        let area = self.free.try_lock()?;
        // No wait to time; the hold sampled as `lock`'s; rdtsc is safe in any
        // context.
        let t = if self.lockstat.on.get() && self.lockstat.uncontended_locked() { ticks().max(1) } else { 0 };
        Some(ZoneGuard::enter(self, mm, area, t))
    }
}
