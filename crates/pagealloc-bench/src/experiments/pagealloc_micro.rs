//! `pagealloc bench pagealloc-micro` (seed 5, part 2): mmtests' pagealloc-micro
//! rebuilt, run with and without a monitor reading pagetypeinfo, for the old
//! design (list walk under the zone lock) and the new one (lock-free counters).
//!
//! The original (a systemtap module) times, for each order and batch, `inner`
//! rounds of "allocate the batch, then free it", `outer` times, and prints one
//! line per outer round: `order %2u batch %6lu alloc %llu free %llu`, in TSC
//! cycles. It has two quirks we keep in those lines so they compare with
//! published figures: each round allocates `batch + 1` blocks but divides by
//! `batch` (batch 1 reads twice its true cost), and the cycle totals are not
//! reset between outer rounds (each line carries a small remainder of the
//! previous one). The figures in results.json (and the claim) use the
//! corrected per-call cost instead (cycles of the round / calls made).
//!
//! Raw output: each (design, monitor) run's `pagealloc.log` with the bench
//! script's `alloc-N`/`free-N` files in mmtests' layout under
//! `raw/pagealloc-micro/<design>-<monitor>/iter-0/pagealloc/logs/`, and in
//! `raw/pagealloc-micro.txt` the no-monitor lines (all in full mode) and, per
//! design, the table compare-mmtests.pl prints for its three runs
//! ([`mmtests::compare`]).
//!
//! Orders: `PAGEALLOC_ORDER_MIN`..=`PAGEALLOC_ORDER_MAX` (mmtests' names),
//! default 4..=4 as in seed 5. The arena is first given long free lists with
//! high orders still available (`workloads::scattered_order0`), so the list
//! walk has real work to do, as on a machine that has run for a while.

use crate::harness::{pin, rdtsc, stats, Claim, Ctx, Experiment, ExperimentResult, Figure};
use crate::report::mmtests;
use crate::workloads;
use indicatif::ProgressBar;
use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

/// The experiment.
pub struct PageallocMicro;

const BATCHES: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Monitor {
    None,
    Every10ms,
    Continuous,
}

impl Monitor {
    const ALL: [Monitor; 3] = [Monitor::None, Monitor::Every10ms, Monitor::Continuous];
    fn name(self) -> &'static str {
        match self {
            Monitor::None => "no-monitor",
            Monitor::Every10ms => "monitor-10ms",
            Monitor::Continuous => "monitor-continuous",
        }
    }

    /// The second half of the mmtests run name `<design>-<this>` (no `-`, so
    /// the compare table's header splits the name into design and monitor).
    fn run_suffix(self) -> &'static str {
        match self {
            Monitor::None => "none",
            Monitor::Every10ms => "monitor10ms",
            Monitor::Continuous => "continuous",
        }
    }
}

/// One (order, batch, monitor) series: per outer round, corrected cycles per
/// call, and the original's lines.
#[derive(Default)]
struct Series {
    alloc: Vec<f64>,
    free: Vec<f64>,
    lines: Vec<String>,
    failed: u64,
    /// The original's running totals (carried across rounds, as it does).
    orig: (u64, u64),
}

/// Involuntary context switches of the calling thread so far (the scheduler
/// took the CPU away; waiting on a lock is a voluntary switch and not counted).
fn involuntary_switches() -> i64 {
    // SAFETY: a zeroed rusage is a valid value for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD is valid on Linux and `ru` is a valid out pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_nivcsw
}

/// One outer round: `inner` times allocate `batch + 1` blocks then free them.
/// With `retries > 0`, a round during which the scheduler preempted us (another
/// process took the CPU: the machine is shared) is thrown away and run again, up
/// to `retries` times; returns how many were thrown away.
fn round(
    a: &PageAllocator,
    order: u32,
    batch: u64,
    inner: u64,
    pages: &mut [Option<Pfn>],
    s: &mut Series,
    retries: u32,
) -> u32 {
    let mut redone = 0;
    let (ra, rf) = loop {
        let before = involuntary_switches();
        let t = timed_round(a, order, inner, pages, s);
        if redone >= retries || involuntary_switches() == before {
            break t;
        }
        redone += 1;
    };
    record(s, order, batch, inner, ra, rf);
    redone
}

