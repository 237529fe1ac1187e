//! A small SVG chart renderer: line charts and grouped bar charts, drawn as a
//! string with no fonts, scripts or links beyond the generic `sans-serif`.
//!
//! An experiment's [`Plot`] is first resolved against its figures into a
//! [`Chart`] (series of points, each with the median and the min..max of its
//! repeats), then drawn. Every point carries a whisker for its spread, so the
//! noise is on the plot as well as in the tables, and a `<title>` tooltip with
//! its exact value.
//!
//! Layout, in user units: a 720 x 340 canvas; the plot area from x = 72 to 560
//! and y = 34 to 292; the legend in the column to its right.

use super::html::esc;
use crate::harness::{stats, ExperimentResult, Figure, Plot, PlotKind};
use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 340.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 560.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 292.0;
const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

/// Where a point sits on the x axis.
#[derive(Clone, Debug, PartialEq)]
pub enum X {
    /// A numeric parameter (line charts).
    Num(f64),
    /// A category (bar charts).
    Cat(String),
}

/// One plotted value.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Position on x.
    pub x: X,
    /// Median.
    pub y: f64,
    /// Smallest repeat.
    pub lo: f64,
    /// Largest repeat.
    pub hi: f64,
}

/// One series of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Legend label.
    pub label: String,
    /// Points in x order.
    pub points: Vec<Point>,
}

/// A plot resolved against the figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// The plot's description.
    pub spec: Plot,
    /// Its series.
    pub lines: Vec<Line>,
}

fn point(f: &Figure, x: X) -> Point {
    let (lo, hi) =
        if f.samples.is_empty() { (f.value, f.value) } else { (stats::min(&f.samples), stats::max(&f.samples)) };
    Point { x, y: f.value, lo, hi }
}

fn param_num(f: &Figure, k: &str) -> Option<f64> {
    let v = f.params.get(k)?;
    v.as_f64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn param_label(f: &Figure, k: &str) -> Option<String> {
    let v = f.params.get(k)?;
    Some(v.as_str().map_or_else(|| v.to_string(), str::to_string))
}

/// Resolve the experiment's plot (or its default plot) against its figures.
pub fn chart(r: &ExperimentResult) -> Chart {
    let spec = r.plot.clone().unwrap_or_else(|| default_plot(r));
    let mut lines = Vec::new();
    for s in &spec.series {
        let mut points: Vec<Point> = r
            .figures
            .iter()
            .filter(|f| s.takes(f) && f.value.is_finite())
            .filter_map(|f| match spec.kind {
                PlotKind::Line => param_num(f, &spec.x).map(|x| point(f, X::Num(x))),
                PlotKind::Bar => Some(point(f, X::Cat(param_label(f, &spec.x).unwrap_or_else(|| f.metric.clone())))),
            })
            .collect();
        if spec.kind == PlotKind::Line {
            points.sort_by(|a, b| match (&a.x, &b.x) {
                (X::Num(a), X::Num(b)) => a.total_cmp(b),
                _ => std::cmp::Ordering::Equal,
            });
        }
        lines.push(Line { label: s.label.clone(), points });
    }
    Chart { spec, lines }
}

/// The plot of an experiment that declared none: its claims' metrics, old
/// against new; without claims, the figures sharing the first figure's unit.
pub fn default_plot(r: &ExperimentResult) -> Plot {
    let unit = r.figures.first().map_or("", |f| f.unit.as_str());
    let mut p = Plot::bar(&r.title, "", "metric", unit);
    if !r.claims.is_empty() {
        // One series per (variant, metric); the legend merges them by label.
        for c in &r.claims {
            for v in [&c.old, &c.new] {
                if !p.series.iter().any(|s| s.variant == *v && s.metric.as_deref() == Some(&c.metric)) {
                    p = p.series(v, v, Some(&c.metric));
                }
            }
        }
        return p;
    }
    let mut variants: Vec<&str> = Vec::new();
    for f in r.figures.iter().filter(|f| f.unit == unit).take(16) {
        if !variants.contains(&f.variant.as_str()) {
            variants.push(&f.variant);
        }
    }
    for v in variants {
        p = p.series(v, v, None);
    }
    p
}

/// Merge lines that share a label (a default plot's per-metric series).
fn merged(lines: &[Line]) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    for l in lines {
        match out.iter_mut().find(|o| o.label == l.label) {
            Some(o) => o.points.extend(l.points.iter().cloned()),
            None => out.push(l.clone()),
        }
    }
    out
}

/// A linear or log axis mapping values to pixels.
struct Axis {
    lo: f64,
    hi: f64,
    log: Option<f64>,
    from: f64,
    to: f64,
}

