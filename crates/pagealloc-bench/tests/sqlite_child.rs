//! `pagealloc sqlite-child`, the many-databases workload of `bench sqlite`,
//! on a few small databases: both caches run it without errors, and the
//! device-latency VFS (`--device-us`) charges page reads, sleeping at least
//! the stated latency each, only when asked.

use pagealloc_sqlite::ffi;
use std::ffi::CString;
use std::path::Path;
use std::process::Command;

const DBS: usize = 4;
const ROWS: u64 = 400;

/// Create `db<i>.sqlite` as `bench sqlite` does (SQLite's own cache: this
/// test process never installs pagealloc's).
fn populate(dir: &Path) {
    for i in 0..DBS {
        let path = CString::new(dir.join(format!("db{i}.sqlite")).to_str().unwrap()).unwrap();
        let sql = CString::new(format!(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {ROWS})
             INSERT INTO t SELECT x, randomblob(200) FROM c;"
        ))
        .unwrap();
        let mut db = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
        // SAFETY: NUL-terminated strings, a valid out-pointer, the default
        // VFS; the connection is closed below.
        unsafe {
            assert_eq!(ffi::sqlite3_open_v2(path.as_ptr(), &raw mut db, flags, std::ptr::null()), ffi::SQLITE_OK);
            let rc = ffi::sqlite3_exec(db, sql.as_ptr(), None, std::ptr::null_mut(), std::ptr::null_mut());
            assert_eq!(rc, ffi::SQLITE_OK);
            ffi::sqlite3_close(db);
        }
    }
}

/// One child run: its JSON line, parsed.
fn child(dir: &Path, cache: &str, device_us: u64) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .args(["sqlite-child", cache, dir.to_str().unwrap()])
        .args(["--dbs", &DBS.to_string(), "--rows", &ROWS.to_string(), "--budget", "131072"])
        .args(["--threads", "2", "--secs", "0.3", "--warm-ms", "100", "--skew", "1", "--write-pct", "10"])
        .args(["--idle-ms", "0", "--device-us", &device_us.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn both_caches_run_and_device_reads_are_charged() {
    let dir = std::env::temp_dir().join(format!("pagealloc-bench-sqlite-child-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    populate(&dir);
    for cache in ["pcache1", "pagealloc"] {
        // 128 KiB for 4 databases of about 25 pages: misses go to the file.
        let warm = child(&dir, cache, 0);
        assert_eq!(warm["errors"], 0, "{cache}: {warm}");
        assert!(warm["ops"].as_u64().unwrap() > 0 && warm["misses"].as_u64().unwrap() > 0, "{cache}: {warm}");
        assert_eq!(warm["device_reads"], 0, "{cache}: no VFS, no charged reads");
        let dev = child(&dir, cache, 200);
        assert_eq!(dev["errors"], 0, "{cache}: {dev}");
        assert!(dev["device_reads"].as_u64().unwrap() > 0, "{cache}: misses read pages: {dev}");
        let wait = dev["device_wait_us"].as_f64().unwrap();
        assert!(wait >= 200.0, "{cache}: each charged read sleeps at least 200 us, slept {wait}");
    }
    if let Some(g) = pagealloc_sqlite::global() {
        panic!("this process must keep SQLite's own cache, found {g:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A `--scan` run of `cache` with `secs` measured afterwards.
fn scan(dir: &Path, cache: &str, secs: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pagealloc"))
        .args(["sqlite-child", cache, dir.to_str().unwrap()])
        .args(["--dbs", &DBS.to_string(), "--rows", &ROWS.to_string(), "--budget", "16777216"])
        .args(["--threads", "1", "--secs", secs, "--warm-ms", "50", "--skew", "1", "--write-pct", "0"])
        .args(["--idle-ms", "0", "--scan"])
        .output()
        .unwrap()
}

#[test]
fn the_scan_counts_every_page_for_each_cache() {
    let dir = std::env::temp_dir().join(format!("pagealloc-bench-sqlite-scan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    populate(&dir);
    let mut pages = Vec::new();
    for cache in ["pcache1", "pagealloc", "pagealloc-noshare"] {
        let out = scan(&dir, cache, "0");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{cache}: {text}");
        let run: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert!(run["scan_anon"].as_u64().unwrap() > 0, "{cache}: {run}");
        assert_eq!(run["ops"], 0, "{cache}: --secs 0 stops after the scan");
        pages.push(run["scan_pages"].as_u64().unwrap());
    }
    // 4 databases of 400 rows of about 215 bytes: more than 80 pages, the
    // same count whatever the cache.
    assert!(pages[0] > 80 && pages.iter().all(|&p| p == pages[0]), "{pages:?}");
    // The measured interval reports the CPU time it used.
    let out = scan(&dir, "pagealloc", "0.2");
    let run: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert!(run["ops"].as_u64().unwrap() > 0 && run["cpu_secs"].as_f64().unwrap() > 0.0, "{run}");
    let bad = scan(&dir, "pcache2", "0");
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stdout).contains("unknown cache"));
    std::fs::remove_dir_all(dir).unwrap();
}
