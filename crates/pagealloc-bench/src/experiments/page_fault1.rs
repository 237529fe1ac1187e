//! `pagealloc bench page-fault1`: will-it-scale's page_fault1 rebuilt on the
//! allocator (seed 1: free per-CPU pages in bulk, picking them off the lists
//! outside the zone lock).
//!
//! Each of N pinned threads loops: take 32768 order-0 pages (128 MiB, the test's
//! `MEMSIZE`) one `alloc_pages` call at a time, write one byte to each (`--zero`:
//! zero the whole page, which is what the kernel's fault path does), then free
//! them the way munmap does, in gather batches of [`GATHER_BATCH`] pages through
//! `free_pages_bulk`. Every page written counts one iteration, as in the
//! original. A reporter thread prints will-it-scale's lines each second
//! (`min:%llu max:%llu total:%llu` over the threads' per-second deltas), first the
//! warm-up seconds, then the measured ones, then `average:%llu`.
//!
//! Variants (seed 1's A/B): `old` = [`DrainMode::SinglePass`] (the drain picks
//! pages off the per-CPU lists under the zone lock, as before the seed's patch,
//! and as the kernel does again today), `new` = [`DrainMode::TwoPass`] (the
//! seed's patch: pick outside, merge under the lock). Peers in the same run:
//! `kernel` (the real loop: mmap 128 MiB, touch each page, munmap), `malloc` (the
//! system allocator's 4 KiB-aligned 4 KiB allocations, written and freed one by
//! one) and `floor` (the same writes to an already-resident 128 MiB buffer, no
//! allocation at all).

use crate::harness::{pin, stats, Claim, Ctx, Experiment, ExperimentResult, Figure, Plot};
use pagealloc::{Backing, Config, DrainMode, Gfp, PageAllocator, Pfn};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

/// Bytes each thread maps (page_fault1's `MEMSIZE`).
pub const MEMSIZE: usize = 128 << 20;
/// Pages per iteration of the outer loop.
pub const NR_PAGES: usize = MEMSIZE / 4096;
/// Pages per free call: the kernel's munmap frees through mmu_gather batches of
/// about 510 pages (one page of pointers); 512 here.
pub const GATHER_BATCH: usize = 512;

/// Which drain mode(s) to run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VariantArg {
    /// Seed 1's design only (`new`).
    TwoPass,
    /// The design before seed 1 (and today's kernel) only (`old`).
    SinglePass,
    /// Both, side by side.
    #[default]
    Both,
}

/// A peer run beside the allocator.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerArg {
    /// The real page_fault1 loop (mmap, touch, munmap).
    Kernel,
    /// The system allocator, 4 KiB-aligned.
    Malloc,
    /// No peers.
    None,
}

/// page-fault1's own command-line flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Args {
    /// page-fault1: run only this many threads (default 1 and 2, or 1..=CPUs with --sweep).
    #[arg(long)]
    pub threads: Option<usize>,
    /// page-fault1: zero the whole page instead of writing one byte.
    #[arg(long)]
    pub zero: bool,
    /// page-fault1: sweep 1..=CPUs threads and print runtest.py's CSV.
    #[arg(long)]
    pub sweep: bool,
    /// page-fault1: drain mode(s) to run.
    #[arg(long, value_enum, default_value_t = VariantArg::Both)]
    pub variant: VariantArg,
    /// page-fault1: peers to run beside the allocator (default: kernel,malloc).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub peer: Vec<PeerArg>,
}

static ARGS: OnceLock<Args> = OnceLock::new();

/// Hand the command line's flags to the experiment (once, before it runs).
pub fn set_args(a: Args) {
    let _ = ARGS.set(a);
}

/// The experiment.
pub struct PageFault1;

/// What one run's threads do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ours(DrainMode),
    Kernel,
    Malloc,
    Floor,
}

impl Kind {
    fn variant(self) -> &'static str {
        match self {
            Kind::Ours(DrainMode::SinglePass) => "old",
            Kind::Ours(DrainMode::TwoPass) => "new",
            Kind::Kernel => "kernel",
            Kind::Malloc => "malloc",
            Kind::Floor => "floor",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Ours(DrainMode::SinglePass) => "pagealloc, drain picks under the zone lock (single pass)",
            Kind::Ours(DrainMode::TwoPass) => "pagealloc, drain picks outside the zone lock (two passes)",
            Kind::Kernel => "kernel: mmap 128 MiB, touch, munmap",
            Kind::Malloc => "system allocator: 32768 aligned 4 KiB blocks, touch, free",
            Kind::Floor => "floor: the writes alone, to resident memory",
        }
    }
}

