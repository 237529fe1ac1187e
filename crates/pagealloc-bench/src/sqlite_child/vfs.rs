//! A device-latency VFS for the many-databases workload: SQLite's default
//! (unix) VFS, wrapped so that every read of a whole page of a main
//! database file first waits a stated latency, as a read that misses the
//! page cache would wait for an NVMe device rather than copy from the
//! kernel's page cache. The databases are small and warm in the kernel's
//! cache, so without it a miss costs a `pread` of a few microseconds and
//! the hit rate hardly matters; real per-tenant databases are not all in
//! RAM twice.
//!
//! Only page reads of main databases are charged: the 16- and 100-byte
//! reads of page 1's header SQLite makes when a transaction starts stand
//! for a page the kernel would keep cached, and journals are in memory.
//! The wait is a sleep (the thread blocks, as in I/O, and other threads
//! run), with the thread's timer slack set to 1 ns so that the sleep is
//! not rounded up by the default 50 us slack; the time actually slept is
//! counted ([`device_counts`]), so the charged latency is measured, not
//! assumed.
//!
//! The wrapper file is the wrapper's `sqlite3_file` header followed by the
//! unix VFS's own file object; every method but `xRead` forwards to it.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `sqlite3_file`: the methods pointer, followed by the VFS's own fields.
#[repr(C)]
struct File {
    methods: *const IoMethods,
}

/// `sqlite3_io_methods`, version 1 fields (no shared memory, no mmap).
#[repr(C)]
#[allow(non_snake_case)]
struct IoMethods {
    iVersion: c_int,
    xClose: Option<unsafe extern "C" fn(*mut File) -> c_int>,
    xRead: Option<unsafe extern "C" fn(*mut File, *mut c_void, c_int, i64) -> c_int>,
    xWrite: Option<unsafe extern "C" fn(*mut File, *const c_void, c_int, i64) -> c_int>,
    xTruncate: Option<unsafe extern "C" fn(*mut File, i64) -> c_int>,
    xSync: Option<unsafe extern "C" fn(*mut File, c_int) -> c_int>,
    xFileSize: Option<unsafe extern "C" fn(*mut File, *mut i64) -> c_int>,
    xLock: Option<unsafe extern "C" fn(*mut File, c_int) -> c_int>,
    xUnlock: Option<unsafe extern "C" fn(*mut File, c_int) -> c_int>,
    xCheckReservedLock: Option<unsafe extern "C" fn(*mut File, *mut c_int) -> c_int>,
    xFileControl: Option<unsafe extern "C" fn(*mut File, c_int, *mut c_void) -> c_int>,
    xSectorSize: Option<unsafe extern "C" fn(*mut File) -> c_int>,
    xDeviceCharacteristics: Option<unsafe extern "C" fn(*mut File) -> c_int>,
}

/// The leading fields of `sqlite3_vfs` this wrapper reads or changes; the
/// rest (`xDelete` .. `xNextSystemCall`) is copied from the unix VFS as
/// bytes and never looked at (the unix functions take the VFS pointer but
/// read only `pAppData` and `mxPathname`, copied unchanged).
#[repr(C)]
#[allow(non_snake_case)]
struct VfsHead {
    iVersion: c_int,
    szOsFile: c_int,
    mxPathname: c_int,
    pNext: *mut c_void,
    zName: *const c_char,
    pAppData: *mut c_void,
    xOpen: Option<unsafe extern "C" fn(*mut VfsHead, *const c_char, *mut File, c_int, *mut c_int) -> c_int>,
}

/// Room for the whole `sqlite3_vfs` (168 bytes for version 3 on 64-bit).
const VFS_BYTES: usize = 256;

/// The copy registered with SQLite: `VfsHead` then the unix VFS's tail.
#[repr(C, align(8))]
struct Vfs([u8; VFS_BYTES]);

/// The wrapper's header in each file, before the unix file object.
#[repr(C)]
struct Wrapped {
    base: File,
    /// Charge page reads (a main database file).
    charged: bool,
}

/// The unix file object sits after the header, 8-aligned.
const HDR: usize = std::mem::size_of::<Wrapped>().next_multiple_of(8);

const SQLITE_OPEN_MAIN_DB: c_int = 0x100;

#[link(name = "sqlite3")]
extern "C" {
    fn sqlite3_vfs_find(name: *const c_char) -> *mut VfsHead;
    fn sqlite3_vfs_register(vfs: *mut VfsHead, make_default: c_int) -> c_int;
}

/// The unix VFS, the latency and the counters (set once, by [`register`]).
struct State {
    real: *mut VfsHead,
    latency: Duration,
    reads: AtomicU64,
    slept_ns: AtomicU64,
}

// SAFETY: `real` points to SQLite's static unix VFS, read-only here.
unsafe impl Send for State {}
// SAFETY: as above; the counters are atomics.
unsafe impl Sync for State {}

static STATE: OnceLock<State> = OnceLock::new();

fn state() -> &'static State {
    STATE.get().expect("registered before any file opens")
}

/// The unix file object behind a wrapper file.
///
/// # Safety
/// `f` was opened by [`x_open`] (it has `HDR` bytes of header).
unsafe fn inner(f: *mut File) -> *mut File {
    // SAFETY: x_open sized the file szOsFile = HDR + the unix size.
    unsafe { f.cast::<u8>().add(HDR).cast() }
}

/// The unix VFS's methods for the inner file.
///
/// # Safety
/// As [`inner`]; the inner file was opened successfully.
unsafe fn real_methods<'a>(f: *mut File) -> &'a IoMethods {
    // SAFETY: a successfully opened unix file has its methods set.
    unsafe { &*(*inner(f)).methods }
}

