//! Peer allocators loaded at run time with `dlopen`, for the experiments that
//! compare pagealloc with them (`bench bulk`, `bench burst-idle`).
//!
//! The binary neither links a peer nor needs one: where a library is missing,
//! [`DlAlloc::load`] says why, and the experiment reports the peer as not run.
//! Each library is opened `RTLD_LOCAL`, so its `malloc` does not replace the
//! process's: only the two entry points looked up here reach it, and every block
//! it hands out goes back to it. Each entry point is checked (with `dladdr`) to
//! live in the library itself and not in one of its dependencies (a `dlsym`
//! on a handle also searches those: jemalloc's `aligned_alloc` would otherwise
//! silently be glibc's where the library did not define it).
//!
//! Debian's jemalloc keeps its thread state in initial-exec TLS, which a
//! `dlopen` can place only in glibc's small static TLS surplus (512 bytes by
//! default): in a process started without more, its load fails with "cannot
//! allocate memory in static TLS block". `bench burst-idle` therefore starts
//! its peer processes with [`STATIC_TLS_TUNABLE`] in `GLIBC_TUNABLES`.

use std::ffi::{c_void, CStr};

/// gperftools' tcmalloc (Debian's libtcmalloc-minimal4).
pub const TCMALLOC: &CStr = c"libtcmalloc_minimal.so.4";
/// jemalloc (Debian's libjemalloc2).
pub const JEMALLOC: &CStr = c"libjemalloc.so.2";

/// The glibc tunable that reserves static TLS for a `dlopen`ed jemalloc.
pub const STATIC_TLS_TUNABLE: &str = "glibc.rtld.optional_static_tls=16384";

/// An aligned allocation function (`align`, `size`) and its free.
pub type AllocFn = unsafe extern "C" fn(align: usize, size: usize) -> *mut c_void;
/// The free matching an [`AllocFn`].
pub type FreeFn = unsafe extern "C" fn(*mut c_void);

/// A peer's aligned allocation and its free.
#[derive(Clone, Copy)]
pub struct DlAlloc {
    /// `memalign`-shaped: alignment first, then size.
    pub alloc: AllocFn,
    /// Frees what `alloc` returned.
    pub free: FreeFn,
}

