//! The contention model of `bench scaling`: what one lock does to N threads,
//! predicted from what one and two threads measure (the machine repairman
//! model, solved exactly by mean value analysis; Reiser and Lavenberg,
//! "Mean-Value Analysis of Closed Multichain Queuing Networks", JACM 1980).
//!
//! Each thread moves pages; per page it spends `z` nanoseconds on its own
//! (front cache, per-CPU lists, its share of the memory map) and `d`
//! nanoseconds holding the one lock every thread shares, the zone lock:
//! the hold itself, plus the lock's handoff each time it changes hands
//! (the lock word's and the free lists' cache lines move to the next CPU).
//! With N threads, a page's lock demand waits behind the others' queue:
//!
//! ```text
//! R(n) = d * (1 + Q(n-1)),  X(n) = n / (z + R(n)),  Q(n) = X(n) * R(n)
//! ```
//!
//! and the speedup is `X(N) / X(1)`. From one thread: `z + d` is the time
//! per page, `d` the zone lock's hold per page (lock statistics), times its
//! acquisitions per page the handoff. The handoff comes from the same run's
//! `buddy-pair` loop, which at two threads does nothing but pass the lock:
//! its time per acquisition there, less its hold per acquisition, is what a
//! handoff costs on this machine.
//!
//! What it leaves out: everything else the threads share (memory bandwidth,
//! cache lines of the memory map, the kernel's scheduler), so it is an upper
//! bound where the zone lock is not the limit. docs/experiments.md compares
//! it with a 16-core machine.

/// One loop's inputs, per page at one thread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inputs {
    /// Time per page at one thread, nanoseconds.
    pub t1_ns: f64,
    /// Zone-lock hold per page, nanoseconds.
    pub hold_ns: f64,
    /// Zone-lock acquisitions per page.
    pub acq: f64,
}

impl Inputs {
    /// The serialized time per page: the hold, and a handoff of `handoff_ns`
    /// per acquisition.
    pub fn serial_ns(&self, handoff_ns: f64) -> f64 {
        self.hold_ns + self.acq * handoff_ns
    }

    /// The speedup over one thread at `n` threads (exact MVA), each
    /// acquisition paying `handoff_ns` more than it did alone.
    pub fn speedup(&self, n: usize, handoff_ns: f64) -> f64 {
        let d = self.serial_ns(handoff_ns);
        let z = (self.t1_ns - self.hold_ns).max(0.0);
        let (mut q, mut x1, mut x) = (0.0, 0.0, 0.0);
        for k in 1..=n.max(1) {
            let r = d * (1.0 + q);
            x = k as f64 / (z + r);
            q = x * r;
            if k == 1 {
                x1 = x;
            }
        }
        if x1 > 0.0 {
            x / x1
        } else {
            f64::NAN
        }
    }
}

/// The handoff per acquisition, from a loop that does nothing but take the
/// lock (`buddy-pair`): at two threads the lock is busy all the time, so
/// `acq_per_page * rate2` acquisitions a second each take the hold plus
/// one handoff. `hold_per_acq_ns` is its hold per acquisition at one
/// thread. Never negative.
pub fn handoff_ns(acq_per_page: f64, rate2_pages_per_s: f64, hold_per_acq_ns: f64) -> f64 {
    if acq_per_page <= 0.0 || rate2_pages_per_s <= 0.0 {
        return 0.0;
    }
    (1e9 / (acq_per_page * rate2_pages_per_s) - hold_per_acq_ns).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_lock_scales_linearly_and_all_lock_not_at_all() {
        let free = Inputs { t1_ns: 20.0, hold_ns: 0.0, acq: 0.0 };
        assert!((free.speedup(16, 100.0) - 16.0).abs() < 1e-9);
        let all = Inputs { t1_ns: 20.0, hold_ns: 20.0, acq: 0.0 };
        assert!((all.speedup(16, 0.0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_bound_is_the_lock_and_mva_stays_under_it() {
        // 40 ns a page, 2 of them serialized: at most 20x, whatever N.
        let m = Inputs { t1_ns: 40.0, hold_ns: 2.0, acq: 0.0 };
        let (s16, s88, s1000) = (m.speedup(16, 0.0), m.speedup(88, 0.0), m.speedup(1000, 0.0));
        assert!(s16 > 12.0 && s16 < 16.0, "{s16}");
        assert!(s88 > s16 && s88 <= 20.0 + 1e-9 && s1000 <= 20.0 + 1e-9, "{s88} {s1000}");
        assert!(s1000 > 19.9, "{s1000}");
        // Two threads, by hand: R(1) = 2, X(1) = 1/40; Q(1) = 2/40;
        // R(2) = 2 * 1.05 = 2.1; X(2) = 2 / 40.1.
        assert!((m.speedup(2, 0.0) - 80.0 / 40.1).abs() < 1e-12);
        // A handoff per acquisition adds to the serialized part.
        let h = Inputs { t1_ns: 40.0, hold_ns: 1.0, acq: 0.01 };
        assert!((h.serial_ns(100.0) - 2.0).abs() < 1e-12);
        assert!(h.speedup(16, 100.0) < h.speedup(16, 0.0));
    }

    #[test]
    fn the_handoff_is_what_a_saturated_lock_takes_beyond_its_hold() {
        // 2 acquisitions a page, 2.5 M pages/s at two threads: 200 ns an
        // acquisition, of which 150 were hold.
        assert!((handoff_ns(2.0, 2.5e6, 150.0) - 50.0).abs() < 1e-9);
        assert_eq!(handoff_ns(2.0, 2.5e6, 500.0), 0.0);
        assert_eq!(handoff_ns(0.0, 2.5e6, 10.0), 0.0);
    }
}
