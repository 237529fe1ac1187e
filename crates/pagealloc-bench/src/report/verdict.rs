//! Verdicts: does a seed's claim hold here?
//!
//! A claim names one metric and two variants (old design A, new design B). Each
//! figure is the median of its repeats; its noise is its spread,
//! `(max - min) / median` over the repeats (with 5 or more repeats, over all
//! but the lowest and the highest, so one preempted repeat cannot swamp the rest). The change is signed so positive
//! means B is better (`(new - old) / old` for throughput, `(old - new) / old` for
//! costs). Then:
//!
//! | condition | verdict |
//! |---|---|
//! | a figure is missing | not run |
//! | `|change| <= max(spread A, spread B)` | inconclusive (within noise) |
//! | `change > noise` | reproduced |
//! | `change < -noise` | not reproduced |
//!
//! Worked example: old 200 cycles (repeats 196..204, spread 4%), new 150
//! (147..152, spread 3.3%): change = +25% > 4% noise, so reproduced. Had new been
//! 195, change = +2.5% <= 4%: within noise.
//!
//! A seed's verdict combines its claims' verdicts, ignoring claims not run: all
//! reproduced -> reproduced; any not reproduced -> not reproduced; otherwise
//! inconclusive; no claim measured -> not run.

use super::seeds;
use crate::harness::{ExperimentResult, Figure};
use serde::{Deserialize, Serialize};

/// The verdict on one claim or one seed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B beats A by more than the noise.
    Reproduced,
    /// A beats B by more than the noise.
    NotReproduced,
    /// The difference is within the noise.
    Inconclusive,
    /// The figures are missing (experiment not run or not built yet).
    NotRun,
}

impl Verdict {
    /// The words the report prints.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Inconclusive => "inconclusive (within noise)",
            Verdict::NotRun => "not run",
        }
    }

    /// A CSS class name.
    pub fn class(self) -> &'static str {
        match self {
            Verdict::Reproduced => "v-yes",
            Verdict::NotReproduced => "v-no",
            Verdict::Inconclusive => "v-noise",
            Verdict::NotRun => "v-none",
        }
    }
}

/// One claim, judged.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClaimVerdict {
    /// Seed number.
    pub seed: u32,
    /// Experiment that tested it.
    pub experiment: String,
    /// The claim in words.
    pub text: String,
    /// Metric compared.
    pub metric: String,
    /// Unit of the metric.
    pub unit: String,
    /// Whether a larger value is better.
    pub higher_is_better: bool,
    /// Variant name of the old design.
    pub old_variant: String,
    /// Variant name of the new design.
    pub new_variant: String,
    /// Median of the old design.
    pub old: Option<f64>,
    /// Median of the new design.
    pub new: Option<f64>,
    /// Relative spread of the old design's repeats.
    pub old_spread: Option<f64>,
    /// Relative spread of the new design's repeats.
    pub new_spread: Option<f64>,
    /// new / old.
    pub ratio: Option<f64>,
    /// Relative change, positive when the new design is better.
    pub change: Option<f64>,
    /// The noise the change is compared with: max of the two spreads.
    pub noise: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
}

/// One seed, judged.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SeedVerdict {
    /// Seed number.
    pub seed: u32,
    /// Title of the change.
    pub title: String,
    /// Combined verdict of its claims.
    pub verdict: Verdict,
    /// How many claims were judged (run or not).
    pub claims: usize,
}

/// Judge old against new.
pub fn judge(old: &Figure, new: &Figure) -> (f64, f64, Verdict) {
    let change = seeds::change(old.value, new.value, new.higher_is_better);
    let noise = old.spread().max(new.spread());
    let v = if !change.is_finite() || !noise.is_finite() || change.abs() <= noise {
        Verdict::Inconclusive
    } else if change > 0.0 {
        Verdict::Reproduced
    } else {
        Verdict::NotReproduced
    };
    (change, noise, v)
}

/// Judge every claim of every experiment.
pub fn claims(results: &[ExperimentResult]) -> Vec<ClaimVerdict> {
    let mut out = Vec::new();
    for r in results {
        for c in &r.claims {
            let (o, n) = (r.get(&c.metric, &c.old), r.get(&c.metric, &c.new));
            let mut v = ClaimVerdict {
                seed: c.seed,
                experiment: r.name.clone(),
                text: c.text.clone(),
                metric: c.metric.clone(),
                unit: o.or(n).map(|f| f.unit.clone()).unwrap_or_default(),
                higher_is_better: o.or(n).is_some_and(|f| f.higher_is_better),
                old_variant: c.old.clone(),
                new_variant: c.new.clone(),
                old: o.map(|f| f.value),
                new: n.map(|f| f.value),
                old_spread: o.map(Figure::spread),
                new_spread: n.map(Figure::spread),
                ratio: None,
                change: None,
                noise: None,
                verdict: Verdict::NotRun,
            };
            if let (Some(o), Some(n)) = (o, n) {
                let (change, noise, verdict) = judge(o, n);
                v.ratio = Some(n.value / o.value);
                v.change = Some(change);
                v.noise = Some(noise);
                v.verdict = verdict;
            }
            out.push(v);
        }
    }
    out
}

/// Combine claim verdicts into one verdict per seed 1..=5.
pub fn seeds(claims: &[ClaimVerdict]) -> Vec<SeedVerdict> {
    seeds::SEEDS
        .iter()
        .map(|s| {
            let mine: Vec<Verdict> = claims.iter().filter(|c| c.seed == s.n).map(|c| c.verdict).collect();
            SeedVerdict { seed: s.n, title: s.title.to_string(), verdict: combine(&mine), claims: mine.len() }
        })
        .collect()
}

/// The seed-level rule (see the module doc).
pub fn combine(vs: &[Verdict]) -> Verdict {
    let run: Vec<Verdict> = vs.iter().copied().filter(|v| *v != Verdict::NotRun).collect();
    if run.is_empty() {
        Verdict::NotRun
    } else if run.iter().all(|v| *v == Verdict::Reproduced) {
        Verdict::Reproduced
    } else if run.contains(&Verdict::NotReproduced) {
        Verdict::NotReproduced
    } else {
        Verdict::Inconclusive
    }
}
