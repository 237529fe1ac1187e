//! `bench sqlite`, part d: pages smaller than a frame (512, 1024 and 2048
//! bytes, common in long-lived and embedded databases). pagealloc's cache
//! puts several such pages of one cache in one 4 KiB frame
//! (`pagealloc_sqlite::Config::share_frames`); the one-page-one-frame
//! design (`pagealloc-noshare`) wastes the rest of each frame.
//!
//! - Bytes per cached page: one database of about 8 MiB of rows read
//!   whole, twice, in a child per cache (pcache1, pagealloc, pagealloc
//!   without sharing; each with room for every page): the anonymous
//!   resident memory (RssAnon) the reads added over the pages the
//!   database has. Target: pagealloc at most 1.1x pcache1 per page size.
//! - Hit rate and throughput, 1 KiB pages: `SMALL_DBS` databases whose
//!   data is about four times a `SMALL_BUDGET` budget, the many-databases
//!   workload of part b (Zipf reads, 10% writes, warm kernel cache), with
//!   and without sharing (and pcache1, split per connection, for
//!   reference). Sharing holds about three times the pages in the same
//!   budget; if it cost throughput, the figure says by how much.

use super::sqlite::{populate, run_child};
use crate::harness::{Ctx, ExperimentResult, Figure};
use crate::sqlite_child::ChildRun;
use std::path::Path;

/// Rows of the one database read whole: about 8 MiB of 200-byte rows.
const SCAN_ROWS: u64 = 40_000;
/// Databases and rows of the hit-rate runs (about 14 MiB at 1 KiB pages).
const SMALL_DBS: usize = 16;
/// See [`SMALL_DBS`].
const SMALL_ROWS: u64 = 4000;
/// The budget of the hit-rate runs.
const SMALL_BUDGET: u64 = 4 << 20;
/// The caches compared.
const CACHES: [&str; 3] = ["pcache1", "pagealloc", "pagealloc-noshare"];

/// Args of a child that reads everything and stops: a budget with room
/// for every page even at a frame each (the arena is reserved, not resident).
fn scan_args() -> Vec<String> {
    let budget = 256u64 << 20;
    format!(
        "--dbs 1 --rows {SCAN_ROWS} --budget {budget} --threads 1 --secs 0 --warm-ms 0 --skew 1 --write-pct 0 \
         --idle-ms 0 --scan"
    )
    .split_whitespace()
    .map(String::from)
    .collect()
}

/// Args of a hit-rate run.
fn workload_args(ctx: &Ctx, threads: usize) -> Vec<String> {
    let secs = if ctx.full { 10.0 } else { 3.0 };
    format!(
        "--dbs {SMALL_DBS} --rows {SMALL_ROWS} --budget {SMALL_BUDGET} --threads {threads} --secs {secs} \
         --warm-ms 1500 --skew 1 --write-pct 10 --idle-ms 0"
    )
    .split_whitespace()
    .map(String::from)
    .collect()
}

/// A fresh directory with `dbs` databases of `rows` rows at `page_size`.
fn fresh(tag: &str, dbs: usize, rows: u64, page_size: usize) -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("pagealloc-bench-sqlite-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    populate(&dir, dbs, rows, page_size)?;
    Ok(dir)
}

/// Run `f` for each cache, `ctx.repeats` rounds alternating; the runs
/// that worked, per cache, and a note for each that did not.
fn rounds(ctx: &Ctx, dir: &Path, args: &[String], r: &mut ExperimentResult) -> Vec<(&'static str, ChildRun)> {
    let mut out = Vec::new();
    for round in 0..ctx.repeats {
        for cache in CACHES {
            match run_child(dir, cache, args) {
                Ok(c) if c.errors == 0 => out.push((cache, c)),
                Ok(c) => r.notes.push(format!("{cache} round {round}: {} operations failed", c.errors)),
                Err(e) => r.notes.push(e),
            }
        }
    }
    out
}

