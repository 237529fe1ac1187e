//! A budget without room for one page of each open cache: SQLite reports
//! SQLITE_NOMEM ("out of memory") for the connection that cannot get a
//! cache, and nothing crashes. One test: one install per process.

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
fn a_budget_below_one_page_per_cache_is_sqlite_nomem() {
    // 32 KiB: each connection's cache reserves one page's charge (its
    // frame and header, page_charge: about 4.4 KB), plus the pages it uses,
    // so fewer than 8 connections fit.
    let g = install(&Config {
        arena_bytes: 4 << 20,
        hugepages: false,
        budget_bytes: Some(8 * 4096),
        page_reporting: false,
    })
    .unwrap();
    let mut open = Vec::new();
    let err = loop {
        match open_and_use(":memory:") {
            Ok(db) => open.push(db),
            Err(e) => break e,
        }
        assert!(open.len() <= 8, "the budget cannot hold more than 8 caches");
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
    // A 64 KiB page needs 16 frames: more than the whole budget.
    drop(open);
    let mut db = Db::open(":memory:").unwrap();
    let e = db.exec("PRAGMA page_size = 65536; CREATE TABLE big(x);").unwrap_err();
    assert_eq!(e.rc, SQLITE_NOMEM, "{e:?}");
    drop(db);
    assert_conserved(&g);
}
