//! The report rendered from a fixed set of results: well-formed, self-contained,
//! one plot per experiment, one verdict per seed, a valid results.json, and the
//! page as a browser shows it.

use super::verdict::{judge, Verdict};
use super::*;
use crate::harness::{Claim, ExperimentResult, Figure, Plot};

fn fig(metric: &str, variant: &str, unit: &str, samples: &[f64]) -> Figure {
    Figure::new(metric, variant, unit, samples.to_vec())
}

fn claim(seed: u32, text: &str, metric: &str) -> Claim {
    Claim { seed, text: text.into(), metric: metric.into(), old: "old".into(), new: "new".into() }
}

/// page-fault1's results: iterations at 1 and 2 threads, a claim, a plot and raw files.
fn fixture_page_fault1() -> ExperimentResult {
    let mut pf = ExperimentResult::new("page-fault1", "will-it-scale page_fault1", Some(1));
    for (t, old, new) in [(1, 100.0, 104.0), (2, 190.0, 203.0)] {
        let s = |v: f64| vec![v * 0.995, v, v * 1.004];
        pf.figures.push(fig(&format!("iterations-{t}t"), "old", "iter/s", &s(old)).higher_better().param("threads", t));
        pf.figures.push(fig(&format!("iterations-{t}t"), "new", "iter/s", &s(new)).higher_better().param("threads", t));
        pf.figures.push(
            fig(&format!("iterations-{t}t"), "kernel", "iter/s", &s(old * 3.0)).higher_better().param("threads", t),
        );
    }
    pf.claims.push(claim(1, "+3..6% iterations at full load", "iterations-2t"));
    pf.plot = Some(
        Plot::line("page_fault1 iterations against threads", "threads", "threads", "iterations per second")
            .series("old", "old", None)
            .series("new", "new", None)
            .series("kernel", "kernel", None),
    );
    pf.raw = "min:95 max:105 total:200\n".into();
    pf.raw_file("csv", "tasks,processes,processes_idle,threads,threads_idle,linear\n1,0,0,104,0,104\n");
    pf
}

/// pcp-flush's results: one metric within noise.
fn fixture_pcp_flush() -> ExperimentResult {
    let mut flush = ExperimentResult::new("pcp-flush", "PCP flush of 10,000-page batches", Some(2));
    flush.figures.push(fig("cycles-per-batch", "old", "cycles", &[1000.0, 1040.0, 980.0]));
    flush.figures.push(fig("cycles-per-batch", "new", "cycles", &[995.0, 1030.0, 990.0]));
    flush.claims.push(claim(2, "about 2.6% fewer cycles", "cycles-per-batch"));
    flush
}

/// bulk's results: the forms at every step, a log-x plot.
fn fixture_bulk() -> ExperimentResult {
    let mut bulk = ExperimentResult::new("bulk", "page_bench04_bulk <list & array>", Some(3));
    for n in [1u32, 2, 4, 8, 16, 32, 64, 128] {
        let list = 190.0 + 100.0 / f64::from(n);
        let array = 94.0 + 100.0 / f64::from(n);
        bulk.figures.push(fig(&format!("bulk-{n}"), "old", "cycles", &[list, list + 2.0, list - 1.0]).param("bulk", n));
        bulk.figures.push(fig(&format!("bulk-{n}"), "new", "cycles", &[array, array + 1.0]).param("bulk", n));
    }
    bulk.figures.push(fig("single", "single", "cycles", &[207.0]));
    bulk.claims.push(claim(3, "array 94 cycles at 128 vs list 189", "bulk-128"));
    bulk.plot = Some(
        Plot::line("Per-page cost against bulk size", "bulk", "bulk size (pages)", "cycles per page")
            .log_x()
            .series("list (old)", "old", Some("bulk-*"))
            .series("array (new)", "new", Some("bulk-*")),
    );
    bulk.raw =
        "time_bench: Type:time_bulk_page_alloc_free_array Per elem: 94 cycles(tsc) 26.170 ns (step:128)\n".into();
    bulk
}

