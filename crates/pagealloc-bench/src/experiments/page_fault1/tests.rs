//! runtest.py's parsing, re-implemented (will-it-scale is GPL, so it is not
//! vendored here): github.com/antonblanchard/will-it-scale, runtest.py and
//! main.c at commit 75f66e45697e6f5f49c33dd950c4e6b289198f8f (2024-01-10).
//! For each task count runtest.py runs `<test>_processes` then
//! `<test>_threads`, and in each one's stdout: a line holding `testcase:` is
//! split on `:` into exactly two values (the title); a line holding
//! `average:` is split on `:` into exactly two values and the second read
//! with `int()`, the run's average (-1 when no such line). It then prints
//! `'%d,%d,%0.2f,%d,%0.2f,%d' % (tasks, processes_avg, processes_idle,
//! threads_avg, threads_idle, linear * tasks)`, `linear` being the larger
//! of the two averages at one task.

use super::case::{run_case, Run};
use super::wis::{py_2f, run_header, runtest_csv, wis_lines};
use super::Kind;
use pagealloc::DrainMode;

/// Python's `line.split(':')` unpacked into two names.
fn split2(line: &str) -> Result<(&str, &str), String> {
    let parts: Vec<&str> = line.split(':').collect();
    match parts.len() {
        2 => Ok((parts[0], parts[1])),
        n if n > 2 => Err(format!("ValueError: too many values to unpack (expected 2) in {line:?}")),
        _ => Err(format!("ValueError: not enough values to unpack (expected 2, got {n}) in {line:?}", n = 1)),
    }
}

/// Python's `int(s)` on a decimal string: surrounding whitespace allowed,
/// an optional sign, digits with single underscores between them.
fn py_int(s: &str) -> Result<i64, String> {
    let t = s.trim_matches(|c: char| c.is_whitespace());
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    let ok = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !ok {
        return Err(format!("ValueError: invalid literal for int() with base 10: {s:?}"));
    }
    t.replace('_', "").parse().map_err(|e| format!("{e}"))
}

/// One run's stdout as runtest.py reads it: (title, average).
fn runtest_read(stdout: &str) -> Result<(Option<String>, i64), String> {
    let (mut title, mut avg) = (None, -1);
    // readlines() keeps each line's newline; the title file gets it too.
    for line in stdout.split_inclusive('\n') {
        if line.contains("testcase:") {
            title = Some(split2(line)?.1.to_string());
        }
        if line.contains("average:") {
            avg = py_int(split2(line)?.1)?;
        }
    }
    Ok((title, avg))
}

/// runtest.py's CSV from each task count's processes and threads stdout
/// (`None`: that binary printed nothing) and idle percentages.
fn runtest_csv_from(runs: &[(usize, Option<&str>, f64, &str, f64)]) -> Result<String, String> {
    let mut s = String::from("tasks,processes,processes_idle,threads,threads_idle,linear\n0,0,100,0,100,0\n");
    let mut linear = None;
    for &(i, processes, p_idle, threads, t_idle) in runs {
        let p = match processes {
            Some(out) => runtest_read(out)?.1,
            None => -1,
        };
        let t = runtest_read(threads)?.1;
        if i == 1 {
            linear = Some(p.max(t));
        }
        let linear = linear.ok_or("NameError: name 'linear' is not defined")?;
        s.push_str(&format!("{i},{p},{},{t},{},{}\n", py_2f(p_idle), py_2f(t_idle), linear * i as i64));
    }
    Ok(s)
}

/// Our raw file cut back into its runs: (variant, threads, stdout).
fn split_raw(raw: &str) -> Vec<(String, usize, String)> {
    let mut runs: Vec<(String, usize, String)> = Vec::new();
    for line in raw.split_inclusive('\n') {
        if let Some(h) = line.strip_prefix("# ") {
            let w: Vec<&str> = h.split_whitespace().collect();
            if w.len() == 5 && w[1] == "-t" && w[3] == "-s" {
                runs.push((w[0].to_string(), w[2].parse().unwrap(), String::new()));
                continue;
            }
        }
        if let Some(r) = runs.last_mut() {
            r.2.push_str(line);
        }
    }
    runs
}

