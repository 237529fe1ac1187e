//! will-it-scale's output formats: main.c's lines for one run (`testcase:`,
//! `warmup`, the per-second `min:max:total`, `measurement`, `average:`) and
//! runtest.py's CSV over the runs, which the tests check by re-implementing
//! runtest.py's parsing.

use super::case::Run;
use super::Kind;
use std::fmt::Write as _;

/// The lines main.c prints for one run whose threads' per-second deltas are
/// `seconds` (the first `warmup` of them before the `measurement` line):
/// `testcase:%s`, `warmup`, `min:%llu max:%llu total:%llu` once a second,
/// `measurement`, and `average:%llu` (the measured totals' sum over their count).
/// main.c itself reports one warm-up second more than its `WARMUP_ITERATIONS`
/// (its line for that second comes just before `measurement`); the lines'
/// shapes and order are the same. Returns the measured totals and the average.
pub(super) fn wis_lines(kind: Kind, seconds: &[Vec<u64>], warmup: usize, out: &mut String) -> (Vec<f64>, u64) {
    let _ = writeln!(out, "testcase:{}", kind.describe());
    let _ = writeln!(out, "warmup");
    let mut totals = Vec::new();
    for (i, deltas) in seconds.iter().enumerate() {
        let (min, max, sum) =
            (*deltas.iter().min().unwrap_or(&0), *deltas.iter().max().unwrap_or(&0), deltas.iter().sum::<u64>());
        let _ = writeln!(out, "min:{min} max:{max} total:{sum}");
        if i + 1 > warmup {
            totals.push(sum);
        }
        if i + 1 == warmup {
            let _ = writeln!(out, "measurement");
        }
    }
    let average = totals.iter().sum::<u64>() / (totals.len().max(1) as u64);
    let _ = writeln!(out, "average:{average}");
    (totals.into_iter().map(|t| t as f64).collect(), average)
}

/// The line before each run's output in the raw file: which run follows, as
/// runtest.py's command line for it would name it. runtest.py reads only the
/// lines holding `testcase:` or `average:`, so it skips this one.
pub(super) fn run_header(k: Kind, threads: usize, measure: usize) -> String {
    format!("# {} -t {threads} -s {measure}\n", k.variant())
}

/// Python's `'%0.2f' % x` (runtest.py's idle columns): as Rust's `{:.2}`, but
/// `nan` and `inf` in lower case.
pub(super) fn py_2f(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{x:.2}")
    }
}

/// runtest.py's CSV for one kind: its header, its `0,0,100,0,100,0` row, then
/// `'%d,%d,%0.2f,%d,%0.2f,%d' % (tasks, processes_avg, processes_idle,
/// threads_avg, threads_idle, linear)` per thread count, `linear` being the
/// larger average at one task times the task count. Our allocator's threads
/// share nothing but the allocator (no mm, no mmap_lock), which is what
/// will-it-scale's processes mode measures, so both columns carry the same run;
/// the kernel peer's threads share one mm, so it has only the threads columns
/// (processes `-1`, runtest.py's value when a run printed no `average:`). With
/// no one-thread run, `linear` is `-1` (runtest.py always starts at one task).
pub(super) fn runtest_csv(k: Kind, rows: &[(Kind, usize, Run)]) -> String {
    let mut s = String::from("tasks,processes,processes_idle,threads,threads_idle,linear\n0,0,100,0,100,0\n");
    let mine: Vec<&(Kind, usize, Run)> = rows.iter().filter(|(kk, _, _)| *kk == k).collect();
    let one = mine.iter().find(|(_, n, _)| *n == 1).map(|(_, _, run)| run.average as i64);
    for (_, n, run) in &mine {
        let processes = if k == Kind::Kernel { -1 } else { run.average as i64 };
        let linear = one.map_or(-1, |o| o * *n as i64);
        let _ = writeln!(s, "{n},{processes},{},{},{},{linear}", py_2f(run.idle), run.average, py_2f(run.idle));
    }
    s
}
