//! The calling thread's last error and the names of status codes: how a C
//! caller learns what went wrong after a call returned a status.

use std::ffi::c_char;

use crate::args::copy_out;
use crate::status::pagealloc_status::{self, *};
use crate::status::{self, guard};

/// The message of the calling thread's last error, snprintf-style (as
/// `pagealloc_buddyinfo`; `buf` may be NULL to ask for the length). An empty
/// string when this thread has had no error. Successful calls do not clear it.
/// Thread safety: safe from any thread; each thread has its own last error.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_last_error_message(buf: *mut c_char, len: usize) -> usize {
    guard("pagealloc_last_error_message", 0, || {
        let (_, msg) = status::last();
        // SAFETY: the caller's contract.
        unsafe { copy_out(&msg, buf, len) }
    })
}

/// The code of the calling thread's last error (`PAGEALLOC_OK` if none yet).
/// Thread safety: safe from any thread; each thread has its own last error.
#[no_mangle]
pub extern "C" fn pagealloc_last_error() -> pagealloc_status {
    guard("pagealloc_last_error", PAGEALLOC_ERR_PANIC, || status::last().0)
}

/// The name of a status code ("PAGEALLOC_ERR_DOUBLE_FREE"), a static string;
/// "(not a pagealloc status)" for other values.
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn pagealloc_status_name(code: i32) -> *const c_char {
    status::name(code).as_ptr()
}
