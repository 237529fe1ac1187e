//! `pagealloc sqlite-child` (hidden): one cache's side of `bench sqlite`'s
//! many-databases workload, in a process of its own, because the page cache
//! is process-wide and must be chosen before the first connection.
//!
//! The child opens the `--dbs` databases the parent populated (table
//! `t(id INTEGER PRIMARY KEY, v BLOB)`, `--rows` rows of 200 bytes each),
//! one connection per database shared by all threads behind a mutex, and:
//! - `pcache1`: SQLite's own cache, `PRAGMA cache_size` = budget / dbs on
//!   each connection (the static split an application would configure), in
//!   pages with their headers (`pagealloc_sqlite::page_charge`), the same
//!   memory as pagealloc's budget;
//! - `pagealloc`: pagealloc's cache installed with the whole budget shared,
//!   page reporting on, and each connection's `cache_size` set to the whole
//!   budget so that only the shared budget limits it;
//! - `pagealloc-noshare`: the same with `share_frames` off (each page under
//!   4 KiB takes a frame of its own).
//!
//! `--scan` first reads every row of every database (twice), and reports
//! the pages that brought into the caches and the anonymous resident
//! memory (RssAnon) they added: the bytes a cached page costs.
//!
//! Then `--threads` threads pick a database and a row by Zipf (`--skew`) and
//! read it (`SELECT length(v)`, checked to be 200), or with probability
//! `--write-pct`% rewrite it, for a warm-up of `--warm-ms` and then
//! `--secs` measured. It reports hits and misses (`sqlite3_db_status`,
//! reset after the warm-up), operations, VmRSS before opening (the
//! baseline), with the connections open, at the end and its peak. Then,
//! for `--idle-ms` each, it samples VmRSS with the connections open and
//! idle (beside the bytes the caches hold, `SQLITE_DBSTATUS_CACHE_USED`),
//! and after closing every connection. One JSON line ([`ChildRun`]) on
//! stdout.
//!
//! `--device-us N` (N > 0) opens the databases through a VFS that charges
//! N microseconds per page read ([`vfs`]): a miss that goes to a device.

mod vfs;

use crate::sqlite_db::{proc_status_bytes, Db, Rng, Stmt, Zipf};
use pagealloc_sqlite::ffi;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The child's arguments.
#[derive(clap::Args, Clone, Debug)]
pub struct ChildArgs {
    /// `pcache1` or `pagealloc`.
    pub cache: String,
    /// Directory of the databases `db<i>.sqlite`.
    pub dir: PathBuf,
    /// Databases.
    #[arg(long)]
    pub dbs: usize,
    /// Rows in each.
    #[arg(long)]
    pub rows: u64,
    /// Bytes all caches together may hold.
    #[arg(long)]
    pub budget: u64,
    /// Worker threads.
    #[arg(long)]
    pub threads: usize,
    /// Measured seconds.
    #[arg(long)]
    pub secs: f64,
    /// Warm-up milliseconds (not measured).
    #[arg(long)]
    pub warm_ms: u64,
    /// Zipf exponent over databases and over rows.
    #[arg(long)]
    pub skew: f64,
    /// Percent of operations that write.
    #[arg(long)]
    pub write_pct: u64,
    /// Milliseconds of idle sampling with the connections open, and again
    /// after they close (0: neither).
    #[arg(long)]
    pub idle_ms: u64,
    /// Microseconds a page read of a database waits (0: no wait).
    #[arg(long, default_value_t = 0)]
    pub device_us: u64,
    /// Read every database whole first, and report what it cost per page.
    #[arg(long)]
    pub scan: bool,
}

