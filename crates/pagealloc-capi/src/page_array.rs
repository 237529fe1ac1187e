//! Page arrays: the Rust API's `PageArray` for C callers.
//!
//! `pagealloc_page_array_create` makes an array of `nr` empty slots on an
//! allocator; `pagealloc_page_array_fill` fills its empty slots with order-0
//! pages and `pagealloc_page_array_release` frees every page in it. While a
//! page is in the array no pfn call acts on it (`pagealloc_free_pages` and
//! the bulk frees refuse it, and a lock or writeback, with
//! `PAGEALLOC_ERR_NOT_ALLOCATED`), so the release frees each page with
//! one plain store where a free by pfn must claim it with a compare-and-swap.
//! `pagealloc_page_array_get` reads a slot (its pfn, or `PAGEALLOC_HOLE`);
//! `pagealloc_page_array_take` hands a slot's page over as an ordinary
//! allocated page (free it with `pagealloc_free_pages`, order 0).
//!
//! Invariants: an array keeps its allocator's handle alive (the handle
//! refuses `pagealloc_destroy` while an array made on it is not destroyed);
//! an array is used by one call at a time (it may move between threads).

use std::sync::atomic::Ordering;

use ::pagealloc::{PageAllocator, PageArray, Pfn};

use crate::args::{opt_out, out, to_gfp};
use crate::constants::PAGEALLOC_HOLE;
use crate::handle::{handle, pagealloc};
use crate::status::pagealloc_status;
use crate::status::{alloc_err, invalid, run, Res};

/// A page array's tag ("parr").
const ARRAY_MAGIC: u32 = 0x7061_7272;

/// An array of slots owning order-0 pages. Opaque: made by
/// `pagealloc_page_array_create`, ended by `pagealloc_page_array_destroy`.
pub struct pagealloc_page_array {
    magic: u32,
    handle: *const pagealloc,
    /// Borrows the handle's allocator, which the handle's `arrays` count
    /// keeps alive until `pagealloc_page_array_destroy`.
    inner: PageArray<'static>,
}

/// The array behind a pointer, or `PAGEALLOC_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `arr` is null or points to readable memory at least as large as an
/// array (a live one from `pagealloc_page_array_create`, in a correct
/// program), used by no other call meanwhile.
unsafe fn array<'a>(arr: *mut pagealloc_page_array) -> Res<&'a mut PageArray<'static>> {
    if arr.is_null() || !arr.is_aligned() {
        return Err(invalid("page array is NULL or misaligned"));
    }
    // SAFETY: non-null and aligned; live and unshared by the caller's contract.
    let a = unsafe { &mut *arr };
    if a.magic != ARRAY_MAGIC {
        return Err(invalid(format_args!("{arr:p} is not a pagealloc page array")));
    }
    Ok(&mut a.inner)
}

/// A slot index of `arr`, or `PAGEALLOC_ERR_INVALID_ARGUMENT`.
fn slot(arr: &PageArray<'_>, i: usize) -> Res<usize> {
    if i < arr.len() {
        Ok(i)
    } else {
        Err(invalid(format_args!("slot {i} is past the array's {} slots", arr.len())))
    }
}

/// Check `arr`, `pfn_out` and slot `i`, then write what `f` makes of the
/// slot to `*pfn_out` (`PAGEALLOC_HOLE` for none): `get` and `take`.
///
/// # Safety
/// As [`array`] for `arr`; `pfn_out` is NULL or writable.
unsafe fn slot_out(
    arr: *mut pagealloc_page_array,
    i: usize,
    pfn_out: *mut u64,
    f: impl FnOnce(&mut PageArray<'static>, usize) -> Option<Pfn>,
) -> Res<()> {
    // SAFETY: the caller's contract.
    let arr = unsafe { array(arr) }?;
    let o = out(pfn_out, "pfn_out")?;
    let i = slot(arr, i)?;
    o.write(f(arr, i).map_or(PAGEALLOC_HOLE, Pfn::as_u64));
    Ok(())
}

/// Make an array of `nr` empty slots on allocator `a` and store it in
/// `*out_arr`. The handle refuses `pagealloc_destroy` until the array is
/// destroyed.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `out_arr`, `nr`
/// more than the arena's pages).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `out_arr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_create(
    a: *const pagealloc,
    nr: usize,
    out_arr: *mut *mut pagealloc_page_array,
) -> pagealloc_status {
    run("pagealloc_page_array_create", || {
        // SAFETY: the caller's contract. 'static: the allocator lives as long
        // as the handle, which refuses destruction while this array lives.
        let inner: &'static PageAllocator = unsafe { handle(a) }?;
        let o = out(out_arr, "out_arr")?;
        let arr = inner.page_array(nr).map_err(alloc_err)?;
        // SAFETY: a live handle (checked above).
        unsafe { (*a).arrays.fetch_add(1, Ordering::AcqRel) };
        o.write(Box::into_raw(Box::new(pagealloc_page_array { magic: ARRAY_MAGIC, handle: a, inner: arr })));
        Ok(())
    })
}

