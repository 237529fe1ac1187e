//! mmtests' pagealloc report, re-implemented: what `compare-mmtests.pl -b
//! pagealloc` prints for a set of `pagealloc.log` files.
//!
//! mmtests is GPL, so nothing of it is copied here; this module follows the
//! behaviour of github.com/gormanm/mmtests at commit
//! 74aced35950fe732f0ca559398b5127e8b18c126 (the last one with the benchmark:
//! the next, beeaeb89, "pagealloc: Remove bit-rotted benchmark", dropped it):
//! `shellpack_src/src/pagealloc/pagealloc-bench` and
//! `stap-scripts/pagealloc-micro.stp` (the log), `bin/lib/MMTests/
//! ExtractPagealloc.pm` (reading it), `SummariseMultiops.pm`, `Summarise.pm` and
//! `Stat.pm` (the statistics), `Compare.pm` and `PrintGeneric.pm` (the table).
//!
//! - **Log.** One line per outer round, `order %2u batch %6lu alloc %llu free
//!   %llu`; the bench script also writes `alloc-<order>` and `free-<order>`
//!   (`<batch> <value>` lines), whose names tell the report which orders ran.
//! - **Extraction.** Each line is split on whitespace (fields 2, 4, 6 and 8 are
//!   order, batch, alloc and free). The first two lines of each batch size are
//!   warm-up and dropped, counted per batch size across all orders (so with
//!   several orders only the first order loses them). Operations
//!   `alloc-odr<o>-<b>`, `free-odr<o>-<b>` and `total-odr<o>-<b>` (alloc +
//!   free), by operation, then order (the file names' orders sorted as
//!   strings), then batch in order of first appearance.
//! - **Statistics** per operation, on the samples sorted ascending (lower is
//!   better): Min, Amean, Stddev (n - 1; none for one sample), CoeffVar (100
//!   times Stddev over Amean), Max, BAmean-50, BAmean-95, BAmean-99 (the mean of
//!   the best, here lowest, 50, 95, 99% of the samples, at least one). A
//!   statistic that is NaN is left out of its row, as mmtests' `_FilterNaN`
//!   does.
//! - **Comparison**, each run against the first: `pndiff`: 0 when the values
//!   are equal (the baseline column is always `0.00%`), 100 when the new value
//!   is 0, -99 when the base is 0, else `100 - new * 100 / base`.
//! - **Significance**, on the Amean row. `Stat.pm`'s `_calc_meanci` asks R
//!   for the half-width of each run's mean interval (`qnorm(1 - alpha/2,
//!   sd = Stddev)`, piped to `R --slave`) and `Compare.pm` stars a value when
//!   `cidiff` (the difference of the means over the intervals' spans toward
//!   each other) is beyond ±1. Without R on the machine (as here, and on the
//!   machines this bench is meant for) the shell's answer is empty, Perl reads
//!   it as 0, every interval shrinks to its mean, the span sum is 0 and
//!   `cidiff` returns the plain difference of the means: a value is starred
//!   exactly when its Amean differs from the baseline's by more than 1 (one
//!   cycle here), one sample or many. That is the rule implemented
//!   ([`significant`]); it is the script's, not a statistic, and the seed
//!   verdicts do not use it (`super::verdict`).
//! - **Table.** Two header rows, each run's name split at its first `-` (the
//!   part before on the first row, after on the second), right-aligned in
//!   `12 + 7 + 4` columns after `stat width + operation width + 1` spaces; then
//!   one row per statistic and operation (statistics outermost):
//!   `%-9s %-<ops>s` and per run `%12.2f (%7.2f%%)`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One `pagealloc.log` line, as the systemtap module prints it.
pub fn log_line(order: u32, batch: u64, alloc: u64, free: u64) -> String {
    format!("order {order:2} batch {batch:6} alloc {alloc} free {free}")
}

/// The bench script's `alloc-<order>` and `free-<order>` files from a log:
/// (file name, content) for each order in the log.
pub fn split_files(log: &str) -> Vec<(String, String)> {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for l in log.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let _ = writeln!(files.entry(format!("alloc-{}", f[1])).or_default(), "{} {}", f[3], f[5]);
        let _ = writeln!(files.entry(format!("free-{}", f[1])).or_default(), "{} {}", f[3], f[7]);
    }
    files.into_iter().collect()
}

