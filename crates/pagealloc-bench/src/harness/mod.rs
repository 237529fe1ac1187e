//! The benchmark harness: TSC timing, thread pinning, progress bars, and the
//! results model every experiment fills in.
//!
//! An experiment is one file in `experiments/` implementing [`Experiment`]; it
//! receives a [`Ctx`] and returns an [`ExperimentResult`] holding its figures
//! (each with unit, variant and the samples it came from) and its raw output in
//! the original tool's format.
//!
//! For the report (`crate::report`) an experiment may also fill, all optional:
//! - `claims`: the seed claims it tests, each one metric compared between the
//!   old-design and new-design variants; the report gives each a verdict;
//! - `plot`: which figures to draw against which parameter ([`plot`] module);
//! - `raw_files`: extra raw outputs in other original formats, keyed by file
//!   extension (`"csv"` becomes `raw/<name>.csv` beside `raw/<name>.txt`, which
//!   holds `raw`).

pub mod plot;
pub mod rand;
pub mod stats;
pub mod tsc;

use indicatif::{ProgressBar, ProgressStyle};
#[allow(unused_imports)] // for experiments that declare plots
pub use plot::{Plot, PlotKind, Series};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
pub use tsc::{rdtsc, Tsc};

/// Run-wide settings and services handed to every experiment.
pub struct Ctx {
    /// Full mode: the original loop counts and at least 5 repeats.
    pub full: bool,
    /// The calibrated TSC.
    pub tsc: Tsc,
    /// Repeats per measurement (3 quick, 5 full).
    pub repeats: usize,
    /// Print the raw output as it is produced.
    pub echo: bool,
    /// Show progress bars.
    pub progress: bool,
    /// CPUs idle when the run started: the CPUs this process may use less
    /// the one-minute load average, rounded down. A scaling target at N
    /// threads needs N of them.
    pub idle_cpus: usize,
}

impl Ctx {
    /// A context with a freshly calibrated TSC.
    pub fn new(full: bool, echo: bool, progress: bool) -> Self {
        // Until the caller sets it from the load average (`idle_cpus`): all.
        let idle_cpus = cpus();
        Self { full, tsc: Tsc::calibrate(50), repeats: if full { 5 } else { 3 }, echo, progress, idle_cpus }
    }

    /// A progress bar of `len` steps for an experiment (hidden when progress is off).
    pub fn bar(&self, name: &str, len: u64) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::new(len);
        pb.set_style(
            ProgressStyle::with_template("{prefix:>16} [{bar:40}] {pos}/{len} {msg} ({elapsed})")
                .unwrap()
                .progress_chars("=> "),
        );
        pb.set_prefix(name.to_string());
        pb
    }
}

/// `p`, hidden from the optimizer in a register. `std::hint::black_box`
/// stores its value to the stack and loads it back; in a timed loop that
/// store can alias (in its low 12 bits) a word the allocator touches next,
/// and the false dependency moved the pair's time with the size of the
/// environment (which moves the stack) while tcmalloc's stayed put.
#[inline(always)]
pub fn opaque_pfn(p: pagealloc::Pfn) -> pagealloc::Pfn {
    // SAFETY: `Pfn` is `repr(transparent)` over a `NonZeroU64`, so it is a
    // non-zero u64; the empty asm leaves the register as it was, so the value
    // turned back is the same non-zero one.
    unsafe {
        let mut raw = std::mem::transmute::<pagealloc::Pfn, u64>(p);
        std::arch::asm!("/* {0} */", inout(reg) raw, options(nomem, nostack, preserves_flags));
        std::mem::transmute::<u64, pagealloc::Pfn>(raw)
    }
}

/// [`opaque_pfn`] for a pointer (the peers' blocks).
#[inline(always)]
#[allow(clippy::pointers_in_nomem_asm_block)] // the asm passes it through, never dereferences it
pub fn opaque_ptr<T>(mut p: *mut T) -> *mut T {
    // SAFETY: an empty asm with the pointer in a register: no memory, no stack.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) p, options(nomem, nostack, preserves_flags)) };
    p
}

/// The process's resident pages (the second field of /proc/self/statm).
pub fn process_rss_pages() -> Option<u64> {
    std::fs::read_to_string("/proc/self/statm").ok()?.split_whitespace().nth(1)?.parse().ok()
}

/// The CPUs this process may run on, as its affinity mask was at the first
/// call (before any thread pinned itself); `0..available_parallelism` when the
/// mask cannot be read.
fn allowed_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is this thread; `set` is a valid cpu_set_t of that size.
        let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } == 0;
        let mut cpus = Vec::new();
        for c in 0..libc::CPU_SETSIZE as usize {
            // SAFETY: `c` is below CPU_SETSIZE, the set's size.
            if ok && unsafe { libc::CPU_ISSET(c, &set) } {
                cpus.push(c);
            }
        }
        if cpus.is_empty() {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
        } else {
            cpus
        }
    })
}