impl Axis {
    fn new(lo: f64, hi: f64, log: Option<f64>, from: f64, to: f64) -> Self {
        let (lo, hi) = match log {
            Some(b) => (lo.log(b), hi.log(b)),
            None => (lo, hi),
        };
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 0.5, hi + 0.5) };
        Self { lo, hi, log, from, to }
    }

    fn px(&self, v: f64) -> f64 {
        let v = match self.log {
            Some(b) => v.max(f64::MIN_POSITIVE).log(b),
            None => v,
        };
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }

    /// Tick values (in data units).
    fn ticks(&self) -> Vec<f64> {
        match self.log {
            Some(b) => {
                let (a, z) = (self.lo.floor() as i32, self.hi.ceil() as i32);
                let every = ((z - a) / 10 + 1).max(1);
                (a..=z).filter(|e| (e - a) % every == 0).map(|e| b.powi(e)).collect()
            }
            None => {
                let step = nice_step((self.hi - self.lo) / 5.0);
                let first = (self.lo / step).ceil() * step;
                (0..20).map(|i| first + i as f64 * step).take_while(|v| *v <= self.hi + step * 1e-9).collect()
            }
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 || raw.is_infinite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|s| *s >= raw).unwrap_or(10.0 * p)
}

/// A compact number: 1.5k, 2.3M, 0.25, 1e-6.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    let (x, suf) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if x == x.trunc() || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.001 {
        format!("{x:.3}")
    } else {
        format!("{x:.1e}")
    };
    let s = if s.contains('.') && !s.contains('e') { s.trim_end_matches('0').trim_end_matches('.').into() } else { s };
    format!("{s}{suf}")
}

/// The y axis over every point (log or linear as the plot asks), with its
/// grid lines and labels drawn into `s`.
fn y_axis(s: &mut String, spec: &Plot, all: &[&Point]) -> Axis {
    let (mut ylo, mut yhi) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in all {
        ylo = ylo.min(p.lo.min(p.y));
        yhi = yhi.max(p.hi.max(p.y));
    }
    let yaxis = if spec.log_y {
        let pos: Vec<f64> = all.iter().flat_map(|p| [p.lo, p.y]).filter(|v| *v > 0.0).collect();
        let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
        let lo = if lo.is_finite() { lo } else { 1.0 };
        Axis::new(10f64.powf(lo.log10().floor()), 10f64.powf(yhi.max(lo).log10().ceil()), Some(10.0), BOTTOM, TOP)
    } else {
        let lo = ylo.min(0.0);
        let hi = if yhi > lo { yhi * 1.05 } else { lo + 1.0 };
        let step = nice_step((hi - lo) / 5.0);
        Axis::new((lo / step).floor() * step, (hi / step).ceil() * step, None, BOTTOM, TOP)
    };
    for t in yaxis.ticks() {
        let y = yaxis.px(t);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT - 6.0,
            y + 4.0,
            esc(&compact(t))
        );
    }
    yaxis
}

/// The plot's frame, axis labels and legend.
fn frame_and_legend(s: &mut String, spec: &Plot, lines: &[Line]) {
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#555"/>"##,
        RIGHT - LEFT,
        BOTTOM - TOP
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (LEFT + RIGHT) / 2.0,
        H - 10.0,
        esc(&spec.x_label)
    );
    let _ = write!(
        s,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (TOP + BOTTOM) / 2.0,
        esc(&spec.y_label)
    );
    // Legend.
    for (i, l) in lines.iter().enumerate() {
        let y = TOP + 8.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            RIGHT + 14.0,
            y - 9.0,
            COLOURS[i % COLOURS.len()],
            RIGHT + 32.0,
            y + 1.0,
            esc(&l.label)
        );
    }
}