fn timed_round(a: &PageAllocator, order: u32, inner: u64, pages: &mut [Option<Pfn>], s: &mut Series) -> (u64, u64) {
    let (mut ra, mut rf) = (0u64, 0u64);
    for _ in 0..inner {
        let t0 = rdtsc();
        for slot in pages.iter_mut() {
            *slot = a.alloc_pages(Gfp::KERNEL, order).ok();
        }
        let t1 = rdtsc();
        for slot in pages.iter_mut() {
            match slot.take() {
                Some(p) => a.free_pages(p, order).expect("free a batch page"),
                None => s.failed += 1,
            }
        }
        let t2 = rdtsc();
        ra += t1 - t0;
        rf += t2 - t1;
    }
    (ra, rf)
}

fn record(s: &mut Series, order: u32, batch: u64, inner: u64, ra: u64, rf: u64) {
    // The original's arithmetic: totals carried across rounds, divided by the
    // inner count and by the batch (not batch + 1).
    s.orig.0 = (s.orig.0 + ra) / inner / batch;
    s.orig.1 = (s.orig.1 + rf) / inner / batch;
    let calls = (inner * (batch + 1)) as f64;
    let (pa, pf) = (ra as f64 / calls, rf as f64 / calls);
    s.lines.push(mmtests::log_line(order, batch, s.orig.0, s.orig.1));
    s.alloc.push(pa);
    s.free.push(pf);
}

const MODE_STOP: u8 = 255;

/// A monitor thread on CPU 1 that reads pagetypeinfo as `mode` says (an index
/// into `Monitor::ALL`), switched between rounds by the benchmark thread so the
/// three conditions interleave and share the machine's noise. Returns the
/// benchmark closure's result and the monitor's reads.
fn with_monitor<T: Send>(a: &PageAllocator, f: impl FnOnce(&AtomicU8) -> T + Send) -> (T, u64) {
    let mode = AtomicU8::new(0);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            loop {
                match mode.load(Ordering::Relaxed) {
                    MODE_STOP => break,
                    m if Monitor::ALL[m as usize] == Monitor::None => std::thread::sleep(Duration::from_micros(200)),
                    m => {
                        std::hint::black_box(a.stats().pagetypeinfo().render());
                        reads.fetch_add(1, Ordering::Relaxed);
                        if Monitor::ALL[m as usize] == Monitor::Every10ms {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            }
        });
        let t = s
            .spawn(|| {
                pin(0);
                f(&mode)
            })
            .join()
            .expect("benchmark thread");
        mode.store(MODE_STOP, Ordering::Relaxed);
        (t, reads.load(Ordering::Relaxed))
    })
}

fn env_order(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&o| o <= 10).unwrap_or(default)
}

/// Geometric mean over batches of Amean(col)/Amean(base), as a percent change
/// (positive: slower), and each batch's own percent change.
fn slowdown(base: &[Vec<f64>], col: &[Vec<f64>]) -> (f64, Vec<f64>) {
    let logs: Vec<f64> = base.iter().zip(col).map(|(b, c)| (stats::mean(c) / stats::mean(b)).ln()).collect();
    let per_batch = logs.iter().map(|l| (l.exp() - 1.0) * 100.0).collect();
    ((stats::mean(&logs).exp() - 1.0) * 100.0, per_batch)
}

/// A slowdown figure: the samples are the batch sizes' own slowdowns (the
/// designs paired by batch size, as the verdict pairs alternating rounds),
/// the value their geometric mean.
fn slowdown_figure(metric: String, design: &str, (value, per_batch): (f64, Vec<f64>)) -> Figure {
    let mut f = Figure::new(metric, design, "%", per_batch).paired();
    f.value = value;
    f
}

/// Per batch size, one condition's samples.
type Samples = Vec<Vec<f64>>;

