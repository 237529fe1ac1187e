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
//! - `drains <= hold_samples`; `drain_hold_ticks <= hold_ticks`.
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
        }
    }

    /// Count one acquisition that waited `wait` ticks (its hold is then
    /// timed). Caller holds the lock.
    #[inline(always)]
    pub fn waited_locked(&self, wait: u64) {
        self.acquisitions.add_locked(1);
        self.wait_ticks.add_locked(wait);
        self.wait_hist[bucket(wait)].add_locked(1);
    }

    /// Count one acquisition that did not wait; true when its hold is to be
    /// timed (one in [`LOCKSTAT_SAMPLE`]). Caller holds the lock.
    #[inline(always)]
    pub fn uncontended_locked(&self) -> bool {
        // Its zero wait is not stored: `read` derives bucket 0 as the
        // acquisitions no other bucket counts.
        let n = self.acquisitions.get_racy();
        self.acquisitions.add_locked(1);
        n.is_multiple_of(LOCKSTAT_SAMPLE)
    }

    /// Count one hold of `hold` ticks; `drained` pages if it was a per-CPU
    /// drain (0 otherwise). Caller holds the lock.
    #[inline(always)]
    pub fn held_locked(&self, hold: u64, drained: u32) {
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
        }
    }
}

/// Try-lock holds of a per-CPU list lock timed: one in this many on average
/// (random gaps of 1 to `2 * PCP_HOLD_SAMPLE - 1` holds); the zone lock's
/// rate, [`LOCKSTAT_SAMPLE`].
pub const PCP_HOLD_SAMPLE: u32 = LOCKSTAT_SAMPLE as u32;

/// `gap` and `countdown` while counting is off.
const PCP_OFF: u32 = u32::MAX;

/// One per-CPU list lock's counters (see the module doc): plain integers
/// inside the lock's data (`PcpLists`), written and read under the lock.
///
/// Every acquisition is counted; the hold of one try-lock acquisition in
/// [`PCP_HOLD_SAMPLE`] (at random gaps, so no periodic pattern of the
/// workload aliases with the sampling), and of every blocking acquisition,
/// is timed. A try-lock pays one decrement and one branch whether counting
/// is on or off (`countdown` never reaches 0 while off, in practice);
/// only the sampled holds read the clock. A TSC read costs tens of cycles
/// and a front-cache workload takes a list lock every few dozen pages, so
/// timing every hold shows in pcp-flush; one in 64 keeps the front-off
/// pair (`scripts/fastpath-budget` pcp-pair) within its budget, where 1 in
/// 16 did not (figures: docs/results/, the fast-path file).
#[derive(Debug, Clone)]
pub struct PcpLockStat {
    /// Try-locks left until the next timed one (the acquisition that brings
    /// it to 0 is timed).
    countdown: u32,
    /// The current gap's length (`PCP_OFF`: counting is off).
    gap: u32,
    /// xorshift32 state for the gaps.
    rng: u32,
    /// Untimed try-lock acquisitions of finished gaps.
    untimed: u64,
    /// When the hold in progress began, low bit set (0: not timed).
    entered: u64,
    hold_ticks: u64,
    /// Timed holds by `ilog2(ticks | 1)`: slot `j` is report bucket `j + 1`
    /// (a hold of 0 ticks, which two TSC reads never measure, would land in
    /// bucket 1). Indexed without a bound check or clamp.
    hold_log: [u64; 64],
    /// Blocking acquisitions (remote drains), each with its wait.
    waits: u64,
    wait_ticks: u64,
    wait_hist: [u64; LOCKSTAT_BUCKETS],
}

impl PcpLockStat {
    /// Counters of a new lock, counting from the start if `on`; `seed`
    /// varies the sampling gaps between locks.
    pub fn new(on: bool, seed: u32) -> Self {
        let mut s = Self {
            countdown: PCP_OFF,
            gap: PCP_OFF,
            rng: seed.wrapping_mul(0x9E37_79B9) | 1,
            untimed: 0,
            entered: 0,
            hold_ticks: 0,
            hold_log: [0; 64],
            waits: 0,
            wait_ticks: 0,
            wait_hist: [0; LOCKSTAT_BUCKETS],
        };
        s.set_enabled(on);
        s
    }

    /// Count a try-lock acquisition (caller just took the lock), timing its
    /// hold when sampled.
    #[inline(always)]
    pub fn acquired(&mut self) {
        self.countdown = self.countdown.wrapping_sub(1);
        if self.countdown == 0 {
            self.sample_point();
        }
    }

    /// The end of a gap: count its untimed acquisitions, start the next and
    /// time this hold. Nothing counted while counting is off.
    #[cold]
    #[inline(never)]
    fn sample_point(&mut self) {
        if self.gap == PCP_OFF {
            self.countdown = PCP_OFF;
            return;
        }
        self.untimed += self.gap as u64 - 1;
        self.new_gap();
        self.entered = ticks() | 1;
    }

