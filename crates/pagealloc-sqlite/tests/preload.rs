//! The LD_PRELOAD path: `scripts/sqlite-preload-test` runs CPython's
//! test_sqlite3 with the library preloaded and checks it passes on our cache
//! (stats line with fetches > 0). Skipped, loudly, where Python's test suite
//! is missing.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn python_test_sqlite3_passes_under_ld_preload() {
    let have_suite =
        Command::new("python3").args(["-c", "import test.test_sqlite3"]).status().is_ok_and(|s| s.success());
    if !have_suite {
        eprintln!("SKIPPED: python3 with test.test_sqlite3 not found");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    // target/<profile>/deps/preload-<hash>: the profile of this build.
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(|d| d.parent()).and_then(|d| d.file_name()).unwrap();
    let out = Command::new(root.join("scripts/sqlite-preload-test")).arg(profile).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sqlite-preload-test failed");
    assert!(stdout.contains("Result: SUCCESS"));
    let stats = stdout.lines().find(|l| l.starts_with("pagealloc-sqlite: caches ")).expect("a stats line");
    let fetches: u64 = stats.split_whitespace().skip_while(|w| *w != "fetches").nth(1).unwrap().parse().unwrap();
    assert!(fetches > 0, "{stats}");
}
