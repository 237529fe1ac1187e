//! mmtests-style compare tables.
//!
//! mmtests' `compare-kernels.sh` prints, for each metric, one row per statistic
//! with the baseline in the first column and each other run beside it with its
//! percentage change, grouped by statistic:
//!
//! ```text
//!                               no-monitor                monitor
//! Min    alloc-odr4-1     8539.00 (   0.00%)     8762.00 (  -2.61%)
//! Amean  alloc-odr4-1     8550.20 (   0.00%)     8901.40 (  -4.11%)
//! ```
//!
//! On the Amean row a difference compare-mmtests.pl marks (without R: the
//! means more than one unit apart, [`super::mmtests::significant`]) is
//! printed between stars, `*  -4.11%*`, as it prints it. The mark is the
//! script's convention, not a test of significance.
//!
//! The percentage is signed so that positive is always better: for
//! lower-is-better figures it is `100 - new * 100 / base`, for higher-is-better
//! ones `new * 100 / base - 100`; Stddev is always lower-is-better.
//!
//! [`table`] formats rows of samples (experiments use it for their raw output,
//! e.g. monitor against no monitor); [`runs`] compares two `results.json`
//! files figure by figure (`pagealloc bench compare OLD.json NEW.json`).

use super::Report;
use crate::harness::stats;
use std::fmt::Write;

/// One metric's samples in the baseline and the new run.
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    /// Metric name as printed.
    pub metric: &'a str,
    /// Whether larger is better.
    pub higher_is_better: bool,
    /// Baseline samples.
    pub base: &'a [f64],
    /// New samples.
    pub new: &'a [f64],
}

/// Percentage change, positive when `new` is better: mmtests' `pdiff` (higher
/// is better) and `pndiff` (lower is better), with their special cases: equal
/// values are 0 (so the baseline column is `0.00%`, never `-0.00%`); for
/// `pdiff` a new 0 is 0 and a base 0 is 100; for `pndiff` a new 0 is 100 and
/// a base 0 is -99.
pub fn pct(base: f64, new: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        if new == base || new == 0.0 {
            0.0
        } else if base == 0.0 {
            100.0
        } else {
            new * 100.0 / base - 100.0
        }
    } else {
        super::mmtests::pndiff(new, base)
    }
}

