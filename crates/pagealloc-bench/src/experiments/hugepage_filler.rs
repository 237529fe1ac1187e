//! `pagealloc bench hugepage-filler` (on demand): does the
//! hugepage filler (`Config::hugepage_filler`: per-CPU refills fill partly
//! used pageblocks before they split a wholly free one) pack live memory
//! into fewer 2 MiB pages under a fragmenting workload?
//!
//! The workload, on a 256 MiB arena with hugepage backing, pinned pages (no
//! compaction can help), background reporting off: half of the arena
//! allocated one order-0 page at a time and written, one page in eight
//! long-lived, the rest short-lived; then rounds of churn: half of the
//! short-lived pages freed at random and as many allocated again (one in
//! sixteen of the new ones long-lived), and one long-lived page in twenty
//! freed at random; at the end every short-lived page is freed, the per-CPU
//! lists and front caches drained and every wholly free pageblock released
//! (`report_free_pages_now`). Figures, filler off and on in the same run,
//! each with three seeds: `pageblocks-over-packed` (pageblocks holding live
//! pages over the fewest that could hold them), `resident-over-live`
//! (resident arena pages, managed minus released, over live pages),
//! `released-mib`, `coverage` (the arena's AnonHugePages over its Rss from
//! /proc/self/smaps), and `churn-ns` (the churn's ns per page allocated and
//! freed, written once: the filler's cost).
//!
//! The filler packs only where pageblocks differ in fullness: when every
//! pageblock keeps short-lived survivors at each trough, all are about as
//! full and new pages land in all of them. Dated figures are in docs/results/.

use super::hugepage::smaps_range;
use crate::harness::{stats, Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn, PAGEBLOCK_PAGES, PAGE_SIZE};
use std::collections::HashSet;
use std::time::Instant;

/// The experiment.
pub struct HugepageFiller;

/// Rounds of churn.
const ROUNDS: usize = 40;

/// xorshift64: the workload's random choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// One run's outcome.
struct Outcome {
    live: u64,
    used_blocks: u64,
    resident: u64,
    released: u64,
    coverage: f64,
    churn_ns: f64,
}

fn take_random(v: &mut Vec<u64>, rng: &mut Rng) -> u64 {
    let i = rng.below(v.len());
    v.swap_remove(i)
}

fn alloc_written(a: &PageAllocator, k: u64) -> u64 {
    let p = a.alloc_pages(Gfp::MOVABLE, 0).expect("hugepage-filler: arena exhausted");
    // SAFETY: the page is allocated to this experiment.
    unsafe { a.page_address(p).expect("backed").as_ptr().cast::<u64>().write_volatile(k) };
    p.as_u64()
}

