//! `pagealloc bench sqlite` (on demand only: it writes databases and runs
//! child processes). pagealloc's SQLite page cache (crates/pagealloc-sqlite)
//! against SQLite's own, pcache1, in three parts:
//!
//! a. speedtest1, SQLite's benchmark, head to head at the same cache memory
//!    ([`super::sqlite_speedtest`]); target: pagealloc's throughput at least
//!    0.95x pcache1's.
//! b. Many databases, one budget: `DBS` databases whose data is several
//!    times the budget, Zipf-skewed reads and some writes from several
//!    threads, each cache in a child process of its own
//!    ([`crate::sqlite_child`]): pcache1 with the budget split statically
//!    (`cache_size` = budget / DBS per connection) against pagealloc with
//!    the budget shared. Hit rate, throughput, resident memory over the
//!    baseline against the budget (pagealloc's budget is of memory: page
//!    headers are charged to it). Run twice: with the databases warm in
//!    the kernel's page cache (a miss costs a `pread` copy), and with
//!    misses that go to a device (`--device-us`: a VFS that waits
//!    [`DEVICE_US`] per page read). Targets: at least 1.5x pcache1's
//!    throughput with device misses; resident growth within the budget + 5%.
//! c. Idle return, twice: for 3.5 s with the connections open and idle
//!    (target: resident memory over the baseline within 1.1x of what live
//!    data needs: the connections' memory at open plus the bytes the caches
//!    hold, `SQLITE_DBSTATUS_CACHE_USED`), then for 3.5 s after closing
//!    every connection; pagealloc's cache has page reporting on (blocks
//!    free for 2 s are madvised away), pcache1 frees into malloc.
//! d. Pages under a frame ([`super::sqlite_small`]): resident bytes per
//!    cached page of 512, 1024 and 2048 bytes, and hit rate and throughput
//!    with frames shared against one page per frame.

use super::{sqlite_small, sqlite_speedtest};
use crate::harness::{Ctx, Experiment, ExperimentResult, Figure, Plot};
use crate::sqlite_child::ChildRun;
use crate::sqlite_db::Db;
use std::path::Path;
use std::process::Command;

/// `pagealloc bench sqlite`'s own flags.
#[derive(clap::Args, Clone, Debug, Default)]
#[group(id = "sqlite")] // not `Args`, page-fault1's group
pub struct Args {
    /// sqlite: worker threads of the many-databases runs (default: twice
    /// the CPUs).
    #[arg(long)]
    pub sqlite_threads: Option<usize>,
}

/// The experiment, with its flags.
pub struct Sqlite(pub Args);

/// Databases (quick and full alike: the point is many).
const DBS: usize = 64;
/// Rows of 200-byte blobs per database: about 230 pages of 4 KiB each, so
/// 64 databases hold about 58 MiB.
const ROWS: u64 = 4000;
/// The budget both caches get: about a quarter of the data.
const BUDGET: u64 = 16 << 20;
/// Zipf exponent over databases and over rows.
const SKEW: f64 = 1.0;
/// Percent of operations that write.
const WRITE_PCT: u64 = 10;
/// Idle sampling after the close: past pagealloc's 2 s reporting delay.
const IDLE_MS: u64 = 3500;
/// The device latency per page read in the device-miss runs, in
/// microseconds: the typical 4 KiB random-read latency at queue depth 1 of
/// a datacenter NVMe SSD (Intel's SSD DC P4510 datasheet states 77 us).
const DEVICE_US: u64 = 80;

/// Create `dbs` databases of `rows` 200-byte rows with pages of
/// `page_size` bytes in `dir` (SQLite's own cache: this process never
/// installs pagealloc's).
pub(super) fn populate(dir: &Path, dbs: usize, rows: u64, page_size: usize) -> Result<(), String> {
    for i in 0..dbs {
        let path = dir.join(format!("db{i}.sqlite"));
        let _ = std::fs::remove_file(&path);
        let db = Db::open(&path)?;
        db.exec(&format!(
            "PRAGMA page_size={page_size}; PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY;
             CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {rows})
             INSERT INTO t SELECT x, randomblob(200) FROM c;"
        ))?;
    }
    Ok(())
}

