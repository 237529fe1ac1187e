//! A hard cap without room for one page of each open cache: SQLite reports
//! SQLITE_NOMEM ("out of memory") for the connection that cannot get a
//! cache, and nothing crashes. The hard cap is the only way to get it: the
//! budget below it is overdrawn instead. One test: one install per process.

mod common;
use common::{assert_conserved, Db, SQLITE_NOMEM};
use pagealloc_sqlite::{install, Config};

/// Open a database and make it read its schema: Ok, or the SQLite error.
fn open_and_use(name: &str) -> Result<Db, common::Error> {
    let mut db = Db::open(name)?;
    db.exec("CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(1);")?;
    Ok(db)
}

#[test]
fn a_hard_cap_below_one_page_per_cache_is_sqlite_nomem() {
    // A 32 KiB hard cap: each connection's cache reserves one page's
    // charge (its frame and header, page_charge: about 4.4 KB), plus the
    // pages it uses, so fewer than 8 connections fit. The budget, 16 KiB,
    // is overdrawn on the way.
    let g = install(&Config {
        arena_bytes: 4 << 20,
        budget_bytes: Some(4 * 4096),
        hard_cap_bytes: Some(8 * 4096),
        ..Config::default()
    })
    .unwrap();
    let mut open = Vec::new();
    let err = loop {
        match open_and_use(":memory:") {
            Ok(db) => open.push(db),
            Err(e) => break e,
        }
        assert!(open.len() <= 8, "the hard cap cannot hold more than 8 caches");
    };
    assert_eq!(err.rc, SQLITE_NOMEM, "{err:?}");
    assert_eq!(err.msg, "out of memory");
    assert!(!open.is_empty(), "the first connections fit");
    // The open connections still work, and after closing one another fits.
    for db in &mut open {
        assert_eq!(db.one("SELECT count(*) FROM t"), 1);
    }
    open.pop();
    open.push(open_and_use(":memory:").unwrap());
    assert!(g.overdraft().times > 0, "the budget was overdrawn before the cap: {:?}", g.overdraft());
    // A 64 KiB page needs 16 frames: more than the whole hard cap.
    drop(open);
    let mut db = Db::open(":memory:").unwrap();
    let e = db.exec("PRAGMA page_size = 65536; CREATE TABLE big(x);").unwrap_err();
    assert_eq!(e.rc, SQLITE_NOMEM, "{e:?}");
    drop(db);
    assert_conserved(&g);
}
