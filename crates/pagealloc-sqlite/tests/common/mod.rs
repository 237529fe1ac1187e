//! A minimal SQLite client over the system library's C API, declared here
//! (no rusqlite offline): open, exec, integer queries, close.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};

#[repr(C)]
pub struct Sqlite3 {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct Stmt {
    _opaque: [u8; 0],
}

pub const SQLITE_NOMEM: c_int = 7;
const SQLITE_ROW: c_int = 100;
const SQLITE_DONE: c_int = 101;
const OPEN_RW_CREATE: c_int = 0x2 | 0x4;
/// SQLITE_OPEN_NOMUTEX: each connection is used by one thread.
const OPEN_NOMUTEX: c_int = 0x8000;

#[link(name = "sqlite3")]
extern "C" {
    fn sqlite3_open_v2(name: *const c_char, db: *mut *mut Sqlite3, flags: c_int, vfs: *const c_char) -> c_int;
    fn sqlite3_close(db: *mut Sqlite3) -> c_int;
    fn sqlite3_errmsg(db: *mut Sqlite3) -> *const c_char;
    fn sqlite3_prepare_v2(
        db: *mut Sqlite3,
        sql: *const c_char,
        n: c_int,
        stmt: *mut *mut Stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    fn sqlite3_step(stmt: *mut Stmt) -> c_int;
    fn sqlite3_column_count(stmt: *mut Stmt) -> c_int;
    fn sqlite3_column_int64(stmt: *mut Stmt, i: c_int) -> i64;
    fn sqlite3_finalize(stmt: *mut Stmt) -> c_int;
    fn sqlite3_exec(
        db: *mut Sqlite3,
        sql: *const c_char,
        cb: *const c_void,
        arg: *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
}

/// An SQLite error: the code and SQLite's message.
#[derive(Debug)]
pub struct Error {
    pub rc: c_int,
    pub msg: String,
}

/// One connection, used from one thread at a time.
pub struct Db(*mut Sqlite3);

// SAFETY: a connection opened NOMUTEX may move between threads as long as
// one thread uses it at a time, which `&mut self`/ownership guarantees.
unsafe impl Send for Db {}

impl Db {
    pub fn open(name: &str) -> Result<Db, Error> {
        let c = CString::new(name).unwrap();
        let mut db = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        let rc = unsafe { sqlite3_open_v2(c.as_ptr(), &mut db, OPEN_RW_CREATE | OPEN_NOMUTEX, std::ptr::null()) };
        let d = Db(db);
        if rc != 0 {
            return Err(d.error(rc));
        }
        Ok(d)
    }

    fn error(&self, rc: c_int) -> Error {
        // SAFETY: errmsg of a (possibly null) connection is a valid C string.
        let msg = unsafe { CStr::from_ptr(sqlite3_errmsg(self.0)) }.to_string_lossy().into_owned();
        Error { rc, msg }
    }

    pub fn exec(&mut self, sql: &str) -> Result<(), Error> {
        let c = CString::new(sql).unwrap();
        // SAFETY: open connection, valid SQL string, no callback.
        let rc =
            unsafe { sqlite3_exec(self.0, c.as_ptr(), std::ptr::null(), std::ptr::null_mut(), std::ptr::null_mut()) };
        if rc != 0 {
            return Err(self.error(rc));
        }
        Ok(())
    }

    /// Rows of integer columns.
    pub fn query(&mut self, sql: &str) -> Result<Vec<Vec<i64>>, Error> {
        let c = CString::new(sql).unwrap();
        let mut st = std::ptr::null_mut();
        // SAFETY: open connection, NUL-terminated SQL.
        let rc = unsafe { sqlite3_prepare_v2(self.0, c.as_ptr(), -1, &mut st, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(self.error(rc));
        }
        let mut rows = Vec::new();
        let rc = loop {
            // SAFETY: a prepared statement of this connection.
            match unsafe { sqlite3_step(st) } {
                SQLITE_ROW => {
                    // SAFETY: a statement on a row.
                    let n = unsafe { sqlite3_column_count(st) };
                    let col = |i| {
                        // SAFETY: a statement on a row, column `i` < n.
                        unsafe { sqlite3_column_int64(st, i) }
                    };
                    rows.push((0..n).map(col).collect());
                }
                SQLITE_DONE => break 0,
                rc => break rc,
            }
        };
        // SAFETY: finalise once.
        unsafe { sqlite3_finalize(st) };
        if rc != 0 {
            return Err(self.error(rc));
        }
        Ok(rows)
    }

    pub fn one(&mut self, sql: &str) -> i64 {
        self.query(sql).unwrap()[0][0]
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: closing our connection once (null is a no-op); every
        // statement was finalised.
        let rc = unsafe { sqlite3_close(self.0) };
        assert_eq!(rc, 0, "sqlite3_close");
    }
}

/// A fresh directory for on-disk databases.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pagealloc-sqlite-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every frame of the installed group is back in the allocator.
pub fn assert_conserved(g: &pagealloc_sqlite::Group) {
    g.check_invariants().unwrap();
    assert_eq!(g.charged_bytes(), 0, "bytes still charged after every connection closed");
    assert_eq!(g.used_frames(), 0, "frames still held after every connection closed");
    let a = g.allocator();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.check_invariants().unwrap();
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
