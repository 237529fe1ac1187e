//! `pagealloc replay FILE`: a real kernel's page allocations, captured with
//! `scripts/capture-trace`, replayed through pagealloc.
//!
//! Each kernel zone of the start snapshot becomes an arena seeded with the
//! zone's free blocks ([`seed`]); every allocation and free of the trace is
//! then replayed in order ([`engine`]), once per design: today's, and the
//! seed variants whose behaviour a stream of allocations and frees can show
//! (seed 1's two-pass drain, seed 2's migratetype cached at free; seeds 3-5
//! change the bulk API, the page lock and the pagetypeinfo read, which a
//! trace of single allocations does not call). It reports, beside the
//! kernel's own figures from the same trace: fragmenting fallbacks per
//! 1,000 allocations (against `mm_page_alloc_extfrag` with `fragmenting=1`),
//! free pages per order at the end (against the end snapshot), zone-lock
//! acquisitions (against an estimate from the kernel's events) and the
//! replay's speed against the trace's own duration; `--out` writes the HTML
//! report with free pages per order over the replay beside the kernel's two
//! snapshots.
//!
//! Bad input is counted, never a panic: lines the reader cannot use
//! ([`trace::BadInput`]), frees of pfns the trace never allocated (given
//! back from the seeded in-use memory while it lasts, then counted), and a
//! file without a start snapshot is an error message and exit status 2.

mod engine;
mod proc;
mod report;
mod seed;
#[cfg(test)]
mod tests;
pub mod trace;

use clap::Args as ClapArgs;
use pagealloc::{Config, DrainMode};
use std::path::PathBuf;

/// `pagealloc replay`'s arguments.
#[derive(ClapArgs, Clone, Debug)]
pub struct Args {
    /// The capture (`scripts/capture-trace`'s output, gzip or plain text).
    pub file: PathBuf,
    /// Directory of the HTML report (index.html, results.json).
    #[arg(long, default_value = "replay-report")]
    pub out: PathBuf,
    /// Replay with today's design only (no seed variants).
    #[arg(long)]
    pub default_only: bool,
}

/// The designs replayed: name and configuration.
fn designs(default_only: bool, cpus: Option<usize>) -> Vec<(&'static str, Config)> {
    let base = Config::new().nr_cpus(cpus);
    let mut v = vec![("new", base.clone())];
    if !default_only {
        v.push(("seed1-two-pass-drain", base.clone().drain_mode(DrainMode::TwoPass)));
        v.push(("seed2-migratetype-cache", base.pcp_migratetype_cache(true)));
    }
    v
}

/// One design's replay, or why it could not run.
pub struct DesignRun {
    /// The design's name.
    pub name: &'static str,
    /// What happened.
    pub outcome: engine::Outcome,
}

/// Everything a replay produced.
pub struct Replay {
    /// The trace as read.
    pub trace: trace::Trace,
    /// The snapshot's zones (start), as seeded.
    pub zones: Vec<proc::Zone>,
    /// The end snapshot's zones.
    pub end_zones: Vec<proc::Zone>,
    /// Per design.
    pub runs: Vec<DesignRun>,
    /// Zones the replay left out, and why.
    pub skipped: Vec<String>,
}

/// Read, seed and replay.
pub fn run_file(args: &Args) -> Result<Replay, String> {
    let trace = trace::open(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    replay_trace(trace, args.default_only)
}

/// Seed and replay an already-read trace.
pub fn replay_trace(trace: trace::Trace, default_only: bool) -> Result<Replay, String> {
    let get = |m: &std::collections::BTreeMap<String, String>, f: &str| m.get(f).cloned().unwrap_or_default();
    let zones = proc::zones(&get(&trace.start, "pagetypeinfo"), &get(&trace.start, "zoneinfo"));
    let end_zones = proc::zones(&get(&trace.end, "pagetypeinfo"), &get(&trace.end, "zoneinfo"));
    if zones.iter().all(|z| z.managed == 0) {
        return Err("no start snapshot of /proc/pagetypeinfo and /proc/zoneinfo: nothing to seed".into());
    }
    let cpus = trace.header.get("cpus").and_then(|c| c.parse().ok()).filter(|&c| c > 0 && c <= 8192);
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for (name, config) in designs(default_only, cpus) {
        let mut seeded = Vec::new();
        let mut spans = Vec::new();
        for z in zones.iter().filter(|z| z.managed > 0) {
            match seed::seed(z, config.clone()) {
                Ok(s) => {
                    seeded.push(s);
                    spans.push((z.start_pfn, z.spanned));
                }
                Err(e) if name == "new" => skipped.push(e),
                Err(_) => {}
            }
        }
        if seeded.is_empty() {
            return Err(format!("no zone could be seeded: {}", skipped.join("; ")));
        }
        let outcome = engine::replay(&trace, &mut seeded, &spans);
        for s in &seeded {
            s.a.check_invariants().map_err(|e| format!("{name}: invariants after the replay: {e:?}"))?;
        }
        runs.push(DesignRun { name, outcome });
    }
    Ok(Replay { trace, zones, end_zones, runs, skipped })
}

/// `pagealloc replay FILE`: print the summary, write the report; the exit
/// status.
pub fn main(args: &Args) -> i32 {
    let r = match run_file(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pagealloc replay: {e}");
            return 2;
        }
    };
    print!("{}", report::text(&r));
    match report::write(&r, &args.out) {
        Ok(index) => {
            println!("report: {}", index.display());
            0
        }
        Err(e) => {
            eprintln!("cannot write the report to {}: {e}", args.out.display());
            1
        }
    }
}