/// One run's extracted samples: operations in report order and each one's samples.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extract {
    /// Operation names in report order.
    pub ops: Vec<String>,
    /// Samples per operation.
    pub samples: BTreeMap<String, Vec<f64>>,
}

/// ExtractPagealloc's reading of a `pagealloc.log`.
pub fn extract(log: &str) -> Extract {
    let mut orders: Vec<String> = Vec::new();
    let mut batches: Vec<String> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut x = Extract::default();
    for l in log.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (order, batch) = (f[1].to_string(), f[3].to_string());
        let (a, fr): (f64, f64) = (f[5].parse().unwrap_or(f64::NAN), f[7].parse().unwrap_or(f64::NAN));
        if !orders.contains(&order) {
            orders.push(order.clone());
        }
        let n = seen.entry(batch.clone()).or_default();
        *n += 1;
        if *n == 1 {
            batches.push(batch.clone());
        }
        if *n >= 3 {
            for (op, v) in [("alloc", a), ("free", fr), ("total", a + fr)] {
                x.samples.entry(format!("{op}-odr{order}-{batch}")).or_default().push(v);
            }
        }
    }
    orders.sort();
    for op in ["alloc", "free", "total"] {
        for o in &orders {
            for b in &batches {
                x.ops.push(format!("{op}-odr{o}-{b}"));
            }
        }
    }
    x
}

/// The statistics' names, in row order.
pub const STATS: [&str; 8] = ["Min", "Amean", "Stddev", "CoeffVar", "Max", "BAmean-50", "BAmean-95", "BAmean-99"];
/// The row whose comparison carries the significance mark (Amean).
const SIG_ROW: usize = 1;

fn amean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut sum = 0.0;
    for x in v {
        sum += x;
    }
    sum / v.len() as f64
}

fn stddev(v: &[f64]) -> f64 {
    let m = amean(v);
    if m.is_nan() || v.len() <= 1 {
        return f64::NAN;
    }
    let mut d = 0.0;
    for x in v {
        d += (x - m).powi(2);
    }
    (d / (v.len() - 1) as f64).sqrt()
}

/// Mean of the lowest `pct`% of the ascending `v` (at least one sample).
fn bamean(v: &[f64], pct: usize) -> f64 {
    let n = (v.len() * pct / 100).max(1).min(v.len());
    amean(&v[..n])
}

/// One operation's statistics as mmtests keeps them: in [`STATS`] order with
/// NaN ones left out.
fn summarise(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let (mean, sd) = (amean(&v), stddev(&v));
    let cv = {
        let (s, m) = (if sd.is_nan() { 0.0 } else { sd }, if mean.is_nan() { 0.0 } else { mean });
        if m != 0.0 {
            s * 100.0 / m
        } else {
            0.0
        }
    };
    let first = v.first().copied().unwrap_or(f64::NAN);
    let last = v.last().copied().unwrap_or(f64::NAN);
    let all = [first, mean, sd, cv, last, bamean(&v, 50), bamean(&v, 95), bamean(&v, 99)];
    all.into_iter().filter(|x| !x.is_nan()).collect()
}

/// Stat.pm's `pndiff(new, base)` (lower is better).
pub fn pndiff(new: f64, base: f64) -> f64 {
    if new == base {
        0.0
    } else if new == 0.0 {
        100.0
    } else if base == 0.0 {
        -99.0
    } else {
        100.0 - new * 100.0 / base
    }
}

/// Whether compare-mmtests.pl, run without R, stars the Amean comparison
/// of `new` against `base` (both runs' samples): the two Ameans differ by
/// more than 1 (the module doc says why). An operation without samples has
/// no Amean and is never starred.
pub fn significant(base: &[f64], new: &[f64]) -> bool {
    means_apart(amean(base), amean(new))
}