/// The dynamic loader's last error as a string.
fn dlerror() -> String {
    // SAFETY: dlerror has no preconditions; a non-null result is a
    // NUL-terminated string valid until the next dl call on this thread,
    // copied out at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// The file name (last path component) of the object `p` lies in, if any.
fn object_of(p: *const c_void) -> Option<String> {
    // SAFETY: an all-zero Dl_info is a valid value (null pointers, zero).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables for `p` and fills `info`.
    if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, owned by the loader while the object is loaded.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    Some(path.rsplit('/').next().unwrap_or(&path).to_string())
}

impl DlAlloc {
    /// Open `lib` (never closed: allocators cannot be unloaded safely) and look
    /// up `alloc` (`void *alloc(size_t align, size_t size)`) and `free` (`void
    /// free(void *)`) in it; the loader's message when either is missing or
    /// resolves outside `lib`.
    ///
    /// # Safety
    ///
    /// The two names must be functions of those C signatures in `lib`.
    pub unsafe fn load(lib: &CStr, alloc: &CStr, free: &CStr) -> Result<Self, String> {
        // SAFETY: `lib` is NUL-terminated; loading runs the library's
        // initialisers, which for an allocator set up its own heap only.
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err(format!("dlopen: {}", dlerror()));
        }
        let lib_name = lib.to_string_lossy();
        let sym = |name: &CStr| {
            // SAFETY: `h` is a live handle (never closed), `name` NUL-terminated.
            let p = unsafe { libc::dlsym(h, name.as_ptr()) };
            if p.is_null() {
                return Err(format!("{lib_name}: no symbol {}", name.to_string_lossy()));
            }
            let base = lib_name.rsplit('/').next().unwrap_or(&lib_name);
            match object_of(p) {
                Some(o) if o == base => Ok(p),
                o => Err(format!(
                    "{lib_name}: symbol {} resolves outside it (in {})",
                    name.to_string_lossy(),
                    o.as_deref().unwrap_or("an unknown object")
                )),
            }
        };
        let (a, f) = (sym(alloc)?, sym(free)?);
        // SAFETY: the caller guarantees the signatures; the pointers are these
        // functions, found in `lib` itself (checked above).
        unsafe {
            Ok(Self {
                alloc: std::mem::transmute::<*mut c_void, AllocFn>(a),
                free: std::mem::transmute::<*mut c_void, FreeFn>(f),
            })
        }
    }

    /// tcmalloc's `tc_memalign` and `tc_free`.
    pub fn tcmalloc() -> Result<Self, String> {
        // SAFETY: gperftools declares `void *tc_memalign(size_t align, size_t
        // size)` and `void tc_free(void *ptr)`.
        unsafe { Self::load(TCMALLOC, c"tc_memalign", c"tc_free") }
    }

    /// jemalloc's own `aligned_alloc` and `free` (unprefixed in Debian's
    /// build; with `RTLD_LOCAL` and the check in [`DlAlloc::load`] they are
    /// jemalloc's, not glibc's).
    pub fn jemalloc() -> Result<Self, String> {
        // SAFETY: C11's `void *aligned_alloc(size_t alignment, size_t size)` and
        // `void free(void *)`, which jemalloc defines.
        unsafe { Self::load(JEMALLOC, c"aligned_alloc", c"free") }
    }

    /// glibc's `aligned_alloc` and `free`, the process's own allocator.
    pub fn glibc() -> Self {
        Self { alloc: libc::aligned_alloc, free: libc::free }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_not_a_crash() {
        // SAFETY: never called: the library does not exist.
        let e = unsafe { DlAlloc::load(c"libtcmalloc_minimal.so.does-not-exist", c"tc_memalign", c"tc_free") }
            .err()
            .expect("loaded a missing library");
        assert!(e.starts_with("dlopen: ") && e.contains("does-not-exist"), "{e}");
    }

    /// A name the library does not define but its dependency (glibc) does is
    /// refused, not silently taken from the dependency.
    #[test]
    fn a_symbol_from_a_dependency_is_refused() {
        for lib in [TCMALLOC, JEMALLOC] {
            // SAFETY: never called: the load is expected to fail.
            match unsafe { DlAlloc::load(lib, c"getpid", c"getppid") } {
                Ok(_) => panic!("{lib:?}: getpid taken from a dependency"),
                Err(e) if e.starts_with("dlopen: ") => eprintln!("{lib:?} cannot be loaded here: skipped ({e})"),
                Err(e) => assert!(e.contains("resolves outside") || e.contains("no symbol"), "{e}"),
            }
        }
    }

    /// Where a peer is installed, it hands out 4 KiB-aligned blocks.
    #[test]
    fn peers_when_installed_hand_out_aligned_pages() {
        for (name, peer) in
            [("glibc", Ok(DlAlloc::glibc())), ("tcmalloc", DlAlloc::tcmalloc()), ("jemalloc", DlAlloc::jemalloc())]
        {
            let p = match peer {
                Ok(p) => p,
                Err(e) => {
                    assert!(e.starts_with("dlopen: "), "{name}: loaded but refused: {e}");
                    eprintln!("{name} cannot be loaded here: skipped ({e})");
                    continue;
                }
            };
            for _ in 0..1000 {
                // SAFETY: a power-of-two alignment and a size that is a multiple of it.
                let b = unsafe { (p.alloc)(4096, 4096) };
                assert!(!b.is_null() && (b as usize).is_multiple_of(4096), "{name}: {b:?}");
                // SAFETY: from this peer's alloc above, freed once, to it.
                unsafe { (p.free)(b) };
            }
        }
    }

    /// jemalloc, where installed, loads in a process started with
    /// [`STATIC_TLS_TUNABLE`] (this test binary, re-run on this test alone),
    /// and its entry points are its own (checked by the loader).
    #[test]
    fn jemalloc_loads_with_the_static_tls_tunable() {
        const CHILD: &str = "PAGEALLOC_PEERS_TEST_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let p = DlAlloc::jemalloc().expect("jemalloc under the tunable");
            // SAFETY: a power-of-two alignment and a size that is a multiple of it.
            let b = unsafe { (p.alloc)(4096, 4096) };
            assert!(!b.is_null() && (b as usize).is_multiple_of(4096), "{b:?}");
            // SAFETY: from jemalloc's alloc above, freed once, to it.
            unsafe { (p.free)(b) };
            return;
        }
        match DlAlloc::jemalloc() {
            Ok(_) => return, // loaded without help: nothing to check
            Err(e) if !e.contains("static TLS") => {
                eprintln!("jemalloc cannot be loaded here: skipped ({e})");
                return;
            }
            Err(_) => {}
        }
        let exe = std::env::current_exe().expect("test binary");
        let st = std::process::Command::new(exe)
            .args(["--exact", "peers::tests::jemalloc_loads_with_the_static_tls_tunable", "--test-threads=1"])
            .env(CHILD, "1")
            .env("GLIBC_TUNABLES", STATIC_TLS_TUNABLE)
            .output()
            .expect("re-run the test binary");
        let out = String::from_utf8_lossy(&st.stdout);
        // `--exact` with a stale name would run nothing and pass.
        assert!(st.status.success() && out.contains("1 passed"), "jemalloc under {STATIC_TLS_TUNABLE}: {out}");
    }
}