/// One design's arena and what the rounds share: the outer loop count, the
/// logs (one per monitor condition) and the rounds preempted and run again.
struct Design<'a> {
    name: &'static str,
    a: &'a PageAllocator,
    outer: usize,
    /// Calls per round in quick mode (the test's tiny run sets fewer).
    calls: u64,
    logs: [String; 3],
    redone: u64,
}

/// One batch size at one order, the three monitor conditions interleaved:
/// its log lines, figures, and the samples for the slowdowns.
fn batch_run(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    d: &mut Design<'_>,
    order: u32,
    batch: u64,
    (alloc, free): (&mut [Samples], &mut [Samples]),
) {
    let (design, a, outer) = (d.name, d.a, d.outer);
    let inner = if ctx.full { 10_000 } else { (d.calls / (batch + 1)).max(1) };
    let retries = if ctx.full { 0 } else { 30 };
    let mut pages: Vec<Option<Pfn>> = vec![None; batch as usize + 1];
    let ((series, redone), reads) = with_monitor(a, |mode| {
        let mut series: [Series; 3] = Default::default();
        let mut redone = 0;
        for _ in 0..outer {
            for (mi, s) in series.iter_mut().enumerate() {
                mode.store(mi as u8, Ordering::Relaxed);
                redone += round(a, order, batch, inner, &mut pages, s, retries);
            }
        }
        (series, redone)
    });
    d.redone += redone as u64;
    for (mi, (m, c)) in Monitor::ALL.into_iter().zip(series).enumerate() {
        for l in &c.lines {
            d.logs[mi].push_str(l);
            d.logs[mi].push('\n');
            if m == Monitor::None || ctx.full {
                r.line(ctx, l);
            }
        }
        if c.failed > 0 {
            r.notes.push(format!("{design} {} order {order} batch {batch}: {} allocations failed", m.name(), c.failed));
        }
        let metric = |k: &str| format!("{k}-odr{order}-{batch}");
        r.figures.push(
            Figure::new(metric("alloc"), format!("{design}-{}", m.name()), "cycles", c.alloc.clone())
                .param("order", order)
                .param("batch", batch)
                .param("inner", inner)
                .param("monitor_reads", reads),
        );
        r.figures.push(
            Figure::new(metric("free"), format!("{design}-{}", m.name()), "cycles", c.free.clone())
                .param("order", order)
                .param("batch", batch)
                .param("inner", inner),
        );
        alloc[mi].push(c.alloc);
        free[mi].push(c.free);
    }
}

/// Every batch size at one order, then the slowdowns the monitors caused.
fn order_run(ctx: &Ctx, r: &mut ExperimentResult, pb: &ProgressBar, d: &mut Design<'_>, order: u32) {
    // [monitor][batch] -> samples
    let mut alloc: Vec<Vec<Vec<f64>>> = vec![Vec::new(); 3];
    let mut free: Vec<Vec<Vec<f64>>> = vec![Vec::new(); 3];
    for &batch in &BATCHES {
        batch_run(ctx, r, d, order, batch, (&mut alloc, &mut free));
        pb.inc(1);
    }
    let design = d.name;
    for (kind, data) in [("alloc", &alloc), ("free", &free)] {
        let (s10, sc) = (slowdown(&data[0], &data[1]), slowdown(&data[0], &data[2]));
        r.line(ctx, format!("# {design} order {order} {kind}: Amean change with 10 ms monitor {:+.2}%, continuous {:+.2}% (geometric mean over batches; + is slower)", s10.0, sc.0));
        r.figures.push(slowdown_figure(format!("{kind}-odr{order}-monitor10ms-slowdown"), design, s10));
        r.figures.push(slowdown_figure(format!("{kind}-odr{order}-continuous-slowdown"), design, sc));
    }
}

