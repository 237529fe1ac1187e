//! `pagealloc bench lru-file-readonce` (on demand only, not in the
//! default run: it writes a file ten times the arena). vm-scalability's
//! lru-file-readonce on our page cache: a 128 MiB arena with a page cache and
//! kswapd, a real file of ten times the arena on the machine's disk file
//! system (the temporary directory), and one reader per CPU, each reading its
//! own contiguous share of the file once, page by page, through the cache
//! (`Mapping::read`, which fills missing pages with `pread`).
//!
//! Reported: elapsed time, failed page-cache allocations (`pgalloc_fail`;
//! each is also a reader's read error), reclaim counters, kswapd's share of
//! the reclaim (`pgsteal_kswapd / (pgsteal_kswapd + pgsteal_direct)`; target at least
//! 90%), and the page-cache allocation latency: the time from a reader's call
//! to `read` of a missing page until the cache asks the source for the
//! page's bytes (allocation, insertion and LRU add; the `pread` itself is
//! not counted), p50/p99/p99.9/max. The same readers over a file of half the
//! arena (no reclaim runs; checked) give the latency "with no reclaim
//! running"; the target is p99 under reclaim at most 2x that.
//!
//! kswapd's share moves with the machine's load: its wakeup waits for a CPU
//! that two pinned readers hold. Dated figures are in docs/results/.

use crate::harness::{pin, rdtsc, Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::{Config, FileSource, PageAllocator, PageCache, PageCacheConfig, PageSource, PAGE_SIZE};
use std::cell::{Cell, RefCell};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

/// The experiment.
pub struct LruFileReadonce;

/// Arena bytes (the suggestion: a small arena, so that ten times it
/// fits the disk and the time).
const ARENA: u64 = 128 << 20;

thread_local! {
    /// When this thread asked the cache for a page (0: no request pending).
    static T0: Cell<u64> = const { Cell::new(0) };
    /// This thread's latencies (TSC cycles).
    static LAT: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// A file source that records, on the calling thread, the time since the
/// reader's request when the cache starts reading the page.
struct Timed(FileSource);

impl PageSource for Timed {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        let t = rdtsc();
        let t0 = T0.with(|c| c.replace(0));
        if t0 != 0 {
            LAT.with(|l| l.borrow_mut().push(t.saturating_sub(t0)));
        }
        self.0.read_page(index, buf)
    }
}

/// One run's outcome.
struct Run {
    secs: f64,
    pages: u64,
    errors: u64,
    lat: Vec<u64>,
    vm: Vec<(&'static str, u64)>,
}

impl Run {
    fn vm(&self, k: &str) -> u64 {
        self.vm.iter().find(|(n, _)| *n == k).map_or(0, |&(_, v)| v)
    }
    fn kswapd_share(&self) -> f64 {
        let (k, d) = (self.vm("pgsteal_kswapd"), self.vm("pgsteal_direct"));
        if k + d == 0 {
            f64::NAN
        } else {
            100.0 * k as f64 / (k + d) as f64
        }
    }
}

/// Read `pages` pages of `path` once with `threads` readers (disjoint
/// ranges) through a fresh page cache over a fresh arena.
fn run_once(path: &std::path::Path, pages: u64, threads: usize) -> Run {
    let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(ARENA)).expect("readonce arena"));
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: true }).expect("page cache");
    let f = std::fs::File::open(path).expect("open the readonce file");
    let m = pc.mapping(1, Arc::new(Timed(FileSource(f))));
    let per = pages / threads as u64;
    let t = Instant::now();
    let (errors, lat) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let m = &m;
                s.spawn(move || {
                    pin(k);
                    let mut buf = vec![0u8; PAGE_SIZE];
                    let mut errors = 0u64;
                    LAT.with(|l| l.borrow_mut().reserve(per as usize));
                    for i in k as u64 * per..(k as u64 + 1) * per {
                        T0.with(|c| c.set(rdtsc()));
                        if m.read(i * PAGE_SIZE as u64, &mut buf).is_err() {
                            errors += 1;
                        }
                    }
                    T0.with(|c| c.set(0));
                    (errors, LAT.with(|l| std::mem::take(&mut *l.borrow_mut())))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("reader")).fold((0, Vec::new()), |mut acc, (e, l)| {
            acc.0 += e;
            acc.1.extend(l);
            acc
        })
    });
    let secs = t.elapsed().as_secs_f64();
    let mut vm: Vec<(&'static str, u64)> = a.stats().vmstat().items;
    vm.push(("pgalloc_fail", a.stats().pcpstat().pgalloc_fail));
    vm.push(("kswapd_cpu_ms", kswapd_cpu_ms()));
    drop(m);
    drop(pc);
    Run { secs, pages: per * threads as u64, errors, lat, vm }
}

