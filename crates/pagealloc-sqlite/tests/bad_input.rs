//! Bad input to an installed cache: `xCreate` through the methods table
//! SQLite was given (`SQLITE_CONFIG_GETPCACHE2`), with page sizes SQLite
//! cannot have and extra areas of 250 bytes or more, returns NULL (SQLite's
//! SQLITE_NOMEM) and leaves the group as it was; then a real connection
//! still works. One test: one install per process.

mod common;
use common::{assert_conserved, Db};
use pagealloc_sqlite::ffi::{self, PcacheMethods2};
use pagealloc_sqlite::{install, page_charge, Config, InstallError, MAX_EXTRA};

/// The methods SQLite holds now.
fn installed_methods() -> PcacheMethods2 {
    let mut m = std::mem::MaybeUninit::<PcacheMethods2>::zeroed();
    // SAFETY: GETPCACHE2 writes one `sqlite3_pcache_methods2` to the pointer.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETPCACHE2, m.as_mut_ptr()) };
    assert_eq!(rc, ffi::SQLITE_OK);
    // SAFETY: written by SQLite just above (all pointers or null).
    unsafe { m.assume_init() }
}

#[test]
fn bad_page_and_extra_sizes_get_no_cache() {
    // A budget below one 4 KiB page is refused before SQLite is touched.
    let e = install(&Config { budget_bytes: Some(4095), ..Config::default() }).unwrap_err();
    assert!(matches!(e, InstallError::Budget { budget: 4095, .. }), "{e:?}");
    let g = install(&Config { arena_bytes: 8 << 20, ..Config::default() }).unwrap();
    let m = installed_methods();
    let (create, destroy) = (m.xCreate.unwrap(), m.xDestroy.unwrap());
    for (page, extra) in [(256, 100), (3000, 100), (131072, 100), (0, 100), (-4096, 100), (4096, 250), (4096, 4096)] {
        // SAFETY: xCreate takes plain integers.
        let c = unsafe { create(page, extra, 1) };
        assert!(c.is_null(), "xCreate({page}, {extra}) must fail");
    }
    for extra in [300, i32::MAX, -1] {
        // SAFETY: as above.
        assert!(unsafe { create(4096, extra, 0) }.is_null(), "extra {extra}");
    }
    assert_eq!(g.totals().0, 0, "no cache was made");
    g.check_invariants().unwrap();
    // The largest extra area accepted, and the smallest and largest pages.
    for page in [512, 4096, 65536] {
        // SAFETY: as above; destroyed at once, as SQLite would.
        let c = unsafe { create(page, MAX_EXTRA as i32, 1) };
        assert!(!c.is_null(), "xCreate({page}, {MAX_EXTRA})");
        // SAFETY: a live cache of the installed table, not used again.
        unsafe { destroy(c) };
    }
    assert!(page_charge(65536, MAX_EXTRA) > 16 * 4096);
    // SQLite itself still runs on the cache.
    let mut db = Db::open(":memory:").unwrap();
    db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(1), (2);").unwrap();
    assert_eq!(db.one("SELECT sum(x) FROM t"), 3);
    drop(db);
    assert_eq!(g.totals().0, 4);
    assert_conserved(&g);
}