/// page-lock's results: a claim against the new design and one with no figure.
fn fixture_page_lock() -> ExperimentResult {
    let mut lock = ExperimentResult::new("page-lock", "Page lock and the waiters bit", Some(4));
    lock.figures.push(fig("unlock-uncontended", "old", "ns", &[5.0, 5.1, 4.9]));
    lock.figures.push(fig("unlock-uncontended", "new", "ns", &[9.0, 9.2, 8.9]));
    lock.claims.push(claim(4, "fewer cycles in unlock", "unlock-uncontended"));
    lock.claims.push(claim(4, "fewer cycles in wake", "wake-latency"));
    lock.target(crate::harness::TargetKind::Floor, "uncontended unlock under 20 ns", 9.0, 20.0, true);
    lock
}

/// pagetypeinfo's results: a bar plot on a log axis.
fn fixture_pagetypeinfo() -> ExperimentResult {
    let mut pti = ExperimentResult::new("pagetypeinfo", "pagetypeinfo read latency", Some(5));
    for (state, old, new) in [("fresh", 700.0, 269.0), ("fragmented", 28_700.0, 270.0)] {
        pti.figures.push(fig(&format!("read-{state}"), "old", "us", &[old, old * 1.01]).param("state", state));
        pti.figures.push(fig(&format!("read-{state}"), "new", "us", &[new, new * 1.01]).param("state", state));
    }
    pti.claims.push(claim(5, "700 us -> 269 us fresh", "read-fresh"));
    pti.claims.push(claim(5, "28.7 ms -> 270 us fragmented", "read-fragmented"));
    pti.plot = Some(
        Plot::bar("pagetypeinfo read", "state", "free lists", "us per read")
            .log_y()
            .series("walk (old)", "old", None)
            .series("counters (new)", "new", None),
    );
    pti
}

/// pagealloc-micro's results: per-batch figures and mmtests raw files.
fn fixture_micro() -> ExperimentResult {
    let mut micro = ExperimentResult::new("pagealloc-micro", "mmtests pagealloc-micro, order 4", Some(5));
    for b in [1u32, 16, 512] {
        let base = 5000.0 + f64::from(b);
        micro.figures.push(fig(&format!("alloc-odr4-{b}"), "old-monitor", "ns", &[base * 1.15]).param("batch", b));
        micro.figures.push(fig(&format!("alloc-odr4-{b}"), "new-monitor", "ns", &[base * 1.01]).param("batch", b));
        micro.figures.push(fig(&format!("alloc-odr4-{b}"), "no-monitor", "ns", &[base]).param("batch", b));
    }
    micro.figures.push(fig("monitor-impact", "old", "%", &[14.5, 15.2, 17.7]));
    micro.figures.push(fig("monitor-impact", "new", "%", &[1.0, 1.4, 2.1]));
    micro.claims.push(claim(5, "monitor impact from up to -17% to within -5%", "monitor-impact"));
    micro.plot = Some(
        Plot::line("alloc latency against batch", "batch", "batch", "ns per order-4 alloc")
            .log_x()
            .series("no monitor", "no-monitor", Some("alloc-*"))
            .series("monitor, old", "old-monitor", Some("alloc-*"))
            .series("monitor, new", "new-monitor", Some("alloc-*")),
    );
    micro.raw = "order  4 batch      1 alloc 5001 free 300\n".into();
    micro.raw_file("old-none/iter-0/pagealloc/logs/pagealloc.log", "order  4 batch      1 alloc 5001 free 300\n");
    micro.raw_file("old-none/iter-0/pagealloc/logs/alloc-4", "1 5001\n");
    micro
}

/// buddy's results: no seed, a target and a note to escape.
fn fixture_buddy() -> ExperimentResult {
    let mut buddy = ExperimentResult::new("buddy", "Buddy allocator: pair cost", None);
    buddy.figures.push(fig("pair-order0-hot", "new", "ns", &[30.0, 31.0, 29.5]).param("order", 0));
    buddy.target(crate::harness::TargetKind::Floor, "order-0 pair at most 60 ns & <fast>", 30.0, 60.0, true);
    buddy.notes.push("a note with <angle brackets> & ampersands".into());
    buddy
}

