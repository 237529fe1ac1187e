//! Checks of the plain arguments C passes (gfp bits, pfns, out pointers) and
//! the snprintf-style copy of text into a caller's buffer. The checks are
//! inline with their error paths cold, so the hit paths carry only the tests.

use std::ffi::c_char;
use std::ptr::{self, NonNull};

use ::pagealloc::{Gfp, PageAllocator, Pfn};

use crate::constants::PAGEALLOC_HOLE;
use crate::status::pagealloc_status::{self, *};
use crate::status::{fail, invalid, Res};

#[inline(always)]
pub(crate) fn to_gfp(bits: u32) -> Res<Gfp> {
    match Gfp::from_bits(bits) {
        Some(g) => Ok(g),
        None => Err(bad_gfp(bits)),
    }
}

#[cold]
#[inline(never)]
fn bad_gfp(bits: u32) -> pagealloc_status {
    invalid(format_args!(
        "gfp {bits:#x} has bits that are not PAGEALLOC_GFP_* flags (unknown: {:#x})",
        bits & !Gfp::all().bits()
    ))
}

/// A pfn from C: `PAGEALLOC_HOLE` is not one, and no arena reaches it.
#[inline(always)]
pub(crate) fn to_pfn(a: &PageAllocator, p: u64) -> Res<Pfn> {
    if p == PAGEALLOC_HOLE {
        return Err(pfn_out_of_range(a, p));
    }
    Ok(Pfn::new(p))
}

#[cold]
#[inline(never)]
pub(crate) fn pfn_out_of_range(a: &PageAllocator, p: u64) -> pagealloc_status {
    fail(PAGEALLOC_ERR_OUT_OF_RANGE, format_args!("pfn {p:#x} is out of range (arena has {} pages)", a.nr_pages()))
}

/// A checked out parameter: non-null; written unaligned, so C callers may
/// pass any address (on x86-64 and AArch64 the write is one plain store).
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Clone for Out<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Out<T> {}

impl<T> Out<T> {
    #[inline(always)]
    pub(crate) fn write(self, v: T) {
        // SAFETY: non-null (checked in `out`); the caller promised it points
        // to writable memory for a T (C's contract for an out parameter).
        unsafe { self.0.as_ptr().write_unaligned(v) }
    }
}

#[inline(always)]
pub(crate) fn out<T>(p: *mut T, what: &str) -> Res<Out<T>> {
    match NonNull::new(p) {
        Some(p) => Ok(Out(p)),
        None => Err(null_out(what)),
    }
}

#[cold]
#[inline(never)]
fn null_out(what: &str) -> pagealloc_status {
    invalid(format_args!("{what} is NULL"))
}

/// Write `v` through an optional out pointer (null: not wanted).
///
/// # Safety
/// `p` is null or points to a writable, aligned `T`.
#[inline(always)]
pub(crate) unsafe fn opt_out<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: by the caller's contract.
        unsafe { p.write(v) }
    }
}

/// Copy `text` snprintf-style: at most `len` bytes including a NUL, always
/// terminated when `len > 0`; returns the full length (without the NUL).
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
pub(crate) unsafe fn copy_out(text: &str, buf: *mut c_char, len: usize) -> usize {
    if let Some(b) = NonNull::new(buf) {
        if len > 0 {
            let n = text.len().min(len - 1);
            // SAFETY: n + 1 <= len bytes at buf, writable by the caller's
            // contract; the source is a distinct Rust string.
            unsafe {
                ptr::copy_nonoverlapping(text.as_ptr(), b.as_ptr().cast::<u8>(), n);
                b.as_ptr().add(n).write(0);
            }
        }
    }
    text.len()
}
