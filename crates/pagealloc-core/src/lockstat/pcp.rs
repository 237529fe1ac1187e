//! The per-CPU list locks' statistics (see the parent module doc).

use super::{bucket, ticks, ZoneLockStat, LOCKSTAT_BUCKETS, LOCKSTAT_SAMPLE};
#[allow(unused_imports)]
use crate::prelude::*;

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
    pub(crate) fn acquired(&mut self) {
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
/// assert!(a.stats().lockstat().pcp.iter().any(|p| p.acquisitions > 0 && p.cpu < pagealloc::possible_cpus()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lockstat::{bucket, LockStat, LockStatReport};

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