/// The run the fixture's results came from.
fn fixture_info() -> RunInfo {
    RunInfo {
        command: "target/release/pagealloc bench --out 'my report'".into(),
        full: false,
        repeats: 3,
        started: 1_700_000_000,
        duration_s: 95.0,
        machine: Machine {
            cpu_model: "Test CPU @ 2.00GHz".into(),
            cores: 2,
            kernel: "6.1.0-test".into(),
            tsc_ghz: 2.0,
            loadavg: [1.5, 0.5, 0.2],
            busy: true,
        },
    }
}

/// Six experiments over seeds 1..=5 and one without a seed, covering every verdict.
pub(super) fn fixture() -> Report {
    let experiments = vec![
        fixture_page_fault1(),
        fixture_pcp_flush(),
        fixture_bulk(),
        fixture_page_lock(),
        fixture_pagetypeinfo(),
        fixture_micro(),
        fixture_buddy(),
    ];
    Report::new(fixture_info(), experiments)
}

/// The verdicts the fixture is built to produce, per seed.
const EXPECTED: [(u32, Verdict); 5] = [
    (1, Verdict::Reproduced),
    (2, Verdict::Inconclusive),
    (3, Verdict::Reproduced),
    (4, Verdict::NotReproduced),
    (5, Verdict::Reproduced),
];

#[test]
fn verdicts_follow_the_interval_rule() {
    let r = fixture();
    for (seed, v) in EXPECTED {
        assert_eq!(r.seeds.iter().find(|s| s.seed == seed).unwrap().verdict, v, "seed {seed}");
    }
    let missing = r.claims.iter().find(|c| c.metric == "wake-latency").unwrap();
    assert_eq!(missing.verdict, Verdict::NotRun);
    // The module doc's worked example.
    let old = Figure::new("m", "old", "cycles", vec![196.0, 200.0, 204.0]);
    let new = Figure::new("m", "new", "cycles", vec![147.0, 150.0, 152.0]);
    assert_eq!(judge(&old, &new).2, Verdict::Reproduced);
    let same = Figure::new("m", "new", "cycles", vec![195.0]);
    assert_eq!(judge(&old, &same).2, Verdict::Inconclusive);
    assert_eq!(judge(&new, &old).2, Verdict::NotReproduced);
    // One sample a side has no interval: inconclusive, however large the change.
    let tput_old = Figure::new("m", "old", "ops/s", vec![100.0]).higher_better();
    let tput_new = Figure::new("m", "new", "ops/s", vec![110.0]).higher_better();
    assert_eq!(judge(&tput_old, &tput_new).2, Verdict::Inconclusive);
    let tput_old = Figure::new("m", "old", "ops/s", vec![100.0, 101.0, 99.0]).higher_better();
    let tput_new = Figure::new("m", "new", "ops/s", vec![110.0, 111.0, 109.0]).higher_better();
    assert_eq!(judge(&tput_old, &tput_new).2, Verdict::Reproduced);
    // The module doc's straddling example.
    let wide = Figure::new("m", "new", "cycles", vec![190.0, 200.0, 210.0]);
    assert_eq!(judge(&old, &wide).2, Verdict::Inconclusive);
    let (lo, hi) = verdict::figures_interval(&old, &new).unwrap();
    assert!(lo > 0.2 && hi < 0.3, "{lo} {hi}");
}

/// Rounds that alternated are paired: drift that moves both designs alike
/// cancels, where the unpaired interval straddles 0.
#[test]
fn alternating_rounds_are_paired() {
    let drift = [100.0, 140.0, 90.0, 160.0, 120.0, 80.0, 150.0, 110.0];
    let old: Vec<f64> = drift.to_vec();
    let new: Vec<f64> = drift.iter().map(|d| d * 0.9).collect();
    let (o, n) = (Figure::new("m", "old", "cycles", old), Figure::new("m", "new", "cycles", new));
    assert_eq!(judge(&o, &n).2, Verdict::Inconclusive, "unpaired, the drift swamps 10%");
    let (o, n) = (o.paired(), n.paired());
    assert_eq!(judge(&o, &n).2, Verdict::Reproduced);
    let (lo, hi) = verdict::figures_interval(&o, &n).unwrap();
    assert!((lo - 0.1).abs() < 1e-9 && (hi - 0.1).abs() < 1e-9, "{lo} {hi}");
    // Paired needs as many rounds a side; otherwise it is unpaired.
    let short = Figure::new("m", "new", "cycles", vec![90.0, 126.0]).paired();
    assert_eq!(judge(&o, &short).2, Verdict::Inconclusive);
    // Deterministic: the same samples, the same interval.
    assert_eq!(
        verdict::interval(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0], true),
        verdict::interval(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0], true)
    );
}