/// What one child measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ChildRun {
    /// Operations in the measured interval.
    pub ops: u64,
    /// Seconds measured.
    pub secs: f64,
    /// Page-cache hits and misses (sum over connections, measured interval).
    pub hits: u64,
    /// See `hits`.
    pub misses: u64,
    /// Reads that did not find their row, and failed steps.
    pub errors: u64,
    /// VmRSS (bytes) before the first connection.
    pub rss_base: u64,
    /// VmRSS (bytes) with every connection open, before the workload.
    pub rss_open: u64,
    /// VmRSS at the end of the measured interval.
    pub rss_end: u64,
    /// VmHWM (bytes) at the end of the measured interval.
    pub rss_peak: u64,
    /// (ms after the close, VmRSS bytes) while idle.
    pub idle: Vec<(u64, u64)>,
    /// (ms after the workload stopped, VmRSS bytes), connections open.
    pub idle_open: Vec<(u64, u64)>,
    /// Bytes the caches hold when the workload stops (sum over the
    /// connections of `SQLITE_DBSTATUS_CACHE_USED`: pages with SQLite's
    /// per-page overhead).
    pub cache_used: u64,
    /// Page reads charged a device wait in the measured interval.
    pub device_reads: u64,
    /// Mean wait actually slept per charged read, microseconds.
    pub device_wait_us: f64,
    /// pagealloc only: bytes charged to its budget at the end of the
    /// measured interval (frames and headers), and the frames alone.
    pub charged: u64,
    /// See `charged`.
    pub frames_bytes: u64,
    /// RssAnon (bytes: resident memory less file-backed pages such as the
    /// code the workload faults in) with the connections open, and at the
    /// end of the measured interval.
    pub anon_open: u64,
    /// See `anon_open`.
    pub anon_end: u64,
    /// pagealloc only: the most bytes charged over the budget (createFlag
    /// 2 with nothing left to evict), and the charges that went over.
    #[serde(default)]
    pub overdraft_peak: u64,
    /// See `overdraft_peak`.
    #[serde(default)]
    pub overdraft_times: u64,
    /// CPU seconds (user and system, all threads) the process used in the
    /// measured interval: on a machine others load, CPU time per operation
    /// compares caches where throughput cannot.
    #[serde(default)]
    pub cpu_secs: f64,
    /// `--scan`: pages of the databases (all cached by the scan), and the
    /// RssAnon (bytes) the scan added.
    #[serde(default)]
    pub scan_pages: u64,
    /// See `scan_pages`.
    #[serde(default)]
    pub scan_anon: u64,
}

/// SQLite's extra area per page (Debian's 3.40.1, 64-bit), as
/// `sqlite_speedtest` states it.
const SQLITE_EXTRA: usize = 208;

/// One database and its two statements (dropped before the connection).
struct Conn {
    read: Stmt,
    write: Stmt,
    db: Db,
}

/// Open database `i` configured for `cache`.
fn open(a: &ChildArgs, i: usize) -> Result<Conn, String> {
    let db = Db::open(&a.dir.join(format!("db{i}.sqlite")))?;
    let size = db.prepare("PRAGMA page_size")?.run(0).ok().flatten().unwrap_or(4096).max(512) as u64;
    // pcache1 gets the budget's memory split evenly: its pages carry the
    // same per-page overhead (SQLite's extra area, a header, malloc's
    // chunk) that pagealloc charges to its budget (page_charge).
    let charge = pagealloc_sqlite::page_charge(size as usize, SQLITE_EXTRA);
    let pages = if a.cache == "pcache1" { a.budget / charge / a.dbs as u64 } else { a.budget / size };
    // synchronous=OFF and an in-memory journal: the writes cost what the
    // cache costs, not fsyncs, and are the same in both children.
    db.exec(&format!("PRAGMA cache_size={pages}; PRAGMA synchronous=OFF; PRAGMA journal_mode=MEMORY;"))?;
    Ok(Conn {
        read: db.prepare("SELECT length(v) FROM t WHERE id=?1")?,
        write: db.prepare("UPDATE t SET v=randomblob(200) WHERE id=?1")?,
        db,
    })
}