/// A per-thread iteration counter on its own cache line.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// One thread's measured work, in will-it-scale's units (pages written).
fn worker(kind: Kind, alloc: Option<&PageAllocator>, zero: bool, counter: &AtomicU64, stop: &AtomicBool) {
    let touch = |p: *mut u8| {
        if zero {
            // SAFETY: `p` is the start of a 4 KiB page this thread owns right now.
            unsafe { std::ptr::write_bytes(p, 0, 4096) }
        } else {
            // SAFETY: as above; one byte of it.
            unsafe { std::ptr::write_volatile(p, 0) }
        }
    };
    let mut n = 0u64;
    match kind {
        Kind::Ours(_) => {
            let a = alloc.expect("an allocator");
            let mut pfns: Vec<Pfn> = Vec::with_capacity(NR_PAGES);
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..NR_PAGES {
                    let p = a.alloc_pages(Gfp::USER, 0).expect("page_fault1: arena exhausted");
                    touch(a.page_address(p).expect("a backed arena").as_ptr());
                    pfns.push(p);
                    n += 1;
                    counter.store(n, Ordering::Relaxed);
                }
                for b in pfns.chunks(GATHER_BATCH) {
                    a.free_pages_bulk(b).expect("page_fault1: bulk free");
                }
                pfns.clear();
            }
        }
        Kind::Kernel => {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
                let c = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        MEMSIZE,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                assert_ne!(c, libc::MAP_FAILED, "page_fault1: mmap failed");
                let c = c.cast::<u8>();
                for i in (0..MEMSIZE).step_by(4096) {
                    // SAFETY: i < MEMSIZE, inside the mapping made above.
                    touch(unsafe { c.add(i) });
                    n += 1;
                    counter.store(n, Ordering::Relaxed);
                }
                // SAFETY: unmaps exactly the mapping made above, no longer used.
                unsafe { libc::munmap(c.cast(), MEMSIZE) };
            }
        }
        Kind::Malloc => {
            let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
            let mut blocks: Vec<*mut u8> = Vec::with_capacity(NR_PAGES);
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..NR_PAGES {
                    // SAFETY: the layout has a non-zero size.
                    let p = unsafe { std::alloc::alloc(layout) };
                    assert!(!p.is_null(), "page_fault1: malloc failed");
                    touch(p);
                    blocks.push(p);
                    n += 1;
                    counter.store(n, Ordering::Relaxed);
                }
                for p in blocks.drain(..) {
                    // SAFETY: allocated above with this layout, freed once.
                    unsafe { std::alloc::dealloc(p, layout) };
                }
            }
        }
        Kind::Floor => {
            let mut buf = vec![1u8; MEMSIZE]; // written in full: resident
            let c = buf.as_mut_ptr();
            while !stop.load(Ordering::Relaxed) {
                for i in (0..MEMSIZE).step_by(4096) {
                    // SAFETY: i < MEMSIZE, inside `buf`.
                    touch(unsafe { c.add(i) });
                    n += 1;
                    counter.store(n, Ordering::Relaxed);
                }
            }
            std::hint::black_box(&buf);
        }
    }
}

/// `cpu` and total jiffies from /proc/stat, for runtest.py's idle columns.
fn proc_stat() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((idle, v.iter().sum()))
}

/// One will-it-scale run.
struct Run {
    /// Totals of the measured seconds.
    totals: Vec<f64>,
    /// Idle percent over the measured seconds (runtest.py's `*_idle`).
    idle: f64,
}

