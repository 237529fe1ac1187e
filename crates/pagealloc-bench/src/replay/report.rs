//! The replay's summary (terminal) and report (the bench's HTML page with
//! one experiment, `replay`, whose plot is free pages per order over the
//! replay beside the kernel's start and end snapshots).

use super::Replay;
use crate::harness::{ExperimentResult, Figure, Plot};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Orders drawn in the plot (all eleven would hide each other).
const PLOT_ORDERS: [usize; 5] = [0, 3, 6, 9, 10];

/// Per 1,000 of `n`.
fn per_k(x: u64, n: u64) -> f64 {
    if n == 0 {
        f64::NAN
    } else {
        x as f64 * 1000.0 / n as f64
    }
}

/// Free pages per order of the snapshot's zones that were replayed.
fn snapshot_free(zones: &[super::proc::Zone]) -> [u64; 11] {
    let mut v = [0; 11];
    for z in zones.iter().filter(|z| z.managed >= 1024) {
        for (o, n) in z.free_pages().iter().enumerate() {
            v[o] += n;
        }
    }
    v
}

fn row(label: &str, v: &[u64; 11]) -> String {
    let mut s = format!("{label:<28}");
    for n in v {
        let _ = write!(s, " {n:>8}");
    }
    s
}

/// The summary the command prints (and `raw/replay.txt` holds).
pub fn text(r: &Replay) -> String {
    let (t, k) = (&r.trace, &r.trace.kernel);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "trace: {} allocations ({} failed in the kernel), {} frees, {:.1} s, {} events lost; command: {}",
        k.allocs,
        k.alloc_failures,
        k.frees,
        t.span_s,
        t.lost,
        t.header.get("command").map_or("?", String::as_str)
    );
    let b = &t.bad;
    let _ = writeln!(
        s,
        "bad input: {} malformed lines, {} unknown events, {} stray lines, truncated: {}; {} mm_page_free_batched \
         (each repeats an mm_page_free)",
        b.malformed, b.unknown_event, b.stray_lines, b.truncated, k.free_batched
    );
    for z in &r.skipped {
        let _ = writeln!(s, "zone skipped: {z}");
    }
    let _ = writeln!(
        s,
        "\n{:<26} {:>10} {:>10} {:>12} {:>12} {:>10} {:>9} {:>9}",
        "design", "frag/1000", "failed", "lock acq", "frees seeded", "unknown", "x real", "x cpu"
    );
    let _ = writeln!(
        s,
        "{:<26} {:>10.2} {:>10} {:>12} {:>12} {:>10} {:>9} {:>9}",
        "kernel",
        per_k(k.extfrag_fragmenting, k.allocs),
        k.alloc_failures,
        format!("~{}", k.zone_lock_estimate),
        "-",
        "-",
        "1",
        "-"
    );
    for d in &r.runs {
        let o = &d.outcome;
        let _ = writeln!(
            s,
            "{:<26} {:>10.2} {:>10} {:>12} {:>12} {:>10} {:>9.0} {:>9.0}",
            d.name,
            per_k(o.fragmenting, o.allocs),
            o.alloc_failures,
            o.lock_acquisitions,
            o.frees_seeded,
            o.frees_unknown,
            t.span_s / o.seconds.max(1e-9),
            t.span_s / o.cpu_seconds.max(1e-9)
        );
    }
    for d in &r.runs {
        let (refill, drain, failed) = d.outcome.pcp;
        let _ = writeln!(
            s,
            "{}: {refill} per-CPU refills, {drain} drains, {failed} refused allocations (the seeding's own excluded)",
            d.name
        );
    }
    let _ = writeln!(
        s,
        "x real: the trace's span over the replay loop's wall time; x cpu: over its CPU time (the wall time \
         on a shared host also holds other processes' turns). lock acq: zone-lock acquisitions (the kernel's \
         estimated from its refill and drain runs)."
    );
    free_table(&mut s, r);
    s
}

