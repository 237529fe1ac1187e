//! Bulk allocation and freeing over C arrays of pfns. The arrays go to the
//! Rust API in fixed chunks converted on the stack, and the rejections of a
//! bulk free are gathered over the chunks into one status and message.

use std::mem::MaybeUninit;

use ::pagealloc::Pfn;

use crate::args::{opt_out, to_gfp};
use crate::constants::PAGEALLOC_HOLE;
use crate::handle::{handle, pagealloc};
use crate::status::{fail, free_code, invalid, pagealloc_status, run, Res};

/// Bulk arrays go through the Rust API in chunks of this many slots, converted
/// on the stack (`Option<Pfn>`'s layout is the library's business).
const CHUNK: usize = 256;

/// A slice of C slots (`len` may be 0 with a NULL pointer).
///
/// # Safety
/// `p` is NULL or points to `len` readable (and, for `_mut`, writable) elements.
unsafe fn c_slots_mut<'a>(p: *mut u64, len: usize, what: &str) -> Res<&'a mut [u64]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(bad_array(what));
    }
    // SAFETY: by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// # Safety
/// As [`c_slots_mut`], read only.
unsafe fn c_slots<'a>(p: *const u64, len: usize, what: &str) -> Res<&'a [u64]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(bad_array(what));
    }
    // SAFETY: by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `buf[..src.len()]` filled by `f`, as an initialised slice.
#[inline(always)]
fn convert<'b, S: Copy, D>(buf: &'b mut [MaybeUninit<D>; CHUNK], src: &[S], f: impl Fn(S) -> D) -> &'b mut [D] {
    let n = src.len();
    assert!(n <= CHUNK);
    for (d, s) in buf.iter_mut().zip(src) {
        d.write(f(*s));
    }
    // SAFETY: the first n elements were written just above (zip stops at the
    // shorter, and n <= CHUNK).
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<D>(), n) }
}

#[inline(always)]
fn slot_in(v: u64) -> Option<Pfn> {
    (v != PAGEALLOC_HOLE).then(|| Pfn::new(v))
}

/// Fill the empty slots (`PAGEALLOC_HOLE`) of `slots[0..nr]` with order-0
/// pages; populated slots are left alone. `*nr_populated` (optional) gets the
/// number of leading populated slots afterwards: `nr` when every hole was
/// filled, less when memory ran short (the first hole is at that index).
/// Running short is not an error: the call returns `PAGEALLOC_OK`.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `slots` with
/// `nr > 0`, unknown gfp bits).
/// Thread safety: safe to call concurrently on one allocator (on different arrays).
///
/// # Safety
/// `a` is a live handle (or NULL); `slots` points to `nr` writable `uint64_t`
/// (may be NULL when `nr` is 0); `nr_populated` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages_bulk(
    a: *const pagealloc,
    gfp_flags: u32,
    slots: *mut u64,
    nr: usize,
    nr_populated: *mut usize,
) -> pagealloc_status {
    run("pagealloc_alloc_pages_bulk", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        // SAFETY: the caller's contract.
        let s = unsafe { c_slots_mut(slots, nr, "slots") }?;
        let mut buf = [const { MaybeUninit::<Option<Pfn>>::uninit() }; CHUNK];
        let mut lead = 0;
        for c in s.chunks_mut(CHUNK) {
            let b = convert(&mut buf, c, slot_in);
            let got = a.alloc_pages_bulk(g, b);
            for (d, v) in c.iter_mut().zip(b.iter()) {
                *d = v.map_or(PAGEALLOC_HOLE, Pfn::as_u64);
            }
            lead += got;
            if got < c.len() {
                break;
            }
        }
        // SAFETY: the caller's contract.
        unsafe { opt_out(nr_populated, lead) };
        Ok(())
    })
}

/// Rejections of a bulk free, gathered over the chunks.
struct Rejects {
    count: usize,
    first: Option<(usize, pagealloc_status, String)>,
}

impl Rejects {
    fn new() -> Self {
        Self { count: 0, first: None }
    }

    #[cold]
    fn add(&mut self, base: usize, err: ::pagealloc::BulkFreeError, orig: &[u64]) {
        for (i, e) in err.rejected {
            self.count += 1;
            if self.first.is_none() {
                let msg = if orig[i] == PAGEALLOC_HOLE {
                    format!("pfn {:#x} is out of range (PAGEALLOC_HOLE is not a pfn)", orig[i])
                } else {
                    e.to_string()
                };
                self.first = Some((base + i, free_code(&e), msg));
            }
        }
    }