/// CPUs idle at a one-minute load average of `load1`: the CPUs this process
/// may use less the load, rounded down.
pub fn idle_cpus(load1: f64) -> usize {
    (cpus() as f64 - load1).floor().max(0.0) as usize
}

/// How many CPUs this process may run on.
pub fn cpus() -> usize {
    allowed_cpus().len()
}

/// Pin the calling thread to the `cpu`-th CPU the process may run on (modulo
/// their number): on a machine that lends the process CPUs 32..47, `pin(0)`
/// is CPU 32, where CPU 0 would be refused.
pub fn pin(cpu: usize) -> bool {
    let cpus = allowed_cpus();
    pagealloc::pin_to_cpu(cpus[cpu % cpus.len()])
}

/// One measured figure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    /// What was measured, e.g. `pair-order0` or `alloc-odr4-16`.
    pub metric: String,
    /// Which design or peer: `old`, `new`, `kernel`, `malloc`, `floor`, ...
    pub variant: String,
    /// Unit: `ns`, `cycles`, `ops/s`, `us`, `pages`, `%`, ...
    pub unit: String,
    /// The reported value (median of the samples).
    #[serde(deserialize_with = "f64_or_nan")]
    pub value: f64,
    /// Every repeat's value.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub samples: Vec<f64>,
    /// Whether a larger value is better.
    pub higher_is_better: bool,
    /// Extra parameters (order, batch, threads...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_json::Value>,
}

impl Figure {
    /// A figure from samples (value = median).
    pub fn new(
        metric: impl Into<String>,
        variant: impl Into<String>,
        unit: impl Into<String>,
        samples: Vec<f64>,
    ) -> Self {
        Self {
            metric: metric.into(),
            variant: variant.into(),
            unit: unit.into(),
            value: stats::median(&samples),
            samples,
            higher_is_better: false,
            params: BTreeMap::new(),
        }
    }

    /// Mark larger as better (throughput).
    pub fn higher_better(mut self) -> Self {
        self.higher_is_better = true;
        self
    }

    /// Mark the samples as taken in rounds alternating with the other
    /// designs' (sample i of each ran back to back), so the verdict pairs
    /// them round by round (`report::verdict`).
    pub fn paired(self) -> Self {
        self.param("paired", true)
    }

    /// Whether [`Figure::paired`] marked it.
    pub fn is_paired(&self) -> bool {
        self.params.get("paired").and_then(serde_json::Value::as_bool) == Some(true)
    }

    /// Attach a parameter.
    pub fn param(mut self, k: &str, v: impl Into<serde_json::Value>) -> Self {
        self.params.insert(k.to_string(), v.into());
        self
    }

    /// Relative spread of the samples: (max - min) / median, leaving out the
    /// lowest and the highest sample when there are at least 5 (so that one
    /// repeat preempted on a shared machine cannot swamp the others).
    pub fn spread(&self) -> f64 {
        if self.samples.len() < 2 || self.value == 0.0 {
            return 0.0;
        }
        let mut v: Vec<f64> = self.samples.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        let v = if v.len() >= 5 { &v[1..v.len() - 1] } else { &v[..] };
        match (v.first(), v.last()) {
            (Some(lo), Some(hi)) => (hi - lo) / self.value.abs(),
            _ => 0.0,
        }
    }
}

/// JSON has no NaN: serde_json writes it as `null`; read `null` back as NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// [`f64_or_nan`] for every element.
fn vec_f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(d)?.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

/// What a target's figure is measured against, so that a reader can tell a
/// miss that means something from one this host cannot avoid: a ratio to a
/// floor or a peer timed in the same run moves with the host as the figure
/// does, and a count does not move at all. Absolute times are figures, not
/// targets.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A ratio to a floor timed in the same run (the same work with nothing
    /// around it, or the same code with one feature off).
    Floor,
    /// A ratio to a peer timed in the same run (the kernel, malloc, tcmalloc).
    Peer,
    /// A deterministic count: pages, blocks, bytes, lock acquisitions.
    Count,
}

impl TargetKind {
    /// The words the report prints.
    pub fn words(self) -> &'static str {
        match self {
            TargetKind::Floor => "ratio to a same-run floor",
            TargetKind::Peer => "ratio to a same-run peer",
            TargetKind::Count => "count",
        }
    }
}

