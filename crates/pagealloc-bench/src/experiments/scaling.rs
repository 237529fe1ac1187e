//! `pagealloc bench scaling` (on demand): the allocator's throughput against
//! the thread count. N pinned threads share one allocator (frames only, no
//! memory behind them, so the figures are the allocator's alone) and each
//! runs one loop until told to stop; the pages they allocate and free are
//! counted over `repeats` measured intervals after a warm-up. The loops, from
//! the most private state to the most shared:
//!
//! - `pair`: `alloc_pages(KERNEL, 0)` + `free_pages`, hits of the thread's
//!   own front cache;
//! - `pcp-pair`: the same pair with the front cache off: the per-CPU list of
//!   the CPU the thread is pinned to (its lock is shared only when two
//!   threads share a CPU);
//! - `bulk128`: the array form, 128 slots filled and freed (past the front
//!   cache's 32, so one per-CPU list lock hold per call);
//! - `fault1`: page-fault1's allocator side without the writes: 32768 single
//!   allocations, then their free in batches of 512, so half of every round
//!   goes through the buddy under the zone lock (per-CPU refills and drains);
//! - `pcp-flush`: seed 2's loop, batches of 10,000 single allocations then
//!   their single frees, with `high` pinned near a third of a batch, so the
//!   lists overflow and refill over and over;
//! - `buddy-pair`: the pair with the per-CPU lists and the front cache off:
//!   every page under the zone lock, the one shared point.
//!
//! Raw output: one line per loop and thread count with the median pages a
//! second, the speedup over one thread, and the zone lock's acquisitions,
//! wait, hold and free-list operations (the hold's work, which preemption
//! on a busy machine cannot inflate) per thousand pages over the measured
//! intervals; then per
//! loop the contention model's prediction for 16 and 88 threads from its
//! one- and two-thread runs (`scaling_model`).

use super::page_fault1::{GATHER_BATCH, NR_PAGES};
use crate::harness::{opaque_pfn, pin, Ctx, Experiment, ExperimentResult, Figure, Plot};
use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The loops.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The order-0 pair on the thread's front cache.
    Pair,
    /// The order-0 pair on the per-CPU lists (front cache off).
    PcpPair,
    /// The array form at 128 pages.
    Bulk128,
    /// page-fault1's allocator side, without the writes.
    Fault1,
    /// pcp-flush's loop (seed 2): 10,000-page batches through lists pinned small.
    PcpFlush,
    /// The order-0 pair under the zone lock (per-CPU lists and front cache off).
    BuddyPair,
}

impl Mode {
    const ALL: [Mode; 6] = [Mode::Pair, Mode::PcpPair, Mode::Bulk128, Mode::Fault1, Mode::PcpFlush, Mode::BuddyPair];

    fn name(self) -> &'static str {
        match self {
            Mode::Pair => "pair",
            Mode::PcpPair => "pcp-pair",
            Mode::Bulk128 => "bulk128",
            Mode::Fault1 => "fault1",
            Mode::PcpFlush => "pcp-flush",
            Mode::BuddyPair => "buddy-pair",
        }
    }

    /// The allocator for `threads` threads of this loop: frames only; room
    /// for every thread's 128 MiB twice over for `fault1`, 1 GiB at least.
    fn allocator(self, threads: usize, design: Design) -> PageAllocator {
        let bytes = ((threads as u64 * 2 * (NR_PAGES as u64 * 4096)).max(1 << 30) + (1 << 30) - 1) & !((1 << 30) - 1);
        let private = !matches!(self, Mode::PcpPair | Mode::BuddyPair);
        let mut cfg = Config::new()
            .arena_bytes(bytes)
            .backing(Backing::None)
            .front_cache(private)
            .pcp_lists(self != Mode::BuddyPair);
        if self == Mode::PcpFlush {
            let f = super::pcp_flush::high_fraction(&cfg);
            cfg = cfg.percpu_pagelist_high_fraction(f);
        }
        PageAllocator::new(design.apply(cfg)).expect("scaling: allocator")
    }
}

