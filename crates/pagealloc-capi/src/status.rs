//! Status codes, the thread-local last error, and the panic guard every entry
//! point runs inside.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pagealloc::{AllocError, ConfigError, FreeError, InvariantError, PageStateError, WaitError};

/// What a call did. `PAGEALLOC_OK` (0) is success; every other value is an
/// error whose message (naming the pfn where there is one) is available from
/// `pagealloc_last_error_message` on the same thread.
#[repr(C)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum pagealloc_status {
    /// Success.
    PAGEALLOC_OK = 0,
    /// No free block of the order asked for (a normal result, not a crash);
    /// from `pagealloc_create`, no memory for the allocator's page descriptors.
    PAGEALLOC_ERR_NO_MEMORY = 1,
    /// The order is above PAGEALLOC_MAX_ORDER.
    PAGEALLOC_ERR_INVALID_ORDER = 2,
    /// The node does not exist.
    PAGEALLOC_ERR_INVALID_NODE = 3,
    /// The pfn is past the end of the arena.
    PAGEALLOC_ERR_OUT_OF_RANGE = 4,
    /// The pfn is not aligned to its order.
    PAGEALLOC_ERR_MISALIGNED = 5,
    /// The pfn heads an allocated block of another order.
    PAGEALLOC_ERR_WRONG_ORDER = 6,
    /// The pfn is already free.
    PAGEALLOC_ERR_DOUBLE_FREE = 7,
    /// The pfn lies inside an allocated block headed by another pfn.
    PAGEALLOC_ERR_INSIDE_BLOCK = 8,
    /// The pfn is not an allocated page (never allocated, or held by isolation).
    PAGEALLOC_ERR_NOT_ALLOCATED = 9,
    /// Free of a locked page: unlock it first. (Also a lock held by a Rust
    /// `PageLockGuard`, which only that guard releases.)
    PAGEALLOC_ERR_LOCKED = 10,
    /// Free of a page under writeback: end writeback first.
    PAGEALLOC_ERR_WRITEBACK = 11,
    /// Unlock of a page that is not locked.
    PAGEALLOC_ERR_NOT_LOCKED = 12,
    /// End of writeback on a page not under writeback.
    PAGEALLOC_ERR_NOT_WRITEBACK = 13,
    /// A pageblock in the range is already isolated.
    PAGEALLOC_ERR_ALREADY_ISOLATED = 14,
    /// A pageblock in the range is not isolated.
    PAGEALLOC_ERR_NOT_ISOLATED = 15,
    /// The range is empty, runs past the arena, or crosses a zone.
    PAGEALLOC_ERR_BAD_RANGE = 16,
    /// The range holds a pageblock that cannot be isolated (HighAtomic).
    PAGEALLOC_ERR_UNISOLATABLE = 17,
    /// A wait with a timeout ran out.
    PAGEALLOC_ERR_TIMED_OUT = 18,
    /// A wait was cancelled.
    PAGEALLOC_ERR_CANCELLED = 19,
    /// `pagealloc_trylock_page` did not get the lock (held by someone else, or
    /// not an allocated page).
    PAGEALLOC_ERR_BUSY = 20,
    /// A configuration field is out of its range (the message names it).
    PAGEALLOC_ERR_INVALID_CONFIG = 21,
    /// Mapping the arena failed.
    PAGEALLOC_ERR_MMAP = 22,
    /// `pagealloc_check_invariants` found a broken invariant.
    PAGEALLOC_ERR_INVARIANT = 23,
    /// A failure injected by the library's fail-inject feature.
    PAGEALLOC_ERR_INJECTED = 24,
    /// A null pointer where one is not allowed, a handle that is not one,
    /// unknown gfp bits, or an unknown enum value.
    PAGEALLOC_ERR_INVALID_ARGUMENT = 25,
    /// The library panicked; the panic was caught at the boundary. The
    /// allocator may be unusable afterwards.
    PAGEALLOC_ERR_PANIC = 26,
    /// An error this version of the C API does not know how to classify.
    PAGEALLOC_ERR_UNKNOWN = 27,
    /// A no-lock call (`pagealloc_alloc_pages_nolock`) found a lock it needed
    /// taken and did not wait: retry, or allocate from a context that may wait.
    PAGEALLOC_ERR_WOULD_BLOCK = 28,
    /// `pagealloc_inline.h` was compiled for another layout of the thread
    /// caches than this library's (`PAGEALLOC_INLINE_ABI_VERSION`): rebuild
    /// the program against this library's headers.
    PAGEALLOC_ERR_ABI_MISMATCH = 29,
}

