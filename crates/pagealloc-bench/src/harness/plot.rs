//! What an experiment asks the report to plot.
//!
//! An experiment does not draw anything: it names, in a [`Plot`], which of its
//! figures form which series and what goes on the axes, and the report
//! (`crate::report::svg`) draws one inline SVG chart from that.
//!
//! Two kinds of chart:
//! - [`PlotKind::Line`]: x is a numeric parameter of the figures
//!   (`Figure::params[x]`, e.g. `bulk`, `threads`, `batch`), one line per series.
//!   With `log_x` the x axis is in powers of two (bulk and batch sizes).
//! - [`PlotKind::Bar`]: grouped bars; each figure a series selects is one bar,
//!   grouped by its category (the x parameter when the figure has it, else its
//!   metric name), coloured by series. Good for "fresh vs fragmented".
//!
//! A series selects figures by variant and, optionally, by metric: an exact
//! metric name, or a pattern with one `*` (`alloc-odr4-*`, `pair-order*-hot`).
//!
//! ```ignore
//! r.plot = Some(
//!     Plot::line("Per-element cost against bulk size", "bulk", "bulk size (pages)", "cycles per page")
//!         .log_x()
//!         .series("list (old)", "old", Some("bulk-*"))
//!         .series("array (new)", "new", Some("bulk-*")),
//! );
//! ```
//!
//! An experiment that declares no plot gets a bar chart of its claims' metrics,
//! old against new (or, without claims, of its first figures).

use super::Figure;
use serde::{Deserialize, Serialize};

/// Line or grouped-bar chart.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum PlotKind {
    /// y against a numeric x parameter, one line per series.
    #[default]
    Line,
    /// Grouped bars, one group per category, one bar per series.
    Bar,
}

/// One series: the figures of one variant (and optionally one metric family).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// `Figure::variant` to take.
    pub variant: String,
    /// `Figure::metric` to take: exact, or a pattern with one `*`; `None` takes all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

impl Series {
    /// Whether this series takes the figure.
    pub fn takes(&self, f: &Figure) -> bool {
        if f.variant != self.variant {
            return false;
        }
        match &self.metric {
            None => true,
            Some(m) => match m.split_once('*') {
                Some((pre, suf)) => {
                    f.metric.len() >= pre.len() + suf.len() && f.metric.starts_with(pre) && f.metric.ends_with(suf)
                }
                None => f.metric == *m,
            },
        }
    }
}

/// The plot an experiment asks for.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Plot {
    /// Chart title.
    pub title: String,
    /// Line or bar.
    pub kind: PlotKind,
    /// The figure parameter that gives x (line charts; bar categories when present).
    #[serde(default)]
    pub x: String,
    /// x axis label.
    pub x_label: String,
    /// y axis label (put the unit in it).
    pub y_label: String,
    /// x axis in powers of two.
    #[serde(default)]
    pub log_x: bool,
    /// y axis in powers of ten (values spanning decades, e.g. us against ms).
    #[serde(default)]
    pub log_y: bool,
    /// The series, in legend order.
    pub series: Vec<Series>,
}

#[allow(dead_code)] // the builder is for experiments; not every one uses every method
impl Plot {
    /// A line chart of y against figure parameter `x`.
    pub fn line(title: &str, x: &str, x_label: &str, y_label: &str) -> Self {
        Self {
            title: title.into(),
            kind: PlotKind::Line,
            x: x.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            series: Vec::new(),
        }
    }

    /// A grouped bar chart (categories: figure parameter `x` if present, else metric names).
    pub fn bar(title: &str, x: &str, x_label: &str, y_label: &str) -> Self {
        Self { kind: PlotKind::Bar, ..Self::line(title, x, x_label, y_label) }
    }

    /// Put x on a log2 axis.
    pub fn log_x(mut self) -> Self {
        self.log_x = true;
        self
    }

    /// Put y on a log10 axis.
    pub fn log_y(mut self) -> Self {
        self.log_y = true;
        self
    }

    /// Add a series: figures of `variant`, optionally only `metric` (exact, or a pattern with one `*`).
    pub fn series(mut self, label: &str, variant: &str, metric: Option<&str>) -> Self {
        self.series.push(Series { label: label.into(), variant: variant.into(), metric: metric.map(Into::into) });
        self
    }
}
