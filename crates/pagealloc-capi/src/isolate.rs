//! Pageblock isolation and contiguous ranges: the calls that take a pfn range
//! rather than a block, which must not wrap past the largest pfn.

use ::pagealloc::{PageAllocator, Pfn};

use crate::args::{out, to_gfp, to_pfn};
use crate::handle::{handle, pagealloc};
use crate::status::pagealloc_status::{self, *};
use crate::status::{alloc_err, fail, free_err, run, state_err, Res};

/// `start + nr` must stay a pfn.
fn range(a: &PageAllocator, start: u64, nr: u64) -> Res<Pfn> {
    let p = to_pfn(a, start)?;
    if start.checked_add(nr).is_none() {
        return Err(fail(
            PAGEALLOC_ERR_BAD_RANGE,
            format_args!("range at pfn {start:#x} of {nr} pages runs past the largest pfn"),
        ));
    }
    Ok(p)
}

/// Give `[start, start + nr_pages)`, all of it in holes of
/// `pagealloc_create_with_holes` not yet given, to the allocator: the pages
/// merge with free neighbours and count as managed from then on. Fails
/// without changing anything: `PAGEALLOC_ERR_BAD_RANGE` (empty, past the
/// arena, or a page not in a hole), `_OUT_OF_RANGE`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_add_free_memory(a: *const pagealloc, start: u64, nr_pages: u64) -> pagealloc_status {
    run("pagealloc_add_free_memory", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.add_free_memory(range(a, start, nr_pages)?, nr_pages).map_err(state_err)
    })
}

/// Isolate the pageblocks covering `[start, start + nr_pages)` (one zone).
/// Fails without changing anything: `PAGEALLOC_ERR_BAD_RANGE`,
/// `_ALREADY_ISOLATED`, `_UNISOLATABLE`, `_OUT_OF_RANGE`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_isolate_range(a: *const pagealloc, start: u64, nr_pages: u64) -> pagealloc_status {
    run("pagealloc_isolate_range", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.contig().isolate_range(range(a, start, nr_pages)?, nr_pages).map_err(state_err)
    })
}

/// Undo `pagealloc_isolate_range` over the same range (`PAGEALLOC_ERR_NOT_ISOLATED`
/// if a block in it is not isolated).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_undo_isolate_range(
    a: *const pagealloc,
    start: u64,
    nr_pages: u64,
) -> pagealloc_status {
    run("pagealloc_undo_isolate_range", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.contig().undo_isolate_range(range(a, start, nr_pages)?, nr_pages).map_err(state_err)
    })
}

/// Store in `*isolated` whether every page of `[start, start + nr_pages)` is
/// free inside isolated pageblocks.
/// Thread safety: safe to call concurrently on one allocator (the answer is a
/// snapshot).
///
/// # Safety
/// `a` is a live handle (or NULL); `isolated` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_test_pages_isolated(
    a: *const pagealloc,
    start: u64,
    nr_pages: u64,
    isolated: *mut bool,
) -> pagealloc_status {
    run("pagealloc_test_pages_isolated", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let o = out(isolated, "isolated")?;
        let p = range(a, start, nr_pages)?;
        o.write(a.contig().test_pages_isolated(p, nr_pages));
        Ok(())
    })
}

/// Find, isolate and take `nr_pages` contiguous free pages; the first pfn goes
/// to `*start_out`. The pages come back as order-0 allocated pages: free them
/// with `pagealloc_free_contig_range` or one by one. `PAGEALLOC_ERR_NO_MEMORY`
/// when no such run is free.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `start_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_contig_pages(
    a: *const pagealloc,
    nr_pages: u64,
    gfp_flags: u32,
    start_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_alloc_contig_pages", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        let o = out(start_out, "start_out")?;
        let p = a.contig().alloc_contig_pages(nr_pages, g).map_err(alloc_err)?;
        o.write(p.as_u64());
        Ok(())
    })
}

/// Free a range from `pagealloc_alloc_contig_pages`. Stops at the first page
/// that cannot be freed and reports it (the pages before it are freed).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_contig_range(
    a: *const pagealloc,
    start: u64,
    nr_pages: u64,
) -> pagealloc_status {
    run("pagealloc_free_contig_range", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.contig().free_contig_range(range(a, start, nr_pages)?, nr_pages).map_err(free_err)
    })
}
