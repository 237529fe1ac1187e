//! compare-mmtests.pl itself, run on the bench's own `raw/pagealloc-micro/`
//! tree: every row of its tables, stars included, must be ours.
//!
//! mmtests is GPL and not vendored; `PAGEALLOC_MMTESTS` names a checkout at
//! 74aced35 (the last commit with ExtractPagealloc), whose script needs perl
//! with File::Slurp and File::Which (Debian's libfile-slurp-perl and
//! libfile-which-perl) and nothing else. Without R on the machine the script
//! stars by its no-R rule (`super::mmtests`, "Significance"); with R it would
//! ask R for intervals, so these tests refuse to run where `R` is on the PATH
//! rather than compare against the other rule. Without a checkout they say
//! so on stderr and pass: CI has no way to fetch it.

use super::mmtests::{compare, log_line, split_files};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout, if one is given and R is absent.
pub(crate) fn checkout() -> Option<PathBuf> {
    let Ok(mm) = std::env::var("PAGEALLOC_MMTESTS") else {
        eprintln!("skipped: PAGEALLOC_MMTESTS does not name an mmtests checkout at 74aced35");
        return None;
    };
    let r_present = Command::new("sh").args(["-c", "command -v R"]).output().is_ok_and(|o| o.status.success());
    assert!(!r_present, "R is installed: compare-mmtests.pl would star by R's intervals, not its no-R rule");
    Some(PathBuf::from(mm))
}

/// What compare-mmtests.pl prints for `names` under `dir`.
pub(crate) fn script(mm: &Path, dir: &Path, names: &[&str]) -> String {
    let out = Command::new("perl")
        .arg(mm.join("bin/compare-mmtests.pl"))
        .args(["-d", dir.to_str().unwrap(), "-b", "pagealloc", "-n", &names.join(",")])
        .output()
        .expect("perl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !text.is_empty(),
        "compare-mmtests.pl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Our table for the same runs, read from the tree's `pagealloc.log` files.
fn ours(dir: &Path, names: &[&str]) -> String {
    let logs: Vec<String> = names
        .iter()
        .map(|n| std::fs::read_to_string(dir.join(n).join("iter-0/pagealloc/logs/pagealloc.log")).expect("a log"))
        .collect();
    compare(&names.iter().copied().zip(logs.iter().map(String::as_str)).collect::<Vec<_>>())
}

/// Compare every row; returns (rows, starred rows) so a caller can check
/// that both marks were exercised.
fn same_rows(mm: &Path, dir: &Path, names: &[&str]) -> (usize, usize) {
    let (theirs, ours) = (script(mm, dir, names), ours(dir, names));
    let (t, o): (Vec<&str>, Vec<&str>) = (theirs.lines().collect(), ours.lines().collect());
    for (i, (a, b)) in t.iter().zip(&o).enumerate() {
        assert_eq!(b, a, "row {i} of {names:?} differs (ours, then compare-mmtests.pl's)");
    }
    assert_eq!(o.len(), t.len(), "row counts differ for {names:?}");
    (t.len(), t.iter().filter(|l| l.contains('*')).count())
}

/// The runs of a `raw/pagealloc-micro/` tree: per design its three monitor
/// conditions, then the two designs' no-monitor runs against each other.
fn run_sets(dir: &Path) -> Vec<Vec<String>> {
    let mut sets = Vec::new();
    for design in ["old", "new"] {
        let names: Vec<String> =
            ["none", "monitor10ms", "continuous"].iter().map(|m| format!("{design}-{m}")).collect();
        if names.iter().all(|n| dir.join(n).is_dir()) {
            sets.push(names);
        }
    }
    if dir.join("old-none").is_dir() && dir.join("new-none").is_dir() {
        sets.push(vec!["old-none".into(), "new-none".into()]);
    }
    sets
}

/// Every run set of a tree compared row by row: (rows, starred rows).
pub(crate) fn check_tree(mm: &Path, dir: &Path) -> (usize, usize) {
    let sets = run_sets(dir);
    assert!(!sets.is_empty(), "no pagealloc-micro runs under {}", dir.display());
    let (mut rows, mut starred) = (0, 0);
    for names in &sets {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (r, s) = same_rows(mm, dir, &names);
        rows += r;
        starred += s;
    }
    (rows, starred)
}

/// A tree a full `pagealloc bench` run left, named by `PAGEALLOC_MICRO_TREE`
/// (e.g. `bench-report/raw/pagealloc-micro`).
#[test]
fn compare_mmtests_pl_agrees_on_a_given_tree() {
    let Ok(tree) = std::env::var("PAGEALLOC_MICRO_TREE") else { return };
    let Some(mm) = checkout() else { return };
    let (rows, starred) = check_tree(&mm, Path::new(&tree));
    eprintln!("{tree}: {rows} rows agree, {starred} of them starred");
}

/// Hand-made logs where the means differ by less than one cycle (never
/// starred, however far apart in noise terms), by more (starred, however
/// noisy), and by exactly nothing.
#[test]
fn compare_mmtests_pl_agrees_on_the_star_boundary() {
    let Some(mm) = checkout() else { return };
    let log = |rounds: usize, f: &dyn Fn(u64, usize) -> (u64, u64)| {
        let mut s = String::new();
        for b in [1u64, 2, 1024] {
            for i in 0..rounds {
                let (a, fr) = f(b, i);
                s.push_str(&log_line(4, b, a, fr));
                s.push('\n');
            }
        }
        s
    };
    let runs = [
        ("old-none", log(15, &|b, i| (8539 + 37 * b + (i as u64 * 7919) % 13, 3 * b + i as u64 % 5))),
        // alloc means within 1 of the base at batch 1 and 2, free far apart.
        ("old-monitor10ms", log(15, &|b, i| (8539 + 37 * b + (i as u64 * 7919) % 13 + u64::from(i == 3), 3 * b + 40))),
        ("new-none", log(15, &|b, _| (8600 + b, 3 * b))),
        // Three rounds: one sample after the two warm-up rounds, no
        // Stddev, starred all the same.
        ("new-single", log(3, &|b, i| (if i < 2 { 1 } else { 9000 + b }, 3 * b))),
    ];
    let dir = std::env::temp_dir().join(format!("pagealloc-mmtests-{}", std::process::id()));
    for (name, l) in &runs {
        let logs = dir.join(name).join("iter-0/pagealloc/logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("pagealloc.log"), l).unwrap();
        for (f, c) in split_files(l) {
            std::fs::write(logs.join(f), c).unwrap();
        }
    }
    let names: Vec<&str> = runs.iter().map(|(n, _)| *n).collect();
    let (rows, starred) = same_rows(&mm, &dir, &names);
    let t = ours(&dir, &names);
    let _ = std::fs::remove_dir_all(&dir);
    let amean = t.lines().find(|l| l.starts_with("Amean     alloc-odr4-1 ")).expect("Amean row");
    assert_eq!(amean.matches('*').count(), 4, "within one cycle: not starred; the others: starred: {amean}");
    assert!(rows > 0 && starred > 0);
}