/// `pagealloc bench scaling`'s own flags.
#[derive(clap::Args, Clone, Debug, Default)]
#[group(id = "scaling")] // not `Args`, page-fault1's group
pub struct Args {
    /// scaling: the thread counts to run, comma-separated (default 1, 2, 4, ...
    /// up to the CPUs, then twice the CPUs).
    #[arg(long, value_delimiter = ',')]
    pub scaling_threads: Vec<usize>,
    /// scaling: the loops to run, comma-separated (default all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scaling_mode: Vec<Mode>,
    /// scaling: the design the zone lock sees (default: the library's; the
    /// others are the designs before this one, for an A/B in one binary).
    #[arg(long, value_enum, default_value_t = Design::Blocks)]
    pub scaling_design: Design,
}

/// What the per-CPU lists do with the zone lock.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Design {
    /// The library's: drains merge outside the zone lock, a depot between
    /// the lists and the buddy.
    #[default]
    Blocks,
    /// The same drain without the depot.
    NoDepot,
    /// The kernel's drain (pick and merge under the zone lock), no depot.
    SinglePass,
    /// Seed 1's drain (pick outside, merge under), no depot.
    TwoPass,
}

impl Design {
    fn apply(self, cfg: Config) -> Config {
        match self {
            Design::Blocks => cfg,
            Design::NoDepot => cfg.depot_fraction(0),
            Design::SinglePass => cfg.drain_mode(pagealloc::DrainMode::SinglePass),
            Design::TwoPass => cfg.drain_mode(pagealloc::DrainMode::TwoPass),
        }
    }
}

/// The experiment, with its flags.
pub struct Scaling(pub Args);

/// A per-thread page counter on its own cache line.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// Run `round` (which moves `pages` pages) until `stop`, counting pages.
fn rounds(stop: &AtomicBool, counter: &AtomicU64, pages: u64, mut round: impl FnMut()) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        round();
        n += pages;
        counter.store(n, Ordering::Relaxed);
    }
}

/// One thread's loop.
fn worker(mode: Mode, a: &PageAllocator, counter: &AtomicU64, stop: &AtomicBool) {
    const PAIRS: u64 = 256;
    let pair = || {
        for _ in 0..PAIRS {
            let p = a.alloc_pages(Gfp::KERNEL, 0).expect("scaling: alloc");
            a.free_pages(opaque_pfn(p), 0).expect("scaling: free");
        }
    };
    match mode {
        Mode::Pair | Mode::PcpPair | Mode::BuddyPair => rounds(stop, counter, PAIRS, pair),
        Mode::Bulk128 => {
            let mut slots = vec![None; 128];
            rounds(stop, counter, 128, || {
                assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 128, "scaling: bulk came back short");
                a.free_pages_bulk_slots(&mut slots).expect("scaling: bulk free");
            });
        }
        Mode::PcpFlush => {
            let mut pfns: Vec<Pfn> = Vec::with_capacity(super::pcp_flush::BATCH);
            rounds(stop, counter, super::pcp_flush::BATCH as u64, || {
                for _ in 0..super::pcp_flush::BATCH {
                    pfns.push(a.alloc_pages(Gfp::KERNEL, 0).expect("scaling: arena exhausted"));
                }
                for p in pfns.drain(..) {
                    a.free_pages(opaque_pfn(p), 0).expect("scaling: free");
                }
            });
        }
        Mode::Fault1 => {
            let mut pfns: Vec<Pfn> = Vec::with_capacity(NR_PAGES);
            rounds(stop, counter, NR_PAGES as u64, || {
                for _ in 0..NR_PAGES {
                    pfns.push(a.alloc_pages(Gfp::USER, 0).expect("scaling: arena exhausted"));
                }
                for b in pfns.chunks(GATHER_BATCH) {
                    a.free_pages_bulk(b).expect("scaling: bulk free");
                }
                pfns.clear();
            });
        }
    }
}

/// The zone locks' acquisitions, wait ticks, (estimated) hold ticks and
/// (estimated) free-list operations so far, over every zone.
fn zone_lock(a: &PageAllocator) -> [u64; 4] {
    a.stats().lockstat().zones.iter().fold([0; 4], |[n, w, h, o], z| {
        [n + z.acquisitions, w + z.wait_ticks, h + z.hold_ticks_estimate() as u64, o + z.list_ops_estimate() as u64]
    })
}