/// CPU time (user + system) of this process's kswapd threads so far, in ms
/// (from `/proc/self/task/*/stat`; 0 where unreadable).
fn kswapd_cpu_ms() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    let tick = 1000 / 100; // USER_HZ is 100 on Linux
    dir.flatten()
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with("kswapd")))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|st| {
            // Fields after the command (which ends with ')'): utime is the
            // 12th, stime the 13th.
            let rest = &st[st.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .sum::<u64>()
        * tick
}

/// p-th percentile (0..=100) of sorted cycles, in ns.
fn pct(ctx: &Ctx, sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    ctx.tsc.ns(sorted[i.min(sorted.len() - 1)] as f64)
}

/// Write this experiment's file of `pages` pages in the temporary directory
/// and print the run's header line; None (noted, the experiment skipped) if
/// it cannot be written.
pub(crate) fn file_for(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    what: &str,
    pages: u64,
    arena: u64,
    threads: usize,
) -> Option<std::path::PathBuf> {
    let path = std::env::temp_dir().join(format!("pagealloc-{what}-{}", std::process::id()));
    if let Err(e) = make_file(&path, pages) {
        r.notes.push(format!("could not write {}: {e}; experiment skipped", path.display()));
        return None;
    }
    r.line(
        ctx,
        format!(
            "# arena {} MiB, file {} MiB on {}, {threads} readers, {} repeats",
            arena >> 20,
            (pages * PAGE_SIZE as u64) >> 20,
            std::env::temp_dir().display(),
            ctx.repeats
        ),
    );
    Some(path)
}

/// Write a file of `pages` pages (each page's bytes a function of its index).
fn make_file(path: &std::path::Path, pages: u64) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut page = vec![0u8; PAGE_SIZE];
    for i in 0..pages {
        page.fill((i % 251) as u8);
        w.write_all(&page)?;
    }
    w.flush()
}

const STATS: [&str; 8] = [
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "allocstall_movable",
    "pageoutrun",
    "pgalloc_fail",
    "kswapd_cpu_ms",
];

impl Experiment for LruFileReadonce {
    fn name(&self) -> &'static str {
        "lru-file-readonce"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "lru-file-readonce: a file 10x the arena read once", Some(4));
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arena_pages = ARENA / PAGE_SIZE as u64;
        let pages = 10 * arena_pages;
        let Some(path) = file_for(ctx, &mut r, "readonce", pages, ARENA, threads) else {
            return r;
        };
        r.line(
            ctx,
            format!("run file_pages secs errors kswapd_share_pct p50_ns p99_ns p999_ns max_ns {}", STATS.join(" ")),
        );
        let mut fig: std::collections::BTreeMap<(&str, &str), Vec<f64>> = Default::default();
        for rep in 0..ctx.repeats {
            for (variant, file_pages) in [("no-reclaim", arena_pages / 2), ("reclaim", pages)] {
                let mut run = run_once(&path, file_pages, threads);
                run.lat.sort_unstable();
                let q = [50.0, 99.0, 99.9, 100.0].map(|p| pct(ctx, &run.lat, p));
                let stats: Vec<String> = STATS.iter().map(|k| run.vm(k).to_string()).collect();
                r.line(
                    ctx,
                    format!(
                        "{variant}#{rep} {} {:.3} {} {:.1} {:.0} {:.0} {:.0} {:.0} {}",
                        run.pages,
                        run.secs,
                        run.errors,
                        run.kswapd_share(),
                        q[0],
                        q[1],
                        q[2],
                        q[3],
                        stats.join(" ")
                    ),
                );
                for (m, v) in [("p50", q[0]), ("p99", q[1]), ("p99.9", q[2]), ("max", q[3])] {
                    fig.entry((variant, m)).or_default().push(v);
                }
                fig.entry((variant, "secs")).or_default().push(run.secs);
                if variant == "reclaim" {
                    fig.entry((variant, "kswapd-share")).or_default().push(run.kswapd_share());
                    fig.entry((variant, "failed")).or_default().push(run.vm("pgalloc_fail").max(run.errors) as f64);
                } else if run.vm("pgsteal_kswapd") + run.vm("pgsteal_direct") != 0 {
                    r.notes
                        .push(format!("no-reclaim run {rep} reclaimed pages: its latency is not a no-reclaim figure"));
                }
            }
        }
        let _ = std::fs::remove_file(&path);
        for ((variant, m), v) in fig {
            let (metric, unit, hib) = match m {
                "kswapd-share" => ("kswapd-share".to_string(), "%", true),
                "failed" => ("failed-allocations".to_string(), "pages", false),
                "secs" => ("elapsed".to_string(), "s", false),
                q => (format!("alloc-latency-{q}"), "ns", false),
            };
            let mut f = Figure::new(metric, variant, unit, v).param("threads", threads as u64);
            if hib {
                f = f.higher_better();
            }
            r.figures.push(f);
        }
        let val = |m: &str, v: &str| r.get(m, v).map_or(f64::NAN, |f| f.value);
        let share = val("kswapd-share", "reclaim");
        let failed = val("failed-allocations", "reclaim");
        let (p99r, p99n) = (val("alloc-latency-p99", "reclaim"), val("alloc-latency-p99", "no-reclaim"));
        use crate::harness::TargetKind::{Count, Floor};
        r.target(Count, "failed page-cache allocations (median of runs)", failed, 0.0, failed == 0.0);
        r.target(Count, "kswapd share of reclaim, % (median of runs)", share, 90.0, share >= 90.0);
        let x = p99r / p99n;
        r.target(Floor, "p99 allocation latency under reclaim / without, x", x, 2.0, p99r <= 2.0 * p99n);
        r
    }
}