use pagealloc_status::*;

/// The Rust-side result of an entry point: the message is recorded when the
/// error is made (on the cold path), so success costs nothing.
pub(crate) type Res<T = ()> = Result<T, pagealloc_status>;

struct LastError {
    code: pagealloc_status,
    msg: String,
}

thread_local! {
    static LAST: RefCell<LastError> = const { RefCell::new(LastError { code: PAGEALLOC_OK, msg: String::new() }) };
}

/// Record `msg` as this thread's last error and return `code`.
#[cold]
#[inline(never)]
pub(crate) fn fail(code: pagealloc_status, msg: impl fmt::Display) -> pagealloc_status {
    let msg = msg.to_string();
    // A thread that is exiting may have lost its slot already: the code still
    // comes back, only the message is lost.
    let _ = LAST.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            l.code = code;
            l.msg = msg;
        }
    });
    code
}

/// A null pointer (or other argument the C side got wrong).
#[cold]
pub(crate) fn invalid(what: impl fmt::Display) -> pagealloc_status {
    fail(PAGEALLOC_ERR_INVALID_ARGUMENT, what)
}

/// The last error's code and a copy of its message, on this thread.
pub(crate) fn last() -> (pagealloc_status, String) {
    LAST.try_with(|l| l.try_borrow().map(|l| (l.code, l.msg.clone())).unwrap_or((PAGEALLOC_OK, String::new())))
        .unwrap_or((PAGEALLOC_OK, String::new()))
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}

/// Run `f`, turning a panic into `PAGEALLOC_ERR_PANIC` (message recorded) so no
/// unwind ever crosses the C boundary.
#[inline(always)]
pub(crate) fn guard<T>(name: &'static str, on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            caught(name, p);
            on_panic
        }
    }
}

/// Run `f`, turning a panic into `Err(PAGEALLOC_ERR_PANIC)` (message
/// recorded): for inline fast paths whose other outcomes are not a status.
#[inline(always)]
pub(crate) fn catch<T>(name: &'static str, f: impl FnOnce() -> T) -> Res<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(p) => {
            caught(name, p);
            Err(PAGEALLOC_ERR_PANIC)
        }
    }
}

#[cold]
#[inline(never)]
fn caught(name: &'static str, p: Box<dyn Any + Send>) {
    fail(PAGEALLOC_ERR_PANIC, format_args!("panic in {name}: {}", panic_message(&*p)));
    // Dropping a payload can itself panic; never let that escape.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(p)));
}

/// `guard` for the common shape: a status-returning call.
#[inline(always)]
pub(crate) fn run(name: &'static str, f: impl FnOnce() -> Res) -> pagealloc_status {
    guard(name, PAGEALLOC_ERR_PANIC, || match f() {
        Ok(()) => PAGEALLOC_OK,
        Err(s) => s,
    })
}

// The error enums are #[non_exhaustive]: a variant added later comes back as
// PAGEALLOC_ERR_UNKNOWN with its message until it is given a code here.

#[cold]
#[inline(never)]
pub(crate) fn alloc_err(e: AllocError) -> pagealloc_status {
    fail(alloc_code(&e), e)
}

/// The code of an allocation error, without recording anything (the no-lock
/// calls: recording a message allocates).
pub(crate) fn alloc_code(e: &AllocError) -> pagealloc_status {
    match e {
        AllocError::NoMemory { .. } => PAGEALLOC_ERR_NO_MEMORY,
        AllocError::InvalidOrder { .. } => PAGEALLOC_ERR_INVALID_ORDER,
        AllocError::InvalidNode { .. } => PAGEALLOC_ERR_INVALID_NODE,
        AllocError::Injected => PAGEALLOC_ERR_INJECTED,
        AllocError::WouldBlock { .. } => PAGEALLOC_ERR_WOULD_BLOCK,
        AllocError::ArrayTooLarge { .. } => PAGEALLOC_ERR_INVALID_ARGUMENT,
        _ => PAGEALLOC_ERR_UNKNOWN,
    }
}