/// Draw the chart as one `<svg>` element.
pub fn draw(c: &Chart) -> String {
    let spec = &c.spec;
    let lines = merged(&c.lines);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" style="max-width: 100%; height: auto" role="img" aria-label="{}" font-family="sans-serif" font-size="11">"#,
        esc(&spec.title)
    );
    let _ = write!(s, r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(s, r#"<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{}</text>"#, esc(&spec.title));
    let all: Vec<&Point> = lines.iter().flat_map(|l| l.points.iter()).collect();
    if all.is_empty() {
        let _ = write!(
            s,
            r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#999"/><text x="{}" y="{}" text-anchor="middle" fill="#666">no data</text></svg>"##,
            RIGHT - LEFT,
            BOTTOM - TOP,
            (LEFT + RIGHT) / 2.0,
            (TOP + BOTTOM) / 2.0
        );
        return s;
    }
    let yaxis = y_axis(&mut s, spec, &all);
    // x axis and the marks.
    match spec.kind {
        PlotKind::Line => draw_lines(&mut s, spec, &lines, &all, &yaxis),
        PlotKind::Bar => draw_bars(&mut s, &lines, &yaxis),
    }
    frame_and_legend(&mut s, spec, &lines);
    s.push_str("</svg>");
    s
}

fn draw_lines(s: &mut String, spec: &Plot, lines: &[Line], all: &[&Point], yaxis: &Axis) {
    let xs: Vec<f64> = all.iter().filter_map(|p| if let X::Num(x) = p.x { Some(x) } else { None }).collect();
    let (mut lo, mut hi) = (stats::min(&xs), stats::max(&xs));
    let log = spec.log_x && lo > 0.0;
    if log {
        lo = 2f64.powf(lo.log2().floor());
        hi = 2f64.powf(hi.log2().ceil());
    }
    let xaxis = Axis::new(lo, hi, log.then_some(2.0), LEFT + 12.0, RIGHT - 12.0);
    // Integer parameters (threads, orders) get integer ticks only.
    let integral = xs.iter().all(|x| x.fract() == 0.0);
    for t in xaxis.ticks().into_iter().filter(|t| !integral || t.fract() == 0.0) {
        let x = xaxis.px(t);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{BOTTOM}" x2="{x:.1}" y2="{:.1}" stroke="#555"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            BOTTOM + 4.0,
            BOTTOM + 16.0,
            esc(&compact(t))
        );
    }
    for (i, l) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<(f64, &Point)> =
            l.points.iter().filter_map(|p| if let X::Num(x) = p.x { Some((x, p)) } else { None }).collect();
        let path: Vec<String> = pts.iter().map(|(x, p)| format!("{:.1},{:.1}", xaxis.px(*x), yaxis.px(p.y))).collect();
        let _ = write!(s, r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#, path.join(" "));
        for (x, p) in pts {
            let px = xaxis.px(x);
            whisker(s, px, p, yaxis, colour);
            let _ = write!(
                s,
                r#"<circle cx="{px:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {} = {}, median {} (min {}, max {})</title></circle>"#,
                yaxis.px(p.y),
                esc(&l.label),
                esc(&spec.x),
                compact(x),
                compact(p.y),
                compact(p.lo),
                compact(p.hi)
            );
        }
    }
}

fn draw_bars(s: &mut String, lines: &[Line], yaxis: &Axis) {
    let mut cats: Vec<String> = Vec::new();
    for l in lines {
        for p in &l.points {
            if let X::Cat(c) = &p.x {
                if !cats.contains(c) {
                    cats.push(c.clone());
                }
            }
        }
    }
    if cats.iter().all(|c| c.parse::<f64>().is_ok()) {
        cats.sort_by(|a, b| a.parse::<f64>().unwrap_or(0.0).total_cmp(&b.parse::<f64>().unwrap_or(0.0)));
    }
    let slot = (RIGHT - LEFT) / cats.len().max(1) as f64;
    let bw = (slot * 0.8 / lines.len().max(1) as f64).min(80.0);
    let pad = (slot - bw * lines.len() as f64) / 2.0;
    let base = yaxis.px(if yaxis.log.is_some() { 10f64.powf(yaxis.lo) } else { 0f64.max(yaxis.lo) });
    for (ci, c) in cats.iter().enumerate() {
        let cx = LEFT + slot * (ci as f64 + 0.5);
        let label: String =
            if c.chars().count() > 18 { c.chars().take(17).chain(['…']).collect() } else { c.clone() };
        let _ = write!(
            s,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}<title>{}</title></text>"#,
            BOTTOM + 16.0,
            esc(&label),
            esc(c)
        );
        for (i, l) in lines.iter().enumerate() {
            let Some(p) = l.points.iter().find(|p| p.x == X::Cat(c.clone())) else { continue };
            let colour = COLOURS[i % COLOURS.len()];
            let x = LEFT + slot * ci as f64 + pad + bw * i as f64;
            let y = yaxis.px(p.y);
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.85"><title>{} {}: median {} (min {}, max {})</title></rect>"#,
                y.min(base),
                bw * 0.92,
                (base - y).abs(),
                esc(&l.label),
                esc(c),
                compact(p.y),
                compact(p.lo),
                compact(p.hi)
            );
            whisker(s, x + bw * 0.46, p, yaxis, "#222");
        }
    }
}

/// The min..max whisker of a point's repeats.
fn whisker(s: &mut String, x: f64, p: &Point, yaxis: &Axis, colour: &str) {
    if p.hi > p.lo {
        let (y0, y1) = (yaxis.px(p.lo), yaxis.px(p.hi));
        let _ = write!(
            s,
            r#"<path d="M{:.1} {y0:.1}H{:.1}M{x:.1} {y0:.1}V{y1:.1}M{:.1} {y1:.1}H{:.1}" stroke="{colour}" fill="none"/>"#,
            x - 3.0,
            x + 3.0,
            x - 3.0,
            x + 3.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_and_numbers() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(17.0), 20.0);
        assert_eq!(nice_step(420.0), 500.0);
        assert_eq!(compact(1500.0), "1500");
        assert_eq!(compact(15000.0), "15k");
        assert_eq!(compact(9_536_374.0), "9.5M");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(128.0), "128");
    }

    #[test]
    fn log_axis_ticks_are_powers() {
        let a = Axis::new(1.0, 128.0, Some(2.0), 0.0, 100.0);
        assert_eq!(a.ticks(), vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]);
        assert!((a.px(128.0) - 100.0).abs() < 1e-9);
    }
}