/// One `pagealloc sqlite-child CACHE DIR ARGS..` run: what it measured.
pub(super) fn run_child(dir: &Path, cache: &str, args: &[String]) -> Result<ChildRun, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out =
        Command::new(exe).arg("sqlite-child").arg(cache).arg(dir).args(args).output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|_| format!("{cache} child: {} {}", line, String::from_utf8_lossy(&out.stderr)))
}

/// One child run of `cache`, with `device_us` per page read (0: warm
/// kernel cache, with the idle phases; else without them).
fn child(ctx: &Ctx, dir: &Path, cache: &str, threads: usize, device_us: u64) -> Result<ChildRun, String> {
    let secs = if ctx.full { 10.0 } else { 3.0 };
    let args = format!(
        "--dbs {DBS} --rows {ROWS} --budget {BUDGET} --threads {threads} --secs {secs} --warm-ms 1500 --skew {SKEW} \
         --write-pct {WRITE_PCT} --idle-ms {} --device-us {device_us}",
        if device_us == 0 { IDLE_MS } else { 0 }
    );
    run_child(dir, cache, &args.split_whitespace().map(String::from).collect::<Vec<_>>())
}

/// Bytes to MiB.
fn mib(b: f64) -> f64 {
    b / f64::from(1 << 20)
}

/// One sample: (metric, variant, unit, value, higher is better).
type Sample = (String, String, String, f64, bool);

/// Figures of one warm child run (parts b and c), pushed per variant.
fn record(all: &mut Vec<Sample>, v: &str, c: &ChildRun) {
    let over = |b: u64| mib(b.saturating_sub(c.rss_base) as f64);
    let hit = c.hits as f64 * 100.0 / (c.hits + c.misses).max(1) as f64;
    let idle_end = c.idle.last().map_or(0, |x| x.1);
    let open_end = c.idle_open.last().map_or(0, |x| x.1);
    let live = over(c.rss_open) + mib(c.cache_used as f64);
    let mut push = |m: &str, unit: &str, x: f64, hb: bool| all.push((m.into(), v.into(), unit.into(), x, hb));
    push("many-throughput", "ops/s", c.ops as f64 / c.secs, true);
    push("many-hit-rate", "%", hit, true);
    push("many-rss-over-base", "MiB", over(c.rss_end), false);
    push("many-rss-over-open", "MiB", mib(c.rss_end.saturating_sub(c.rss_open) as f64), false);
    push("many-anon-over-open", "MiB", mib(c.anon_end.saturating_sub(c.anon_open) as f64), false);
    push("many-peak-over-base", "MiB", over(c.rss_peak), false);
    if c.charged > 0 {
        push("many-charged", "MiB", mib(c.charged as f64), false);
        push("many-overdraft-peak", "MiB", mib(c.overdraft_peak as f64), false);
        push("many-overdraft-times", "charges", c.overdraft_times as f64, false);
    }
    push("idle-rss-over-base", "MiB", over(idle_end), false);
    push("open-idle-rss-over-base", "MiB", over(open_end), false);
    push("open-idle-live-over-base", "MiB", live, false);
    push("open-idle-over-live", "x", over(open_end) / live, false);
    for (prefix, samples) in [("idle", &c.idle), ("open-idle", &c.idle_open)] {
        for &(t, rss) in samples {
            // Quarter-second buckets, so the rounds' samples line up.
            let t = (t + 125) / 250 * 250;
            push(&format!("{prefix}-{t}ms"), "MiB", over(rss), false);
        }
    }
}

/// Figures of one device-miss child run.
fn record_device(all: &mut Vec<Sample>, v: &str, c: &ChildRun) {
    let hit = c.hits as f64 * 100.0 / (c.hits + c.misses).max(1) as f64;
    let mut push = |m: &str, unit: &str, x: f64, hb: bool| all.push((m.into(), v.into(), unit.into(), x, hb));
    push("device-throughput", "ops/s", c.ops as f64 / c.secs, true);
    push("device-hit-rate", "%", hit, true);
    push("device-reads-per-op", "reads", c.device_reads as f64 / c.ops.max(1) as f64, false);
    push("device-wait-us", "us", c.device_wait_us, false);
}