/// Run a no-lock call: a panic becomes `PAGEALLOC_ERR_PANIC` with no message
/// recorded (recording allocates; a panic on these paths is a bug, and
/// `catch_unwind` costs nothing until one happens).
#[inline(always)]
pub(crate) fn run_nolock(f: impl FnOnce() -> Res) -> pagealloc_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => PAGEALLOC_OK,
        Ok(Err(s)) => s,
        Err(p) => {
            // Dropping a payload can itself panic; never let that escape.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(p)));
            PAGEALLOC_ERR_PANIC
        }
    }
}

/// The code of a free error, without recording anything.
pub(crate) fn free_code(e: &FreeError) -> pagealloc_status {
    match e {
        FreeError::OutOfRange { .. } => PAGEALLOC_ERR_OUT_OF_RANGE,
        FreeError::InvalidOrder { .. } => PAGEALLOC_ERR_INVALID_ORDER,
        FreeError::Misaligned { .. } => PAGEALLOC_ERR_MISALIGNED,
        FreeError::WrongOrder { .. } => PAGEALLOC_ERR_WRONG_ORDER,
        FreeError::DoubleFree { .. } => PAGEALLOC_ERR_DOUBLE_FREE,
        FreeError::InsideBlock { .. } => PAGEALLOC_ERR_INSIDE_BLOCK,
        FreeError::NotAllocated { .. } => PAGEALLOC_ERR_NOT_ALLOCATED,
        FreeError::Locked { .. } => PAGEALLOC_ERR_LOCKED,
        FreeError::Writeback { .. } => PAGEALLOC_ERR_WRITEBACK,
        // Only a Rust `Pages` handle owns a block; the C API never makes one.
        FreeError::Owned { .. } => PAGEALLOC_ERR_NOT_ALLOCATED,
        _ => PAGEALLOC_ERR_UNKNOWN,
    }
}

#[cold]
#[inline(never)]
pub(crate) fn free_err(e: FreeError) -> pagealloc_status {
    fail(free_code(&e), e)
}

#[cold]
#[inline(never)]
pub(crate) fn state_err(e: PageStateError) -> pagealloc_status {
    let code = match e {
        PageStateError::OutOfRange { .. } => PAGEALLOC_ERR_OUT_OF_RANGE,
        PageStateError::NotAllocated { .. } => PAGEALLOC_ERR_NOT_ALLOCATED,
        PageStateError::NotLocked { .. } => PAGEALLOC_ERR_NOT_LOCKED,
        // Only a Rust `PageLockGuard` holds such a lock; the C API never makes one.
        PageStateError::HeldByGuard { .. } => PAGEALLOC_ERR_LOCKED,
        PageStateError::NotWriteback { .. } => PAGEALLOC_ERR_NOT_WRITEBACK,
        PageStateError::AlreadyIsolated { .. } => PAGEALLOC_ERR_ALREADY_ISOLATED,
        PageStateError::NotIsolated { .. } => PAGEALLOC_ERR_NOT_ISOLATED,
        PageStateError::BadRange { .. } => PAGEALLOC_ERR_BAD_RANGE,
        PageStateError::Unisolatable { .. } => PAGEALLOC_ERR_UNISOLATABLE,
        // Only a Rust `Pages` or `OwnedBlock` owns a block, as for frees.
        PageStateError::Owned { .. } => PAGEALLOC_ERR_NOT_ALLOCATED,
        _ => PAGEALLOC_ERR_UNKNOWN,
    };
    fail(code, e)
}

