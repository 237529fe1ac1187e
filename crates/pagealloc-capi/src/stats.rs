//! Reading the allocator: the invariant check, page counts and the
//! /proc-style text reports. Counts and reports return their value rather
//! than a status, so a bad handle is 0 or a negative status with the last
//! error set.

use std::ffi::c_char;

use ::pagealloc::PageAllocator;

use crate::args::copy_out;
use crate::handle::{handle, pagealloc};
use crate::status::pagealloc_status::{self, *};
use crate::status::{guard, invalid, invariant_err, run};

/// Check every invariant; `PAGEALLOC_ERR_INVARIANT` with the first broken one
/// (and its pfn) in the message.
/// Thread safety: safe to call concurrently on one allocator, but exact only
/// when no other thread allocates or frees meanwhile (it may then report a page
/// in the middle of a free); it never changes anything.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_check_invariants(a: *const pagealloc) -> pagealloc_status {
    run("pagealloc_check_invariants", || {
        // SAFETY: the caller's contract.
        unsafe { handle(a) }?.check_invariants().map_err(invariant_err)
    })
}

/// A count from the allocator, 0 (last error set) for a bad handle.
///
/// # Safety
/// `a` is a live handle (or NULL).
unsafe fn count(name: &'static str, a: *const pagealloc, f: impl FnOnce(&PageAllocator) -> u64) -> u64 {
    guard(name, 0, || {
        // SAFETY: the caller's contract.
        match unsafe { handle(a) } {
            Ok(a) => f(a),
            Err(_) => 0,
        }
    })
}

/// Free pages in the buddy lists outside isolated blocks (NR_FREE_PAGES; pages
/// on per-CPU lists and front caches are not counted). 0 with the last error
/// set for a bad handle.
/// Thread safety: safe to call concurrently on one allocator (read without locks).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_nr_free_pages(a: *const pagealloc) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { count("pagealloc_nr_free_pages", a, PageAllocator::nr_free_pages) }
}

/// Pages the allocator manages. 0 with the last error set for a bad handle.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_managed_pages(a: *const pagealloc) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { count("pagealloc_managed_pages", a, PageAllocator::managed_pages) }
}

/// Pages in the arena (valid pfns are 0 .. this - 1). 0 with the last error set
/// for a bad handle.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_nr_pages(a: *const pagealloc) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { count("pagealloc_nr_pages", a, PageAllocator::nr_pages) }
}

/// A report as text into `buf`, snprintf-style.
///
/// # Safety
/// `a` is a live handle (or NULL); `buf` is NULL or points to `len` writable bytes.
unsafe fn report(
    name: &'static str,
    a: *const pagealloc,
    buf: *mut c_char,
    len: usize,
    f: impl FnOnce(&PageAllocator) -> String,
) -> i64 {
    guard(name, -(PAGEALLOC_ERR_PANIC as i64), || {
        // SAFETY: the caller's contract.
        let a = match unsafe { handle(a) } {
            Ok(a) => a,
            Err(e) => return -(e as i64),
        };
        if buf.is_null() && len > 0 {
            return -(invalid("buf is NULL with len > 0") as i64);
        }
        let text = f(a);
        // SAFETY: the caller's contract.
        unsafe { copy_out(&text, buf, len) as i64 }
    })
}

/// /proc/buddyinfo's text, snprintf-style: writes at most `len` bytes including
/// the terminating NUL (always terminated when `len > 0`; `buf` may be NULL when
/// `len` is 0) and returns the length of the whole text without the NUL, so a
/// return value `>= len` means it was cut short. A negative value is
/// `-pagealloc_status` (bad handle, NULL `buf` with `len > 0`).
/// Thread safety: safe to call concurrently on one allocator (read without locks).
///
/// # Safety
/// `a` is a live handle (or NULL); `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_buddyinfo(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_buddyinfo", a, buf, len, |a| a.stats().buddyinfo().to_string()) }
}

/// /proc/pagetypeinfo's text (counts capped at 100000 as the kernel prints
/// them), as `pagealloc_buddyinfo`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_buddyinfo`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_pagetypeinfo(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_pagetypeinfo", a, buf, len, |a| a.stats().pagetypeinfo().to_string()) }
}

/// /proc/zoneinfo's text, as `pagealloc_buddyinfo`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_buddyinfo`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_zoneinfo(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_zoneinfo", a, buf, len, |a| a.stats().zoneinfo().to_string()) }
}

/// /proc/vmstat's text, as `pagealloc_buddyinfo`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_buddyinfo`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_vmstat(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_vmstat", a, buf, len, |a| a.stats().vmstat().to_string()) }
}