/// The design's logs in mmtests' layout
/// (`<run>/iter-0/pagealloc/logs/{pagealloc.log,alloc-N,free-N}`), and
/// compare-mmtests.pl's tables over them.
fn mmtests_logs(ctx: &Ctx, r: &mut ExperimentResult, design: &str, logs: &[String; 3]) {
    let names: Vec<String> = Monitor::ALL.iter().map(|m| format!("{design}-{}", m.run_suffix())).collect();
    for (name, log) in names.iter().zip(logs) {
        let dir = format!("{name}/iter-0/pagealloc/logs");
        for (f, c) in mmtests::split_files(log) {
            r.raw_file(&format!("{dir}/{f}"), c);
        }
        r.raw_file(&format!("{dir}/pagealloc.log"), log.clone());
    }
    r.line(ctx, format!("# compare-mmtests.pl -d raw/pagealloc-micro -b pagealloc -n {}", names.join(",")));
    let runs: Vec<(&str, &str)> = names.iter().map(String::as_str).zip(logs.iter().map(String::as_str)).collect();
    for l in mmtests::compare(&runs).lines() {
        r.line(ctx, l);
    }
}

/// How big a run is: the arena, the scattering workload's operations and
/// the calls per round in quick mode.
#[derive(Clone, Copy)]
struct Sizes {
    arena: Option<u64>,
    ops: u64,
    calls: u64,
}

/// One design (`walk`: the old list walk) on an arena of its own, scattered
/// by the same workload: every order, then its logs and tables.
fn design_run(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    pb: &ProgressBar,
    (design, walk): (&'static str, bool),
    orders: &[u32],
    outer: usize,
    sizes: Sizes,
) {
    let config = sizes.arena.map_or_else(Config::new, Config::small);
    let a = PageAllocator::new(config.pagetypeinfo_walk_lists(walk)).expect("default arena");
    let live = workloads::scattered_order0(&a, sizes.ops, 0x5eed);
    let free_blocks: u64 = a.stats().buddyinfo().zones.iter().map(|z| z.free.iter().sum::<u64>()).sum();
    r.line(
        ctx,
        format!(
            "# design {design} ({}); {free_blocks} free blocks on the lists",
            if walk { "walk free lists under the zone lock" } else { "lock-free counters" }
        ),
    );
    let mut d = Design { name: design, a: &a, outer, calls: sizes.calls, logs: Default::default(), redone: 0 };
    for &order in orders {
        order_run(ctx, r, pb, &mut d, order);
    }
    mmtests_logs(ctx, r, design, &d.logs);
    if d.redone > 0 {
        r.line(ctx, format!("# {design}: {} rounds preempted by other processes were run again", d.redone));
    }
    a.check_invariants().expect("invariants after pagealloc-micro");
    workloads::free_all(&a, live);
}

/// The targets on the largest order, and seed 5's claim. The monitor runs
/// on a CPU of its own beside the benchmark's: with fewer than two CPUs
/// idle it takes the benchmark's time slices or waits for its own, and the
/// slowdown is the host's (at load averages of 8 to 14 on 2 CPUs it read
/// 3% to 19%, at 1.7 within ±2%), so the targets need two idle CPUs.
fn targets_and_claim(ctx: &Ctx, r: &mut ExperimentResult, order: u32) {
    for kind in ["alloc", "free"] {
        let m = format!("{kind}-odr{order}-monitor10ms-slowdown");
        let new = r.get(&m, "new").map_or(f64::NAN, |f| f.value);
        let old = r.get(&m, "old").map_or(f64::NAN, |f| f.value);
        let what = format!("counters: order-{order} {kind} Amean with the 10 ms monitor within 2% of none");
        if ctx.idle_cpus < 2 {
            let why = format!(
                "needs 2 idle CPUs (the benchmark's and the monitor's), {} were idle at the start",
                ctx.idle_cpus
            );
            r.not_measurable(crate::harness::TargetKind::Floor, what, (new, 2.0), why);
        } else {
            r.target(crate::harness::TargetKind::Floor, what, new, 2.0, new <= 2.0);
        }
        r.notes.push(format!("list walk: order-{order} {kind} Amean with the 10 ms monitor {old:+.2}% vs none"));
    }
    r.claims.push(Claim {
        seed: 5,
        text: "with a monitor reading pagetypeinfo every 10 ms, order-4 alloc/free degraded up to -17% (Min) before, within about -5% after".into(),
        metric: format!("alloc-odr{order}-monitor10ms-slowdown"),
        old: "old".into(),
        new: "new".into(),
    });
}

impl Experiment for PageallocMicro {
    fn name(&self) -> &'static str {
        "pagealloc-micro"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        // Full: the original's 15 x 10,000. Quick: 15 rounds of about 20,000
        // calls each (fewer inner loops for larger batches), and a round the
        // scheduler preempted is run again (the machine may be shared).
        let ops = if ctx.full { 8_000_000 } else { 1_000_000 };
        run_sized(ctx, Sizes { arena: None, ops, calls: 20_000 })
    }
}