/// Free every page in the array and the array itself (NULL: a no-op).
///
/// Thread safety: any thread, but not concurrently with a call using `arr`.
///
/// # Safety
/// `arr` is NULL or a live array, used by no call now or later.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_destroy(arr: *mut pagealloc_page_array) -> pagealloc_status {
    run("pagealloc_page_array_destroy", || {
        if arr.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract (checked as far as it can be).
        unsafe { array(arr) }?;
        // SAFETY: made by Box::into_raw in pagealloc_page_array_create and
        // handed back once (the caller's contract); the tag is cleared so
        // that a stale copy of the pointer is more likely to be refused.
        let b = unsafe {
            (*arr).magic = 0;
            Box::from_raw(arr)
        };
        let h = b.handle;
        // The array's pages go back here, while the handle still lives.
        drop(b);
        // SAFETY: the handle refuses destruction while this array lives.
        unsafe { (*h).arrays.fetch_sub(1, Ordering::AcqRel) };
        Ok(())
    })
}

/// Fill the array's empty slots with order-0 pages; `*nr_populated`
/// (optional) gets the number of leading populated slots afterwards (the
/// array's length when every slot was filled, less when memory ran short:
/// the first empty slot is at that index). Running short is not an error.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad array, unknown gfp bits).
/// Thread safety: one call at a time on an array.
///
/// # Safety
/// `arr` is a live array (or NULL); `nr_populated` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_fill(
    arr: *mut pagealloc_page_array,
    gfp_flags: u32,
    nr_populated: *mut usize,
) -> pagealloc_status {
    run("pagealloc_page_array_fill", || {
        // SAFETY: the caller's contract.
        let arr = unsafe { array(arr) }?;
        let g = to_gfp(gfp_flags)?;
        let lead = arr.fill(g);
        // SAFETY: the caller's contract.
        unsafe { opt_out(nr_populated, lead) };
        Ok(())
    })
}

/// Free every page in the array; every slot is empty afterwards.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad array).
/// Thread safety: one call at a time on an array.
///
/// # Safety
/// `arr` is a live array (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_release(arr: *mut pagealloc_page_array) -> pagealloc_status {
    run("pagealloc_page_array_release", || {
        // SAFETY: the caller's contract.
        unsafe { array(arr) }?.release();
        Ok(())
    })
}

/// The array's number of slots in `*len`.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad array, NULL `len`).
///
/// # Safety
/// `arr` is a live array (or NULL); `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_len(arr: *mut pagealloc_page_array, len: *mut usize) -> pagealloc_status {
    run("pagealloc_page_array_len", || {
        // SAFETY: the caller's contract.
        let arr = unsafe { array(arr) }?;
        out(len, "len")?.write(arr.len());
        Ok(())
    })
}

/// Slot `i`'s pfn in `*pfn_out` (`PAGEALLOC_HOLE` for an empty slot). The
/// page stays the array's: its memory is the caller's to use
/// (`pagealloc_page_address`) until the array is released or destroyed.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad array, `i` past the end,
/// NULL `pfn_out`).
///
/// # Safety
/// `arr` is a live array (or NULL); `pfn_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_get(
    arr: *mut pagealloc_page_array,
    i: usize,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_page_array_get", || {
        // SAFETY: the caller's contract.
        unsafe { slot_out(arr, i, pfn_out, |a, i| a.get(i)) }
    })
}

/// Take slot `i`'s page out of the array as an ordinary allocated order-0
/// page (free it with `pagealloc_free_pages`); the slot is empty after.
/// `*pfn_out` gets its pfn, or `PAGEALLOC_HOLE` when the slot was empty.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad array, `i` past the end,
/// NULL `pfn_out`).
///
/// # Safety
/// `arr` is a live array (or NULL); `pfn_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_array_take(
    arr: *mut pagealloc_page_array,
    i: usize,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_page_array_take", || {
        // SAFETY: the caller's contract.
        unsafe { slot_out(arr, i, pfn_out, PageArray::take_pfn) }
    })
}