    /// Report through the optional outs; the first rejection's code.
    ///
    /// # Safety
    /// The pointers are NULL or writable.
    unsafe fn finish(self, nr_rejected: *mut usize, first_rejected: *mut usize) -> Res {
        // SAFETY: the caller's contract.
        unsafe {
            opt_out(nr_rejected, self.count);
            opt_out(first_rejected, self.first.as_ref().map_or(usize::MAX, |f| f.0));
        }
        match self.first {
            None => Ok(()),
            Some((i, code, msg)) => Err(fail(
                code,
                format_args!("bulk free skipped {} invalid entries (first: index {i}: {msg})", self.count),
            )),
        }
    }
}

/// Free the order-0 pages `pfns[0..nr]`. Invalid entries (the same classes as
/// `pagealloc_free_pages`; `PAGEALLOC_HOLE` counts as out of range) are skipped
/// and every valid one is freed. Returns `PAGEALLOC_OK` when all were freed,
/// else the code of the first rejected entry; `*nr_rejected` (optional) gets
/// how many were skipped and `*first_rejected` (optional) the index of the
/// first (`SIZE_MAX` when none).
///
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `pfns` points to `nr` readable `uint64_t`
/// (may be NULL when `nr` is 0); the out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages_bulk(
    a: *const pagealloc,
    pfns: *const u64,
    nr: usize,
    nr_rejected: *mut usize,
    first_rejected: *mut usize,
) -> pagealloc_status {
    run("pagealloc_free_pages_bulk", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        // SAFETY: the caller's contract.
        let s = unsafe { c_slots(pfns, nr, "pfns") }?;
        let mut buf = [const { MaybeUninit::<Pfn>::uninit() }; CHUNK];
        let mut rej = Rejects::new();
        for (ci, c) in s.chunks(CHUNK).enumerate() {
            // PAGEALLOC_HOLE becomes Pfn::MAX, past every arena (at most 2^32 pages).
            let b = convert(&mut buf, c, |v| if v == PAGEALLOC_HOLE { Pfn::MAX } else { Pfn::new(v) });
            if let Err(e) = a.free_pages_bulk(b) {
                rej.add(ci * CHUNK, e, c);
            }
        }
        // SAFETY: the caller's contract.
        unsafe { rej.finish(nr_rejected, first_rejected) }
    })
}

/// The partner of `pagealloc_alloc_pages_bulk`: free every populated slot of
/// `slots[0..nr]` (order-0 pages) and set it to `PAGEALLOC_HOLE`. Holes are
/// skipped. Invalid entries stay in their slots and are reported as by
/// `pagealloc_free_pages_bulk`; every valid one is freed.
///
/// Thread safety: safe to call concurrently on one allocator (on different arrays).
///
/// # Safety
/// As `pagealloc_free_pages_bulk`, with `slots` writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages_bulk_slots(
    a: *const pagealloc,
    slots: *mut u64,
    nr: usize,
    nr_rejected: *mut usize,
    first_rejected: *mut usize,
) -> pagealloc_status {
    run("pagealloc_free_pages_bulk_slots", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        // SAFETY: the caller's contract.
        let s = unsafe { c_slots_mut(slots, nr, "slots") }?;
        let mut buf = [const { MaybeUninit::<Option<Pfn>>::uninit() }; CHUNK];
        let mut rej = Rejects::new();
        for (ci, c) in s.chunks_mut(CHUNK).enumerate() {
            let b = convert(&mut buf, c, slot_in);
            let r = a.free_pages_bulk_slots(b);
            if let Err(e) = r {
                rej.add(ci * CHUNK, e, c);
            }
            for (d, v) in c.iter_mut().zip(b.iter()) {
                *d = v.map_or(PAGEALLOC_HOLE, Pfn::as_u64);
            }
        }
        // SAFETY: the caller's contract.
        unsafe { rej.finish(nr_rejected, first_rejected) }
    })
}

#[cold]
#[inline(never)]
fn bad_array(what: &str) -> pagealloc_status {
    invalid(format_args!("{what} is NULL or misaligned"))
}
