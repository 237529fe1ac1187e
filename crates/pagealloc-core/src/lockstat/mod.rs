//! Zone-lock statistics (the kernel's zone-lock tracepoints, as counters):
//! how long each zone lock was waited for and held, as log2 histograms of
//! clock ticks, and how long the per-CPU drains held it and how many pages they
//! gave back while holding it (the hold time per drained page, the figure
//! the bulk-drain experiment compares).
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
//!   The clock costs tens of cycles a read (two reads a hold cost more
//!   than a whole uncontended buddy pair), so an uncontended acquisition has its hold timed one time in
//!   [`LOCKSTAT_SAMPLE`]; a contended acquisition (its wait is timed anyway)
//!   and every per-CPU drain (for the hold per drained page) are always timed.
//!   `hold_ticks / hold_samples` is the mean hold.
//! - `drains + refills <= hold_samples`;
//!   `drain_hold_ticks + refill_hold_ticks <= hold_ticks`. Every hold that
//!   moves a per-CPU batch (a drain or a refill) is timed, so the hold per
//!   page those batches cost is exact, not sampled.
//! - While counting is off, nothing is counted and the clock is never read. A
//!   hold counts (wait and hold both) exactly when counting was on as the lock
//!   was taken, whatever happens to the switch before it is released, so the
//!   sums above hold across switches.
//!
//! The per-CPU list locks (one per zone per CPU) have a [`PcpLockStat`] each,
//! inside the data the lock protects (plain integers, read under the lock).
//! Every acquisition is counted, but only a random one try-lock hold in
//! [`PCP_HOLD_SAMPLE`] is timed (and every blocking one): the histogram of
//! hold times is a sample's, `timed` says how many it holds. Those locks are taken with `try_lock` on
//! every path but the remote drain (`drain_all_pages`), so an acquisition
//! waits for nothing except there: only blocking acquisitions record a wait,
//! and a report counts every other acquisition as a wait of zero ticks
//! (bucket 0), which keeps `sum(wait_hist) == sum(hold_hist) == acquisitions`
//! in the report without a store per try-lock. A try-lock that fails is not
//! an acquisition (the `pcp_trylock_fail` event counts those frees). Holds
//! taken by `check_invariants` are not counted.

#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{LockedCounter, RelaxedFlag};

mod pcp;
mod report;

pub use pcp::{PcpLockStat, PcpLockStatReport, PCP_HOLD_SAMPLE};
pub use report::LockStatReport;

/// Buckets of a histogram: bucket `i` counts durations `d` with
/// `floor(log2(d)) == i - 1` (bucket 0 holds zero ticks), so 40 buckets cover
/// up to 2^39 ticks (several minutes of TSC) and the last bucket takes the rest.
pub const LOCKSTAT_BUCKETS: usize = 40;

/// An uncontended acquisition has its hold timed one time in this many (see
/// the module's invariants); contended ones and drains always.
pub const LOCKSTAT_SAMPLE: u64 = 64;

/// The clock the statistics read.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: rdtsc has no preconditions; every x86-64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    // Off x86-64, and under Miri (which cannot run rdtsc): a monotonic clock.
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    crate::platform::now_ns()
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
pub fn bucket(d: u64) -> usize {
    ((64 - d.leading_zeros()) as usize).min(LOCKSTAT_BUCKETS - 1)
}

/// One zone lock's counters.
#[derive(Debug)]
pub struct LockStat {
    /// Counting on (from `Config::lock_stats`, switchable at run time with
    /// `PageAllocator::set_lock_stats`).
    pub on: RelaxedFlag,
    acquisitions: LockedCounter,
    wait_ticks: LockedCounter,
    hold_ticks: LockedCounter,
    hold_samples: LockedCounter,
    wait_hist: [LockedCounter; LOCKSTAT_BUCKETS],
    hold_hist: [LockedCounter; LOCKSTAT_BUCKETS],
    drains: LockedCounter,
    drain_hold_ticks: LockedCounter,
    drain_pages: LockedCounter,
    refills: LockedCounter,
    refill_hold_ticks: LockedCounter,
    refill_pages: LockedCounter,
    list_ops: LockedCounter,
    batch_list_ops: LockedCounter,
}

