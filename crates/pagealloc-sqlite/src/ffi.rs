//! The few items of SQLite's C API this crate uses, declared by hand from
//! `sqlite3.h` (3.40.1) so that no second copy of SQLite is built or linked:
//! the symbols resolve to the system's `libsqlite3.so.0` at load time.

use std::ffi::{c_int, c_uint, c_void};

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

#[link(name = "sqlite3")]
extern "C" {
    /// Variadic, as in C: the argument after `op` depends on `op`.
    pub fn sqlite3_config(op: c_int, ...) -> c_int;
}
