//! Verdicts: does a seed's claim hold here?
//!
//! A claim names one metric and two variants (old design A, new design B),
//! each a figure with one sample per repeat (the experiments alternate A and
//! B repeat by repeat, so drift on a shared machine hits both). The change
//! is signed so positive means B is better (`(new - old) / old` for
//! throughput, `(old - new) / old` for costs), computed on the medians.
//!
//! **The rule.** A 95% percentile-bootstrap interval of the change: 2,000
//! times, each side's samples are drawn again with replacement (a fixed
//! generator, so the same samples always give the same interval) and the
//! change of the two medians is taken; the interval runs from the 2.5th to
//! the 97.5th percentile of those changes. When both figures were measured
//! in alternating rounds ([`Figure::paired`], same count), the rounds are
//! drawn instead: each round's own change, old against new run back to back,
//! and the median of the drawn rounds' changes, so drift that moves both
//! designs in a round cancels. Then:
//!
//! | condition | verdict |
//! |---|---|
//! | a figure is missing | not run |
//! | fewer than 2 samples on a side (no interval) | inconclusive |
//! | the interval lies above 0 | reproduced |
//! | the interval lies below 0 | not reproduced |
//! | the interval contains 0 | inconclusive |
//!
//! Worked example: old repeats 196, 200, 204 cycles, new 147, 150, 152: every
//! resampled median of new is below every one of old, the interval is about
//! +23%..+28%, reproduced. Had new been 190, 200, 210, the interval would
//! span about -5%..+5%: inconclusive.
//!
//! The spread of the repeats, `(max - min) / median` (with 5 or more, over
//! all but the lowest and highest), is still shown as the noise, and the
//! experiments of seeds 1 and 2 run more alternating rounds while the
//! interval contains 0 ([`interval`], up to a bound each states).
//!
//! A seed's verdict combines its claims' verdicts, ignoring claims not run: all
//! reproduced -> reproduced; any not reproduced -> not reproduced; otherwise
//! inconclusive; no claim measured -> not run.

use super::seeds;
use crate::harness::{stats, ExperimentResult, Figure};
use serde::{Deserialize, Serialize};

/// The verdict on one claim or one seed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B beats A: the change's interval lies above 0.
    Reproduced,
    /// A beats B: the change's interval lies below 0.
    NotReproduced,
    /// The change's interval contains 0 (or there are too few samples for one).
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
            Verdict::Inconclusive => "inconclusive (interval contains 0)",
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
    /// The larger of the two spreads, shown beside the change.
    pub noise: Option<f64>,
    /// The 95% bootstrap interval of the change, low end (absent with
    /// fewer than 2 samples a side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_low: Option<f64>,
    /// The interval's high end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_high: Option<f64>,
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

/// Resamples in the bootstrap: enough that the 2.5th and 97.5th
/// percentiles move by well under a point between generators.
const RESAMPLES: usize = 2000;

/// The 95% percentile-bootstrap interval of the change from `old` to `new`
/// samples (positive = new better), or `None` with fewer than 2 finite
/// samples on a side.
pub fn interval(old: &[f64], new: &[f64], higher_is_better: bool) -> Option<(f64, f64)> {
    let finite = |v: &[f64]| v.iter().copied().filter(|x| x.is_finite()).collect::<Vec<f64>>();
    let (o, n) = (finite(old), finite(new));
    if o.len() < 2 || n.len() < 2 {
        return None;
    }
    let mut rng = crate::harness::rand::Lcg(0x9e37_79b9_7f4a_7c15);
    let (mut bo, mut bn) = (Vec::with_capacity(o.len()), Vec::with_capacity(n.len()));
    percentiles((0..RESAMPLES).map(|_| {
        let (mo, mn) = (draw(&mut rng, &o, &mut bo), draw(&mut rng, &n, &mut bn));
        seeds::change(mo, mn, higher_is_better)
    }))
}

/// [`interval`] for samples taken in alternating rounds: round i of `old`
/// and of `new` ran back to back. The rounds' own changes are drawn.
pub fn interval_paired(old: &[f64], new: &[f64], higher_is_better: bool) -> Option<(f64, f64)> {
    let rounds: Vec<f64> =
        old.iter().zip(new).map(|(&o, &n)| seeds::change(o, n, higher_is_better)).filter(|c| c.is_finite()).collect();
    if rounds.len() < 2 || old.len() != new.len() {
        return None;
    }
    let mut rng = crate::harness::rand::Lcg(0x9e37_79b9_7f4a_7c15);
    let mut buf = Vec::with_capacity(rounds.len());
    percentiles((0..RESAMPLES).map(|_| draw(&mut rng, &rounds, &mut buf)))
}

/// The median of `v.len()` draws from `v` with replacement.
fn draw(rng: &mut crate::harness::rand::Lcg, v: &[f64], buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..v.len()).map(|_| v[(rng.next() % v.len() as u64) as usize]));
    stats::median(buf)
}

/// The 2.5th and 97.5th percentiles of the resampled changes (none when
/// most were not finite).
fn percentiles(changes: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let mut changes: Vec<f64> = changes.filter(|c| c.is_finite()).collect();
    if changes.len() < RESAMPLES / 2 {
        return None;
    }
    changes.sort_by(f64::total_cmp);
    let at = |q: f64| changes[((changes.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// The interval of two figures: paired when both were measured in
/// alternating rounds (the same number of them), else unpaired.
pub fn figures_interval(old: &Figure, new: &Figure) -> Option<(f64, f64)> {
    if old.is_paired() && new.is_paired() && old.samples.len() == new.samples.len() {
        interval_paired(&old.samples, &new.samples, new.higher_is_better)
    } else {
        interval(&old.samples, &new.samples, new.higher_is_better)
    }
}

/// Whether more alternating rounds could settle a claim: the paired
/// interval contains 0, or there is none yet.
pub fn unsettled(old: &[f64], new: &[f64], higher_is_better: bool) -> bool {
    interval_paired(old, new, higher_is_better).is_none_or(|(lo, hi)| lo <= 0.0 && hi >= 0.0)
}

/// The verdict of an interval (see the module doc).
pub fn of_interval(ci: Option<(f64, f64)>) -> Verdict {
    match ci {
        Some((lo, _)) if lo > 0.0 => Verdict::Reproduced,
        Some((_, hi)) if hi < 0.0 => Verdict::NotReproduced,
        _ => Verdict::Inconclusive,
    }
}

/// Judge old against new: the change of the medians, the larger spread,
/// the verdict from the change's interval.
pub fn judge(old: &Figure, new: &Figure) -> (f64, f64, Verdict) {
    let change = seeds::change(old.value, new.value, new.higher_is_better);
    let noise = old.spread().max(new.spread());
    (change, noise, of_interval(figures_interval(old, new)))
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
                ci_low: None,
                ci_high: None,
                verdict: Verdict::NotRun,
            };
            if let (Some(o), Some(n)) = (o, n) {
                let (change, noise, verdict) = judge(o, n);
                if let Some((lo, hi)) = figures_interval(o, n) {
                    (v.ci_low, v.ci_high) = (Some(lo), Some(hi));
                }
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