impl LockStat {
    pub fn new(on: bool) -> Self {
        Self {
            on: RelaxedFlag::new(on),
            acquisitions: LockedCounter::new(0),
            wait_ticks: LockedCounter::new(0),
            hold_ticks: LockedCounter::new(0),
            hold_samples: LockedCounter::new(0),
            wait_hist: core::array::from_fn(|_| LockedCounter::new(0)),
            hold_hist: core::array::from_fn(|_| LockedCounter::new(0)),
            drains: LockedCounter::new(0),
            drain_hold_ticks: LockedCounter::new(0),
            drain_pages: LockedCounter::new(0),
            refills: LockedCounter::new(0),
            refill_hold_ticks: LockedCounter::new(0),
            refill_pages: LockedCounter::new(0),
            list_ops: LockedCounter::new(0),
            batch_list_ops: LockedCounter::new(0),
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
        // Its zero wait is not stored: `read` derives bucket 0 as the
        // acquisitions no other bucket counts.
        let n = self.acquisitions.get_racy();
        self.acquisitions.add_locked(1);
        n.is_multiple_of(LOCKSTAT_SAMPLE)
    }

    /// Count one hold of `hold` ticks that moved `batch` pages between a
    /// per-CPU list and the buddy and did `ops` free-list operations.
    /// Caller holds the lock.
    #[inline(always)]
    pub fn held_locked(&self, hold: u64, batch: Batch, ops: u32) {
        self.hold_ticks.add_locked(hold);
        self.hold_samples.add_locked(1);
        self.hold_hist[bucket(hold)].add_locked(1);
        self.list_ops.add_locked(ops as u64);
        if batch != Batch::None {
            self.batch_list_ops.add_locked(ops as u64);
        }
        let (n, ticks, pages, p) = match batch {
            Batch::None => return,
            Batch::Drain(p) => (&self.drains, &self.drain_hold_ticks, &self.drain_pages, p),
            Batch::Refill(p) => (&self.refills, &self.refill_hold_ticks, &self.refill_pages, p),
        };
        n.add_locked(1);
        ticks.add_locked(hold);
        pages.add_locked(p as u64);
    }

    /// A racy copy for reports.
    pub fn read(&self, zone: usize, nid: u32, name: &'static str) -> ZoneLockStat {
        let h = |a: &[LockedCounter; LOCKSTAT_BUCKETS]| a.iter().map(LockedCounter::get_racy).collect();
        let acquisitions = self.acquisitions.get_racy();
        let mut wait_hist: Vec<u64> = h(&self.wait_hist);
        // Uncontended acquisitions (see `uncontended_locked`); racy reads
        // may run a little apart, never below zero.
        wait_hist[0] += acquisitions.saturating_sub(wait_hist.iter().sum());
        ZoneLockStat {
            zone,
            nid,
            name,
            enabled: self.on.get(),
            acquisitions,
            wait_ticks: self.wait_ticks.get_racy(),
            hold_ticks: self.hold_ticks.get_racy(),
            hold_samples: self.hold_samples.get_racy(),
            wait_hist,
            hold_hist: h(&self.hold_hist),
            drains: self.drains.get_racy(),
            drain_hold_ticks: self.drain_hold_ticks.get_racy(),
            drain_pages: self.drain_pages.get_racy(),
            refills: self.refills.get_racy(),
            refill_hold_ticks: self.refill_hold_ticks.get_racy(),
            refill_pages: self.refill_pages.get_racy(),
            list_ops: self.list_ops.get_racy(),
            batch_list_ops: self.batch_list_ops.get_racy(),
        }
    }
}

/// One zone's lock statistics, read without the lock (`PageAllocator::lockstat`).
///
/// # Examples
/// ```
/// let z = pagealloc::PageAllocator::new(pagealloc::Config::small(4 << 20)).unwrap().lockstat().zones.remove(0);
/// assert_eq!(z.wait_hist.iter().sum::<u64>(), z.acquisitions); // every acquisition's wait, bucketed
/// ```
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
    /// Holds that were per-CPU refills from the buddy.
    pub refills: u64,
    /// Ticks those refills held the lock, summed.
    pub refill_hold_ticks: u64,
    /// Pages those refills took.
    pub refill_pages: u64,
    /// Free-list operations (a block linked, unlinked or moved between
    /// lists) done under the timed holds: the deterministic measure of the
    /// work the lock serializes, which preemption cannot inflate.
    pub list_ops: u64,
    /// Of those, the ones under per-CPU batch holds (all timed).
    pub batch_list_ops: u64,
}