/// Sleep `d` with this thread's timer slack at 1 ns (set on first use).
fn device_wait(d: Duration) {
    thread_local!(static SLACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    SLACK.with(|s| {
        if !s.get() {
            // SAFETY: PR_SET_TIMERSLACK takes one unsigned long; no memory.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
            s.set(true);
        }
    });
    let t = Instant::now();
    std::thread::sleep(d);
    let st = state();
    st.reads.fetch_add(1, Relaxed);
    st.slept_ns.fetch_add(t.elapsed().as_nanos() as u64, Relaxed);
}

/// `xRead`: the device wait for a page of a main database, then the read.
unsafe extern "C" fn x_read(f: *mut File, buf: *mut c_void, amt: c_int, off: i64) -> c_int {
    // SAFETY: SQLite passes a file x_open made; header read only.
    if unsafe { (*f.cast::<Wrapped>()).charged } && amt >= 512 {
        device_wait(state().latency);
    }
    // SAFETY: forwarding SQLite's own arguments to the inner file.
    unsafe { real_methods(f).xRead.expect("xRead")(inner(f), buf, amt, off) }
}

/// Forward method `$m` with arguments `$a: $t` to the inner file.
macro_rules! forward {
    ($name:ident, $m:ident, $ret:ty $(, $a:ident: $t:ty)*) => {
        unsafe extern "C" fn $name(f: *mut File $(, $a: $t)*) -> $ret {
            // SAFETY: SQLite passes a file x_open made, with its own
            // arguments, which go to the inner file unchanged.
            unsafe { real_methods(f).$m.expect(stringify!($m))(inner(f) $(, $a)*) }
        }
    };
}
forward!(x_close, xClose, c_int);
forward!(x_write, xWrite, c_int, b: *const c_void, n: c_int, o: i64);
forward!(x_truncate, xTruncate, c_int, n: i64);
forward!(x_sync, xSync, c_int, fl: c_int);
forward!(x_file_size, xFileSize, c_int, out: *mut i64);
forward!(x_lock, xLock, c_int, l: c_int);
forward!(x_unlock, xUnlock, c_int, l: c_int);
forward!(x_check_reserved, xCheckReservedLock, c_int, out: *mut c_int);
forward!(x_file_control, xFileControl, c_int, op: c_int, arg: *mut c_void);
forward!(x_sector_size, xSectorSize, c_int);
forward!(x_device_chars, xDeviceCharacteristics, c_int);

static METHODS: IoMethods = IoMethods {
    iVersion: 1,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_chars),
};

// SAFETY: a table of function pointers.
unsafe impl Sync for IoMethods {}

/// `xOpen`: open the inner file with the unix VFS, then wrap it.
unsafe extern "C" fn x_open(
    _vfs: *mut VfsHead,
    name: *const c_char,
    f: *mut File,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let real = state().real;
    // SAFETY: `f` has szOsFile = HDR + the unix size bytes (SQLite
    // allocates them); the unix xOpen fills the inner part.
    unsafe {
        let rc = (*real).xOpen.expect("xOpen")(real, name, inner(f), flags, out);
        // SQLite calls xClose whenever the methods are set, even after a
        // failed open; so ours are set exactly when the inner file's are,
        // and its xClose is reached through them.
        let opened = !(*inner(f)).methods.is_null();
        f.cast::<Wrapped>().write(Wrapped {
            base: File { methods: if opened { &raw const METHODS } else { std::ptr::null() } },
            charged: flags & SQLITE_OPEN_MAIN_DB != 0,
        });
        rc
    }
}

/// Register the wrapper as SQLite's default VFS, charging `latency` per
/// page read of a main database. Call once, before the first connection.
pub fn register(latency: Duration) -> Result<(), String> {
    // SAFETY: a null name finds the default VFS; SQLite's static, or null.
    let real = unsafe { sqlite3_vfs_find(std::ptr::null()) };
    if real.is_null() {
        return Err("no default VFS".into());
    }
    STATE
        .set(State { real, latency, reads: AtomicU64::new(0), slept_ns: AtomicU64::new(0) })
        .map_err(|_| "the device VFS is registered already".to_string())?;
    let mut copy = Box::new(Vfs([0; VFS_BYTES]));
    // SAFETY: the unix VFS is a `sqlite3_vfs` (version 3: 168 bytes <=
    // VFS_BYTES) in SQLite's static data, readable whole.
    unsafe { std::ptr::copy_nonoverlapping(real.cast::<u8>(), copy.0.as_mut_ptr(), 168) };
    let head = Box::leak(copy).0.as_mut_ptr().cast::<VfsHead>();
    // SAFETY: `head` is our leaked, 8-aligned copy, never freed (SQLite
    // keeps the pointer for the process's life).
    unsafe {
        assert!((*head).iVersion <= 3, "a sqlite3_vfs newer than version 3");
        (*head).szOsFile += HDR as c_int;
        (*head).pNext = std::ptr::null_mut();
        (*head).zName = c"pagealloc-device".as_ptr();
        (*head).xOpen = Some(x_open);
        match sqlite3_vfs_register(head, 1) {
            0 => Ok(()),
            rc => Err(format!("sqlite3_vfs_register: {rc}")),
        }
    }
}

/// (page reads charged, nanoseconds slept for them) so far; zeros when
/// the wrapper is not registered.
pub fn device_counts() -> (u64, u64) {
    STATE.get().map_or((0, 0), |s| (s.reads.load(Relaxed), s.slept_ns.load(Relaxed)))
}
