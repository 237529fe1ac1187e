//! Allocating and freeing one block: the order-0 front-cache hit inline in
//! the entry points with the rest out of line, the no-lock (signal-safe)
//! forms, and a frame's address.

use std::ffi::c_void;

use ::pagealloc::{Gfp, PageAllocator, Pfn};

use crate::args::{out, pfn_out_of_range, to_gfp, to_pfn};
use crate::constants::PAGEALLOC_HOLE;
use crate::handle::{handle, handle_quiet, pagealloc};
use crate::status::pagealloc_status::{self, *};
use crate::status::{alloc_code, alloc_err, catch, free_code, free_err, invalid, run, run_nolock};

/// Allocate `1 << order` contiguous pages on the calling thread's node (or
/// another, unless `PAGEALLOC_GFP_THISNODE`) and store the first pfn in
/// `*pfn_out`. `gfp_flags` is an OR of PAGEALLOC_GFP_* flags.
///
/// Errors: `PAGEALLOC_ERR_NO_MEMORY`, `PAGEALLOC_ERR_INVALID_ORDER`,
/// `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `pfn_out`, unknown gfp bits).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `pfn_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages(
    a: *const pagealloc,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    // The hit in this thread's front cache, inline: the full path's checks
    // (handle, flags, out pointer) without their messages, then the
    // allocator's inline order-0 fast path; no error handling on the way (a
    // panic is still caught). A miss calls `alloc0_miss` with what is checked
    // already; anything else (an order above 0, an argument the full path
    // refuses) is a tail call to the full path, which checks again and
    // records the error.
    if order == 0 && !pfn_out.is_null() {
        // One mask test: the known flags but ZERO (which the front cache
        // never serves: it goes to the full path instead of the miss).
        // SAFETY: the caller's contract.
        if let (Ok(h), true) = (unsafe { handle_quiet(a) }, gfp_flags & !INLINE_GFP == 0) {
            let g = Gfp::from_bits_retain(gfp_flags);
            return match catch("pagealloc_alloc_pages", || ::pagealloc::ffi::alloc0_front_only(h, g)) {
                Ok(Some(p)) => {
                    // SAFETY: non-null; writable by the caller's contract
                    // (any alignment, as `Out::write`).
                    unsafe { pfn_out.write_unaligned(p.as_u64()) };
                    PAGEALLOC_OK
                }
                // Checked already: the miss keeps only what it needs.
                // SAFETY: pfn_out as above.
                Ok(None) => unsafe { alloc0_miss(h, gfp_flags, pfn_out) },
                Err(s) => s,
            };
        }
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { alloc_pages_full(a, gfp_flags, order, pfn_out) }
}

/// An order-0 allocation the inline path missed, its arguments checked.
///
/// # Safety
/// `pfn_out` is non-null and writable (any alignment).
/// `extern "C"`, which cannot unwind (`run` catches every panic): the
/// caller's call to it is then a tail call with no unwind landing pad, and
/// the inline hit path needs no stack frame.
#[inline(never)]
unsafe extern "C" fn alloc0_miss(a: &PageAllocator, gfp_flags: u32, pfn_out: *mut u64) -> pagealloc_status {
    let g = Gfp::from_bits_retain(gfp_flags);
    run("pagealloc_alloc_pages", || {
        let p = a.alloc_pages(g, 0).map_err(alloc_err)?;
        // SAFETY: the caller's contract.
        unsafe { pfn_out.write_unaligned(p.as_u64()) };
        Ok(())
    })
}

/// `pagealloc_alloc_pages` by every path but the inline front-cache hit.
///
/// # Safety
/// As `pagealloc_alloc_pages`.
#[inline(never)]
unsafe extern "C" fn alloc_pages_full(
    a: *const pagealloc,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_alloc_pages", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        let o = out(pfn_out, "pfn_out")?;
        let p = a.alloc_pages(g, order).map_err(alloc_err)?;
        o.write(p.as_u64());
        Ok(())
    })
}

/// `pagealloc_alloc_pages`, preferring node `nid`.
/// Errors as `pagealloc_alloc_pages`, plus `PAGEALLOC_ERR_INVALID_NODE`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_alloc_pages`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages_node(
    a: *const pagealloc,
    nid: u32,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_alloc_pages_node", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        let o = out(pfn_out, "pfn_out")?;
        let p = a.alloc_pages_node(::pagealloc::NodeId(nid), g, order).map_err(alloc_err)?;
        o.write(p.as_u64());
        Ok(())
    })
}

/// Free a block allocated with the same order. Misuse changes nothing and is
/// reported: `PAGEALLOC_ERR_OUT_OF_RANGE`, `_INVALID_ORDER`, `_MISALIGNED`,
/// `_WRONG_ORDER`, `_DOUBLE_FREE`, `_INSIDE_BLOCK`, `_NOT_ALLOCATED`,
/// `_LOCKED`, `_WRITEBACK` (each message names the pfn).
/// Thread safety: safe to call concurrently on one allocator (any thread may
/// free any page).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages(a: *const pagealloc, pfn: u64, order: u32) -> pagealloc_status {
    // As in `pagealloc_alloc_pages`: the front-cache hit inline; a page it
    // does not take (misuse included: the inline path then changes nothing)
    // goes to `free0_miss`, which checks and reports (the hole pfn
    // included); a bad handle or an order above 0 to the full path.
    if order == 0 {
        // SAFETY: the caller's contract.
        if let Ok(h) = unsafe { handle_quiet(a) } {
            // The hole is outside every arena: the inline path's range test
            // sends it to the miss, which refuses it.
            return match catch("pagealloc_free_pages", || ::pagealloc::ffi::free0_front_only_raw(h, pfn)) {
                Ok(true) => PAGEALLOC_OK,
                // Checked already: the miss keeps only what it needs.
                Ok(false) => free0_miss(h, pfn),
                Err(s) => s,
            };
        }
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { free_pages_full(a, pfn, order) }
}