impl ZoneLockStat {
    /// Ticks the lock was held over every acquisition: the batch holds
    /// (drains and refills, all timed) as measured, the others' timed
    /// sample scaled up to their number. Zero when nothing was timed.
    pub fn hold_ticks_estimate(&self) -> f64 {
        let batch_ticks = self.drain_hold_ticks + self.refill_hold_ticks;
        batch_ticks as f64 + self.hold_ticks.saturating_sub(batch_ticks) as f64 * self.others_scale()
    }

    /// Free-list operations over every acquisition, scaled as
    /// [`ZoneLockStat::hold_ticks_estimate`]: the batches' as counted, the
    /// other timed holds' standing for every other acquisition.
    pub fn list_ops_estimate(&self) -> f64 {
        self.batch_list_ops as f64 + self.list_ops.saturating_sub(self.batch_list_ops) as f64 * self.others_scale()
    }

    /// How many acquisitions each timed hold that was not a per-CPU batch
    /// stands for (batches are all timed; the others one in
    /// [`LOCKSTAT_SAMPLE`]); 0 when none was timed.
    fn others_scale(&self) -> f64 {
        let batches = self.drains + self.refills;
        let (others, timed) = (self.acquisitions.saturating_sub(batches), self.hold_samples.saturating_sub(batches));
        if timed == 0 {
            0.0
        } else {
            others as f64 / timed as f64
        }
    }
}

/// What one hold of a zone lock moved between a per-CPU list and the buddy
/// (the pages of the batch), for [`LockStat::held_locked`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch {
    /// Not a per-CPU batch.
    None,
    /// A drain that gave back this many pages.
    Drain(u32),
    /// A refill that took this many pages.
    Refill(u32),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lockstat::LockStatReport;

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
        s.held_locked(100, Batch::None, 3);
        s.waited_locked(0);
        s.held_locked(300, Batch::Drain(7), 2);
        s.waited_locked(0);
        s.held_locked(50, Batch::Refill(25), 5);
        let r = s.read(0, 0, "Normal");
        assert_eq!(r.acquisitions, 3);
        assert_eq!(r.wait_hist.iter().sum::<u64>(), 3);
        assert_eq!(r.hold_hist.iter().sum::<u64>(), 3);
        assert_eq!(r.hold_hist[bucket(100)], 1);
        assert_eq!((r.drains, r.drain_hold_ticks, r.drain_pages, r.hold_ticks, r.hold_samples), (1, 300, 7, 450, 3));
        assert_eq!((r.refills, r.refill_hold_ticks, r.refill_pages), (1, 50, 25));
        assert_eq!((r.list_ops, r.batch_list_ops), (10, 7));
        // Uncontended: counted with a zero wait; timed one time in LOCKSTAT_SAMPLE.
        let timed = (0..2 * LOCKSTAT_SAMPLE).filter(|_| s.uncontended_locked()).count();
        assert_eq!(timed, 2);
        let r = s.read(0, 0, "Normal");
        assert_eq!((r.acquisitions, r.wait_hist[0]), (3 + 2 * LOCKSTAT_SAMPLE, 2 + 2 * LOCKSTAT_SAMPLE));
        // The batches as timed (350), the one other timed hold (100) standing
        // for the 1 + 2 * LOCKSTAT_SAMPLE other acquisitions.
        assert_eq!(r.hold_ticks_estimate(), 350.0 + 100.0 * (1 + 2 * LOCKSTAT_SAMPLE) as f64);
        assert_eq!(r.list_ops_estimate(), 7.0 + 3.0 * (1 + 2 * LOCKSTAT_SAMPLE) as f64);
        assert!(LockStatReport { zones: vec![r], pcp: vec![] }.to_string().contains("drain_hold_page   42.86"));
    }
}
