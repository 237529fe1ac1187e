//! time_bench's records: one timed loop's invoke count, cycles and
//! nanoseconds, printed as prototype-kernel's `time_bench_loop` prints them,
//! and the median of a measurement's repeats.

use crate::harness::rdtsc;
use std::time::Instant;

/// One timed run: `loops` calls of a step that handles `step` pages.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rec {
    pub(super) step: usize,
    pub(super) invoked: u64,
    pub(super) tsc: u64,
    pub(super) ns: u64,
}

impl Rec {
    pub(super) fn cycles_per_elem(&self) -> f64 {
        self.tsc as f64 / self.invoked as f64
    }
    /// time_bench's line, as `time_bench_loop` prints it (with its module's
    /// `time_bench: ` prefix) after `time_bench_calc_stats`: the invoke count
    /// taken as 32 bits, cycles and nanoseconds per call by integer division,
    /// and the three "decimals" of the nanoseconds as the remainder divided by
    /// `count / 1000` (its own "incorrect roundup": not rounded, and more than
    /// three digits when the count is under 10^6 and the remainder large).
    /// Under 1000 calls the kernel logs an error, computes nothing and prints
    /// the line with every figure but the count 0.
    pub(super) fn line(&self, name: &str) -> String {
        let (cycles, ns_q, ns_d, ns, tsc) = if self.invoked < 1000 {
            (0, 0, 0, 0, 0)
        } else {
            let cnt = u64::from(self.invoked as u32).max(1);
            (self.tsc / cnt, self.ns / cnt, (self.ns % cnt) / (cnt / 1000), self.ns, self.tsc)
        };
        format!(
            "time_bench: Type:{name} Per elem: {} cycles(tsc) {ns_q}.{ns_d:03} ns (step:{}) - (measurement period time:{}.{:09} sec \
             time_interval:{}) - (invoke count:{} tsc_interval:{})",
            cycles,
            self.step,
            ns / 1_000_000_000,
            ns % 1_000_000_000,
            ns,
            self.invoked,
            tsc
        )
    }
}

/// Time `f`, which makes `loops` calls, each handling `step` pages.
pub(super) fn time(step: usize, loops: u64, f: impl FnOnce()) -> Rec {
    let (t, c0) = (Instant::now(), rdtsc());
    f();
    let tsc = rdtsc() - c0;
    Rec { step, invoked: loops * step as u64, tsc, ns: t.elapsed().as_nanos() as u64 }
}

/// The repeat with the median cost, and every repeat's cycles per element.
pub(super) fn repeat(n: usize, mut f: impl FnMut() -> Rec) -> (Rec, Vec<f64>) {
    median_of((0..n).map(|_| f()).collect())
}

/// The median record of `recs`, and every record's cycles per element.
pub(super) fn median_of(mut recs: Vec<Rec>) -> (Rec, Vec<f64>) {
    let samples = recs.iter().map(Rec::cycles_per_elem).collect();
    recs.sort_by(|a, b| a.cycles_per_elem().total_cmp(&b.cycles_per_elem()));
    (recs[recs.len() / 2], samples)
}

#[cfg(test)]
mod tests {
    use super::Rec;

    #[test]
    fn lines_follow_time_bench() {
        // 1,000,000 pages in 26,170,123 ns and 94,123,456 cycles.
        let r = Rec { step: 128, invoked: 1_000_000, tsc: 94_123_456, ns: 26_170_123 };
        assert_eq!(
            r.line("time_bulk_page_alloc_free_array"),
            "time_bench: Type:time_bulk_page_alloc_free_array Per elem: 94 cycles(tsc) 26.170 ns (step:128) - \
             (measurement period time:0.026170123 sec time_interval:26170123) - (invoke count:1000000 tsc_interval:94123456)"
        );
        // The decimals are the remainder over count/1000, not rounded:
        // 5,999 ns over 2,000 calls is 2.9995 ns, printed 2.999 (not 3.000)...
        let r = Rec { step: 1, invoked: 2_000, tsc: 10_000, ns: 5_999 };
        assert!(r.line("x").contains(" 2.999 ns "), "{}", r.line("x"));
        // ... and with 1,999 calls the divisor is 1, so the remainder itself is
        // printed: 3,997 ns / 1,999 = 1 rest 1,998, printed 1.1998.
        let r = Rec { step: 1, invoked: 1_999, tsc: 10_000, ns: 3_997 };
        assert!(r.line("x").contains(" 1.1998 ns "), "{}", r.line("x"));
        // Under 1000 calls the kernel computes nothing.
        let r = Rec { step: 1, invoked: 999, tsc: 10_000, ns: 3_997 };
        assert_eq!(
            r.line("x"),
            "time_bench: Type:x Per elem: 0 cycles(tsc) 0.000 ns (step:1) - (measurement period time:0.000000000 sec \
             time_interval:0) - (invoke count:999 tsc_interval:0)"
        );
    }
}