/// A target an issue set, checked against a figure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Target {
    /// What the target says, in words.
    pub what: String,
    /// The measured value it was checked against.
    #[serde(deserialize_with = "f64_or_nan")]
    pub measured: f64,
    /// The limit.
    #[serde(deserialize_with = "f64_or_nan")]
    pub limit: f64,
    /// Whether it was met (false when it could not be measured).
    pub met: bool,
    /// What the figure is measured against (absent in files from before
    /// targets were classified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TargetKind>,
    /// Why this host cannot measure it (then `met` is false and the target
    /// is neither met nor missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measurable: Option<String>,
}

impl Target {
    /// `MET`, `MISSED` or `NOT MEASURABLE HERE`.
    pub fn status(&self) -> &'static str {
        if self.not_measurable.is_some() {
            "NOT MEASURABLE HERE"
        } else if self.met {
            "MET"
        } else {
            "MISSED"
        }
    }

    /// Missed, as opposed to met or not measurable.
    pub fn missed(&self) -> bool {
        !self.met && self.not_measurable.is_none()
    }
}

/// A seed's claim, tested by comparing one metric between the old design (A)
/// and the new design (B).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Claim {
    /// The seed (1..=5).
    pub seed: u32,
    /// What the seed claimed, with its figures quoted from the thread.
    pub text: String,
    /// The metric compared (a `Figure::metric`).
    pub metric: String,
    /// Variant name of the old design.
    pub old: String,
    /// Variant name of the new design.
    pub new: String,
}

/// Everything one experiment produced.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct ExperimentResult {
    /// Short name (the subcommand), e.g. `buddy`.
    pub name: String,
    /// Human title.
    pub title: String,
    /// The seed (1..=5) whose claim this experiment tests, if any.
    pub seed: Option<u32>,
    /// The figures.
    pub figures: Vec<Figure>,
    /// Targets checked.
    pub targets: Vec<Target>,
    /// Output in the original tool's format.
    pub raw: String,
    /// Notes worth showing a reader.
    pub notes: Vec<String>,
    /// The seed claims this experiment tests.
    #[serde(default)]
    pub claims: Vec<Claim>,
    /// The plot the report draws for this experiment (a default one when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plot: Option<Plot>,
    /// More raw outputs in other original formats, keyed by file extension
    /// (`"csv"` -> `raw/<name>.csv`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw_files: BTreeMap<String, String>,
}

impl ExperimentResult {
    /// An empty result.
    pub fn new(name: &str, title: &str, seed: Option<u32>) -> Self {
        Self { name: name.into(), title: title.into(), seed, ..Default::default() }
    }

    /// Append a line to the raw output (echoed when the context asks).
    pub fn line(&mut self, ctx: &Ctx, s: impl AsRef<str>) {
        let s = s.as_ref();
        if ctx.echo {
            println!("{s}");
        }
        self.raw.push_str(s);
        self.raw.push('\n');
    }

    /// Record a target check.
    pub fn target(&mut self, kind: TargetKind, what: impl Into<String>, measured: f64, limit: f64, met: bool) {
        self.targets.push(Target { what: what.into(), measured, limit, met, kind: Some(kind), not_measurable: None });
    }

    /// Record a target this host cannot measure, and why (`measured` is
    /// what it showed all the same, NaN if nothing).
    pub fn not_measurable(
        &mut self,
        kind: TargetKind,
        what: impl Into<String>,
        (measured, limit): (f64, f64),
        why: impl Into<String>,
    ) {
        self.targets.push(Target {
            what: what.into(),
            measured,
            limit,
            met: false,
            kind: Some(kind),
            not_measurable: Some(why.into()),
        });
    }

    /// Add a raw output in another original format, written as `raw/<name>.<ext>`.
    #[allow(dead_code)] // for experiments with a second raw format (CSV)
    pub fn raw_file(&mut self, ext: &str, content: impl Into<String>) {
        self.raw_files.insert(ext.to_string(), content.into());
    }

    /// First figure with this metric and variant.
    pub fn get(&self, metric: &str, variant: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.metric == metric && f.variant == variant)
    }
}

/// One experiment of `pagealloc bench`.
pub trait Experiment {
    /// Subcommand name.
    fn name(&self) -> &'static str;
    /// Run it.
    fn run(&self, ctx: &Ctx) -> ExperimentResult;
}

/// Time `iters` calls of `f` in TSC cycles per call, `repeats` times.
pub fn cycles_per_call(ctx: &Ctx, iters: u64, mut f: impl FnMut()) -> Vec<f64> {
    (0..ctx.repeats)
        .map(|_| {
            let c0 = rdtsc();
            for _ in 0..iters {
                f();
            }
            (rdtsc() - c0) as f64 / iters as f64
        })
        .collect()
}