#[cold]
#[inline(never)]
pub(crate) fn wait_err(e: WaitError) -> pagealloc_status {
    match e {
        WaitError::TimedOut => fail(PAGEALLOC_ERR_TIMED_OUT, e),
        WaitError::Cancelled => fail(PAGEALLOC_ERR_CANCELLED, e),
        WaitError::State(s) => state_err(s),
        _ => fail(PAGEALLOC_ERR_UNKNOWN, e),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn config_err(e: ConfigError) -> pagealloc_status {
    let code = match e {
        ConfigError::Mmap(_) => PAGEALLOC_ERR_MMAP,
        ConfigError::OutOfMemory { .. } => PAGEALLOC_ERR_NO_MEMORY,
        ConfigError::ArenaTooSmall { .. }
        | ConfigError::ArenaNotPageMultiple { .. }
        | ConfigError::ArenaNotPageblockMultiple { .. }
        | ConfigError::ArenaTooLarge { .. }
        | ConfigError::TooManyNodes { .. }
        | ConfigError::EmptyZone { .. }
        | ConfigError::Invalid { .. } => PAGEALLOC_ERR_INVALID_CONFIG,
        _ => PAGEALLOC_ERR_UNKNOWN,
    };
    fail(code, e)
}

#[cold]
#[inline(never)]
pub(crate) fn invariant_err(e: InvariantError) -> pagealloc_status {
    fail(PAGEALLOC_ERR_INVARIANT, e)
}

/// The name of a status code as a static NUL-terminated string.
pub(crate) fn name(code: i32) -> &'static std::ffi::CStr {
    match code {
        0 => c"PAGEALLOC_OK",
        1 => c"PAGEALLOC_ERR_NO_MEMORY",
        2 => c"PAGEALLOC_ERR_INVALID_ORDER",
        3 => c"PAGEALLOC_ERR_INVALID_NODE",
        4 => c"PAGEALLOC_ERR_OUT_OF_RANGE",
        5 => c"PAGEALLOC_ERR_MISALIGNED",
        6 => c"PAGEALLOC_ERR_WRONG_ORDER",
        7 => c"PAGEALLOC_ERR_DOUBLE_FREE",
        8 => c"PAGEALLOC_ERR_INSIDE_BLOCK",
        9 => c"PAGEALLOC_ERR_NOT_ALLOCATED",
        10 => c"PAGEALLOC_ERR_LOCKED",
        11 => c"PAGEALLOC_ERR_WRITEBACK",
        12 => c"PAGEALLOC_ERR_NOT_LOCKED",
        13 => c"PAGEALLOC_ERR_NOT_WRITEBACK",
        14 => c"PAGEALLOC_ERR_ALREADY_ISOLATED",
        15 => c"PAGEALLOC_ERR_NOT_ISOLATED",
        16 => c"PAGEALLOC_ERR_BAD_RANGE",
        17 => c"PAGEALLOC_ERR_UNISOLATABLE",
        18 => c"PAGEALLOC_ERR_TIMED_OUT",
        19 => c"PAGEALLOC_ERR_CANCELLED",
        20 => c"PAGEALLOC_ERR_BUSY",
        21 => c"PAGEALLOC_ERR_INVALID_CONFIG",
        22 => c"PAGEALLOC_ERR_MMAP",
        23 => c"PAGEALLOC_ERR_INVARIANT",
        24 => c"PAGEALLOC_ERR_INJECTED",
        25 => c"PAGEALLOC_ERR_INVALID_ARGUMENT",
        26 => c"PAGEALLOC_ERR_PANIC",
        27 => c"PAGEALLOC_ERR_UNKNOWN",
        28 => c"PAGEALLOC_ERR_WOULD_BLOCK",
        29 => c"PAGEALLOC_ERR_ABI_MISMATCH",
        _ => c"(not a pagealloc status)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_codes() {
        for c in 0..=29 {
            let n = name(c).to_str().unwrap();
            assert!(n.starts_with("PAGEALLOC_"), "{c}: {n}");
        }
        assert_eq!(name(PAGEALLOC_ERR_UNKNOWN as i32).to_str().unwrap(), "PAGEALLOC_ERR_UNKNOWN");
        assert_eq!(name(PAGEALLOC_ERR_PANIC as i32).to_str().unwrap(), "PAGEALLOC_ERR_PANIC");
        assert_eq!(name(PAGEALLOC_ERR_WOULD_BLOCK as i32).to_str().unwrap(), "PAGEALLOC_ERR_WOULD_BLOCK");
        assert_eq!(name(PAGEALLOC_ERR_ABI_MISMATCH as i32).to_str().unwrap(), "PAGEALLOC_ERR_ABI_MISMATCH");
        assert_eq!(name(30).to_str().unwrap(), "(not a pagealloc status)");
    }

    #[test]
    fn a_panic_becomes_a_code_with_its_message() {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let s = run("pagealloc_test", || panic!("boom {}", 7));
        std::panic::set_hook(prev);
        assert_eq!(s, PAGEALLOC_ERR_PANIC);
        let (c, m) = last();
        assert_eq!(c, PAGEALLOC_ERR_PANIC);
        assert_eq!(m, "panic in pagealloc_test: boom 7");
    }
}