    /// The lock is about to go (caller still holds it): count the hold if
    /// it was timed.
    #[inline(always)]
    pub fn released(&mut self) {
        if self.entered != 0 {
            self.end_hold();
        }
    }

    #[cold]
    #[inline(never)]
    fn end_hold(&mut self) {
        self.held(ticks().saturating_sub(self.entered));
        self.entered = 0;
    }

    fn new_gap(&mut self) {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        self.gap = 1 + x % (2 * PCP_HOLD_SAMPLE - 1);
        self.countdown = self.gap;
    }

    /// Switch counting (under the lock): the current gap's acquisitions so
    /// far are kept.
    pub fn set_enabled(&mut self, on: bool) {
        if self.gap != PCP_OFF {
            self.untimed += (self.gap - self.countdown) as u64;
        }
        if on {
            self.new_gap();
        } else {
            self.gap = PCP_OFF;
            self.countdown = PCP_OFF;
        }
    }

    /// Count one timed hold of `hold` ticks.
    #[inline]
    pub fn held(&mut self, hold: u64) {
        self.hold_ticks = self.hold_ticks.wrapping_add(hold);
        self.hold_log[(hold | 1).ilog2() as usize] += 1;
    }

    /// Count one blocking acquisition whose wait began at tick `t0` (caller
    /// just took the lock); its hold is timed too.
    #[inline]
    pub fn waited(&mut self, t0: u64) {
        let t1 = ticks() | 1;
        let wait = t1.saturating_sub(t0);
        self.waits += 1;
        self.wait_ticks = self.wait_ticks.wrapping_add(wait);
        self.wait_hist[bucket(wait)] += 1;
        self.entered = t1;
    }

    /// A copy for reports (the try-lock acquisitions as zero waits), taken
    /// under the lock; `zone` gives the zone's identity and switch.
    pub fn read(&self, zone: &ZoneLockStat, cpu: usize) -> PcpLockStatReport {
        let mut hold_hist = vec![0u64; LOCKSTAT_BUCKETS];
        for (j, &n) in self.hold_log.iter().enumerate() {
            hold_hist[(j + 1).min(LOCKSTAT_BUCKETS - 1)] += n;
        }
        let timed: u64 = hold_hist.iter().sum();
        let open = if self.gap == PCP_OFF { 0 } else { (self.gap - self.countdown) as u64 };
        let acquisitions = timed + self.untimed + open;
        let mut wait_hist = self.wait_hist.to_vec();
        wait_hist[0] += acquisitions - self.waits;
        PcpLockStatReport {
            zone: zone.zone,
            nid: zone.nid,
            name: zone.name,
            cpu,
            enabled: self.gap != PCP_OFF,
            acquisitions,
            blocking: self.waits,
            timed,
            wait_ticks: self.wait_ticks,
            hold_ticks: self.hold_ticks,
            wait_hist,
            hold_hist,
        }
    }
}

/// One CPU's list lock for one zone, read without the lock
/// (`PageAllocator::lockstat`).
///
/// # Examples
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20).front_cache(false)).unwrap();
/// a.free_pages(a.alloc_pages(Gfp::KERNEL, 0).unwrap(), 0).unwrap(); // through a per-CPU list
/// assert!(a.lockstat().pcp.iter().any(|p| p.acquisitions > 0 && p.cpu < pagealloc::possible_cpus()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcpLockStatReport {
    /// Zone index in the allocator.
    pub zone: usize,
    /// Node of the zone.
    pub nid: u32,
    /// Zone name.
    pub name: &'static str,
    /// CPU slot.
    pub cpu: usize,
    /// Whether counting was on.
    pub enabled: bool,
    /// Times the lock was taken (sum of `hold_hist`).
    pub acquisitions: u64,
    /// Of those, the blocking ones (remote drains); the others are try-locks
    /// that waited for nothing.
    pub blocking: u64,
    /// Of those, the ones whose hold was timed: every blocking one and a
    /// random one try-lock in [`PCP_HOLD_SAMPLE`] (sum of `hold_hist`).
    pub timed: u64,
    /// Ticks the blocking acquisitions waited, summed.
    pub wait_ticks: u64,
    /// Ticks the timed holds held the lock, summed.
    pub hold_ticks: u64,
    /// Wait times, log2 buckets of ticks (try-locks in bucket 0); sums to
    /// `acquisitions`.
    pub wait_hist: Vec<u64>,
    /// Timed hold times, log2 buckets of ticks; sums to `timed`.
    pub hold_hist: Vec<u64>,
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
}

/// Every zone's lock statistics; `to_string()` gives one block per zone.
///
/// # Examples
/// ```
/// let r = pagealloc::PageAllocator::new(pagealloc::Config::small(4 << 20)).unwrap().lockstat();
/// assert!(r.to_string().starts_with("Node 0, zone   Normal lock")); // one block per zone
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatReport {
    /// Per zone.
    pub zones: Vec<ZoneLockStat>,
    /// Per zone and CPU: the per-CPU list locks, zone-major.
    pub pcp: Vec<PcpLockStatReport>,
}

