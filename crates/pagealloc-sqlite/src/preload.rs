//! Installing without changing the program, and the C install calls.
//!
//! `LD_PRELOAD=libpagealloc_sqlite.so`: the library's `.init_array`
//! constructor runs after its dependency `libsqlite3.so.0` is loaded (the
//! dynamic loader initialises dependencies first) and before `main`, so
//! before anything can call `sqlite3_initialize`; it installs the cache
//! configured by the environment:
//!
//! | variable                      | meaning                               | default   |
//! |-------------------------------|---------------------------------------|-----------|
//! | `PAGEALLOC_SQLITE_ARENA`      | arena bytes (`K`/`M`/`G` suffixes)    | 512M      |
//! | `PAGEALLOC_SQLITE_BUDGET`     | budget bytes, at most the arena       | the arena |
//! | `PAGEALLOC_SQLITE_HARD_CAP`   | overdraft ceiling, budget..=arena     | the arena |
//! | `PAGEALLOC_SQLITE_SHARE_FRAMES` | `0`: a frame for each page under 4 KiB | 1      |
//! | `PAGEALLOC_SQLITE_HUGEPAGES`  | `1`: back the arena with hugepages    | 0         |
//! | `PAGEALLOC_SQLITE_REPORTING`  | `1`: give long-free blocks back to the kernel | 0 |
//! | `PAGEALLOC_SQLITE_STATS`      | `1`: one stats line on stderr at exit (processes that opened a database); an absolute path: appended to that file instead | 0 |
//!
//! The constructor acts only when `LD_PRELOAD` names this library: a program
//! that links the library (or the Rust crate) installs it itself, with
//! [`crate::install`] or [`pagealloc_sqlite_install`], and keeps SQLite's
//! own cache until it does. A bad variable leaves SQLite's own cache in
//! place and says why on stderr.

use crate::ffi::{SQLITE_ERROR, SQLITE_MISUSE, SQLITE_OK};
use crate::{Config, InstallError};
use std::ffi::c_int;
use std::sync::Once;

/// Parse `123`, `64K`, `256M`, `1G` into bytes.
fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim() == "1")
}

/// The configuration the `PAGEALLOC_SQLITE_*` variables describe.
fn config_from_env() -> Result<Config, String> {
    let mut cfg = Config::default();
    let bytes = |name: &str| match std::env::var(name) {
        Ok(v) => parse_bytes(&v).map(Some).ok_or_else(|| format!("{name}={v}: not a size in bytes")),
        Err(_) => Ok(None),
    };
    if let Some(a) = bytes("PAGEALLOC_SQLITE_ARENA")? {
        cfg.arena_bytes = a;
    }
    cfg.budget_bytes = bytes("PAGEALLOC_SQLITE_BUDGET")?;
    cfg.hard_cap_bytes = bytes("PAGEALLOC_SQLITE_HARD_CAP")?;
    cfg.share_frames = !std::env::var("PAGEALLOC_SQLITE_SHARE_FRAMES").is_ok_and(|v| v.trim() == "0");
    cfg.hugepages = env_flag("PAGEALLOC_SQLITE_HUGEPAGES");
    cfg.page_reporting = env_flag("PAGEALLOC_SQLITE_REPORTING");
    Ok(cfg)
}

/// The SQLite code for an install failure.
fn install_rc(r: Result<(), InstallError>) -> c_int {
    match r {
        Ok(()) => SQLITE_OK,
        Err(InstallError::AlreadyInstalled) => SQLITE_MISUSE,
        Err(InstallError::Sqlite(rc)) => rc,
        Err(e) => {
            eprintln!("pagealloc-sqlite: not installed: {e}");
            SQLITE_ERROR
        }
    }
}

/// C: install with an arena of `arena_bytes`, a budget of `budget_bytes`
/// (0: the arena) and hugepages if `hugepages` != 0. Call before the first
/// connection. Returns `SQLITE_OK`, `SQLITE_MISUSE` (installed already, or
/// SQLite initialised) or `SQLITE_ERROR` (a bad size; the reason on stderr).
#[no_mangle]
pub extern "C" fn pagealloc_sqlite_install(arena_bytes: u64, budget_bytes: u64, hugepages: c_int) -> c_int {
    let cfg = Config {
        arena_bytes,
        hugepages: hugepages != 0,
        budget_bytes: (budget_bytes != 0).then_some(budget_bytes),
        ..Config::default()
    };
    install_rc(crate::install(&cfg).map(drop))
}

/// C: install as configured by the `PAGEALLOC_SQLITE_*` variables (module
/// doc), building the arena at the first `xCreate` ([`crate::install_lazy`]);
/// the codes of [`pagealloc_sqlite_install`].
#[no_mangle]
pub extern "C" fn pagealloc_sqlite_install_from_env() -> c_int {
    match config_from_env() {
        Ok(cfg) => install_rc(crate::install_lazy(&cfg)),
        Err(e) => {
            eprintln!("pagealloc-sqlite: not installed: {e}");
            SQLITE_ERROR
        }
    }
}

