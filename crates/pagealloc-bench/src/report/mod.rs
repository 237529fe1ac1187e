//! The report of `pagealloc bench`: one directory a person reads at a glance
//! and tools read without guessing.
//!
//! ```text
//! bench-report/
//!   index.html           the page: machine, verdict per seed, a plot per experiment
//!   results.json         every figure, claim and verdict (schema below)
//!   results.schema.json  the JSON Schema of results.json
//!   raw/<experiment>.txt the experiment's output in its original tool's format
//!   raw/<experiment>.csv ... further formats an experiment gave in `raw_files`
//!   raw/<experiment>/...     a tool's directory layout (keys holding `/`)
//! ```
//!
//! **Verdicts.** Each seed claim an experiment declares (`ExperimentResult::claims`)
//! compares one metric between the old-design and new-design variants; the rule
//! (a difference counts only when it exceeds the repeats' spread) is in
//! [`verdict`]. The seeds' own figures, quoted from the threads, are in [`seeds`].
//!
//! **results.json**, schema `pagealloc-bench-results`, version [`VERSION`]; the
//! JSON Schema is `docs/results.schema.json` and a test validates a produced
//! file against it. Top level: `schema`, `version`, `command`, `mode`
//! (`quick`/`full`), `repeats`, `started` (UTC, ISO 8601), `duration_s`,
//! `machine` {`cpu_model`, `cores`, `kernel`, `tsc_ghz`, `loadavg`, `busy`},
//! `seeds` (one verdict per seed 1..=5), `claims` (each claim judged: old, new,
//! spreads, ratio, change, noise, verdict) and `experiments` (each experiment's
//! full result: figures with unit, variant, median `value`, `samples`,
//! `higher_is_better`, `params`; targets; notes; claims; plot; raw outputs).
//! NaN values are written as `null`. Versioning: adding an optional field
//! keeps the version; renaming, removing or changing the meaning of one bumps it.
//!
//! **Compare.** `pagealloc bench compare OLD.json NEW.json` reads two such files
//! and prints mmtests-style tables ([`compare`]).

pub mod compare;
pub mod html;
pub mod machine;
pub mod mmtests;
pub mod seeds;
pub mod svg;
pub mod verdict;

#[cfg(test)]
pub(crate) mod mmtests_pl;
#[cfg(test)]
mod tests;

use crate::harness::ExperimentResult;
pub use machine::Machine;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use verdict::{ClaimVerdict, SeedVerdict, Verdict};

/// The schema name in `results.json`.
pub const SCHEMA: &str = "pagealloc-bench-results";
/// The schema version in `results.json`.
pub const VERSION: u32 = 1;
/// The JSON Schema of `results.json`.
pub const SCHEMA_JSON: &str = include_str!("../../../../docs/results.schema.json");

/// Everything one run of `pagealloc bench` produced: the content of `results.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// [`VERSION`] of the writer.
    pub version: u32,
    /// The command line, quoted for a shell.
    pub command: String,
    /// `quick` or `full`.
    pub mode: String,
    /// Repeats per measurement.
    pub repeats: usize,
    /// Start of the run, UTC, ISO 8601.
    pub started: String,
    /// Wall time of the run in seconds.
    pub duration_s: f64,
    /// The machine.
    pub machine: Machine,
    /// One verdict per seed 1..=5.
    pub seeds: Vec<SeedVerdict>,
    /// Every claim, judged.
    pub claims: Vec<ClaimVerdict>,
    /// Every experiment's result.
    pub experiments: Vec<ExperimentResult>,
}

/// How the run was started (everything the report needs besides the results).
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The command line.
    pub command: String,
    /// Full mode.
    pub full: bool,
    /// Repeats per measurement.
    pub repeats: usize,
    /// Start, seconds since the epoch.
    pub started: u64,
    /// Wall time in seconds.
    pub duration_s: f64,
    /// The machine.
    pub machine: Machine,
}

impl Report {
    /// Judge the results and assemble the report.
    pub fn new(info: RunInfo, experiments: Vec<ExperimentResult>) -> Self {
        let claims = verdict::claims(&experiments);
        let seeds = verdict::seeds(&claims);
        Self {
            schema: SCHEMA.into(),
            version: VERSION,
            command: info.command,
            mode: if info.full { "full" } else { "quick" }.into(),
            repeats: info.repeats,
            started: machine::iso8601(info.started),
            duration_s: info.duration_s,
            machine: info.machine,
            seeds,
            claims,
            experiments,
        }
    }

