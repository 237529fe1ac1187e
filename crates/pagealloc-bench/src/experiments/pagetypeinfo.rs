//! `pagealloc bench pagetypeinfo` (seed 5, part 1): how long one read of
//! /proc/pagetypeinfo takes, fresh and after a fragmenting workload, for the old
//! design (walk every free list under the zone lock) and the new one (lock-free
//! per-(order, type) counters), with this machine's real /proc/pagetypeinfo as a
//! peer. A read is the whole report: gather the values and render the text.
//!
//! The seed measured 700 us -> 269 us fresh and 28.7 ms -> 270 us after building
//! a kernel, over 10,000 reads.

use crate::harness::{rdtsc, stats, Claim, Ctx, Experiment, ExperimentResult, Figure};
use crate::workloads;
use pagealloc::{Config, PageAllocator};
use std::io::Read;

/// The experiment.
pub struct PageTypeInfo;

/// Per-read latencies in microseconds.
fn time_reads(ctx: &Ctx, n: usize, mut read: impl FnMut() -> usize) -> Vec<f64> {
    let mut sink = 0usize;
    let v = (0..n)
        .map(|_| {
            let c0 = rdtsc();
            sink = sink.wrapping_add(read());
            ctx.tsc.ns((rdtsc() - c0) as f64) / 1000.0
        })
        .collect();
    std::hint::black_box(sink);
    v
}

/// One read of the real file; `None` when it cannot be read (not root).
fn read_proc(buf: &mut Vec<u8>) -> Option<usize> {
    buf.clear();
    let mut f = std::fs::File::open("/proc/pagetypeinfo").ok()?;
    f.read_to_end(buf).ok()
}

impl Experiment for PageTypeInfo {
    fn name(&self) -> &'static str {
        "pagetypeinfo"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new("pagetypeinfo", "pagetypeinfo read latency: list walk vs counters", Some(5));
        let reads = 10_000;
        // The old design's fragmented reads take long; quick mode takes fewer.
        let old_reads = if ctx.full { 10_000 } else { 2_000 };
        let proc_reads = if ctx.full { 10_000 } else { 1_000 };
        let ops = if ctx.full { 8_000_000 } else { 2_000_000 };
        let pb = ctx.bar("pagetypeinfo", 5);
        r.line(
            ctx,
            format!(
                "{:<10} {:<12} {:>7} {:>12} {:>12} {:>12}",
                "design", "state", "reads", "mean-us", "max-us", "free-blocks"
            ),
        );
        let row = |r: &mut ExperimentResult, design: &str, state: &str, v: Vec<f64>, blocks: u64| {
            let (mean, max) = (stats::mean(&v), stats::max(&v));
            r.line(ctx, format!("{design:<10} {state:<12} {:>7} {mean:>12.2} {max:>12.2} {blocks:>12}", v.len()));
            // Samples: the means of ten consecutive slices of the reads (the
            // verdict's interval needs more than one); the value: the mean of
            // all of them.
            let slice = v.len().div_ceil(10).max(1);
            let means: Vec<f64> = v.chunks(slice).map(stats::mean).collect();
            let mut f =
                Figure::new(format!("read-{state}"), design, "us", means).param("max_us", max).param("reads", v.len());
            f.value = mean;
            r.figures.push(f);
        };
        for (design, walk) in [("old", true), ("new", false)] {
            let a = PageAllocator::new(Config::new().pagetypeinfo_walk_lists(walk)).expect("default arena");
            let n = if walk { old_reads } else { reads };
            let blocks =
                |a: &PageAllocator| a.stats().buddyinfo().zones.iter().map(|z| z.free.iter().sum::<u64>()).sum::<u64>();
            let v = time_reads(ctx, n, || a.stats().pagetypeinfo().render().len());
            row(&mut r, design, "fresh", v, blocks(&a));
            pb.inc(1);
            let live = workloads::fragment_hard(&a, ops, 0x5eed);
            let v = time_reads(ctx, n, || a.stats().pagetypeinfo().render().len());
            row(&mut r, design, "fragmented", v, blocks(&a));
            a.check_invariants().expect("invariants after the reads");
            workloads::free_all(&a, live);
            pb.inc(1);
        }
        let mut buf = Vec::with_capacity(8192);
        if read_proc(&mut buf).is_some() {
            let v = time_reads(ctx, proc_reads, || read_proc(&mut buf).unwrap_or(0));
            row(&mut r, "kernel", "this-machine", v, 0);
        } else {
            r.line(ctx, "kernel     this-machine  /proc/pagetypeinfo is not readable here (needs root)");
        }
        pb.finish_and_clear();

        let g = |r: &ExperimentResult, m: &str, v: &str| r.get(m, v).map_or(f64::NAN, |f| f.value);
        let (nf, nx) = (g(&r, "read-fresh", "new"), g(&r, "read-fragmented", "new"));
        let of = g(&r, "read-fragmented", "old");
        let speedup = of / nx;
        r.line(ctx, format!("fragmented: counters are {speedup:.0}x faster than the list walk"));
        let kernel = g(&r, "read-this-machine", "kernel");
        peer_targets(&mut r, kernel, nf, nx);
        r.claims.push(Claim {
            seed: 5,
            text: "pagetypeinfo read 700.9 us -> 268.6 us just after boot, 28.7 ms -> 269.8 us after building a kernel"
                .into(),
            metric: "read-fragmented".into(),
            old: "old".into(),
            new: "new".into(),
        });
        r.notes.push(format!(
            "{reads} reads per design and state ({old_reads} for the list walk in quick mode); the fragmenting workload is \
             {ops} mixed-order, mixed-type operations then order-0 churn (workloads::fragment_hard)"
        ));
        r
    }
}

/// The targets against the peer: this machine's own /proc/pagetypeinfo,
/// read in the same run. It walks a larger machine's lists, which is the
/// point: the counters' read does not grow with memory.
fn peer_targets(r: &mut ExperimentResult, kernel: f64, fresh: f64, fragmented: f64) {
    for (state, ours) in [("fresh", fresh), ("fragmented", fragmented)] {
        let what = format!(
            "lock-free pagetypeinfo read, {state}: at least 10x faster than this machine's /proc/pagetypeinfo \
             (x faster)"
        );
        if kernel.is_nan() {
            let why = "/proc/pagetypeinfo is not readable here (needs root)";
            r.not_measurable(crate::harness::TargetKind::Peer, what, (f64::NAN, 10.0), why);
        } else {
            r.target(crate::harness::TargetKind::Peer, what, kernel / ours, 10.0, kernel >= 10.0 * ours);
        }
    }
}
