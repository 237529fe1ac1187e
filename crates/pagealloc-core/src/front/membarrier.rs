//! `membarrier(2)` with MEMBARRIER_CMD_PRIVATE_EXPEDITED.
use std::sync::OnceLock;

const CMD_QUERY: libc::c_long = 0;
const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

static AVAILABLE: OnceLock<bool> = OnceLock::new();

/// Register this process for expedited private barriers; false if the kernel
/// cannot (then the front cache stays off).
pub(super) fn available() -> bool {
    *AVAILABLE.get_or_init(|| {
        // SAFETY: membarrier takes integer arguments and touches no memory.
        let mask = unsafe { libc::syscall(libc::SYS_membarrier, CMD_QUERY, 0, 0) };
        if mask < 0 || mask & CMD_PRIVATE_EXPEDITED == 0 {
            return false;
        }
        // SAFETY: as above.
        unsafe { libc::syscall(libc::SYS_membarrier, CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
    })
}

/// A full barrier on every running thread of this process.
pub(super) fn expedited() {
    debug_assert!(available());
    // SAFETY: as in `available`; registration happened before any slot existed.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, CMD_PRIVATE_EXPEDITED, 0, 0) };
    assert_eq!(r, 0, "membarrier failed after registration");
}