    /// `results.json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises") + "\n"
    }

    /// Read a `results.json` (or the bare array of experiment results older
    /// `--json` files held).
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parse a `results.json` document.
    pub fn parse(text: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if v.is_array() {
            let experiments: Vec<ExperimentResult> = serde_json::from_value(v).map_err(|e| e.to_string())?;
            let info = RunInfo {
                command: String::new(),
                full: false,
                repeats: 0,
                started: 0,
                duration_s: 0.0,
                machine: Machine::default(),
            };
            return Ok(Self::new(info, experiments));
        }
        match v.get("version").and_then(|x| x.as_u64()) {
            Some(n) if n <= u64::from(VERSION) => {}
            Some(n) => return Err(format!("results.json version {n} is newer than this reader ({VERSION})")),
            None => return Err("not a pagealloc results.json (no version)".into()),
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    /// Write `index.html`, `results.json`, the schema and the raw files into
    /// `dir`; returns the path of `index.html`.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let raw = dir.join("raw");
        if raw.exists() {
            std::fs::remove_dir_all(&raw)?;
        }
        std::fs::create_dir_all(&raw)?;
        for e in &self.experiments {
            for (name, content) in raw_files(e) {
                let path = raw.join(name);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, content)?;
            }
        }
        std::fs::write(dir.join("results.json"), self.to_json())?;
        std::fs::write(dir.join("results.schema.json"), SCHEMA_JSON)?;
        let index = dir.join("index.html");
        std::fs::write(&index, html::page(self))?;
        Ok(index)
    }

    /// The short table printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n{:>4}  {:<16} {:<24} {:>11} {:>11} {:>8} {:>15}  verdict",
            "seed", "experiment", "metric", "old", "new", "change", "95% interval"
        );
        for sv in &self.seeds {
            let mine: Vec<&ClaimVerdict> = self.claims.iter().filter(|c| c.seed == sv.seed).collect();
            if mine.is_empty() {
                let planned = seeds::seed(sv.seed).map_or(String::new(), |s| s.experiments.join(", "));
                let _ = writeln!(
                    s,
                    "{:>4}  {:<16} {:<24} {:>11} {:>11} {:>8} {:>15}  {}",
                    sv.seed,
                    clip(&planned, 16),
                    "-",
                    "",
                    "",
                    "",
                    "",
                    sv.verdict.words()
                );
            }
            for c in mine {
                let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{} {}", svg::compact(v), c.unit));
                let _ = writeln!(
                    s,
                    "{:>4}  {:<16} {:<24} {:>11} {:>11} {:>8} {:>15}  {}",
                    c.seed,
                    clip(&c.experiment, 16),
                    clip(&c.metric, 24),
                    f(c.old),
                    f(c.new),
                    c.change.map_or("-".into(), html::pct),
                    interval_words(c),
                    c.verdict.words()
                );
            }
        }
        let count = |v: Verdict| self.seeds.iter().filter(|s| s.verdict == v).count();
        let _ = writeln!(
            s,
            "seeds: {} reproduced, {} not reproduced, {} inconclusive (interval contains 0), {} not run",
            count(Verdict::Reproduced),
            count(Verdict::NotReproduced),
            count(Verdict::Inconclusive),
            count(Verdict::NotRun)
        );
        s.push_str(&self.target_summary());
        s
    }
}

impl Report {
    /// The targets' tally, then one line per target missed and per target
    /// not measurable here, each saying what and why.
    pub fn target_summary(&self) -> String {
        let mut s = String::new();
        let all = || self.experiments.iter().flat_map(|e| e.targets.iter().map(move |t| (e, t)));
        if all().next().is_none() {
            return s;
        }
        let count = |f: fn(&crate::harness::Target) -> bool| all().filter(|(_, t)| f(t)).count();
        let (met, missed) = (count(|t| t.met), count(|t| t.missed()));
        let nm = count(|t| t.not_measurable.is_some());
        let _ = writeln!(s, "targets: {met} met, {missed} missed, {nm} not measurable here");
        for (e, t) in all().filter(|(_, t)| t.missed()) {
            let kind = t.kind.map_or("unclassified", |k| k.words());
            let _ = writeln!(
                s,
                "  MISSED {}: {}: measured {} against a limit of {} ({kind})",
                e.name,
                t.what,
                svg::compact(t.measured),
                svg::compact(t.limit)
            );
        }
        for (e, t) in all() {
            if let Some(why) = &t.not_measurable {
                let _ = writeln!(s, "  NOT MEASURABLE HERE {}: {}: {why}", e.name, t.what);
            }
        }
        s
    }
}

/// A claim's 95% interval of the change, `+23.1..+28.0%`, or `-`.
pub fn interval_words(c: &ClaimVerdict) -> String {
    match (c.ci_low, c.ci_high) {
        (Some(lo), Some(hi)) => format!("{:+.1}..{:+.1}%", lo * 100.0, hi * 100.0),
        _ => "-".into(),
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(['…']).collect()
    }
}

/// A file name made safe: letters, digits, `-`, `_` and `.` kept, the rest `_`.
fn file_name(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// The raw files of an experiment: `<name>.txt` with `raw`, then `<name>.<ext>`
/// for each of `raw_files`, or, for a key holding `/` (a tool's directory
/// layout, e.g. mmtests' `<run>/iter-0/pagealloc/logs/pagealloc.log`),
/// `<name>/<key>` with each path segment made safe (`..` and empty segments
/// dropped).
pub fn raw_files(e: &ExperimentResult) -> Vec<(String, &str)> {
    let name = file_name(&e.name);
    let mut v = vec![(format!("{name}.txt"), e.raw.as_str())];
    for (ext, content) in &e.raw_files {
        if ext.contains('/') {
            let segs: Vec<String> =
                ext.split('/').filter(|s| !s.is_empty() && *s != "." && *s != "..").map(file_name).collect();
            v.push((format!("{name}/{}", segs.join("/")), content.as_str()));
        } else {
            v.push((format!("{name}.{}", file_name(ext)), content.as_str()));
        }
    }
    v
}
