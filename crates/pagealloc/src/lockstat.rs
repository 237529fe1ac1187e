//! Zone-lock statistics (the kernel's zone-lock tracepoints, as counters):
//! how long each zone lock was waited for and held, as log2 histograms of
//! clock ticks, and how long the per-CPU drains held it and how many pages they
//! gave back while holding it (seed 1's figure: hold time per drained page).
//!
//! Ticks: TSC cycles on x86-64 (`rdtsc`, unserialised: a few cycles of skew
//! either way, no fence on the lock's path), nanoseconds since the first read
//! elsewhere. [`tick_unit`] names the unit.
//!
//! Invariants:
//! - Every counter of a [`LockStat`] is written only while its zone's lock is
//!   held (plain load+store, no atomic read-modify-write), and read racily.
//! - `sum(wait_hist) == acquisitions` (every acquisition, its wait counted
//!   just after the lock is taken; an uncontended one waited 0 ticks, exactly,
//!   without reading the clock).
//! - `sum(hold_hist) == hold_samples <= acquisitions`: holds are *sampled*.
//!   The clock costs tens of cycles a read (23 ns measured on one of this
//!   project's hosts, two reads a hold: more than a whole uncontended buddy
//!   pair), so an uncontended acquisition has its hold timed one time in
//!   [`LOCKSTAT_SAMPLE`]; a contended acquisition (its wait is timed anyway)
//!   and every per-CPU drain (seed 1's figure) are always timed.
//!   `hold_ticks / hold_samples` is the mean hold.
//! - `drains <= hold_samples`; `drain_hold_ticks <= hold_ticks`.
//! - While counting is off, nothing is counted and the clock is never read. A
//!   hold counts (wait and hold both) exactly when counting was on as the lock
//!   was taken, whatever happens to the switch before it is released, so the
//!   sums above hold across switches.

use crate::sync::{LockedCounter, RelaxedFlag};

/// Buckets of a histogram: bucket `i` counts durations `d` with
/// `floor(log2(d)) == i - 1` (bucket 0 holds zero ticks), so 40 buckets cover
/// up to 2^39 ticks (several minutes of TSC) and the last bucket takes the rest.
pub const LOCKSTAT_BUCKETS: usize = 40;

/// An uncontended acquisition has its hold timed one time in this many (see
/// the module's invariants); contended ones and drains always.
pub const LOCKSTAT_SAMPLE: u64 = 64;

/// The clock the statistics read.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: rdtsc has no preconditions; every x86-64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    // Off x86-64, and under Miri (which cannot run rdtsc): a monotonic clock.
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

/// The unit of the statistics' clock: `"tsc cycles"` or `"ns"`.
pub fn tick_unit() -> &'static str {
    if cfg!(all(target_arch = "x86_64", not(miri))) {
        "tsc cycles"
    } else {
        "ns"
    }
}

/// The bucket of a duration.
#[inline(always)]
pub(crate) fn bucket(d: u64) -> usize {
    ((64 - d.leading_zeros()) as usize).min(LOCKSTAT_BUCKETS - 1)
}

/// One zone lock's counters.
#[derive(Debug)]
pub(crate) struct LockStat {
    /// Counting on (from `Config::lock_stats`, switchable at run time with
    /// `PageAllocator::set_lock_stats`).
    pub(crate) on: RelaxedFlag,
    acquisitions: LockedCounter,
    wait_ticks: LockedCounter,
    hold_ticks: LockedCounter,
    hold_samples: LockedCounter,
    wait_hist: [LockedCounter; LOCKSTAT_BUCKETS],
    hold_hist: [LockedCounter; LOCKSTAT_BUCKETS],
    drains: LockedCounter,
    drain_hold_ticks: LockedCounter,
    drain_pages: LockedCounter,
}

impl LockStat {
    pub(crate) fn new(on: bool) -> Self {
        Self {
            on: RelaxedFlag::new(on),
            acquisitions: LockedCounter::new(0),
            wait_ticks: LockedCounter::new(0),
            hold_ticks: LockedCounter::new(0),
            hold_samples: LockedCounter::new(0),
            wait_hist: std::array::from_fn(|_| LockedCounter::new(0)),
            hold_hist: std::array::from_fn(|_| LockedCounter::new(0)),
            drains: LockedCounter::new(0),
            drain_hold_ticks: LockedCounter::new(0),
            drain_pages: LockedCounter::new(0),
        }
    }

    /// Count one acquisition that waited `wait` ticks (its hold is then
    /// timed). Caller holds the lock.
    #[inline(always)]
    pub(crate) fn waited_locked(&self, wait: u64) {
        self.acquisitions.add_locked(1);
        self.wait_ticks.add_locked(wait);
        self.wait_hist[bucket(wait)].add_locked(1);
    }

    /// Count one acquisition that did not wait; true when its hold is to be
    /// timed (one in [`LOCKSTAT_SAMPLE`]). Caller holds the lock.
    #[inline(always)]
    pub(crate) fn uncontended_locked(&self) -> bool {
        let n = self.acquisitions.get_racy();
        self.acquisitions.add_locked(1);
        self.wait_hist[0].add_locked(1);
        n.is_multiple_of(LOCKSTAT_SAMPLE)
    }

    /// Count one hold of `hold` ticks; `drained` pages if it was a per-CPU
    /// drain (0 otherwise). Caller holds the lock.
    #[inline(always)]
    pub(crate) fn held_locked(&self, hold: u64, drained: u32) {
        self.hold_ticks.add_locked(hold);
        self.hold_samples.add_locked(1);
        self.hold_hist[bucket(hold)].add_locked(1);
        if drained != 0 {
            self.drains.add_locked(1);
            self.drain_hold_ticks.add_locked(hold);
            self.drain_pages.add_locked(drained as u64);
        }
    }