/// Write one histogram table: wait and hold per bucket, up to the last
/// non-empty bucket.
fn write_hists(f: &mut core::fmt::Formatter<'_>, wait: &[u64], hold: &[u64]) -> core::fmt::Result {
    writeln!(f, "  {:>16} {:>14} {:>14}", "ticks <", "wait", "hold")?;
    let last = (0..LOCKSTAT_BUCKETS).rev().find(|&i| wait[i] != 0 || hold[i] != 0);
    for i in 0..=last.unwrap_or(0) {
        let bound = if i == LOCKSTAT_BUCKETS - 1 { "inf".to_string() } else { (1u64 << i).to_string() };
        writeln!(f, "  {:>16} {:>14} {:>14}", bound, wait[i], hold[i])?;
    }
    Ok(())
}

impl core::fmt::Display for LockStatReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
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
            write_hists(f, &z.wait_hist, &z.hold_hist)?;
        }
        let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        for p in self.pcp.iter().filter(|p| p.acquisitions != 0) {
            writeln!(
                f,
                "Node {}, zone {:>8} cpu {} pcp lock ({unit}; counting {})",
                p.nid,
                p.name,
                p.cpu,
                if p.enabled { "on" } else { "off" }
            )?;
            writeln!(f, "  acquisitions      {}", p.acquisitions)?;
            writeln!(f, "  blocking          {}", p.blocking)?;
            writeln!(f, "  wait_total        {}", p.wait_ticks)?;
            writeln!(f, "  wait_avg          {:.1}", per(p.wait_ticks, p.acquisitions))?;
            writeln!(f, "  holds_timed       {}", p.timed)?;
            writeln!(f, "  hold_timed_total  {}", p.hold_ticks)?;
            writeln!(f, "  hold_avg          {:.1}", per(p.hold_ticks, p.timed))?;
            write_hists(f, &p.wait_hist, &p.hold_hist)?;
        }
        let idle = self.pcp.iter().filter(|p| p.acquisitions == 0).count();
        if idle != 0 {
            writeln!(f, "pcp locks never taken while counting: {idle} (zone, cpu) sets, not shown")?;
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
        assert!(LockStatReport { zones: vec![r], pcp: vec![] }.to_string().contains("drain_hold_page   42.86"));
    }

    #[test]
    fn pcp_try_locks_count_as_zero_waits() {
        let mut s = PcpLockStat::new(true, 7);
        s.held(10);
        s.held(1000);
        s.waits += 1;
        s.wait_ticks += 50;
        s.wait_hist[bucket(50)] += 1;
        s.held(3);
        let z = LockStat::new(true).read(0, 0, "Normal");
        let r = s.read(&z, 1);
        assert_eq!((r.acquisitions, r.timed, r.blocking, r.wait_ticks, r.hold_ticks), (3, 3, 1, 50, 1013));
        assert_eq!(r.wait_hist.iter().sum::<u64>(), 3);
        assert_eq!((r.wait_hist[0], r.wait_hist[bucket(50)]), (2, 1));
        assert_eq!(r.hold_hist.iter().sum::<u64>(), 3);
        assert_eq!(r.hold_hist[bucket(1000)], 1);
        let text = LockStatReport { zones: vec![z], pcp: vec![r] }.to_string();
        assert!(text.contains("cpu 1 pcp lock"), "{text}");
        assert!(text.contains("hold_avg          337.7"), "{text}");
    }

    #[test]
    fn pcp_sampling_counts_every_acquisition() {
        let z = LockStat::new(true).read(0, 0, "Normal");
        let mut s = PcpLockStat::new(true, 3);
        let mut timed = 0u64;
        for i in 0..10_000u64 {
            s.acquired();
            if s.entered != 0 {
                timed += 1;
            }
            s.released();
            assert_eq!(s.entered, 0);
            if i == 5000 {
                s.set_enabled(false);
                for _ in 0..100 {
                    s.acquired();
                    assert_eq!(s.entered, 0, "timed while off");
                    s.released();
                }
                assert_eq!(s.read(&z, 0).acquisitions, 5001, "counted while off");
                assert!(!s.read(&z, 0).enabled);
                s.set_enabled(true);
            }
        }
        let r = s.read(&z, 0);
        assert_eq!(r.acquisitions, 10_000);
        assert_eq!(r.timed, timed);
        // One in PCP_HOLD_SAMPLE on average.
        let expect = 10_000 / PCP_HOLD_SAMPLE as u64;
        assert!(timed >= expect * 2 / 3 && timed <= expect * 3 / 2, "{timed} timed, about {expect} expected");
        assert_eq!(r.wait_hist[0], 10_000);
    }
}