/// The experiment at `sizes`.
fn run_sized(ctx: &Ctx, sizes: Sizes) -> ExperimentResult {
    let mut r = ExperimentResult::new(
        "pagealloc-micro",
        "pagealloc-micro: order-N alloc/free latency with a pagetypeinfo monitor",
        Some(5),
    );
    let (omin, omax) = (env_order("PAGEALLOC_ORDER_MIN", 4), env_order("PAGEALLOC_ORDER_MAX", 4));
    let orders: Vec<u32> = (omin..=omax.max(omin)).collect();
    let outer = 15;
    let pb = ctx.bar("pagealloc-micro", (2 * orders.len() * BATCHES.len()) as u64);
    r.line(ctx, format!("# outer {outer}, inner {}; runs: no monitor, pagetypeinfo every 10 ms, continuous (interleaved round by round)", if ctx.full { "10000".to_string() } else { format!("{}/(batch+1), preempted rounds re-run", sizes.calls) }));
    r.line(
        ctx,
        "# the lines are pagealloc.log's (the systemtap module's arithmetic); the tables are what \
         compare-mmtests.pl -b pagealloc prints for the logs in raw/pagealloc-micro/; the per-call \
         figures (cycles / calls made) are in results.json",
    );
    for design in [("old", true), ("new", false)] {
        design_run(ctx, &mut r, &pb, design, &orders, outer, sizes);
    }
    pb.finish_and_clear();
    targets_and_claim(ctx, &mut r, *orders.last().unwrap());
    r
}

/// A tiny run (a 64 MiB arena without memory, 200 calls a round) whose
/// `raw/pagealloc-micro/` tree has the real run's layout and timing
/// noise, for the test that runs compare-mmtests.pl itself on it.
#[cfg(test)]
pub(crate) fn tiny_run(ctx: &Ctx) -> ExperimentResult {
    run_sized(ctx, Sizes { arena: Some(64 << 20), ops: 20_000, calls: 200 })
}

#[cfg(test)]
mod tests {
    use super::tiny_run;
    use crate::harness::Ctx;
    use crate::report::mmtests_pl;

    /// The experiment's own tree (a tiny run: real timings, real layout), as
    /// `Report::write_dir` lays it out, and the tables the experiment printed
    /// into `raw/pagealloc-micro.txt`.
    #[test]
    fn compare_mmtests_pl_agrees_on_the_bench_tree() {
        let Some(mm) = mmtests_pl::checkout() else { return };
        let ctx = Ctx::new(false, false, false);
        let r = tiny_run(&ctx);
        let dir = std::env::temp_dir().join(format!("pagealloc-micro-tree-{}", std::process::id()));
        for (name, content) in crate::report::raw_files(&r) {
            let path = dir.join(&name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let tree = dir.join("pagealloc-micro");
        let (rows, starred) = mmtests_pl::check_tree(&mm, &tree);
        // The tables in the raw text are the script's too.
        for design in ["old", "new"] {
            let names: Vec<String> =
                ["none", "monitor10ms", "continuous"].iter().map(|m| format!("{design}-{m}")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let theirs = mmtests_pl::script(&mm, &tree, &names);
            assert!(r.raw.contains(&theirs), "raw/pagealloc-micro.txt lacks the script's {design} table");
        }
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!("{rows} rows agree, {starred} of them starred");
        assert!(starred > 0, "no starred row: the marks were not exercised");
    }
}