/// One loop on `threads` threads: pages a second per measured interval, and
/// the zone lock's acquisitions and wait ticks over those intervals.
struct Run {
    rates: Vec<f64>,
    pages: u64,
    lock: [u64; 4],
}

/// Sum of the counters.
fn total(counters: &[Counter]) -> u64 {
    counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
}

/// Run `mode` on `threads` pinned threads: `warm`, then `intervals` of `each`.
fn run(mode: Mode, (threads, design): (usize, Design), warm: Duration, each: Duration, intervals: usize) -> Run {
    let a = mode.allocator(threads, design);
    let counters: Vec<Counter> = (0..threads).map(|_| Counter::default()).collect();
    let (stop, start) = (AtomicBool::new(false), Barrier::new(threads + 1));
    let run = std::thread::scope(|s| {
        for (t, c) in counters.iter().enumerate() {
            let (a, stop, start) = (&a, &stop, &start);
            s.spawn(move || {
                pin(t);
                start.wait();
                worker(mode, a, &c.0, stop);
            });
        }
        start.wait();
        std::thread::sleep(warm);
        let (mut prev, mut t_prev, lock0) = (total(&counters), Instant::now(), zone_lock(&a));
        let (p0, mut rates) = (prev, Vec::new());
        for _ in 0..intervals {
            std::thread::sleep(each);
            let (now, t_now) = (total(&counters), Instant::now());
            rates.push((now - prev) as f64 / (t_now - t_prev).as_secs_f64());
            (prev, t_prev) = (now, t_now);
        }
        let lock1 = zone_lock(&a);
        stop.store(true, Ordering::Relaxed);
        Run { rates, pages: prev - p0, lock: std::array::from_fn(|i| lock1[i] - lock0[i]) }
    });
    a.drain_all_pages();
    a.check_invariants().expect("scaling: invariants after the run");
    run
}

/// The thread counts: `--scaling-threads`, else powers of two up to the
/// CPUs, the CPUs, and twice the CPUs (oversubscribed).
fn thread_counts(args: &Args, cpus: usize) -> Vec<usize> {
    if !args.scaling_threads.is_empty() {
        return args.scaling_threads.iter().map(|&n| n.max(1)).collect();
    }
    let mut v: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2)).take_while(|&n| n < cpus).collect();
    v.extend([cpus, 2 * cpus]);
    v.dedup();
    v
}

/// The line for one run; `one` is the same loop's median at one thread.
fn line(mode: Mode, n: usize, f: &Figure, one: Option<f64>, run: &Run) -> String {
    let per_k = |x: u64| 1000.0 * x as f64 / run.pages.max(1) as f64;
    let speedup = one.map_or(f64::NAN, |o| f.value / o);
    format!(
        "{:<10} {n:>7} {:>14.0} {:>14.0} {:>14.0} {speedup:>8.2} {:>10.2} {:>12.1} {:>12.1} {:>12.1} {:>12.1}",
        mode.name(),
        f.value,
        f.samples.iter().copied().fold(f64::INFINITY, f64::min),
        f.samples.iter().copied().fold(0.0, f64::max),
        speedup / n as f64,
        per_k(run.lock[0]),
        per_k(run.lock[1]),
        per_k(run.lock[2]),
        per_k(run.lock[3]),
    )
}

/// One loop's run at one thread count, with its median rate.
struct Measured {
    mode: Mode,
    threads: usize,
    rate: f64,
    run: Run,
}

/// Thread counts the model predicts for: the lent machine's cores, and the
/// 88 threads the seeds' page_fault1 runs used.
const MODEL_THREADS: [usize; 2] = [16, 88];