/// Samples by (metric, variant, page size; 0 for none), and their unit.
type Samples = std::collections::BTreeMap<(&'static str, &'static str, u64), (&'static str, Vec<f64>)>;

/// Part d into `r`.
pub fn run(ctx: &Ctx, r: &mut ExperimentResult, threads: usize) {
    let pb = ctx.bar("sqlite small pages", 4);
    let mut all = Samples::new();
    let mut push = |m, v, sz, unit, x| all.entry((m, v, sz)).or_insert((unit, Vec::new())).1.push(x);
    for sz in [512usize, 1024, 2048] {
        match fresh(&format!("scan{sz}"), 1, SCAN_ROWS, sz) {
            Ok(dir) => {
                for (cache, c) in rounds(ctx, &dir, &scan_args(), r) {
                    let per_page = c.scan_anon as f64 / c.scan_pages.max(1) as f64;
                    push("small-bytes-per-page", cache, sz as u64, "bytes", per_page);
                }
                let _ = std::fs::remove_dir_all(dir);
            }
            Err(e) => r.notes.push(format!("small pages {sz}: not run: {e}")),
        }
        pb.inc(1);
    }
    match fresh("small", SMALL_DBS, SMALL_ROWS, 1024) {
        Ok(dir) => {
            for (cache, c) in rounds(ctx, &dir, &workload_args(ctx, threads), r) {
                let hit = c.hits as f64 * 100.0 / (c.hits + c.misses).max(1) as f64;
                push("small-throughput", cache, 0, "ops/s", c.ops as f64 / c.secs);
                push("small-hit-rate", cache, 0, "%", hit);
            }
            let _ = std::fs::remove_dir_all(dir);
        }
        Err(e) => r.notes.push(format!("small pages, hit rate: not run: {e}")),
    }
    pb.finish_and_clear();
    for ((m, v, sz), (unit, xs)) in all {
        let mut f = Figure::new(m, v, unit, xs);
        f.higher_is_better = m != "small-bytes-per-page";
        if sz > 0 {
            f = f.param("page_size", sz);
        }
        r.figures.push(f);
    }
    summarise(ctx, r, threads);
}

/// The median of figure (metric, variant[, page size]), NaN if absent.
fn get(r: &ExperimentResult, m: &str, v: &str, sz: Option<u64>) -> f64 {
    let size = |f: &Figure| f.params.get("page_size").and_then(serde_json::Value::as_u64);
    r.figures.iter().find(|f| f.metric == m && f.variant == v && size(f) == sz).map_or(f64::NAN, |f| f.value)
}

/// The lines and targets of part d.
fn summarise(ctx: &Ctx, r: &mut ExperimentResult, threads: usize) {
    for sz in [512u64, 1024, 2048] {
        let (p1, pa, no) = (
            get(r, "small-bytes-per-page", "pcache1", Some(sz)),
            get(r, "small-bytes-per-page", "pagealloc", Some(sz)),
            get(r, "small-bytes-per-page", "pagealloc-noshare", Some(sz)),
        );
        r.line(
            ctx,
            format!(
                "small pages: {sz:>4}-byte pages, resident bytes per cached page: pcache1 {p1:.0}, pagealloc {pa:.0} \
                 ({:.2}x), one page per frame {no:.0} ({:.2}x)",
                pa / p1,
                no / p1
            ),
        );
        r.target(
            crate::harness::TargetKind::Peer,
            format!("small pages, {sz} bytes: pagealloc resident bytes per page / pcache1's (<= 1.1)"),
            pa / p1,
            1.1,
            pa / p1 <= 1.1,
        );
    }
    let mib = SMALL_BUDGET >> 20;
    for v in CACHES {
        r.line(
            ctx,
            format!(
                "small pages, 1 KiB, {SMALL_DBS} dbs, {mib} MiB budget, {threads} threads: {v:<17} {:>9.0} ops/s  hit {:5.1}%",
                get(r, "small-throughput", v, None),
                get(r, "small-hit-rate", v, None)
            ),
        );
    }
    let x = get(r, "small-throughput", "pagealloc", None) / get(r, "small-throughput", "pagealloc-noshare", None);
    r.line(ctx, format!("  sharing frames / one page per frame: throughput {x:.2}x"));
    r.figures.push(Figure::new("small-sharing-throughput-ratio", "pagealloc", "x", vec![x]).higher_better());
}