/// An order-0 free the inline path did not take (misuse included), its
/// handle checked.
/// `extern "C"` for a tail call, as `alloc0_miss`.
#[inline(never)]
extern "C" fn free0_miss(a: &PageAllocator, pfn: u64) -> pagealloc_status {
    run("pagealloc_free_pages", || a.free_pages(to_pfn(a, pfn)?, 0).map_err(free_err))
}

/// `pagealloc_free_pages` by every path but the inline front-cache hit.
///
/// # Safety
/// As `pagealloc_free_pages`.
#[inline(never)]
unsafe extern "C" fn free_pages_full(a: *const pagealloc, pfn: u64, order: u32) -> pagealloc_status {
    run("pagealloc_free_pages", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.free_pages(to_pfn(a, pfn)?, order).map_err(free_err)
    })
}

/// The gfp flags the inline order-0 hit takes: every known one but ZERO.
const INLINE_GFP: u32 = Gfp::all().bits() & !Gfp::ZERO.bits();

/// `pagealloc_alloc_pages` that never waits (the kernel's
/// `alloc_pages_nolock`): async-signal-safe, so it may be called from a signal
/// handler, even one that interrupted a pagealloc call on the same thread, or
/// from a real-time thread. No heap allocation, no thread-local state (not the
/// thread front cache), no slow path; only try-locks. Zones stay above their
/// min watermark.
///
/// Errors: `PAGEALLOC_ERR_WOULD_BLOCK` (a lock it needed was taken: retry
/// later), `PAGEALLOC_ERR_NO_MEMORY`, `PAGEALLOC_ERR_INVALID_ORDER`,
/// `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `pfn_out`, unknown gfp
/// bits). Unlike every other call it records no last-error message (that
/// would allocate): `pagealloc_last_error_message` is left as it was.
/// Thread safety: safe to call concurrently on one allocator, and from signal
/// handlers.
///
/// # Safety
/// `a` is a live handle (or NULL); `pfn_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages_nolock(
    a: *const pagealloc,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run_nolock(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle_quiet(a) }?;
        let g = Gfp::from_bits(gfp_flags).ok_or(PAGEALLOC_ERR_INVALID_ARGUMENT)?;
        if pfn_out.is_null() || !pfn_out.is_aligned() {
            return Err(PAGEALLOC_ERR_INVALID_ARGUMENT);
        }
        let p = a.alloc_pages_nolock(g, order).map_err(|e| alloc_code(&e))?;
        // SAFETY: non-null and aligned; writable by the caller's contract.
        unsafe { pfn_out.write(p.as_u64()) };
        Ok(())
    })
}

/// `pagealloc_free_pages` that never waits (the kernel's
/// `free_pages_nolock`): async-signal-safe, as `pagealloc_alloc_pages_nolock`.
/// The checks are `pagealloc_free_pages`'s; a block that cannot reach a list
/// without waiting for a lock is parked on a lock-free deferred list that the
/// next locked free or drain empties. Once the checks pass the free succeeds.
///
/// Errors: those of `pagealloc_free_pages`, with no last-error message
/// recorded (see `pagealloc_alloc_pages_nolock`).
/// Thread safety: safe to call concurrently on one allocator, and from signal
/// handlers.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages_nolock(a: *const pagealloc, pfn: u64, order: u32) -> pagealloc_status {
    run_nolock(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle_quiet(a) }?;
        if pfn == PAGEALLOC_HOLE {
            return Err(PAGEALLOC_ERR_OUT_OF_RANGE);
        }
        a.free_pages_nolock(Pfn::new(pfn), order).map_err(|e| free_code(&e))
    })
}

/// Store the address of frame `pfn` in `*addr_out` (the block's memory runs on
/// for `4096 << order` bytes). Errors: `PAGEALLOC_ERR_OUT_OF_RANGE` for a pfn
/// past the arena, `PAGEALLOC_ERR_INVALID_ARGUMENT` for an arena without
/// backing (PAGEALLOC_BACKING_NONE) or a NULL `addr_out`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `addr_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_address(
    a: *const pagealloc,
    pfn: u64,
    addr_out: *mut *mut c_void,
) -> pagealloc_status {
    run("pagealloc_page_address", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let o = out(addr_out, "addr_out")?;
        let p = to_pfn(a, pfn)?;
        match a.page_address(p) {
            Some(m) => {
                o.write(m.as_ptr().cast());
                Ok(())
            }
            None => Err(no_address(a, p)),
        }
    })
}

#[cold]
#[inline(never)]
fn no_address(a: &PageAllocator, p: Pfn) -> pagealloc_status {
    if p.as_u64() >= a.nr_pages() {
        pfn_out_of_range(a, p.as_u64())
    } else {
        invalid(format_args!("{p:?} has no address: the arena has no backing memory"))
    }
}