type Stat = (&'static str, fn(&[f64]) -> f64, bool);

const STATS: [Stat; 4] = [
    ("Min", stats::min, false),
    ("Amean", stats::mean, false),
    ("Stddev", stats::stddev, true),
    ("Max", stats::max, false),
];

/// The compare table of `rows`, baseline column labelled `base`, the other
/// `new`, in Compare.pm's widths (see [`super::mmtests`]): the statistic
/// left-aligned to the longest name, a space, the metric left-aligned to the
/// longest, then per column `%12.2f (%7.2f%%)`; one header row, each label
/// right-aligned over its column.
pub fn table(base: &str, new: &str, rows: &[Row]) -> String {
    let w = rows.iter().map(|r| r.metric.len()).max().unwrap_or(0);
    let sw = STATS.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
    let mut s = String::new();
    let _ = writeln!(s, "{:sw$} {:w$}{base:>23}{new:>23}", "", "");
    for (name, f, always_lower) in STATS {
        for r in rows {
            if r.base.is_empty() || r.new.is_empty() {
                continue;
            }
            let (b, n) = (f(r.base), f(r.new));
            let hib = r.higher_is_better && !always_lower;
            // compare-mmtests.pl marks a significant difference on the Amean
            // row only, with stars for parentheses.
            let sig = name == "Amean" && super::mmtests::significant(r.base, r.new);
            let _ = writeln!(
                s,
                "{name:<sw$} {:<w$}{b:>12.2}{}{n:>12.2}{}",
                r.metric,
                super::mmtests::pct_cell(pct(b, b, hib), false),
                super::mmtests::pct_cell(pct(b, n, hib), sig)
            );
        }
    }
    s
}

/// Compare two runs: one table per experiment and variant present in both.
pub fn runs(old: &Report, new: &Report, old_label: &str, new_label: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{old_label}: {} ({}, {}, {} mode)", old.started, old.machine.cpu_model, old.command, old.mode);
    let _ = writeln!(s, "{new_label}: {} ({}, {}, {} mode)", new.started, new.machine.cpu_model, new.command, new.mode);
    for oe in &old.experiments {
        let Some(ne) = new.experiments.iter().find(|e| e.name == oe.name) else {
            let _ = writeln!(s, "\n{}: only in {old_label}", oe.name);
            continue;
        };
        let mut variants: Vec<&str> = Vec::new();
        for f in &oe.figures {
            if !variants.contains(&f.variant.as_str()) {
                variants.push(&f.variant);
            }
        }
        for v in variants {
            let rows: Vec<Row> = oe
                .figures
                .iter()
                .filter(|f| f.variant == v)
                .filter_map(|of| {
                    let nf = ne.get(&of.metric, v)?;
                    let sam = |f: &'_ crate::harness::Figure| f.samples.is_empty();
                    Some(Row {
                        metric: &of.metric,
                        higher_is_better: of.higher_is_better,
                        base: if sam(of) { std::slice::from_ref(&of.value) } else { &of.samples },
                        new: if sam(nf) { std::slice::from_ref(&nf.value) } else { &nf.samples },
                    })
                })
                .collect();
            if rows.is_empty() {
                continue;
            }
            let mut u: Vec<&str> = oe.figures.iter().filter(|f| f.variant == v).map(|f| f.unit.as_str()).collect();
            u.sort_unstable();
            u.dedup();
            let _ = writeln!(s, "\n{} (variant {v}; {})", oe.name, u.join(", "));
            s.push_str(&table(old_label, new_label, &rows));
        }
    }
    for ne in &new.experiments {
        if !old.experiments.iter().any(|e| e.name == ne.name) {
            let _ = writeln!(s, "\n{}: only in {new_label}", ne.name);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmtests_percentages() {
        // The seed 5 thread: Min alloc-odr4-1 8539.00 ( 0.00%) 8762.00 ( -2.61%).
        assert!((pct(8539.0, 8762.0, false) - -2.61).abs() < 0.005);
        // Stddev 7.29 -> 90.78 printed as -1146.00% there (from unrounded values).
        assert!((pct(7.29, 90.78, false) - -1145.27).abs() < 0.01);
        assert!((pct(100.0, 105.6, true) - 5.6).abs() < 1e-9);
        let t = table(
            "no-monitor",
            "monitor",
            &[Row { metric: "alloc-odr4-1", higher_is_better: false, base: &[8539.0, 8564.0], new: &[8762.0, 9099.0] }],
        );
        assert!(t.contains("Min    alloc-odr4-1     8539.00 (   0.00%)     8762.00 (  -2.61%)"), "{t}");
        assert!(t.contains("Max    alloc-odr4-1     8564.00 (   0.00%)     9099.00 (  -6.25%)"), "{t}");
        assert_eq!(t.lines().count(), 5);
        // Equal values are 0 whatever the floating point says (not -0.00).
        let v = 6516.278134254907;
        assert_eq!(format!("{:.2}", pct(v, v, false)), "0.00");
        assert_eq!(format!("{:.2}", pct(v, v, true)), "0.00");
        let t = table("a", "b", &[Row { metric: "m", higher_is_better: true, base: &[v], new: &[v] }]);
        assert!(!t.contains("-0.00"), "{t}");
    }

    /// The Amean cell is starred exactly when the two runs' means are more
    /// than one unit apart, as compare-mmtests.pl stars it without R; other
    /// rows never are.
    #[test]
    fn significant_amean_differences_are_starred() {
        let far =
            [Row { metric: "m", higher_is_better: false, base: &[100.0, 101.0, 99.0], new: &[130.0, 131.0, 129.0] }];
        let t = table("a", "b", &far);
        let amean = t.lines().find(|l| l.starts_with("Amean")).expect("Amean row");
        assert!(amean.ends_with("* -30.00%*"), "{t}");
        assert!(amean.contains("(   0.00%)"), "the baseline column is never starred: {t}");
        for l in t.lines().skip(1).filter(|l| !l.starts_with("Amean")) {
            assert!(!l.contains('*'), "only the Amean row may be starred: {t}");
        }
        // The same means with wide spreads: starred all the same.
        let wide =
            [Row { metric: "m", higher_is_better: false, base: &[60.0, 140.0, 100.0], new: &[90.0, 170.0, 130.0] }];
        let t = table("a", "b", &wide);
        let amean = t.lines().find(|l| l.starts_with("Amean")).expect("Amean row");
        assert!(amean.ends_with("* -30.00%*"), "{t}");
        // Means within one unit, however tight the samples: parentheses.
        let near = [Row { metric: "m", higher_is_better: false, base: &[100.0, 100.0], new: &[100.9, 100.9] }];
        let t = table("a", "b", &near);
        assert!(!t.contains('*'), "{t}");
        // One sample a side: starred when more than one unit apart.
        let one = [Row { metric: "m", higher_is_better: false, base: &[100.0], new: &[130.0] }];
        assert!(table("a", "b", &one).contains("* -30.00%*"));
    }
}