/// Install pagealloc's cache with the whole budget shared.
fn install(a: &ChildArgs) -> Result<(), String> {
    // Twice the budget, in whole pageblocks: room for the allocator's
    // watermarks; the arena is reserved, not resident, until touched.
    let arena = (a.budget * 2).div_ceil(2 << 20) * (2 << 20);
    let cfg = pagealloc_sqlite::Config {
        arena_bytes: arena,
        budget_bytes: Some(a.budget),
        page_reporting: true,
        share_frames: a.cache != "pagealloc-noshare",
        ..pagealloc_sqlite::Config::default()
    };
    pagealloc_sqlite::install(&cfg).map(drop).map_err(|e| e.to_string())
}

/// The workers: run until `stop`, counting into `ops` once `counting`.
fn work(a: &ChildArgs, conns: &[Mutex<Conn>], stop: &AtomicBool, counting: &AtomicBool, ops: &AtomicU64) -> u64 {
    let (dbz, rowz) = (Zipf::new(a.dbs, a.skew), Zipf::new(a.rows as usize, a.skew));
    let errors = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..a.threads {
            let (dbz, rowz, errors) = (&dbz, &rowz, &errors);
            s.spawn(move || {
                let mut rng = Rng::new(t as u64 + 1);
                let (mut n, mut bad) = (0u64, 0u64);
                while !stop.load(Relaxed) {
                    // Hot databases are 0, 1, ...; hot rows are spread over
                    // the file (a multiplicative scramble of the rank), as
                    // hot keys are in a real table.
                    let d = dbz.sample(rng.unit());
                    let id = (rowz.sample(rng.unit()) as u64).wrapping_mul(2_654_435_761) % a.rows + 1;
                    let write = rng.next_u64() % 100 < a.write_pct;
                    let mut c = conns[d].lock().expect("connection");
                    let r = if write { c.write.run(id as i64) } else { c.read.run(id as i64) };
                    drop(c);
                    match r {
                        Ok(Some(200)) => {}
                        Ok(None) if write => {}
                        _ => bad += 1,
                    }
                    n += 1;
                    if n.is_multiple_of(64) && counting.load(Relaxed) {
                        ops.fetch_add(64, Relaxed);
                    }
                }
                errors.fetch_add(bad, Relaxed);
            });
        }
    });
    errors.load(Relaxed)
}

/// Run the workload; the measured figures.
fn measure(a: &ChildArgs) -> Result<ChildRun, String> {
    if a.cache.starts_with("pagealloc") {
        install(a)?;
    }
    if !["pcache1", "pagealloc", "pagealloc-noshare"].contains(&a.cache.as_str()) {
        return Err(format!("unknown cache {:?}", a.cache));
    }
    if a.device_us > 0 {
        vfs::register(Duration::from_micros(a.device_us))?;
    }
    let mut run = ChildRun { rss_base: proc_status_bytes("VmRSS"), ..ChildRun::default() };
    let conns: Vec<Mutex<Conn>> = (0..a.dbs).map(|i| open(a, i).map(Mutex::new)).collect::<Result<_, _>>()?;
    run.rss_open = proc_status_bytes("VmRSS");
    run.anon_open = proc_status_bytes("RssAnon");
    if a.scan {
        scan(&conns, &mut run)?;
        if a.secs <= 0.0 {
            return Ok(run);
        }
    }
    workload(a, &conns, &mut run);
    for c in &conns {
        let c = c.lock().expect("connection");
        run.hits += c.db.status(ffi::SQLITE_DBSTATUS_CACHE_HIT, false).max(0) as u64;
        run.misses += c.db.status(ffi::SQLITE_DBSTATUS_CACHE_MISS, false).max(0) as u64;
        run.cache_used += c.db.status(ffi::SQLITE_DBSTATUS_CACHE_USED, false).max(0) as u64;
    }
    if a.idle_ms > 0 {
        run.idle_open = sample_rss(a.idle_ms);
        drop(conns);
        run.idle = sample_rss(a.idle_ms);
    }
    Ok(run)
}