/// Run `kind` on `threads` threads: `warmup` reported seconds, then `measure`
/// measured ones, printing will-it-scale's lines into `out`.
fn run_case(kind: Kind, threads: usize, zero: bool, warmup: usize, measure: usize, out: &mut String) -> Run {
    let alloc = match kind {
        Kind::Ours(mode) => {
            // Room for every thread's 128 MiB plus the per-CPU lists, at least 1 GiB,
            // resident before the run like the kernel's memory and the floor's buffer.
            let bytes = ((threads as u64 * 2 * MEMSIZE as u64).max(1 << 30) + (1 << 30) - 1) & !((1 << 30) - 1);
            Some(Arc::new(
                PageAllocator::new(Config::new().arena_bytes(bytes).backing(Backing::Resident).drain_mode(mode))
                    .expect("page_fault1 arena"),
            ))
        }
        _ => None,
    };
    let counters: Arc<Vec<Counter>> = Arc::new((0..threads).map(|_| Counter::default()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (alloc, counters, stop, start) = (alloc.clone(), counters.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                pin(t);
                start.wait();
                worker(kind, alloc.as_deref(), zero, &counters[t].0, &stop);
            })
        })
        .collect();
    start.wait();
    let _ = writeln!(out, "testcase:{} ({} threads)", kind.describe(), threads);
    let _ = writeln!(out, "warmup");
    let mut prev: Vec<u64> = vec![0; threads];
    let mut totals = Vec::new();
    let mut stat0 = None;
    let t0 = Instant::now();
    for sec in 1..=warmup + measure {
        // Sleep to the next whole second since the start (no drift).
        let due = Duration::from_secs(sec as u64);
        if let Some(d) = due.checked_sub(t0.elapsed()) {
            std::thread::sleep(d);
        }
        let now: Vec<u64> = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).collect();
        let deltas: Vec<u64> = now.iter().zip(&prev).map(|(a, b)| a - b).collect();
        prev = now;
        let (min, max, sum) =
            (*deltas.iter().min().unwrap_or(&0), *deltas.iter().max().unwrap_or(&0), deltas.iter().sum::<u64>());
        let _ = writeln!(out, "min:{min} max:{max} total:{sum}");
        if sec > warmup {
            totals.push(sum as f64);
        }
        if sec == warmup {
            let _ = writeln!(out, "measurement");
            stat0 = proc_stat();
        }
    }
    let stat1 = proc_stat();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("page_fault1 worker");
    }
    let sum: f64 = totals.iter().sum();
    let _ = writeln!(out, "average:{}", (sum / totals.len().max(1) as f64) as u64);
    if let Some(a) = &alloc {
        a.drain_all_pages();
        a.check_invariants().expect("page_fault1: invariants after the run");
    }
    let idle = match (stat0, stat1) {
        (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => (i1 - i0) as f64 * 100.0 / (t1 - t0) as f64,
        _ => f64::NAN,
    };
    Run { totals, idle }
}

impl Experiment for PageFault1 {
    fn name(&self) -> &'static str {
        "page-fault1"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let args = ARGS.get().cloned().unwrap_or_default();
        let mut r = ExperimentResult::new("page-fault1", "will-it-scale page_fault1 on the allocator", Some(1));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads: Vec<usize> = match (args.threads, args.sweep) {
            (Some(n), _) => vec![n.max(1)],
            (None, true) => (1..=cpus).collect(),
            (None, false) => vec![1, 2],
        };
        // will-it-scale: 5 warm-up seconds; runtest.py: 5 measured seconds (-s 5).
        let (warmup, measure) = if ctx.full { (5, 5) } else { (1, 2) };
        let mut kinds = Vec::new();
        if args.variant != VariantArg::TwoPass {
            kinds.push(Kind::Ours(DrainMode::SinglePass));
        }
        if args.variant != VariantArg::SinglePass {
            kinds.push(Kind::Ours(DrainMode::TwoPass));
        }
        let peers = if args.peer.is_empty() { vec![PeerArg::Kernel, PeerArg::Malloc] } else { args.peer.clone() };
        if peers.contains(&PeerArg::Kernel) {
            kinds.push(Kind::Kernel);
        }
        if peers.contains(&PeerArg::Malloc) {
            kinds.push(Kind::Malloc);
        }
        kinds.push(Kind::Floor);
        let pb = ctx.bar("page-fault1", (threads.len() * kinds.len()) as u64);
        let mut rows: Vec<(Kind, usize, Run)> = Vec::new();
        // Thread counts outermost, kinds interleaved, so drift on a shared machine
        // hits every variant alike.
        for &n in &threads {
            for &k in &kinds {
                pb.set_message(format!("{} {n}t", k.variant()));
                let mut out = String::new();
                let run = run_case(k, n, args.zero, warmup, measure, &mut out);
                for l in out.lines() {
                    r.line(ctx, l);
                }
                r.figures.push(
                    Figure::new(format!("iterations-{n}t"), k.variant(), "ops/s", run.totals.clone())
                        .higher_better()
                        .param("threads", n as u64),
                );
                let per_page: Vec<f64> = run.totals.iter().map(|t| 1e9 * n as f64 / t.max(1.0)).collect();
                r.figures.push(
                    Figure::new(format!("ns-per-page-{n}t"), k.variant(), "ns", per_page).param("threads", n as u64),
                );
                rows.push((k, n, run));
                pb.inc(1);
            }
        }
        pb.finish_and_clear();