/// The starring rule on two Ameans (NaN: no samples, never starred).
fn means_apart(base: f64, new: f64) -> bool {
    !base.is_nan() && !new.is_nan() && (base - new).abs() > 1.0
}

/// One comparison cell as Compare.pm prints it: ` (%7.2f%)`, or with the
/// parentheses replaced by stars, ` *%7.2f%*`, when the difference is
/// significant (see [`significant`]).
pub fn pct_cell(pct: f64, significant: bool) -> String {
    let (open, close) = if significant { ('*', '*') } else { ('(', ')') };
    format!(" {open}{}%{close}", perl_f(pct, 7))
}

/// Perl's `sprintf("%W.2f", x)`: NaN and infinities as `NaN`, `Inf`, `-Inf`.
fn perl_f(x: f64, width: usize) -> String {
    if x.is_nan() {
        format!("{:>width$}", "NaN")
    } else if x.is_infinite() {
        format!("{:>width$}", if x > 0.0 { "Inf" } else { "-Inf" })
    } else {
        format!("{x:>width$.2}")
    }
}

/// Compare.pm's two header rows: after `indent` spaces, each run's name
/// split at its first '-' (the part before on the first row, after on the
/// second), right-aligned in `width` columns; without a '-', the first row
/// loses the name's last character, as `substr($name, 0, -1)` does.
pub fn header_rows(names: &[&str], indent: usize, width: usize) -> String {
    let mut s = String::new();
    for row in 0..2 {
        s.push_str(&" ".repeat(indent));
        for name in names {
            let part = match name.find('-') {
                Some(i) if row == 0 => &name[..i],
                Some(i) => &name[i + 1..],
                None if row == 0 => &name[..name.len().saturating_sub(1)],
                None => name,
            };
            let _ = write!(s, "{part:>width$}");
        }
        s.push('\n');
    }
    s
}

