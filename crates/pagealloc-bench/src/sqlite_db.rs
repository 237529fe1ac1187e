//! A thin safe layer over the system SQLite's C API (through
//! `pagealloc_sqlite::ffi`) for `bench sqlite`: a connection, a prepared
//! statement with one integer parameter, and the page-cache counters of
//! `sqlite3_db_status`. rusqlite is not available offline, and the bench
//! needs only these few calls.
//!
//! Connections are opened `SQLITE_OPEN_NOMUTEX`: a [`Db`] is `Send` but not
//! `Sync`, so the callers serialise each connection with a mutex of their
//! own, as the threads of the workload do.

use pagealloc_sqlite::ffi;
use std::ffi::{c_int, CStr, CString};
use std::path::Path;

/// One connection. Its statements must be dropped before it (SQLite's
/// `sqlite3_close` refuses a connection with unfinalised statements).
pub struct Db {
    raw: *mut ffi::Sqlite3,
}

// SAFETY: a connection opened NOMUTEX may be used from any thread as long as
// only one uses it at a time; `Db` is not `Sync`, so a shared one sits behind
// a mutex, which gives exactly that.
unsafe impl Send for Db {}

impl Db {
    /// Open (creating) the database file at `path`.
    pub fn open(path: &Path) -> Result<Self, String> {
        let name = CString::new(path.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
        let mut raw = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE | ffi::SQLITE_OPEN_NOMUTEX;
        // SAFETY: `name` is NUL-terminated and lives across the call; `raw`
        // is a valid out-pointer; a null VFS name picks the default.
        let rc = unsafe { ffi::sqlite3_open_v2(name.as_ptr(), &raw mut raw, flags, std::ptr::null()) };
        let db = Self { raw };
        if rc != ffi::SQLITE_OK {
            return Err(format!("open {}: {}", path.display(), db.errmsg()));
        }
        Ok(db)
    }

    /// SQLite's message for the last error on this connection.
    fn errmsg(&self) -> String {
        if self.raw.is_null() {
            return "out of memory".into();
        }
        // SAFETY: a live connection; the message is a NUL-terminated string
        // SQLite owns until the next call on the connection, copied at once.
        unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(self.raw)).to_string_lossy().into_owned() }
    }

    /// Run every statement of `sql`, discarding rows.
    pub fn exec(&self, sql: &str) -> Result<(), String> {
        let c = CString::new(sql).map_err(|e| e.to_string())?;
        // SAFETY: a live connection, a NUL-terminated statement list, no
        // callback and no error-message out-pointer (errmsg() reads it).
        let rc = unsafe { ffi::sqlite3_exec(self.raw, c.as_ptr(), None, std::ptr::null_mut(), std::ptr::null_mut()) };
        if rc != ffi::SQLITE_OK {
            return Err(format!("{sql}: {}", self.errmsg()));
        }
        Ok(())
    }

    /// Prepare one statement (its `?1` bound by [`Stmt::run`]).
    pub fn prepare(&self, sql: &str) -> Result<Stmt, String> {
        let c = CString::new(sql).map_err(|e| e.to_string())?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a live connection; -1 reads `c` up to its NUL; `raw` is a
        // valid out-pointer; no tail wanted.
        let rc = unsafe { ffi::sqlite3_prepare_v2(self.raw, c.as_ptr(), -1, &raw mut raw, std::ptr::null_mut()) };
        if rc != ffi::SQLITE_OK || raw.is_null() {
            return Err(format!("{sql}: {}", self.errmsg()));
        }
        Ok(Stmt { raw })
    }

    /// The current value of `sqlite3_db_status(op)`, resetting it if `reset`.
    pub fn status(&self, op: c_int, reset: bool) -> i64 {
        let (mut cur, mut hi) = (0, 0);
        // SAFETY: a live connection and two valid out-pointers.
        let rc = unsafe { ffi::sqlite3_db_status(self.raw, op, &raw mut cur, &raw mut hi, c_int::from(reset)) };
        if rc == ffi::SQLITE_OK {
            i64::from(cur)
        } else {
            -1
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: the connection is ours and every statement of it was
        // dropped first (the callers' field order); a null one is a no-op.
        unsafe { ffi::sqlite3_close(self.raw) };
    }
}

/// A prepared statement of one connection.
pub struct Stmt {
    raw: *mut ffi::Sqlite3Stmt,
}

// SAFETY: as for `Db`: used by one thread at a time, behind the same mutex
// as its connection.
unsafe impl Send for Stmt {}

impl Stmt {
    /// Bind `?1 = arg`, step to the end, and return the first column of the
    /// first row (if any).
    pub fn run(&mut self, arg: i64) -> Result<Option<i64>, c_int> {
        // SAFETY: a live statement; index 1 is its one parameter.
        unsafe { ffi::sqlite3_bind_int64(self.raw, 1, arg) };
        let mut first = None;
        loop {
            // SAFETY: a live statement, stepped by this thread only.
            match unsafe { ffi::sqlite3_step(self.raw) } {
                // SAFETY: the statement has a row; column 0 exists in every
                // statement this module's callers prepare.
                ffi::SQLITE_ROW => first = first.or(Some(unsafe { ffi::sqlite3_column_int64(self.raw, 0) })),
                ffi::SQLITE_DONE => break,
                rc => {
                    // SAFETY: a live statement; reset makes it reusable.
                    unsafe { ffi::sqlite3_reset(self.raw) };
                    return Err(rc);
                }
            }
        }
        // SAFETY: a live statement; reset makes it reusable.
        unsafe { ffi::sqlite3_reset(self.raw) };
        Ok(first)
    }
}

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: the statement is ours and not used after this.
        unsafe { ffi::sqlite3_finalize(self.raw) };
    }
}

/// A line of /proc/self/status (`VmRSS`, `VmHWM`) in bytes; 0 if absent.
pub fn proc_status_bytes(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Zipf(s) over `0..n` by inverse CDF: rank 0 the most likely.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `n` ranks with exponent `s`.
    pub fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Self { cdf }
    }

    /// The rank for a uniform `u` in [0, 1).
    pub fn sample(&self, u: f64) -> usize {
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// xorshift64*: each thread's own cheap generator.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