fn run_once(filler: bool, seed: u64) -> Outcome {
    let cfg = Config::new()
        .arena_bytes(256 << 20)
        .backing(Backing::HugePages)
        .page_reporting(false)
        .compaction_proactiveness(0)
        .hugepage_filler(filler);
    let a = PageAllocator::new(cfg).expect("hugepage-filler arena");
    let mut rng = Rng(seed);
    let (mut long, mut short) = (Vec::new(), Vec::new());
    let n = (a.managed_pages() / 2) as usize;
    for k in 0..n as u64 {
        short.push(alloc_written(&a, k));
    }
    let t = Instant::now();
    let mut moved = 0u64;
    for _ in 0..ROUNDS {
        // Demand falls to a trough (three quarters of the short-lived pages
        // freed, one long-lived page in twenty too) and climbs back to a
        // peak drawn between a quarter and a half of the arena.
        let m = short.len() * 3 / 4;
        for _ in 0..m {
            let p = take_random(&mut short, &mut rng);
            a.free_pages(Pfn::new(p), 0).expect("free");
        }
        for _ in 0..long.len() / 20 {
            let p = take_random(&mut long, &mut rng);
            a.free_pages(Pfn::new(p), 0).expect("free");
        }
        let peak = n / 2 + rng.below(n / 2 + 1);
        let mut k = 0u64;
        while short.len() + long.len() < peak {
            let p = alloc_written(&a, k);
            if rng.below(16) == 0 {
                long.push(p)
            } else {
                short.push(p)
            }
            k += 1;
        }
        moved += m as u64 + k;
    }
    let churn_ns = t.elapsed().as_nanos() as f64 / moved.max(1) as f64;
    let pfns: Vec<Pfn> = short.drain(..).map(Pfn::new).collect();
    a.free_pages_bulk(&pfns).expect("free");
    a.drain_all_pages();
    a.reporting().report_free_pages_now();
    let released: u64 = a.reporting().residency().iter().map(|z| z.reported).sum();
    let base = a.page_address(Pfn::new(0)).map_or(0, |p| p.as_ptr() as usize);
    let (rss_kb, huge_kb) = smaps_range(base, a.nr_pages() as usize * PAGE_SIZE);
    let used: HashSet<u64> = long.iter().map(|p| p / PAGEBLOCK_PAGES).collect();
    let out = Outcome {
        live: long.len() as u64,
        used_blocks: used.len() as u64,
        resident: a.managed_pages() - released,
        released,
        coverage: if rss_kb == 0 { 0.0 } else { huge_kb as f64 / rss_kb as f64 },
        churn_ns,
    };
    let pfns: Vec<Pfn> = long.into_iter().map(Pfn::new).collect();
    a.free_pages_bulk(&pfns).expect("free");
    a.check_invariants().expect("hugepage-filler: invariants");
    out
}

impl Experiment for HugepageFiller {
    fn name(&self) -> &'static str {
        "hugepage-filler"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r =
            ExperimentResult::new(self.name(), "Hugepage filler: live memory packed into few 2 MiB pages", None);
        r.line(
            ctx,
            "# case seed live_pages used_pageblocks packed_pageblocks resident_pages released_mib coverage churn_ns",
        );
        let mut ratio = [Vec::new(), Vec::new()];
        for (i, (name, filler)) in [("filler-off", false), ("filler-on", true)].into_iter().enumerate() {
            let (mut blocks, mut res, mut rel, mut cov, mut ns) = (vec![], vec![], vec![], vec![], vec![]);
            for seed in [0x2545_f491_4f6c_dd1du64, 0x9e37_79b9_7f4a_7c15, 0xdead_beef_cafe_f00d] {
                let o = run_once(filler, seed);
                let packed = o.live.div_ceil(PAGEBLOCK_PAGES);
                let mib = (o.released * PAGE_SIZE as u64) as f64 / (1 << 20) as f64;
                r.line(
                    ctx,
                    format!(
                        "{name} {seed:#x} {} {} {packed} {} {mib:.0} {:.3} {:.1}",
                        o.live, o.used_blocks, o.resident, o.coverage, o.churn_ns
                    ),
                );
                blocks.push(o.used_blocks as f64 / packed.max(1) as f64);
                res.push(o.resident as f64 / o.live.max(1) as f64);
                rel.push(mib);
                cov.push(o.coverage);
                ns.push(o.churn_ns);
            }
            ratio[i] = res.clone();
            r.figures.push(Figure::new("pageblocks-over-packed", name, "x", blocks));
            r.figures.push(Figure::new("resident-over-live", name, "x live", res));
            r.figures.push(Figure::new("released-mib", name, "MiB", rel).higher_better());
            r.figures.push(Figure::new("coverage", name, "share", cov).higher_better());
            r.figures.push(Figure::new("churn-ns", name, "ns", ns));
        }
        let (off, on) = (stats::median(&ratio[0]), stats::median(&ratio[1]));
        r.line(ctx, format!("# resident over live, medians: filler off {off:.3}, on {on:.3}"));
        r.target(
            crate::harness::TargetKind::Floor,
            "hugepage filler: resident over live, filler on over filler off",
            on / off,
            1.0,
            on <= off,
        );
        r
    }
}