/// The contention model's lines and figures (`scaling_model`): the handoff
/// from `buddy-pair` at one and two threads, then each loop's prediction
/// from its one-thread run, beside its measured two-thread speedup.
fn model(ctx: &Ctx, r: &mut ExperimentResult, runs: &[Measured]) {
    use super::scaling_model::{handoff_ns, Inputs};
    let get = |m: Mode, n: usize| runs.iter().find(|x| x.mode == m && x.threads == n);
    let per_page = |x: &Measured, i: usize| x.run.lock[i] as f64 / x.run.pages.max(1) as f64;
    let to_ns = |ticks: f64| if pagealloc::tick_unit() == "ns" { ticks } else { ctx.tsc.ns(ticks) };
    let handoff = match (get(Mode::BuddyPair, 1), get(Mode::BuddyPair, 2)) {
        (Some(one), Some(two)) => {
            let acq = per_page(one, 0);
            Some(handoff_ns(acq, two.rate, to_ns(per_page(one, 2)) / acq.max(1e-12)))
        }
        _ => None,
    };
    let h = handoff.unwrap_or(0.0);
    r.line(
        ctx,
        match handoff {
            Some(h) => format!("# model: a zone-lock handoff costs {h:.1} ns (buddy-pair at 2 threads, less its hold)"),
            None => "# model: handoff not measured (run buddy-pair at 1 and 2 threads); taken as 0".into(),
        },
    );
    for one in runs.iter().filter(|x| x.threads == 1) {
        let m = Inputs { t1_ns: 1e9 / one.rate.max(1.0), hold_ns: to_ns(per_page(one, 2)), acq: per_page(one, 0) };
        let measured2 =
            get(one.mode, 2).map_or(String::new(), |two| format!(" (measured {:.2}x)", two.rate / one.rate));
        let mut line = format!(
            "# model {:<10} {:.2} ns a page, {:.3} ns of it serialized (hold {:.3} + {:.5} acquisitions x handoff):              2t {:.2}x{measured2}",
            one.mode.name(),
            m.t1_ns,
            m.serial_ns(h),
            m.hold_ns,
            m.acq,
            m.speedup(2, h),
        );
        for n in MODEL_THREADS {
            let s = m.speedup(n, h);
            let _ = write!(line, ", {n}t {s:.2}x");
            r.figures.push(
                Figure::new(format!("model-speedup-{n}t"), one.mode.name(), "x", vec![s])
                    .higher_better()
                    .param("threads", n as u64),
            );
        }
        r.line(ctx, line);
    }
}

impl Experiment for Scaling {
    fn name(&self) -> &'static str {
        "scaling"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "Throughput against threads, one shared allocator", None);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = thread_counts(&self.0, cpus);
        let modes = if self.0.scaling_mode.is_empty() { Mode::ALL.to_vec() } else { self.0.scaling_mode.clone() };
        let (warm, each) = if ctx.full { (1000, 1000) } else { (300, 500) };
        let (warm, each) = (Duration::from_millis(warm), Duration::from_millis(each));
        let pb = ctx.bar("scaling", (threads.len() * modes.len()) as u64);
        r.line(
            ctx,
            format!(
                "# {cpus} CPUs; {} intervals of {each:?} after {warm:?} per run; design {:?}",
                ctx.repeats, self.0.scaling_design
            ),
        );
        r.line(
            ctx,
            "# loop     threads   pages/s(med)   pages/s(min)   pages/s(max)  speedup efficiency  zlock_acq/kp zlock_wait/kp zlock_hold/kp  zlock_ops/kp",
        );
        let mut runs = Vec::new();
        for &mode in &modes {
            let mut one = None;
            for &n in &threads {
                pb.set_message(format!("{} {n}t", mode.name()));
                let run = run(mode, (n, self.0.scaling_design), warm, each, ctx.repeats);
                let f = Figure::new(format!("pages-per-s-{n}t"), mode.name(), "pages/s", run.rates.clone())
                    .higher_better()
                    .param("threads", n as u64);
                if n == 1 {
                    one = Some(f.value);
                }
                r.line(ctx, line(mode, n, &f, one, &run));
                runs.push(Measured { mode, threads: n, rate: f.value, run });
                r.figures.push(f);
                pb.inc(1);
            }
        }
        pb.finish_and_clear();
        model(ctx, &mut r, &runs);
        let mut plot = Plot::line("Pages a second against threads", "threads", "threads", "pages per second").log_x();
        for &mode in &modes {
            plot = plot.series(mode.name(), mode.name(), Some("pages-per-s-*"));
        }
        r.plot = Some(plot);
        r.notes.push(format!(
            "one allocator shared by N threads pinned to distinct CPUs (two a CPU past {cpus}); frames only \
             (Backing::None); zone-lock wait in {} per thousand pages",
            pagealloc::tick_unit()
        ));
        r
    }
}