/// C: the overdraft (module `budget`): bytes over the budget now, the
/// peak, and the charges that went over, into `out`; 0, or -1 (out
/// untouched) before the first cache.
///
/// # Safety
/// `out` points to 3 writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_sqlite_overdraft(out: *mut u64) -> c_int {
    let Some(g) = crate::global() else { return -1 };
    let o = g.overdraft();
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping([o.current, o.peak, o.times].as_ptr(), out, 3) };
    0
}

/// C: the totals since install (caches created, fetches, hits, misses,
/// evictions) into `out`; 0, or -1 (out untouched) before the first cache.
///
/// # Safety
/// `out` points to 5 writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_sqlite_totals(out: *mut u64) -> c_int {
    let Some(g) = crate::global() else { return -1 };
    let (c, f, h, m, e) = g.totals();
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping([c, f, h, m, e].as_ptr(), out, 5) };
    0
}

/// The exit line: `pagealloc-sqlite: caches C fetches F hits H misses M
/// evictions E`, then the budget and the frames in use, then the
/// overdraft: bytes over the budget now, the peak, the charges that went
/// over; then the caches still open (a process may exit with connections
/// open: their frames are in use, not leaked).
#[must_use]
pub fn stats_line() -> String {
    crate::global().map_or_else(|| "pagealloc-sqlite: not installed".into(), |g| group_stats_line(&g))
}

/// [`stats_line`] of group `g`.
pub(crate) fn group_stats_line(g: &crate::Group) -> String {
    let (c, f, h, m, e) = g.totals();
    let o = g.overdraft();
    format!(
        "pagealloc-sqlite: caches {c} fetches {f} hits {h} misses {m} evictions {e} budget_frames {} used_frames {} \
         overdraft_bytes {} overdraft_peak {} overdraft_times {} open_caches {}",
        g.budget_frames(),
        g.used_frames(),
        o.current,
        o.peak,
        o.times,
        g.open_caches()
    )
}

/// Where the exit line goes: stderr (`PAGEALLOC_SQLITE_STATS=1`), or
/// appended to a file (an absolute path: a program whose stderr is read,
/// as SQLite's tests read a child testfixture's, is not disturbed).
fn stats_target() -> Option<Option<std::path::PathBuf>> {
    let v = std::env::var("PAGEALLOC_SQLITE_STATS").ok()?;
    let v = v.trim();
    if v.starts_with('/') {
        Some(Some(v.into()))
    } else {
        (v == "1").then_some(None)
    }
}

extern "C" fn print_stats_at_exit() {
    // A process that never opened a database (a shell the preload passed
    // through on its way to the program) says nothing.
    if crate::global().is_none_or(|g| g.totals().0 == 0) {
        return;
    }
    match stats_target() {
        Some(Some(path)) => {
            use std::io::Write;
            // One write of one line with O_APPEND: the lines of processes
            // exiting together do not interleave.
            let line = format!("{}\n", stats_line());
            let f = std::fs::OpenOptions::new().create(true).append(true).open(&path);
            if let Err(e) = f.and_then(|mut f| f.write_all(line.as_bytes())) {
                eprintln!("pagealloc-sqlite: cannot append the stats line to {}: {e}", path.display());
            }
        }
        Some(None) => eprintln!("{}", stats_line()),
        None => {}
    }
}

/// With `PAGEALLOC_SQLITE_STATS` set, print [`stats_line`] at exit (once).
pub(crate) fn register_exit_stats() {
    static ONCE: Once = Once::new();
    if stats_target().is_some() {
        ONCE.call_once(|| {
            // SAFETY: atexit takes a function that lives as long as the
            // process: a plain extern "C" fn of this library, which is never
            // unloaded while preloaded (and a dlclose'd copy runs its atexit
            // handlers at unload, as glibc does for DSOs).
            unsafe { libc::atexit(print_stats_at_exit) };
        });
    }
}

/// The constructor: install from the environment when preloaded.
extern "C" fn preload_ctor() {
    let preloaded = std::env::var("LD_PRELOAD").is_ok_and(|v| v.contains("libpagealloc_sqlite"));
    if preloaded {
        let _ = pagealloc_sqlite_install_from_env();
    }
}

/// Run by the dynamic loader when the library is loaded (see module doc).
#[used]
#[link_section = ".init_array"]
static PRELOAD_CTOR: extern "C" fn() = preload_ctor;

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("64K"), Some(64 << 10));
        assert_eq!(parse_bytes("256m"), Some(256 << 20));
        assert_eq!(parse_bytes(" 1G "), Some(1 << 30));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("99999999999999G"), None);
    }
}
