//! `bench sqlite`, part a: SQLite's own benchmark, speedtest1 (built
//! unchanged by `scripts/speedtest1-build`), head to head: rounds that
//! alternate SQLite's cache (pcache1) and pagealloc's (the same binary under
//! `LD_PRELOAD=libpagealloc_sqlite.so`), both with `--cachesize` pages
//! per cache (pagealloc honours `cache_size` as each cache's soft limit, as
//! pcache1 does) and pagealloc's global budget at twice those pages' memory
//! (frames and headers, `pagealloc_sqlite::page_charge`): VACUUM
//! fills a second cache (its target database) as large as the main one
//! while the main one's pages are pinned, which pcache1, limited per cache
//! only, serves, and a budget of one cache's bytes refuses (SQLITE_NOMEM).
//! Per test the median time of the rounds; the claim is the ratio of the
//! total times (pcache1 / pagealloc: pagealloc's throughput relative to
//! pcache1's).

use crate::harness::{Ctx, ExperimentResult, Figure};
use pagealloc_sqlite::page_charge;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// speedtest1's `--size` (quick, full).
const SIZE: (u32, u32) = (50, 100);
/// Cache pages given to both (`--cachesize`): 8 MiB of 4 KiB pages, smaller
/// than the larger tests' databases, so the cache's eviction is exercised.
const CACHE_PAGES: u64 = 2000;
/// The extra area SQLite asks each cache for (its `PgHdr` and the b-tree's
/// `MemPage`): 208 bytes in Debian's 3.40.1 on 64-bit. pagealloc's budget
/// is of memory, headers included, so "the same memory" as `CACHE_PAGES`
/// pcache1 pages (which carry the same extra area) is that many page
/// charges, not that many frames.
const SQLITE_EXTRA: usize = 208;

/// The workspace root (the bench is built from it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The speedtest1 binary, built by the script if missing.
fn speedtest1() -> Result<PathBuf, String> {
    let root = workspace();
    let bin = root.join("target/speedtest1/speedtest1");
    if bin.exists() {
        return Ok(bin);
    }
    let out = Command::new(root.join("scripts/speedtest1-build")).output().map_err(|e| e.to_string())?;
    if !out.status.success() || !bin.exists() {
        return Err(format!("scripts/speedtest1-build failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(bin)
}

/// libpagealloc_sqlite.so of the bench's own profile, built if missing.
pub fn preload_lib() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = exe.parent().ok_or("no exe dir")?;
    let lib = dir.join("libpagealloc_sqlite.so");
    if lib.exists() {
        return Ok(lib);
    }
    let release = dir.ends_with("release");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace()).args(["build", "-q", "-p", "pagealloc-sqlite"]);
    if release {
        cmd.arg("--release");
    }
    let ok = cmd.status().is_ok_and(|s| s.success());
    if !ok || !lib.exists() {
        return Err(format!("cannot build {}", lib.display()));
    }
    Ok(lib)
}

/// One run: (test name, seconds) per test line, and the TOTAL.
fn run_once(bin: &Path, lib: Option<&Path>, size: u32, dir: &Path) -> Result<(Vec<(String, f64)>, f64), String> {
    let db = dir.join("speedtest1.db");
    let _ = std::fs::remove_file(&db);
    let mut cmd = Command::new(bin);
    cmd.args(["--testset", "main", "--size", &size.to_string(), "--cachesize", &CACHE_PAGES.to_string()]);
    cmd.arg(&db);
    if let Some(lib) = lib {
        cmd.env("LD_PRELOAD", lib)
            .env("PAGEALLOC_SQLITE_BUDGET", (2 * CACHE_PAGES * page_charge(4096, SQLITE_EXTRA)).to_string())
            .env("PAGEALLOC_SQLITE_ARENA", "64M");
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&db);
    if !out.status.success() {
        return Err(format!("speedtest1 failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// speedtest1's lines ` 100 - 50000 INSERTs into table with no index.....  0.123s`
/// and `       TOTAL.....  1.234s`.
fn parse(text: &str) -> Result<(Vec<(String, f64)>, f64), String> {
    let secs = |l: &str| l.trim_end().strip_suffix('s')?.rsplit(' ').next()?.parse::<f64>().ok();
    let mut tests = Vec::new();
    let mut total = None;
    for l in text.lines() {
        let t = l.trim_start();
        if t.starts_with("TOTAL") {
            total = secs(l);
        } else if let Some((num, _)) = t.split_once(" - ") {
            if num.chars().all(|c| c.is_ascii_digit()) {
                tests.push((num.to_string(), secs(l).ok_or_else(|| format!("bad line {l:?}"))?));
            }
        }
    }
    Ok((tests, total.ok_or("no TOTAL line")?))
}

/// Part a into `r`; `None` when it could not run (noted in `r`).
pub fn run(ctx: &Ctx, r: &mut ExperimentResult) -> Option<f64> {
    let (bin, lib) = match (speedtest1(), preload_lib()) {
        (Ok(b), Ok(l)) => (b, l),
        (Err(e), _) | (_, Err(e)) => {
            r.line(ctx, format!("speedtest1: not run: {e}"));
            r.notes.push(format!("speedtest1 head to head not run: {e}"));
            return None;
        }
    };
    let size = if ctx.full { SIZE.1 } else { SIZE.0 };
    let dir = std::env::temp_dir().join(format!("pagealloc-speedtest1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let mut per: BTreeMap<(&str, String), Vec<f64>> = BTreeMap::new();
    let mut totals: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let pb = ctx.bar("sqlite speedtest1", 2 * ctx.repeats as u64);
    for _ in 0..ctx.repeats {
        for (v, l) in [("pcache1", None), ("pagealloc", Some(lib.as_path()))] {
            match run_once(&bin, l, size, &dir) {
                Ok((tests, total)) => {
                    for (name, s) in tests {
                        per.entry((v, name)).or_default().push(s * 1e3);
                    }
                    totals.entry(v).or_default().push(total * 1e3);
                }
                Err(e) => r.notes.push(format!("speedtest1 {v}: {e}")),
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let _ = std::fs::remove_dir_all(&dir);
    for ((v, name), ms) in per {
        r.figures.push(Figure::new(format!("st1-{name}"), v, "ms", ms).param("size", size));
    }
    for (v, ms) in &totals {
        r.figures.push(Figure::new("st1-total", *v, "ms", ms.clone()).param("size", size));
    }
    let (a, b) = (r.get("st1-total", "pcache1")?.value, r.get("st1-total", "pagealloc")?.value);
    let ratio = a / b;
    r.line(
        ctx,
        format!(
            "speedtest1 --testset main --size {size} --cachesize {CACHE_PAGES}, {} rounds: total pcache1 {a:.0} ms, \
             pagealloc {b:.0} ms: pagealloc throughput {ratio:.3}x pcache1's",
            ctx.repeats
        ),
    );
    r.figures.push(Figure::new("st1-throughput-ratio", "pagealloc", "x", vec![ratio]).higher_better());
    r.target(
        crate::harness::TargetKind::Peer,
        "speedtest1 throughput, pagealloc / pcache1 (>= 0.95)",
        ratio,
        0.95,
        ratio >= 0.95,
    );
    Some(ratio)
}