#[test]
fn one_outlier_repeat_does_not_swamp_the_noise() {
    // Seed 4's unlock figures from a real run: one repeat of twenty was preempted.
    let mut new = vec![14.2; 19];
    new.insert(9, 34.2);
    let old = Figure::new("unlock", "old", "cycles", vec![50.1; 20]);
    let new = Figure::new("unlock", "new", "cycles", new);
    assert!(new.spread() < 0.01, "{}", new.spread());
    assert_eq!(judge(&old, &new).2, Verdict::Reproduced);
    // With fewer than five repeats every sample counts.
    let few = Figure::new("m", "new", "cycles", vec![10.0, 10.0, 30.0]);
    assert!((few.spread() - 2.0).abs() < 1e-9);
}

/// Parse the page as XML: every element closed and nested right.
fn assert_well_formed(html: &str) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(html);
    reader.config_mut().check_end_names = true;
    let mut depth = 0i64;
    let mut roots = 0;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                if depth == 0 {
                    roots += 1;
                    assert_eq!(e.name().as_ref(), b"html");
                }
                depth += 1;
            }
            Ok(Event::End(_)) => depth -= 1,
            Ok(Event::Text(t)) => {
                t.unescape().expect("only XML entities in text");
            }
            Ok(Event::Empty(e)) => {
                for a in e.attributes() {
                    a.expect("well-formed attribute").unescape_value().expect("attribute entities");
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well formed at byte {}: {e}", reader.buffer_position()),
        }
        assert!(depth >= 0);
    }
    assert_eq!(depth, 0, "unclosed elements");
    assert_eq!(roots, 1);
}

#[test]
fn page_is_well_formed_self_contained_with_a_plot_per_experiment_and_a_verdict_per_seed() {
    let r = fixture();
    let html = html::page(&r);
    assert_well_formed(&html);
    let lower = html.to_lowercase();
    for banned in ["http://", "https://", "<script", "<link", "<img", "<iframe", "@import", "url(", "src="] {
        assert!(!lower.contains(banned), "page refers outside itself: {banned}");
    }
    assert_eq!(html.matches("<svg").count(), r.experiments.len(), "one SVG per experiment");
    assert_eq!(html.matches("</svg>").count(), r.experiments.len());
    for e in &r.experiments {
        let at = html.find(&format!("id=\"exp-{}\"", e.name)).expect("a section per experiment");
        let next = html[at..].find("<svg").expect("a plot after it") + at;
        assert!(!html[at..next].contains("class=\"experiment\""), "{}'s plot is its own", e.name);
    }
    for (seed, v) in EXPECTED {
        let tag = format!("data-seed-verdict=\"{seed}\">{}</span>", v.words());
        assert_eq!(html.matches(&format!("data-seed-verdict=\"{seed}\"")).count(), 1, "seed {seed}");
        assert!(html.contains(&tag), "seed {seed}: {tag}");
    }
    assert_eq!(html.matches("data-seed-verdict=").count(), 5);
    // The thread's figures and ours are both there; text is escaped.
    assert!(html.contains("9034215") && html.contains("28700"));
    assert!(html.contains("a note with &lt;angle brackets&gt; &amp; ampersands"));
    assert!(html.contains("the machine looks busy"));
    assert!(html.contains("Test CPU @ 2.00GHz") && html.contains("6.1.0-test") && html.contains("2.000 GHz"));
    assert!(html.contains("target/release/pagealloc bench --out &#39;my report&#39;"));
}

