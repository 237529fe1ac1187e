//! Real SQLite on the pagealloc cache: several databases, in memory and on
//! disk, with several page sizes, through the system's libsqlite3. One test:
//! the cache must be installed before SQLite initialises, once per process.

mod common;
use common::{assert_conserved, temp_dir, Db};
use pagealloc_sqlite::{install, Config, InstallError, METHODS};

/// Fill a table, then check sums through a rolled-back and a committed
/// transaction; returns the final row count.
fn workload(db: &mut Db, rows: i64) -> i64 {
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB)").unwrap();
    db.exec("CREATE INDEX t_v ON t(v)").unwrap();
    db.exec("BEGIN").unwrap();
    for i in 0..rows {
        db.exec(&format!("INSERT INTO t VALUES({i}, {}, randomblob(300))", i * 7 % 1000)).unwrap();
    }
    db.exec("COMMIT").unwrap();
    let sum: i64 = (0..rows).map(|i| i * 7 % 1000).sum();
    assert_eq!(db.one("SELECT count(*) FROM t"), rows);
    assert_eq!(db.one("SELECT sum(v) FROM t"), sum);
    db.exec("BEGIN; UPDATE t SET v = v + 1; DELETE FROM t WHERE id % 3 = 0;").unwrap();
    assert_eq!(db.one("SELECT sum(v) FROM t WHERE id % 3 = 0"), 0, "deleted inside the transaction");
    db.exec("ROLLBACK").unwrap();
    assert_eq!(db.one("SELECT sum(v) FROM t"), sum, "rollback restores every page");
    db.exec("BEGIN; DELETE FROM t WHERE id % 2 = 0; COMMIT;").unwrap();
    let odd_sum: i64 = (0..rows).filter(|i| i % 2 == 1).map(|i| i * 7 % 1000).sum();
    assert_eq!(db.one("SELECT sum(v) FROM t"), odd_sum);
    assert_eq!(db.one("SELECT count(*) FROM t WHERE v BETWEEN 100 AND 200"), {
        (0..rows).filter(|i| i % 2 == 1 && (100..=200).contains(&(i * 7 % 1000))).count() as i64
    });
    db.one("SELECT count(*) FROM t")
}

#[test]
fn sqlite_runs_on_the_pagealloc_cache() {
    let bad = install(&Config { budget_bytes: Some(100), ..Config::default() });
    assert!(matches!(bad, Err(InstallError::Budget { .. })), "{bad:?}");
    let g = install(&Config { arena_bytes: 64 << 20, ..Config::default() }).unwrap();
    assert!(matches!(install(&Config::default()), Err(InstallError::AlreadyInstalled)));
    assert_eq!(pagealloc_sqlite::pagealloc_sqlite_install(64 << 20, 0, 0), 21, "SQLITE_MISUSE");

    // xCreate through the installed table refuses page sizes SQLite cannot have.
    for sz in [256, 1000, 131072, -1] {
        // SAFETY: xCreate takes plain integers.
        let c = unsafe { METHODS.xCreate.unwrap()(sz, 100, 1) };
        assert!(c.is_null(), "page size {sz}");
    }

    let dir = temp_dir("real");
    let mut dbs = Vec::new();
    for (name, page_size, cache_size) in [
        (":memory:", 4096, 2000),
        (":memory:", 1024, 2000),
        ("a.db", 4096, 20),
        ("b.db", 8192, 2000),
        ("c.db", 65536, 10),
    ] {
        let path = if name.starts_with(':') { name.to_string() } else { dir.join(name).display().to_string() };
        let mut db = Db::open(&path).unwrap();
        db.exec(&format!("PRAGMA page_size={page_size}; PRAGMA cache_size={cache_size};")).unwrap();
        dbs.push(db);
    }
    for db in &mut dbs {
        assert_eq!(workload(db, 3000), 1500);
    }
    // Re-read through small caches: the pages come back from disk.
    for db in &mut dbs[2..] {
        assert_eq!(db.one("SELECT count(*) FROM t"), 1500);
        assert_eq!(db.one("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
    }
    let (caches, fetches, hits, misses, evictions) = g.totals();
    eprintln!("{}", pagealloc_sqlite::stats_line());
    assert!(caches >= 5 && fetches > 10_000 && hits > 0 && misses > 0, "{:?}", g.totals());
    assert!(evictions > 0, "cache_size 20 and 10 must evict");
    assert!(g.used_frames() > 0);
    drop(dbs);
    assert_conserved(&g);
    std::fs::remove_dir_all(dir).unwrap();
}