    /// A racy copy for reports.
    pub(crate) fn read(&self, zone: usize, nid: u32, name: &'static str) -> ZoneLockStat {
        let h = |a: &[LockedCounter; LOCKSTAT_BUCKETS]| a.iter().map(LockedCounter::get_racy).collect();
        ZoneLockStat {
            zone,
            nid,
            name,
            enabled: self.on.get(),
            acquisitions: self.acquisitions.get_racy(),
            wait_ticks: self.wait_ticks.get_racy(),
            hold_ticks: self.hold_ticks.get_racy(),
            hold_samples: self.hold_samples.get_racy(),
            wait_hist: h(&self.wait_hist),
            hold_hist: h(&self.hold_hist),
            drains: self.drains.get_racy(),
            drain_hold_ticks: self.drain_hold_ticks.get_racy(),
            drain_pages: self.drain_pages.get_racy(),
        }
    }
}

/// One zone's lock statistics, read without the lock (`PageAllocator::lockstat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneLockStat {
    /// Zone index in the allocator.
    pub zone: usize,
    /// Node of the zone.
    pub nid: u32,
    /// Zone name (`Normal`, `Movable`).
    pub name: &'static str,
    /// Whether counting was on (`Config::lock_stats`).
    pub enabled: bool,
    /// Times the lock was taken.
    pub acquisitions: u64,
    /// Ticks spent waiting for it, summed.
    pub wait_ticks: u64,
    /// Ticks it was held, summed over the timed holds.
    pub hold_ticks: u64,
    /// Holds timed: one uncontended acquisition in [`LOCKSTAT_SAMPLE`], every
    /// contended one and every drain (`sum(hold_hist)`).
    pub hold_samples: u64,
    /// Wait times, log2 buckets of ticks (see [`LOCKSTAT_BUCKETS`]).
    pub wait_hist: Vec<u64>,
    /// Hold times of the timed holds, log2 buckets of ticks.
    pub hold_hist: Vec<u64>,
    /// Holds that were per-CPU drains to the buddy.
    pub drains: u64,
    /// Ticks those drains held the lock, summed.
    pub drain_hold_ticks: u64,
    /// Pages those drains gave back.
    pub drain_pages: u64,
}

/// Every zone's lock statistics; `to_string()` gives one block per zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatReport {
    /// Per zone.
    pub zones: Vec<ZoneLockStat>,
}

impl std::fmt::Display for LockStatReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = tick_unit();
        for z in &self.zones {
            let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            writeln!(
                f,
                "Node {}, zone {:>8} lock ({unit}; counting {})",
                z.nid,
                z.name,
                if z.enabled { "on" } else { "off" }
            )?;
            writeln!(f, "  acquisitions      {}", z.acquisitions)?;
            writeln!(f, "  wait_total        {}", z.wait_ticks)?;
            writeln!(f, "  wait_avg          {:.1}", per(z.wait_ticks, z.acquisitions))?;
            writeln!(f, "  hold_samples      {}", z.hold_samples)?;
            writeln!(f, "  hold_total        {}", z.hold_ticks)?;
            writeln!(f, "  hold_avg          {:.1}", per(z.hold_ticks, z.hold_samples))?;
            writeln!(f, "  drains            {}", z.drains)?;
            writeln!(f, "  drain_pages       {}", z.drain_pages)?;
            writeln!(f, "  drain_hold_avg    {:.1}", per(z.drain_hold_ticks, z.drains))?;
            writeln!(f, "  drain_hold_page   {:.2}", per(z.drain_hold_ticks, z.drain_pages))?;
            writeln!(f, "  {:>16} {:>14} {:>14}", "ticks <", "wait", "hold")?;
            let last = (0..LOCKSTAT_BUCKETS).rev().find(|&i| z.wait_hist[i] != 0 || z.hold_hist[i] != 0);
            for i in 0..=last.unwrap_or(0) {
                let bound = if i == LOCKSTAT_BUCKETS - 1 { "inf".to_string() } else { (1u64 << i).to_string() };
                writeln!(f, "  {:>16} {:>14} {:>14}", bound, z.wait_hist[i], z.hold_hist[i])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 2);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 3);
        assert_eq!(bucket(u64::MAX), LOCKSTAT_BUCKETS - 1);
    }

    #[test]
    fn counts_go_where_they_belong() {
        let s = LockStat::new(true);
        s.waited_locked(5);
        s.held_locked(100, 0);
        s.waited_locked(0);
        s.held_locked(300, 7);
        let r = s.read(0, 0, "Normal");
        assert_eq!(r.acquisitions, 2);
        assert_eq!(r.wait_hist.iter().sum::<u64>(), 2);
        assert_eq!(r.hold_hist.iter().sum::<u64>(), 2);
        assert_eq!(r.hold_hist[bucket(100)], 1);
        assert_eq!((r.drains, r.drain_hold_ticks, r.drain_pages, r.hold_ticks, r.hold_samples), (1, 300, 7, 400, 2));
        // Uncontended: counted with a zero wait; timed one time in LOCKSTAT_SAMPLE.
        let timed = (0..2 * LOCKSTAT_SAMPLE).filter(|_| s.uncontended_locked()).count();
        assert_eq!(timed, 2);
        let r = s.read(0, 0, "Normal");
        assert_eq!((r.acquisitions, r.wait_hist[0]), (2 + 2 * LOCKSTAT_SAMPLE, 1 + 2 * LOCKSTAT_SAMPLE));
        assert!(LockStatReport { zones: vec![r] }.to_string().contains("drain_hold_page   42.86"));
    }
}