/// Part b and c into `r`, with `threads` workers.
fn many(ctx: &Ctx, r: &mut ExperimentResult, threads: usize) {
    let dir = std::env::temp_dir().join(format!("pagealloc-bench-sqlite-{}", std::process::id()));
    if let Err(e) =
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string()).and_then(|()| populate(&dir, DBS, ROWS, 4096))
    {
        r.line(ctx, format!("many databases: not run: {e}"));
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let mut all = Vec::new();
    let pb = ctx.bar("sqlite many-dbs", 4 * ctx.repeats as u64);
    for round in 0..ctx.repeats {
        for (v, device_us) in [("pcache1", 0), ("pagealloc", 0), ("pcache1", DEVICE_US), ("pagealloc", DEVICE_US)] {
            match child(ctx, &dir, v, threads, device_us) {
                Ok(c) => {
                    if c.errors > 0 {
                        r.notes.push(format!("{v} round {round}: {} operations failed", c.errors));
                    }
                    if device_us == 0 {
                        record(&mut all, v, &c);
                    } else {
                        record_device(&mut all, v, &c);
                    }
                }
                Err(e) => r.notes.push(e),
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let _ = std::fs::remove_dir_all(&dir);
    let mut keys: Vec<(String, String)> = all.iter().map(|x| (x.0.clone(), x.1.clone())).collect();
    keys.dedup();
    keys.sort();
    keys.dedup();
    for (m, v) in keys {
        let xs: Vec<_> = all.iter().filter(|x| x.0 == m && x.1 == v).collect();
        let mut f = Figure::new(&m, &v, &xs[0].2, xs.iter().map(|x| x.3).collect());
        let t = m.strip_prefix("open-").unwrap_or(&m).strip_prefix("idle-").and_then(|t| t.strip_suffix("ms"));
        if let Some(t) = t.and_then(|t| t.parse::<u64>().ok()) {
            f = f.param("ms", t);
        }
        f.higher_is_better = xs[0].4;
        r.figures.push(f.param("threads", threads as u64).param("dbs", DBS as u64));
    }
    summarise(ctx, r, threads);
}

/// The value of figure (metric, variant), NaN if absent.
fn get(r: &ExperimentResult, m: &str, v: &str) -> f64 {
    r.get(m, v).map_or(f64::NAN, |f| f.value)
}

/// The lines and targets of part b.
fn summarise(ctx: &Ctx, r: &mut ExperimentResult, threads: usize) {
    let budget = mib(BUDGET as f64);
    r.line(
        ctx,
        format!(
            "many databases: {DBS} dbs x {ROWS} rows (about {:.0} MiB), budget {budget:.0} MiB, {threads} threads, \
             Zipf {SKEW}, {WRITE_PCT}% writes",
            mib((DBS as u64 * ROWS * 215) as f64)
        ),
    );
    for v in ["pcache1", "pagealloc"] {
        r.line(
            ctx,
            format!(
                "  warm kernel cache:  {v:<9} {:>9.0} ops/s  hit {:5.1}%  resident over base {:6.1} MiB (peak {:6.1}), \
                 growth in the workload {:6.1} MiB (anonymous {:.1})",
                get(r, "many-throughput", v),
                get(r, "many-hit-rate", v),
                get(r, "many-rss-over-base", v),
                get(r, "many-peak-over-base", v),
                get(r, "many-rss-over-open", v),
                get(r, "many-anon-over-open", v),
            ),
        );
    }
    for v in ["pcache1", "pagealloc"] {
        r.line(
            ctx,
            format!(
                "  device misses ({DEVICE_US} us/page read): {v:<9} {:>9.0} ops/s  hit {:5.1}%  {:.3} device reads/op, \
                 mean wait slept {:.0} us",
                get(r, "device-throughput", v),
                get(r, "device-hit-rate", v),
                get(r, "device-reads-per-op", v),
                get(r, "device-wait-us", v),
            ),
        );
    }
    let warm = get(r, "many-throughput", "pagealloc") / get(r, "many-throughput", "pcache1");
    let dev = get(r, "device-throughput", "pagealloc") / get(r, "device-throughput", "pcache1");
    r.line(ctx, format!("  throughput pagealloc / pcache1: warm kernel cache {warm:.2}x, device misses {dev:.2}x"));
    r.figures.push(Figure::new("many-throughput-ratio", "pagealloc", "x", vec![warm]).higher_better());
    r.figures.push(Figure::new("device-throughput-ratio", "pagealloc", "x", vec![dev]).higher_better());
    r.target(
        crate::harness::TargetKind::Peer,
        format!("many databases, misses to a device ({DEVICE_US} us): throughput pagealloc / pcache1 (>= 1.5)"),
        dev,
        1.5,
        dev >= 1.5,
    );
    r.target(
        crate::harness::TargetKind::Peer,
        "many databases, warm kernel cache: throughput pagealloc / pcache1 (>= 1.5)",
        warm,
        1.5,
        warm >= 1.5,
    );
    let rss = get(r, "many-rss-over-open", "pagealloc");
    r.line(
        ctx,
        format!(
            "  pagealloc charged to its budget at the end: {:.2} MiB (frames and headers), overdraft peak {:.2} MiB \
             ({:.0} charges over the budget); the rest of its growth is outside the cache (threads, statements, maps)",
            get(r, "many-charged", "pagealloc"),
            get(r, "many-overdraft-peak", "pagealloc"),
            get(r, "many-overdraft-times", "pagealloc"),
        ),
    );
    let limit = budget * 1.05;
    r.target(
        crate::harness::TargetKind::Count,
        "many databases: pagealloc resident growth in the workload, MiB (<= budget + 5%)",
        rss,
        limit,
        rss <= limit,
    );
    idle_summary(ctx, r);
}

/// The lines and target of part c.
fn idle_summary(ctx: &Ctx, r: &mut ExperimentResult) {
    for v in ["pcache1", "pagealloc"] {
        r.line(
            ctx,
            format!(
                "  idle {IDLE_MS} ms, connections open: {v:<9} resident over base {:6.1} MiB, live data {:6.1} MiB \
                 ({:.2}x); after closing all: {:6.1} MiB",
                get(r, "open-idle-rss-over-base", v),
                get(r, "open-idle-live-over-base", v),
                get(r, "open-idle-over-live", v),
                get(r, "idle-rss-over-base", v),
            ),
        );
    }
    let x = get(r, "open-idle-over-live", "pagealloc");
    r.target(
        crate::harness::TargetKind::Floor,
        format!("idle {IDLE_MS} ms with connections open: pagealloc resident over base / live data (<= 1.1)"),
        x,
        1.1,
        x <= 1.1,
    );
}

impl Experiment for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "sqlite: pagealloc's page cache against SQLite's pcache1", None);
        sqlite_speedtest::run(ctx, &mut r);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = self.0.sqlite_threads.unwrap_or(2 * cpus).max(1);
        many(ctx, &mut r, threads);
        sqlite_small::run(ctx, &mut r, threads);
        r.notes.push(
            "resident memory is VmRSS over the child's own baseline (before its first connection); it includes \
             the per-page headers (charged to pagealloc's budget) and statement memory as well as the pages; live \
             data = resident over base with the connections just open + SQLITE_DBSTATUS_CACHE_USED at the end"
                .into(),
        );
        r.plot = Some(
            Plot::line("Resident memory over baseline while idle", "ms", "ms idle", "MiB")
                .series("pcache1, connections open", "pcache1", Some("open-idle-*ms"))
                .series("pagealloc, connections open", "pagealloc", Some("open-idle-*ms"))
                .series("pcache1, after close (malloc)", "pcache1", Some("idle-*ms"))
                .series("pagealloc, after close (page reporting)", "pagealloc", Some("idle-*ms")),
        );
        r
    }
}