#[test]
fn plots_resolve_against_figures() {
    let r = fixture();
    let bulk = r.experiments.iter().find(|e| e.name == "bulk").unwrap();
    let c = svg::chart(bulk);
    assert_eq!(c.lines.len(), 2);
    assert!(c.lines.iter().all(|l| l.points.len() == 8), "single is not a bulk-* figure");
    // A default plot: the claim's metric, old against new.
    let flush = r.experiments.iter().find(|e| e.name == "pcp-flush").unwrap();
    let c = svg::chart(flush);
    assert_eq!(c.lines.iter().map(|l| l.points.len()).sum::<usize>(), 2);
    // An experiment with a claim whose figures are missing still gets its plot.
    let lock = r.experiments.iter().find(|e| e.name == "page-lock").unwrap();
    assert!(svg::draw(&svg::chart(lock)).starts_with("<svg"));
    let empty = ExperimentResult::new("empty", "nothing measured", None);
    assert!(svg::draw(&svg::chart(&empty)).contains("no data"));
}

#[test]
fn results_json_validates_against_its_schema_and_round_trips() {
    let r = fixture();
    let json = r.to_json();
    let schema: serde_json::Value = serde_json::from_str(SCHEMA_JSON).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("docs/results.schema.json is a valid JSON Schema");
    let validate = |doc: &serde_json::Value| -> Vec<String> {
        validator.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect()
    };
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let errs = validate(&doc);
    assert!(errs.is_empty(), "results.json does not match docs/results.schema.json:\n{}", errs.join("\n"));
    assert!(Report::parse(&json).unwrap() == r, "results.json round trip");
    // A figure that lost its unit, or an undocumented field, is caught.
    let mut bad = doc.clone();
    bad["experiments"][0]["figures"][0].as_object_mut().unwrap().remove("unit");
    bad["experiments"][0]["surprise"] = serde_json::json!(1);
    assert_eq!(validate(&bad).len(), 2, "{:?}", validate(&bad));
    // NaN is written as null and read back.
    let mut r2 = r.clone();
    r2.experiments[0].figures[0].value = f64::NAN;
    let back = Report::parse(&r2.to_json()).unwrap();
    assert!(back.experiments[0].figures[0].value.is_nan());
    assert!(validate(&serde_json::from_str(&r2.to_json()).unwrap()).is_empty());
    // Older --json files (a bare array of results) still load.
    let old = serde_json::to_string(&r.experiments).unwrap();
    assert!(Report::parse(&old).unwrap().experiments == r.experiments, "bare array loads");
    let newer = json.replacen("\"version\": 1", "\"version\": 99", 1);
    assert!(Report::parse(&newer).is_err());
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pagealloc-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn report_directory_holds_page_json_schema_and_raw_files() {
    let r = fixture();
    let dir = temp_dir("dir");
    let index = r.write_dir(&dir).unwrap();
    assert_eq!(index, dir.join("index.html"));
    for f in ["index.html", "results.json", "results.schema.json", "raw/page-fault1.txt", "raw/page-fault1.csv"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let raw: Vec<_> = std::fs::read_dir(dir.join("raw")).unwrap().collect();
    // One .txt per experiment, page-fault1's CSV, pagealloc-micro's mmtests tree.
    assert_eq!(raw.len(), r.experiments.len() + 2);
    assert!(dir.join("raw/pagealloc-micro/old-none/iter-0/pagealloc/logs/pagealloc.log").is_file());
    assert!(dir.join("raw/pagealloc-micro/old-none/iter-0/pagealloc/logs/alloc-4").is_file());
    assert!(std::fs::read_to_string(dir.join("raw/bulk.txt"))
        .unwrap()
        .starts_with("time_bench: Type:time_bulk_page_alloc_free_array"));
    assert!(Report::load(&dir.join("results.json")).unwrap() == r, "results.json round trip");
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(html.contains("href=\"raw/page-fault1.csv\""));
    // A tool's directory tree is linked once, by its directory.
    assert_eq!(html.matches("href=\"raw/pagealloc-micro/\"").count(), 1, "{html}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn summary_and_compare_tables() {
    let r = fixture();
    let s = r.summary();
    assert!(
        s.contains("seeds: 3 reproduced, 1 not reproduced, 1 inconclusive (interval contains 0), 0 not run"),
        "{s}"
    );
    assert!(s.contains("page-lock") && s.contains("not run"));
    let mut newer = r.clone();
    for f in &mut newer.experiments[2].figures {
        f.samples.iter_mut().for_each(|x| *x *= 0.9);
    }
    let t = compare::runs(&r, &newer, "base", "tuned");
    assert!(t.contains("bulk (variant old; cycles)"), "{t}");
    assert!(t.contains("Amean  bulk-128"), "{t}");
    assert!(t.contains("(  10.00%)"), "{t}");
}

/// Open the page in headless Chromium and check what it renders.
#[test]
fn chromium_renders_every_verdict() {
    let Some(chromium) =
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().find(|p| std::path::Path::new(p).exists())
    else {
        println!("SKIPPED chromium_renders_every_verdict: no chromium (.ci/run installs Debian's `chromium`)");
        return;
    };
    let r = fixture();
    let dir = temp_dir("chromium");
    let index = r.write_dir(&dir).unwrap();
    let profile = dir.join("profile");
    let mut child = std::process::Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", index.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run chromium");
    // Read both pipes on threads (a DOM can outgrow a pipe's buffer), and let a
    // browser that hangs fail the test rather than the CI run's time limit.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for chromium") {
            break st;
        }
        if t0.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let dom = String::from_utf8_lossy(&stdout);
    assert!(status.success() && dom.contains("</html>"), "chromium failed: {}", String::from_utf8_lossy(&stderr));
    for (seed, v) in EXPECTED {
        assert!(
            dom.contains(&format!("data-seed-verdict=\"{seed}\">{}</span>", v.words())),
            "seed {seed} verdict not rendered"
        );
    }
    assert_eq!(dom.matches("<svg").count(), r.experiments.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `cargo test -p pagealloc-bench -- --ignored write_fixture_report` writes the
/// fixture's report to `target/report-fixture/` to look at without running benchmarks.
#[test]
#[ignore]
fn write_fixture_report() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-fixture");
    let index = fixture().write_dir(&dir).unwrap();
    println!("wrote {}", index.display());
}

/// The summary tallies the targets and gives each miss and each target
/// this host cannot measure one line, with what it was measured against.
#[test]
fn target_summary_names_each_miss_and_why() {
    use crate::harness::TargetKind;
    let mut e = ExperimentResult::new("x", "targets", None);
    e.target(TargetKind::Floor, "pair at most 2x the floor", 2.5, 2.0, false);
    e.target(TargetKind::Count, "blocks whole", 1.0, 1.0, true);
    e.not_measurable(TargetKind::Floor, "2 threads scale 1.8x", (0.9, 1.8), "needs 2 idle CPUs, 0 were idle");
    let r = Report::new(
        RunInfo {
            command: String::new(),
            full: false,
            repeats: 3,
            started: 0,
            duration_s: 0.0,
            machine: Machine::default(),
        },
        vec![e],
    );
    let s = r.target_summary();
    assert!(s.contains("targets: 1 met, 1 missed, 1 not measurable here"), "{s}");
    assert!(
        s.contains(
            "MISSED x: pair at most 2x the floor: measured 2.5 against a limit of 2 (ratio to a same-run floor)"
        ),
        "{s}"
    );
    assert!(s.contains("NOT MEASURABLE HERE x: 2 threads scale 1.8x: needs 2 idle CPUs, 0 were idle"), "{s}");
    assert_eq!(s.lines().count(), 3, "{s}");
    let t = &r.experiments[0].targets;
    assert_eq!((t[0].status(), t[1].status(), t[2].status()), ("MISSED", "MET", "NOT MEASURABLE HERE"));
    // Older results.json targets (no kind) still load.
    let old = r#"{"what":"w","measured":1.0,"limit":2.0,"met":true}"#;
    let t: crate::harness::Target = serde_json::from_str(old).unwrap();
    assert!(t.kind.is_none() && t.not_measurable.is_none() && t.status() == "MET");
}