/// Check `raw` (the experiment's raw text) against our CSV for `k` in `rows`
/// through runtest.py's parsing.
fn check(raw: &str, k: Kind, rows: &[(Kind, usize, Run)]) {
    let runs = split_raw(raw);
    let mut input = Vec::new();
    for (_, n, run) in rows.iter().filter(|(kk, _, _)| *kk == k) {
        let (_, _, out) = runs.iter().find(|(v, t, _)| v == k.variant() && t == n).expect("the run in the raw");
        let (title, avg) = runtest_read(out).unwrap();
        assert_eq!(title.as_deref(), Some(format!("{}\n", k.describe()).as_str()));
        assert_eq!(avg, run.average as i64);
        // The kernel peer is threads only; ours carry the run in both columns.
        let processes = if k == Kind::Kernel { None } else { Some(out.as_str()) };
        input.push((*n, processes, run.idle, out.as_str(), run.idle));
    }
    assert!(!input.is_empty());
    assert_eq!(runtest_csv_from(&input).unwrap(), runtest_csv(k, rows), "{raw}");
}

const KINDS: [Kind; 6] = [
    Kind::Ours(DrainMode::SinglePass),
    Kind::Ours(DrainMode::TwoPass),
    Kind::Ours(DrainMode::Blocks),
    Kind::Kernel,
    Kind::Malloc,
    Kind::Floor,
];

#[test]
fn the_old_lines_crash_runtest_py_and_ours_do_not() {
    // Lines an earlier version printed, which runtest.py could not unpack.
    for old in [
        "testcase:floor: the writes alone, to resident memory (1 threads)\n",
        "testcase:system allocator: 32768 aligned 4 KiB blocks, touch, free (1 threads)\n",
        "testcase:kernel: mmap 128 MiB, touch, munmap (1 threads)\n",
    ] {
        assert!(runtest_read(old).unwrap_err().contains("too many values"));
    }
    for k in KINDS {
        assert!(!k.describe().contains(':'), "{}", k.describe());
        let mut out = String::new();
        wis_lines(k, &[vec![1, 2], vec![3, 4]], 1, &mut out);
        assert_eq!(runtest_read(&out).unwrap(), (Some(format!("{}\n", k.describe())), 7));
    }
}

#[test]
fn lines_follow_main_c() {
    let mut out = String::new();
    let (totals, avg) = wis_lines(Kind::Floor, &[vec![5, 9], vec![10, 20], vec![11, 21], vec![1, 2]], 1, &mut out);
    assert_eq!(
        out,
        "testcase:Floor, the writes alone to resident memory\nwarmup\nmin:5 max:9 total:14\nmeasurement\n\
         min:10 max:20 total:30\nmin:11 max:21 total:32\nmin:1 max:2 total:3\naverage:21\n"
    );
    // 65 / 3 in integers, as main.c's `total / opt_iterations`.
    assert_eq!((totals, avg), (vec![30.0, 32.0, 3.0], 21));
    assert_eq!(py_2f(f64::NAN), "nan");
    assert_eq!(py_2f(99.375), "99.38");
}

#[test]
fn runtest_py_on_our_raw_output_gives_our_csv() {
    // Runs as the experiment lays them out, from made-up per-second counts.
    let mut raw = String::new();
    let mut rows = Vec::new();
    for n in [1usize, 2] {
        for (ki, k) in KINDS.into_iter().enumerate() {
            raw.push_str(&run_header(k, n, 2));
            let per = (1000 * (ki as u64 + 1)) * n as u64;
            let secs: Vec<Vec<u64>> = (0..3).map(|s| (0..n as u64).map(|t| per + 7 * s + t).collect()).collect();
            let (totals, average) = wis_lines(k, &secs, 1, &mut raw);
            raw.push_str("note: a line runtest.py does not read\n");
            rows.push((k, n, Run { totals, average, idle: 12.345 * n as f64, holds: (Vec::new(), Vec::new()) }));
        }
    }
    for k in KINDS {
        check(&raw, k, &rows);
    }
    assert!(runtest_csv(Kind::Kernel, &rows).lines().nth(2).unwrap().starts_with("1,-1,12.35,"));
}

#[test]
fn runtest_py_on_a_real_run_gives_our_csv() {
    // One real run (the floor: no allocator, one thread, 1 + 1 seconds).
    let mut raw = run_header(Kind::Floor, 1, 1);
    let run = run_case(Kind::Floor, 1, false, 1, 1, &mut raw);
    assert_eq!(run.totals.len(), 1);
    // No floor on the average: what is checked is the grammar of the
    // lines, and a starved thread on a loaded machine may finish no
    // iteration in the measured second (CI has seen 0).
    assert!((0.0..=100.0).contains(&run.idle), "{}", run.idle);
    check(&raw, Kind::Floor, &[(Kind::Floor, 1, run)]);
}
