//! Time stamp counter: read it, and calibrate it against CLOCK_MONOTONIC once per run.

use std::time::{Duration, Instant};

/// Read the TSC (serialising nothing: use around loops of many operations).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static T0: OnceLock<Instant> = OnceLock::new();
        T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// A calibrated TSC: cycles per nanosecond.
#[derive(Clone, Copy, Debug)]
pub struct Tsc {
    /// TSC ticks per nanosecond (= GHz).
    pub ghz: f64,
}

impl Tsc {
    /// Measure the TSC rate over about `ms` milliseconds of CLOCK_MONOTONIC
    /// (three rounds, the median kept).
    pub fn calibrate(ms: u64) -> Self {
        let mut rates: Vec<f64> = (0..3)
            .map(|_| {
                let (t0, c0) = (Instant::now(), rdtsc());
                while t0.elapsed() < Duration::from_millis(ms) {
                    std::hint::spin_loop();
                }
                let (c1, dt) = (rdtsc(), t0.elapsed());
                (c1 - c0) as f64 / dt.as_nanos() as f64
            })
            .collect();
        rates.sort_by(|a, b| a.total_cmp(b));
        Self { ghz: rates[1] }
    }

    /// Convert cycles to nanoseconds.
    pub fn ns(&self, cycles: f64) -> f64 {
        cycles / self.ghz
    }
}
