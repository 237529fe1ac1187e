//! Installing from C with one call: builds `tests/c/install_test.c` with the
//! system C compiler against the libpagealloc_sqlite.so cargo built for this
//! run (`cargo test` builds every crate type of the library) and the
//! system's libsqlite3, and runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where this run's libpagealloc_sqlite.so is: target/<profile>/deps when
/// cargo built the library only for the tests, target/<profile> when it
/// was built as a target: the newer of the two.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let modified = |d: &Path| d.join("libpagealloc_sqlite.so").metadata().ok()?.modified().ok();
    [deps, deps.parent().unwrap()]
        .into_iter()
        .filter_map(|d| Some((modified(d)?, d.to_path_buf())))
        .max()
        .map(|(_, d)| d)
        .expect("libpagealloc_sqlite.so next to the test binary")
}

#[test]
fn c_program_installs_with_one_call() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let profile_dir = lib_dir();
    let out: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pagealloc-sqlite-install-test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let build = Command::new(cc)
        .arg(manifest.join("tests/c/install_test.c"))
        .arg("-I")
        .arg(manifest.join("include"))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", profile_dir.display()))
        .arg(format!("-Wl,-rpath,{}", profile_dir.display()))
        .args(["-lpagealloc_sqlite", "-lsqlite3", "-Wall", "-Werror"])
        .output()
        .unwrap();
    assert!(build.status.success(), "cc: {}", String::from_utf8_lossy(&build.stderr));
    // Not preloaded: the constructor must stay out of the way of the
    // program's own install (which the program checks returns SQLITE_OK).
    // Nor may cargo's LD_LIBRARY_PATH (target/<profile> first) pick an
    // older copy of the library than the one linked: the rpath decides.
    let run = Command::new(&out).env_remove("LD_PRELOAD").env_remove("LD_LIBRARY_PATH").output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("\ncaches ") && stdout.starts_with("overdraft now 0 peak "), "{stdout}");
}
