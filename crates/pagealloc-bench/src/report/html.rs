//! `index.html`: the whole run on one self-contained page.
//!
//! The page is XHTML-compatible (every element closed, only the five XML
//! entities, attributes quoted) so an XML parser can check it, and it loads
//! nothing: no scripts, no fonts, no stylesheets or images from anywhere; the
//! plots are inline SVG and the only links are relative ones to the raw files
//! beside it.
//!
//! Order of the page: header (machine, command line, mode, busy warning), the
//! verdict table, then one section per seed (its claim as quoted from the
//! thread, our measurements with old, new, ratio, change, noise and the
//! verdict, then its experiments, each with one plot), then the experiments
//! that test no seed.

use super::seeds::{self, Seed};
use super::svg;
use super::verdict::{ClaimVerdict, Verdict};
use super::Report;
use crate::harness::ExperimentResult;
use std::fmt::Write;

/// Escape text for HTML and XML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A value for a table: a few significant digits.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 100.0 || (v == v.trunc() && v.abs() < 1e15) {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// A signed percentage.
pub fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:+.1}%", v * 100.0)
    } else {
        "–".into()
    }
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.machine th { background: #f4f4f4; }
code { background: #f4f4f4; padding: 0.1em 0.3em; }
blockquote { border-left: 4px solid #bbb; margin: 0.5em 0; padding: 0.2em 1em; color: #444; }
.verdict { display: inline-block; white-space: nowrap; padding: 0.15em 0.6em; border-radius: 0.3em; font-weight: bold; }
.v-yes { background: #d6f5d6; color: #145214; }
.v-no { background: #f8d4d4; color: #7a1414; }
.v-noise { background: #fff0c2; color: #6b5200; }
.v-none { background: #e8e8e8; color: #555; }
.warn { background: #fff0c2; padding: 0.4em 0.8em; border-left: 4px solid #e0a800; }
.experiment { margin: 1em 0 2em 0; }
figure { margin: 0.5em 0; }
figcaption { color: #666; font-size: 0.9em; }
.met { color: #145214; }
.missed { color: #7a1414; }
.unmeasurable { color: #5a5a5a; }
.small { color: #666; font-size: 0.9em; }
";

/// Render the page.
pub fn page(r: &Report) -> String {
    let mut s = String::with_capacity(64 * 1024);
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>");
    let _ = write!(s, "<title>pagealloc bench: {}</title><style>{STYLE}</style></head>\n<body>\n", esc(&r.started));
    header(&mut s, r);
    summary(&mut s, r);
    for seed in &seeds::SEEDS {
        seed_section(&mut s, r, seed);
    }
    let others: Vec<&ExperimentResult> =
        r.experiments.iter().filter(|e| !matches!(e.seed, Some(n) if seeds::seed(n).is_some())).collect();
    if !others.is_empty() {
        s.push_str("<section id=\"other\"><h2>Other experiments</h2>\n");
        for e in others {
            experiment(&mut s, e);
        }
        s.push_str("</section>\n");
    }
    let _ = writeln!(
        s,
        "<footer><p class=\"small\">Every figure is the median of its repeats; \
         spread is (max &#8722; min) / median. A difference counts only when it exceeds the larger \
         spread of the two figures compared. Machine-readable: <a href=\"results.json\">results.json</a> \
         (schema {} version {}, <a href=\"results.schema.json\">results.schema.json</a>).</p></footer>",
        esc(&r.schema),
        r.version
    );
    s.push_str("</body></html>\n");
    s
}

fn header(s: &mut String, r: &Report) {
    let m = &r.machine;
    s.push_str("<header><h1>pagealloc bench</h1>\n<table class=\"machine\">");
    let rows = [
        ("CPU", esc(&m.cpu_model)),
        ("Cores", m.cores.to_string()),
        ("Kernel", esc(&m.kernel)),
        ("TSC", format!("{:.3} GHz", m.tsc_ghz)),
        ("Load at start", format!("{:.2} {:.2} {:.2}", m.loadavg[0], m.loadavg[1], m.loadavg[2])),
        ("Mode", format!("{} ({} repeats per measurement)", esc(&r.mode), r.repeats)),
        ("Started", format!("{}, ran {:.0} s", esc(&r.started), r.duration_s)),
        ("Command", format!("<code>{}</code>", esc(&r.command))),
    ];
    for (k, v) in rows {
        let _ = write!(s, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    s.push_str("</table>\n");
    if let Some(w) = m.busy_warning() {
        let _ = writeln!(s, "<p class=\"warn\">{}</p>", esc(&w));
    }
    s.push_str("</header>\n");
}

fn summary(s: &mut String, r: &Report) {
    s.push_str("<section id=\"summary\"><h2>Seeds at a glance</h2>\n<table><tr><th>Seed</th><th>Change</th>");
    s.push_str("<th>The thread claimed</th><th>We measured</th><th>Verdict</th></tr>\n");
    for seed in &seeds::SEEDS {
        let v = r.seeds.iter().find(|v| v.seed == seed.n).map_or(Verdict::NotRun, |v| v.verdict);
        let ours: Vec<String> = r.claims.iter().filter(|c| c.seed == seed.n).map(measured_short).collect();
        let ours = if ours.is_empty() { "–".to_string() } else { ours.join("<br/>") };
        let _ = writeln!(
            s,
            "<tr><td><a href=\"#seed-{n}\">{n}</a></td><td>{}</td><td>{}</td><td>{ours}</td>\
             <td><span class=\"verdict {}\">{}</span></td></tr>",
            esc(seed.title),
            esc(seed.claim),
            v.class(),
            v.words(),
            n = seed.n
        );
    }
    s.push_str("</table></section>\n");
}

/// "bulk-128: 189 -> 94 cycles (+50.3%, noise ±2.0%)".
fn measured_short(c: &ClaimVerdict) -> String {
    match (c.old, c.new, c.change, c.noise) {
        (Some(o), Some(n), Some(ch), Some(no)) => format!(
            "{}: {} &#8594; {} {} ({}, 95% interval {}, noise &#177;{:.1}%)",
            esc(&c.metric),
            num(o),
            num(n),
            esc(&c.unit),
            pct(ch),
            super::interval_words(c),
            no * 100.0
        ),
        _ => format!("{}: not run", esc(&c.metric)),
    }
}

fn seed_section(s: &mut String, r: &Report, seed: &Seed) {
    let v = r.seeds.iter().find(|v| v.seed == seed.n).map_or(Verdict::NotRun, |v| v.verdict);
    let _ = writeln!(
        s,
        "<section class=\"seed\" id=\"seed-{n}\"><h2>Seed {n}: {}</h2>\n\
         <p>Verdict: <span class=\"verdict {}\" data-seed-verdict=\"{n}\">{}</span></p>",
        esc(seed.title),
        v.class(),
        v.words(),
        n = seed.n
    );
    let _ = writeln!(
        s,
        "<blockquote><p>{}</p><p class=\"small\">{}; tested by {}.</p></blockquote>",
        esc(seed.claim),
        esc(seed.thread),
        seed.experiments.iter().map(|e| format!("<code>{}</code>", esc(e))).collect::<Vec<_>>().join(", ")
    );
    s.push_str("<table class=\"quoted\"><tr><th>The thread's figures</th><th>Before</th><th>After</th><th>Unit</th><th>Change</th></tr>\n");
    for q in seed.figures {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            esc(q.what),
            num(q.old),
            num(q.new),
            esc(q.unit),
            pct(q.change())
        );
    }
    s.push_str("</table>\n");
    let claims: Vec<&ClaimVerdict> = r.claims.iter().filter(|c| c.seed == seed.n).collect();
    s.push_str("<h3>What we measured</h3>\n");
    if claims.is_empty() {
        let _ = writeln!(s, "<p>No experiment in this run reported on this seed.</p>");
    } else {
        s.push_str(
            "<table class=\"claims\"><tr><th>Claim</th><th>Experiment</th><th>Metric</th><th>Old (A)</th>\
             <th>New (B)</th><th>New / old</th><th>Change</th><th>95% interval</th><th>Verdict</th></tr>\n",
        );
        for c in claims {
            claim_row(s, c);
        }
        s.push_str(
            "</table>\n<p class=\"small\">Old and new: median of the repeats and their spread. \
                    Change: positive when the new design is better. Interval: the change's 95% bootstrap interval \
                    (reproduced when it lies above 0, not reproduced below, inconclusive when it contains 0); \
                    noise: the larger spread of the two.</p>\n",
        );
    }
    for e in r.experiments.iter().filter(|e| e.seed == Some(seed.n)) {
        experiment(s, e);
    }
    s.push_str("</section>\n");
}

/// One claim's row of a seed's table.
fn claim_row(s: &mut String, c: &ClaimVerdict) {
    let fig = |v: Option<f64>, sp: Option<f64>, var: &str| match (v, sp) {
        (Some(v), Some(sp)) => {
            format!(
                "{} {} <span class=\"small\">(spread {:.1}%, {})</span>",
                num(v),
                esc(&c.unit),
                sp * 100.0,
                esc(var)
            )
        }
        _ => format!("– <span class=\"small\">({})</span>", esc(var)),
    };
    let interval = format!(
        "{} (noise {})",
        super::interval_words(c),
        c.noise.map_or("–".into(), |x| format!("&#177;{:.1}%", x * 100.0))
    );
    let _ = writeln!(
        s,
        "<tr><td>{}</td><td><a href=\"#exp-{e}\">{e}</a></td><td><code>{}</code></td><td class=\"n\">{}</td>\
         <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
         <td><span class=\"verdict {}\">{}</span></td></tr>",
        esc(&c.text),
        esc(&c.metric),
        fig(c.old, c.old_spread, &c.old_variant),
        fig(c.new, c.new_spread, &c.new_variant),
        c.ratio.map_or("–".into(), |x| format!("{x:.3}")),
        c.change.map_or("–".into(), pct),
        interval,
        c.verdict.class(),
        c.verdict.words(),
        e = esc(&c.experiment)
    );
}

fn experiment(s: &mut String, e: &ExperimentResult) {
    let _ = writeln!(
        s,
        "<div class=\"experiment\" id=\"exp-{}\"><h3><code>{}</code>: {}</h3>",
        esc(&e.name),
        esc(&e.name),
        esc(&e.title)
    );
    let chart = svg::chart(e);
    let repeats = e.figures.iter().map(|f| f.samples.len()).max().unwrap_or(0);
    let _ = writeln!(
        s,
        "<figure>{}<figcaption>Points and bars: medians; whiskers: min to max of up to {repeats} repeats.</figcaption></figure>",
        svg::draw(&chart)
    );
    if !e.targets.is_empty() {
        s.push_str("<ul class=\"targets\">");
        for t in &e.targets {
            let (class, word) = match (&t.not_measurable, t.met) {
                (Some(why), _) => ("unmeasurable", format!("not measurable here: {}", esc(why))),
                (None, true) => ("met", "met".to_string()),
                (None, false) => ("missed", "missed".to_string()),
            };
            let kind = t.kind.map_or(String::new(), |k| format!(" ({})", k.words()));
            let _ = write!(
                s,
                "<li class=\"{class}\">{}: measured {} (limit {}{kind}), {word}</li>",
                esc(&t.what),
                num(t.measured),
                num(t.limit)
            );
        }
        s.push_str("</ul>\n");
    }
    if !e.notes.is_empty() {
        s.push_str("<ul class=\"notes\">");
        for n in &e.notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>\n");
    }
    let _ = writeln!(
        s,
        "<details><summary>All {} figures</summary><table><tr><th>Metric</th><th>Variant</th><th>Median</th>\
         <th>Unit</th><th>Spread</th><th>Repeats</th><th>Parameters</th></tr>",
        e.figures.len()
    );
    for f in &e.figures {
        let params: Vec<String> = f.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td>{}{}</td><td class=\"n\">{:.1}%</td>\
             <td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&f.metric),
            esc(&f.variant),
            num(f.value),
            esc(&f.unit),
            if f.higher_is_better { " (higher is better)" } else { "" },
            f.spread() * 100.0,
            f.samples.len(),
            esc(&params.join(" "))
        );
    }
    s.push_str("</table></details>\n");
    // Files in a tool's directory layout are linked once, by their directory.
    let mut names: Vec<String> = Vec::new();
    for (name, _) in super::raw_files(e) {
        let name = match name.split_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => name,
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let files: Vec<String> = names.iter().map(|n| format!("<a href=\"raw/{n}\">raw/{n}</a>", n = esc(n))).collect();
    let _ = writeln!(s, "<p class=\"small\">Raw output: {}</p></div>", files.join(", "));
}
