//! The few items of SQLite's C API this crate uses, declared by hand from
//! `sqlite3.h` (3.40.1) so that no second copy of SQLite is built or linked:
//! the symbols resolve to the system's `libsqlite3.so.0` at load time.
//! Beside the cache's own needs (`sqlite3_config`), the few calls a program
//! needs to drive a database (open, exec, prepare/bind/step, status), which
//! `pagealloc bench sqlite` uses, as rusqlite is not available to it.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `SQLITE_OK`.
pub const SQLITE_OK: c_int = 0;
/// `SQLITE_ERROR`.
pub const SQLITE_ERROR: c_int = 1;
/// `SQLITE_NOMEM`.
pub const SQLITE_NOMEM: c_int = 7;
/// `SQLITE_MISUSE`: what `sqlite3_config` returns after `sqlite3_initialize`.
pub const SQLITE_MISUSE: c_int = 21;
/// `SQLITE_CONFIG_PCACHE2`: install a `sqlite3_pcache_methods2`.
pub const SQLITE_CONFIG_PCACHE2: c_int = 18;
/// `SQLITE_CONFIG_GETPCACHE2`: read the installed one back.
pub const SQLITE_CONFIG_GETPCACHE2: c_int = 19;
/// `SQLITE_ROW`: `sqlite3_step` has a row.
pub const SQLITE_ROW: c_int = 100;
/// `SQLITE_DONE`: `sqlite3_step` finished.
pub const SQLITE_DONE: c_int = 101;
/// `SQLITE_OPEN_READWRITE`.
pub const SQLITE_OPEN_READWRITE: c_int = 0x2;
/// `SQLITE_OPEN_CREATE`.
pub const SQLITE_OPEN_CREATE: c_int = 0x4;
/// `SQLITE_OPEN_NOMUTEX`: the caller serialises use of the connection.
pub const SQLITE_OPEN_NOMUTEX: c_int = 0x8000;
/// `SQLITE_DBSTATUS_CACHE_USED`: bytes of page cache the connection uses.
pub const SQLITE_DBSTATUS_CACHE_USED: c_int = 1;
/// `SQLITE_DBSTATUS_CACHE_HIT`: page-cache hits.
pub const SQLITE_DBSTATUS_CACHE_HIT: c_int = 7;
/// `SQLITE_DBSTATUS_CACHE_MISS`: page-cache misses.
pub const SQLITE_DBSTATUS_CACHE_MISS: c_int = 8;

/// `sqlite3`: a connection, opaque.
#[repr(C)]
pub struct Sqlite3 {
    _opaque: [u8; 0],
}

/// `sqlite3_stmt`: a prepared statement, opaque.
#[repr(C)]
pub struct Sqlite3Stmt {
    _opaque: [u8; 0],
}

/// `sqlite3_pcache`: opaque to SQLite; here a `cache::CacheHandle`.
#[repr(C)]
pub struct Sqlite3Pcache {
    _opaque: [u8; 0],
}

/// `sqlite3_pcache_page`: what `xFetch` returns. SQLite reads the two
/// pointers and owns the bytes they point to while the page is pinned.
#[repr(C)]
#[derive(Debug)]
pub struct Sqlite3PcachePage {
    /// The page content, `szPage` bytes.
    pub p_buf: *mut c_void,
    /// `szExtra` bytes SQLite keeps beside the page (its `PgHdr`).
    pub p_extra: *mut c_void,
}

/// `sqlite3_pcache_methods2`, field for field. `sqlite3_config` copies it,
/// so a caller's copy may go away after the call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_snake_case, missing_docs)]
pub struct PcacheMethods2 {
    pub iVersion: c_int,
    pub pArg: *mut c_void,
    pub xInit: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    pub xShutdown: Option<unsafe extern "C" fn(*mut c_void)>,
    pub xCreate: Option<unsafe extern "C" fn(c_int, c_int, c_int) -> *mut Sqlite3Pcache>,
    pub xCachesize: Option<unsafe extern "C" fn(*mut Sqlite3Pcache, c_int)>,
    pub xPagecount: Option<unsafe extern "C" fn(*mut Sqlite3Pcache) -> c_int>,
    pub xFetch: Option<unsafe extern "C" fn(*mut Sqlite3Pcache, c_uint, c_int) -> *mut Sqlite3PcachePage>,
    pub xUnpin: Option<unsafe extern "C" fn(*mut Sqlite3Pcache, *mut Sqlite3PcachePage, c_int)>,
    pub xRekey: Option<unsafe extern "C" fn(*mut Sqlite3Pcache, *mut Sqlite3PcachePage, c_uint, c_uint)>,
    pub xTruncate: Option<unsafe extern "C" fn(*mut Sqlite3Pcache, c_uint)>,
    pub xDestroy: Option<unsafe extern "C" fn(*mut Sqlite3Pcache)>,
    pub xShrink: Option<unsafe extern "C" fn(*mut Sqlite3Pcache)>,
}

// SAFETY: the struct is a table of function pointers and an unused null
// `pArg`; nothing in it is tied to a thread.
unsafe impl Sync for PcacheMethods2 {}
// SAFETY: as for Sync.
unsafe impl Send for PcacheMethods2 {}

#[allow(missing_docs)] // the C API's own names; sqlite3.h documents them
#[link(name = "sqlite3")]
extern "C" {
    /// Variadic, as in C: the argument after `op` depends on `op`.
    pub fn sqlite3_config(op: c_int, ...) -> c_int;
    pub fn sqlite3_open_v2(name: *const c_char, db: *mut *mut Sqlite3, flags: c_int, vfs: *const c_char) -> c_int;
    pub fn sqlite3_close(db: *mut Sqlite3) -> c_int;
    /// With no callback: runs every statement of `sql`, rows discarded.
    pub fn sqlite3_exec(
        db: *mut Sqlite3,
        sql: *const c_char,
        cb: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_char, *mut *mut c_char) -> c_int>,
        arg: *mut c_void,
        errmsg: *mut *mut c_char,
    ) -> c_int;
    pub fn sqlite3_errmsg(db: *mut Sqlite3) -> *const c_char;
    pub fn sqlite3_prepare_v2(
        db: *mut Sqlite3,
        sql: *const c_char,
        n: c_int,
        stmt: *mut *mut Sqlite3Stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    pub fn sqlite3_bind_int64(stmt: *mut Sqlite3Stmt, i: c_int, v: i64) -> c_int;
    pub fn sqlite3_step(stmt: *mut Sqlite3Stmt) -> c_int;
    pub fn sqlite3_column_int64(stmt: *mut Sqlite3Stmt, i: c_int) -> i64;
    pub fn sqlite3_reset(stmt: *mut Sqlite3Stmt) -> c_int;
    pub fn sqlite3_finalize(stmt: *mut Sqlite3Stmt) -> c_int;
    pub fn sqlite3_db_status(db: *mut Sqlite3, op: c_int, cur: *mut c_int, hi: *mut c_int, reset: c_int) -> c_int;
}
