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
