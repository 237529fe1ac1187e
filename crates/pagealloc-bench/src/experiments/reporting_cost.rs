//! `pagealloc bench reporting-cost` (on demand): what free page
//! reporting costs the hot paths. Two allocators on the default 1 GiB
//! anonymous arena, one with reporting on (the default: the reporter thread
//! runs its passes) and one with it off, measured alternately, round by
//! round, so drift on a shared machine hits both alike:
//! - `pair`: `alloc_pages(KERNEL, 0)` + `free_pages`, 2^20 pairs a round, ns
//!   a pair (bulk's `order0` figure);
//! - `bulk128`: the array form, 128 slots filled by `alloc_pages_bulk` and
//!   handed back by `free_pages_bulk_slots`, 8192 rounds of it, ns a page;
//! - `page-fault1`: 32768 order-0 pages allocated one at a time and one byte
//!   of each written, then freed 512 at a time through `free_pages_bulk`, ns
//!   a page (page-fault1's loop on anonymous backing: page-fault1 itself runs
//!   on `Backing::Resident`, where nothing can be reported).
//!
//! The target: reporting on within the noise of reporting off. The
//! difference is |on - off| / off of the medians over the rounds (after
//! warm-up rounds); the noise, the larger of the two interquartile ranges
//! over their medians.

use super::page_fault1::{GATHER_BATCH, NR_PAGES};
use crate::harness::{opaque_pfn, Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use std::time::Instant;

/// The experiment.
pub struct ReportingCost;

const PAIRS: u64 = 1 << 18;
const BULK_ROUNDS: u64 = 2048;
/// Rounds left out at the start (warm-up: the arena's first touches).
const WARM: usize = 20;

#[inline(never)]
fn pair_round(a: &PageAllocator) -> f64 {
    let t = Instant::now();
    for _ in 0..PAIRS {
        let p = a.alloc_pages(Gfp::KERNEL, 0).expect("reporting-cost: alloc");
        a.free_pages(opaque_pfn(p), 0).expect("reporting-cost: free");
    }
    t.elapsed().as_nanos() as f64 / PAIRS as f64
}

#[inline(never)]
fn bulk_round(a: &PageAllocator, slots: &mut [Option<Pfn>]) -> f64 {
    let t = Instant::now();
    for _ in 0..BULK_ROUNDS {
        let n = a.alloc_pages_bulk(Gfp::KERNEL, slots);
        assert_eq!(n, slots.len(), "reporting-cost: bulk came back short");
        a.free_pages_bulk_slots(slots).expect("reporting-cost: bulk free");
    }
    t.elapsed().as_nanos() as f64 / (BULK_ROUNDS * slots.len() as u64) as f64
}

#[inline(never)]
fn fault_round(a: &PageAllocator, pfns: &mut Vec<Pfn>) -> f64 {
    let t = Instant::now();
    for _ in 0..NR_PAGES {
        let p = a.alloc_pages(Gfp::USER, 0).expect("reporting-cost: arena exhausted");
        // SAFETY: the page is allocated to this loop.
        unsafe { a.page_address(p).expect("backed").as_ptr().write_volatile(0) };
        pfns.push(p);
    }
    for b in pfns.chunks(GATHER_BATCH) {
        a.free_pages_bulk(b).expect("reporting-cost: bulk free");
    }
    pfns.clear();
    t.elapsed().as_nanos() as f64 / NR_PAGES as f64
}

/// The interquartile range of `v` over its median.
fn iqr(v: &[f64]) -> f64 {
    let mut w = v.to_vec();
    w.sort_by(f64::total_cmp);
    let q = |f: f64| w[((w.len() - 1) as f64 * f).round() as usize];
    (q(0.75) - q(0.25)) / q(0.5)
}

impl Experiment for ReportingCost {
    fn name(&self) -> &'static str {
        "reporting-cost"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "Free page reporting on against off: hot-path cost", None);
        crate::harness::pin(0);
        let on = PageAllocator::new(Config::new()).expect("reporting-cost arena");
        let off = PageAllocator::new(Config::new().page_reporting(false)).expect("reporting-cost arena");
        assert!(on.reporting().page_reporting_stats().enabled && !off.reporting().page_reporting_stats().enabled);
        let rounds = if ctx.full { 1001 } else { 201 };
        let mut slots = vec![None; 128];
        let mut pfns = Vec::with_capacity(NR_PAGES);
        // [metric][on=0/off=1] samples.
        let mut s: [[Vec<f64>; 2]; 3] = Default::default();
        r.line(ctx, "# round pair_on pair_off bulk128_on bulk128_off page-fault1_on page-fault1_off (ns)");
        for round in 0..rounds + WARM {
            // Alternate which goes first.
            let order: [(usize, &PageAllocator); 2] =
                if round % 2 == 0 { [(0, &on), (1, &off)] } else { [(1, &off), (0, &on)] };
            let mut row = [0.0; 6];
            for &(k, a) in &order {
                row[k] = pair_round(a);
                row[2 + k] = bulk_round(a, &mut slots);
                row[4 + k] = fault_round(a, &mut pfns);
            }
            r.line(
                ctx,
                format!("{round} {:.2} {:.2} {:.2} {:.2} {:.2} {:.2}", row[0], row[1], row[2], row[3], row[4], row[5]),
            );
            if round == 0 {
                continue; // warm-up
            }
            for m in 0..3 {
                s[m][0].push(row[2 * m]);
                s[m][1].push(row[2 * m + 1]);
            }
        }
        let st = on.reporting().page_reporting_stats();
        r.notes.push(format!(
            "reporting on: {} passes, {} pages released, {} release calls during the run",
            st.passes, st.released_pages, st.release_calls
        ));
        for (m, name) in ["pair", "bulk128", "page-fault1"].iter().enumerate() {
            let f_on = Figure::new(*name, "reporting-on", "ns", s[m][0].clone());
            let f_off = Figure::new(*name, "reporting-off", "ns", s[m][1].clone());
            let diff = (f_on.value - f_off.value) / f_off.value;
            let noise = iqr(&s[m][1]).max(iqr(&s[m][0]));
            r.line(
                ctx,
                format!(
                    "# {name}: on {:.2} ns, off {:.2} ns (medians), difference {:+.1}%, noise {:.1}%",
                    f_on.value,
                    f_off.value,
                    100.0 * diff,
                    100.0 * noise
                ),
            );
            r.target(
                crate::harness::TargetKind::Floor,
                format!(
                    "{name}: |on - off| / off of the medians within the noise (the larger interquartile range of the \
                     two over its median)"
                ),
                diff.abs(),
                noise,
                diff.abs() <= noise,
            );
            r.figures.push(f_on);
            r.figures.push(f_off);
        }
        r
    }
}