/// Free pages per order: the kernel's snapshots, the seeding, each design's end.
fn free_table(s: &mut String, r: &Replay) {
    let _ = writeln!(
        s,
        "\nfree pages per order (ours after draining the per-CPU lists){}",
        (0..11).map(|o| format!(" {:>8}", o)).collect::<String>()
    );
    let _ = writeln!(s, "{}", row("kernel, start snapshot", &snapshot_free(&r.zones)));
    if let Some(d) = r.runs.first() {
        let _ = writeln!(s, "{}", row(&format!("{}, seeded", d.name), &d.outcome.seeded_free));
    }
    let _ = writeln!(s, "{}", row("kernel, end snapshot", &snapshot_free(&r.end_zones)));
    for d in &r.runs {
        let _ = writeln!(s, "{}", row(&format!("{}, end", d.name), &d.outcome.end_free));
    }
}

/// The replay as one experiment of a bench report.
pub fn experiment(r: &Replay) -> ExperimentResult {
    let mut e = ExperimentResult::new("replay", "A captured kernel allocation trace replayed through pagealloc", None);
    e.raw = text(r);
    let k = &r.trace.kernel;
    let one = |m: &str, v: &str, unit: &str, x: f64| Figure::new(m, v, unit, vec![x]);
    e.figures.push(one(
        "fragmenting-per-1000",
        "kernel",
        "per 1000 allocations",
        per_k(k.extfrag_fragmenting, k.allocs),
    ));
    e.figures.push(one("zone-lock-acquisitions", "kernel", "acquisitions (estimate)", k.zone_lock_estimate as f64));
    for d in &r.runs {
        let o = &d.outcome;
        e.figures.push(one("fragmenting-per-1000", d.name, "per 1000 allocations", per_k(o.fragmenting, o.allocs)));
        e.figures.push(one("zone-lock-acquisitions", d.name, "acquisitions", o.lock_acquisitions as f64));
        let speed = r.trace.span_s / o.seconds.max(1e-9);
        e.figures.push(one("speed", d.name, "x real time", speed).higher_better());
        let cpu = r.trace.span_s / o.cpu_seconds.max(1e-9);
        e.figures.push(one("speed-cpu", d.name, "x real time (CPU time)", cpu).higher_better());
        for (ord, n) in o.end_free.iter().enumerate() {
            e.figures.push(one(&format!("end-free-o{ord}"), d.name, "pages", *n as f64).param("order", ord as u64));
        }
    }
    timeline(r, &mut e);
    e.notes.push(format!(
        "bad input and frees of memory allocated before the capture: see raw/replay.txt. {}",
        r.skipped.join("; ")
    ));
    e
}

/// The timeline figures and the plot.
fn timeline(r: &Replay, e: &mut ExperimentResult) {
    let (start, end) = (snapshot_free(&r.zones), snapshot_free(&r.end_zones));
    let mut plot = Plot::line("Free pages per order during the replay", "t", "trace seconds", "free pages").log_y();
    for &o in &PLOT_ORDERS {
        for (t, v, tag) in [(0.0, start[o], "start"), (r.trace.span_s, end[o], "end")] {
            e.figures.push(Figure::new(format!("free-o{o}-at-{tag}"), "kernel", "pages", vec![v as f64]).param("t", t));
        }
        if let Some(d) = r.runs.first() {
            for (i, (t, v)) in d.outcome.timeline.iter().enumerate() {
                e.figures
                    .push(Figure::new(format!("free-o{o}-at-{i}"), d.name, "pages", vec![v[o] as f64]).param("t", *t));
            }
            plot = plot.series(&format!("order {o}, replay"), d.name, Some(&format!("free-o{o}-at-*")));
        }
        plot = plot.series(&format!("order {o}, kernel snapshots"), "kernel", Some(&format!("free-o{o}-at-*")));
    }
    e.plot = Some(plot);
}

/// Write the report directory; the path of index.html.
pub fn write(r: &Replay, dir: &Path) -> std::io::Result<PathBuf> {
    let mut machine = crate::report::Machine::probe();
    machine.tsc_ghz = 0.0;
    let info = crate::report::RunInfo {
        command: crate::report::machine::command_line(),
        full: false,
        repeats: 1,
        started: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        duration_s: r.runs.iter().map(|d| d.outcome.seconds).sum(),
        machine,
    };
    crate::report::Report::new(info, vec![experiment(r)]).write_dir(dir)
}