/// Read every row of every database twice (the second pass from the
/// caches); the pages the databases have and the RssAnon added, into `run`.
fn scan(conns: &[Mutex<Conn>], run: &mut ChildRun) -> Result<(), String> {
    for c in conns {
        let c = c.lock().expect("connection");
        // max(v) compares whole blobs: their overflow pages are read too.
        for _ in 0..2 {
            c.db.exec("SELECT max(v) FROM t")?;
        }
        let mut pages = c.db.prepare(
            "SELECT (SELECT page_count FROM pragma_page_count()) - freelist_count FROM pragma_freelist_count()",
        )?;
        run.scan_pages += pages.run(0).ok().flatten().unwrap_or(0).max(0) as u64;
    }
    run.scan_anon = proc_status_bytes("RssAnon").saturating_sub(run.anon_open);
    Ok(())
}

/// The warm-up and the measured interval into `run`.
fn workload(a: &ChildArgs, conns: &[Mutex<Conn>], run: &mut ChildRun) {
    let (stop, counting, ops) = (AtomicBool::new(false), AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        let h = s.spawn(|| work(a, conns, &stop, &counting, &ops));
        std::thread::sleep(Duration::from_millis(a.warm_ms));
        for c in conns {
            let c = c.lock().expect("connection");
            c.db.status(ffi::SQLITE_DBSTATUS_CACHE_HIT, true);
            c.db.status(ffi::SQLITE_DBSTATUS_CACHE_MISS, true);
        }
        let (reads0, slept0) = vfs::device_counts();
        let (t0, cpu0) = (Instant::now(), cpu_secs());
        counting.store(true, Relaxed);
        std::thread::sleep(Duration::from_secs_f64(a.secs));
        counting.store(false, Relaxed);
        run.secs = t0.elapsed().as_secs_f64();
        run.cpu_secs = cpu_secs() - cpu0;
        let (reads1, slept1) = vfs::device_counts();
        run.device_reads = reads1 - reads0;
        run.device_wait_us = (slept1 - slept0) as f64 / 1000.0 / run.device_reads.max(1) as f64;
        run.rss_end = proc_status_bytes("VmRSS");
        run.anon_end = proc_status_bytes("RssAnon");
        run.rss_peak = proc_status_bytes("VmHWM");
        if let Some(g) = pagealloc_sqlite::global() {
            run.charged = g.charged_bytes();
            run.frames_bytes = g.used_frames() * 4096;
            let o = g.overdraft();
            (run.overdraft_peak, run.overdraft_times) = (o.peak, o.times);
        }
        stop.store(true, Relaxed);
        run.errors = h.join().expect("workers");
    });
    run.ops = ops.load(Relaxed);
}

/// CPU seconds this process used so far (utime + stime of /proc/self/stat).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name's closing parenthesis start at
    // field 3 (state); utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).filter_map(|x| x.parse().ok()).collect();
    // SAFETY: sysconf reads a constant of the system; no pointer involved.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    f.iter().sum::<u64>() as f64 / hz
}

/// (ms from now, VmRSS bytes) every 250 ms for `ms`, and once at the end.
fn sample_rss(ms: u64) -> Vec<(u64, u64)> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    while t0.elapsed() < Duration::from_millis(ms) {
        out.push((t0.elapsed().as_millis() as u64, proc_status_bytes("VmRSS")));
        std::thread::sleep(Duration::from_millis(250));
    }
    out.push((t0.elapsed().as_millis() as u64, proc_status_bytes("VmRSS")));
    out
}

/// The subcommand: the JSON line, or `sqlite-child: error <why>` and 1.
pub fn run(a: &ChildArgs) -> i32 {
    match measure(a) {
        Ok(r) => {
            println!("{}", serde_json::to_string(&r).expect("json"));
            0
        }
        Err(e) => {
            println!("sqlite-child: error {e}");
            1
        }
    }
}