        // runtest.py's CSV per variant. Our allocator's threads share nothing but
        // the allocator (no mm, no mmap_lock), which is what will-it-scale's
        // processes mode measures, so both columns carry the same run; the kernel
        // peer's threads share one mm, so it has only the threads columns.
        let csv_of = |k: Kind| {
            let mut s = String::from("tasks,processes,processes_idle,threads,threads_idle,linear\n0,0,100,0,100,0\n");
            let mine: Vec<&(Kind, usize, Run)> = rows.iter().filter(|(kk, _, _)| *kk == k).collect();
            let one = mine.iter().find(|(_, n, _)| *n == 1).map(|(_, _, run)| stats::mean(&run.totals));
            for (_, n, run) in &mine {
                let avg = stats::mean(&run.totals) as u64;
                let linear = one.map_or(-1, |o| (o as u64 * *n as u64) as i64);
                if k == Kind::Kernel {
                    let _ = writeln!(s, "{n},-1,{:.2},{avg},{:.2},{linear}", run.idle, run.idle);
                } else {
                    let _ = writeln!(s, "{n},{avg},{:.2},{avg},{:.2},{linear}", run.idle, run.idle);
                }
            }
            s
        };
        for &k in &kinds {
            let csv = csv_of(k);
            if args.sweep {
                r.line(ctx, format!("# runtest.py CSV, {}", k.variant()));
                for l in csv.lines() {
                    r.line(ctx, l);
                }
            }
            if k == Kind::Ours(DrainMode::TwoPass) {
                r.raw_file("csv", csv.clone());
            }
            r.raw_file(&format!("{}.csv", k.variant()), csv);
        }

        // Targets and the claim.
        let val = |r: &ExperimentResult, m: &str, v: &str| r.get(m, v).map(|f| f.value);
        for v in ["old", "new"] {
            if let (Some(ours), Some(floor)) = (val(&r, "ns-per-page-1t", v), val(&r, "ns-per-page-1t", "floor")) {
                let ratio = ours / floor;
                r.target(
                    format!("page-fault1 ({v}) per-page cost at 1 thread at most 1.5x the floor (x floor)"),
                    ratio,
                    1.5,
                    ratio <= 1.5,
                );
            }
            if let (Some(one), Some(two)) = (val(&r, "iterations-1t", v), val(&r, "iterations-2t", v)) {
                let ratio = two / one;
                r.target(
                    format!("page-fault1 ({v}) 2 threads give at least 1.8x the iterations of 1"),
                    ratio,
                    1.8,
                    ratio >= 1.8,
                );
            }
        }
        // What the machine allows: the floor has no allocator at all, so its own
        // scaling bounds any write-bound loop's (2 vCPUs sharing memory).
        if let (Some(one), Some(two)) = (val(&r, "iterations-1t", "floor"), val(&r, "iterations-2t", "floor")) {
            let floor_scaling = two / one;
            let mut note = format!("note: the floor itself gives {floor_scaling:.2}x the iterations at 2 threads");
            for v in ["old", "new"] {
                if let (Some(o), Some(t)) = (val(&r, "iterations-1t", v), val(&r, "iterations-2t", v)) {
                    let _ =
                        write!(note, "; {v} gives {:.2}x ({:.2} of the floor's scaling)", t / o, t / o / floor_scaling);
                }
            }
            r.line(ctx, note);
        }
        let full_load = *threads.iter().max().unwrap_or(&1);
        r.claims.push(Claim {
            seed: 1,
            text: "will-it-scale page_fault1 at full load: +3.0% to +6.4% iterations \
                   (Broadwell 2S 9034215 -> 9536374, +5.6%; Skylake 4S 15677465 -> 16675866, +6.4%)"
                .into(),
            metric: format!("iterations-{full_load}t"),
            old: "old".into(),
            new: "new".into(),
        });
        let mut plot =
            Plot::line("page_fault1: iterations against threads", "threads", "threads", "iterations per second")
                .series("old (pick under zone lock)", "old", Some("iterations-*"))
                .series("new (pick outside)", "new", Some("iterations-*"));
        for k in &kinds {
            if matches!(k, Kind::Kernel | Kind::Malloc | Kind::Floor) {
                plot = plot.series(k.variant(), k.variant(), Some("iterations-*"));
            }
        }
        r.plot = Some(plot);

        // Notes: the per-page costs side by side, and the honest caveats.
        let mut line = String::from("ns per page at 1 thread:");
        for k in &kinds {
            if let Some(v) = val(&r, "ns-per-page-1t", k.variant()) {
                let _ = write!(line, " {} {v:.1}", k.variant());
            }
        }
        r.notes.push(line);
        r.notes.push(format!(
            "{} per page; frees in batches of {GATHER_BATCH} through free_pages_bulk (munmap's gather batches); \
             {warmup} warm-up and {measure} measured seconds per run; iterations = pages written per second.",
            if args.zero { "whole page zeroed" } else { "one byte written" }
        ));
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        r.notes.push(format!(
            "kernel peer: threads of one process (will-it-scale's threads mode, sharing mmap_lock); \
             the kernel also zeroes each page it faults in; THP setting: {}",
            thp.trim()
        ));
        r.notes.push(format!(
            "old = DrainMode::SinglePass (pick under the zone lock, before the seed and again today), \
             new = DrainMode::TwoPass (the seed's patch); {cpus} CPUs on a shared machine, so 2 threads \
             compete with whatever else runs."
        ));
        r
    }
}