/// What `compare-mmtests.pl -b pagealloc -n <names>` prints for the runs
/// `(name, pagealloc.log)`, the first being the baseline.
pub fn compare(runs: &[(&str, &str)]) -> String {
    let ex: Vec<Extract> = runs.iter().map(|(_, log)| extract(log)).collect();
    let Some(base) = ex.first() else { return String::new() };
    let ops = &base.ops;
    type Summary = BTreeMap<String, Vec<f64>>;
    let sums: Vec<Summary> = ex
        .iter()
        .map(|e| e.ops.iter().map(|op| (op.clone(), summarise(e.samples.get(op).map_or(&[][..], |v| v)))).collect())
        .collect();
    let (field, cmp) = (12usize, 7usize);
    let stat_w = STATS.iter().map(|s| s.len()).max().unwrap_or(0);
    let op_w = ops.iter().map(|o| o.len()).max().unwrap_or(0);
    let names: Vec<&str> = runs.iter().map(|(n, _)| *n).collect();
    let mut s = header_rows(&names, stat_w + op_w + 1, field + cmp + 4);
    for (si, stat) in STATS.iter().enumerate() {
        for op in ops {
            let _ = write!(s, "{stat:<stat_w$} {op:<op_w$}");
            let bsum = &sums[0][op];
            let b = bsum.get(si).copied();
            for (m, sum) in sums.iter().enumerate() {
                let msum = sum.get(op).cloned().unwrap_or_default();
                let (v, pct) = match (msum.get(si).copied(), b) {
                    (Some(v), Some(b)) if v != -1.0 && b != -1.0 => (v, pndiff(v, b)),
                    _ => (0.0, 0.0),
                };
                let sig = si == SIG_ROW
                    && m > 0
                    && means_apart(
                        bsum.get(SIG_ROW).copied().unwrap_or(f64::NAN),
                        msum.get(SIG_ROW).copied().unwrap_or(f64::NAN),
                    );
                let _ = write!(s, "{}{}", perl_f(v, field), pct_cell(pct, sig));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log as the bench script writes it: 15 rounds of each batch.
    fn log(order: u32, batches: &[u64], f: impl Fn(u64, usize) -> (u64, u64)) -> String {
        let mut s = String::new();
        for &b in batches {
            for i in 0..15 {
                let (a, fr) = f(b, i);
                s.push_str(&log_line(order, b, a, fr));
                s.push('\n');
            }
        }
        s
    }

    #[test]
    fn log_lines_are_the_systemtap_modules() {
        assert_eq!(log_line(4, 1, 8539, 7000), "order  4 batch      1 alloc 8539 free 7000");
        assert_eq!(log_line(10, 1024, 1, 2), "order 10 batch   1024 alloc 1 free 2");
        let l = log(4, &[1, 2], |b, i| (100 * b + i as u64, 50));
        assert_eq!(split_files(&l)[0].0, "alloc-4");
        assert!(split_files(&l)[1].1.starts_with("1 50\n"));
    }

    #[test]
    fn extraction_drops_two_warm_up_rounds_per_batch_and_adds_totals() {
        let l = log(4, &[1, 2], |b, i| (100 * b + i as u64, 50));
        let x = extract(&l);
        assert_eq!(
            x.ops,
            ["alloc-odr4-1", "alloc-odr4-2", "free-odr4-1", "free-odr4-2", "total-odr4-1", "total-odr4-2"]
        );
        assert_eq!(x.samples["alloc-odr4-1"], (2..15).map(|i| 100.0 + i as f64).collect::<Vec<_>>());
        assert_eq!(x.samples["total-odr4-2"][0], 252.0);
    }

    #[test]
    fn baseline_column_is_zero_and_never_negative_zero() {
        // A base for which x*100/x is not exactly 100 in floating point: 100
        // minus it is -1.4e-14, which "{:.2}" prints as -0.00 (the old tables'
        // baseline column); mmtests compares equal values as 0.
        let v = 6516.278134254907;
        assert_eq!(format!("{:.2}", 100.0 - v * 100.0 / v), "-0.00");
        assert_eq!(format!("{:.2}", pndiff(v, v)), "0.00");
        let l = log(4, &[1, 2, 1024], |b, i| (8539 + 37 * b + (i as u64 * 7919) % 13, 3 * b + i as u64 % 5));
        let t = compare(&[("old-none", &l), ("old-monitor10ms", &l)]);
        assert!(!t.contains("-0.00%"), "{t}");
        for row in t.lines().skip(2) {
            assert!(row.contains(" (   0.00%)"), "{row}");
        }
    }

    #[test]
    fn table_shape_follows_compare_pm() {
        let base = log(4, &[1], |_, i| ([8539, 8564, 8550][i % 3], 100));
        let new = log(4, &[1], |_, i| ([8762, 9099, 8800][i % 3], 100));
        let t = compare(&[("old-none", &base), ("old-monitor", &new)]);
        let lines: Vec<&str> = t.lines().collect();
        // 2 header rows, 8 statistics x 3 operations.
        assert_eq!(lines.len(), 2 + 8 * 3);
        // What compare-mmtests.pl printed for these two logs (mmtests 74aced35,
        // perl 5.36), in part.
        assert_eq!(lines[0], format!("{:22}{:>23}{:>23}", "", "old", "old"));
        assert_eq!(lines[1], format!("{:22}{:>23}{:>23}", "", "none", "monitor"));
        assert_eq!(lines[2], "Min       alloc-odr4-1     8539.00 (   0.00%)     8762.00 (  -2.61%)");
        assert_eq!(lines[5], "Amean     alloc-odr4-1     8550.92 (   0.00%)     8880.31 *  -3.85%*");
        // Equal values compare as 0.
        assert_eq!(lines[6], "Amean     free-odr4-1       100.00 (   0.00%)      100.00 (   0.00%)");
        assert_eq!(lines[8], "Stddev    alloc-odr4-1       10.23 (   0.00%)      152.63 (-1391.31%)");
        assert_eq!(lines[13], "CoeffVar  total-odr4-1        0.12 (   0.00%)        1.70 (-1336.61%)");
        assert_eq!(lines[20], "BAmean-95 alloc-odr4-1     8549.83 (   0.00%)     8862.08 (  -3.65%)");
        assert_eq!(pndiff(0.0, 5.0), 100.0);
        assert_eq!(pndiff(5.0, 0.0), -99.0);
    }
}
