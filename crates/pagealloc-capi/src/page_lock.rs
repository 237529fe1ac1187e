//! The page lock, the up-to-date flag and writeback on allocated pages: the
//! calls a page cache built on the allocator uses to serialise I/O on a page.

use std::time::Duration;

use crate::args::{opt_out, out, pfn_out_of_range, to_pfn};
use crate::handle::{handle, pagealloc};
use crate::status::pagealloc_status::{self, *};
use crate::status::{fail, run, state_err, wait_err};

/// Lock a page (the head of an allocated block), sleeping while another holder
/// has it. Errors: `PAGEALLOC_ERR_OUT_OF_RANGE`, `_NOT_ALLOCATED`.
/// Thread safety: safe to call concurrently on one allocator; blocks.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_lock_page(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_lock_page", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks().lock_page(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Lock a page if nobody holds it; never blocks. `PAGEALLOC_ERR_BUSY` when it
/// did not get the lock (held by another, or not an allocated page),
/// `PAGEALLOC_ERR_OUT_OF_RANGE` past the arena.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_trylock_page(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_trylock_page", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let p = to_pfn(a, pfn)?;
        if a.page_locks().trylock_page(p) {
            Ok(())
        } else if p.as_u64() >= a.nr_pages() {
            Err(pfn_out_of_range(a, pfn))
        } else {
            Err(fail(PAGEALLOC_ERR_BUSY, format_args!("{p:?} is locked by another holder or is not an allocated page")))
        }
    })
}

/// Lock a page, giving up after `timeout_ns` nanoseconds (`PAGEALLOC_ERR_TIMED_OUT`).
/// Thread safety: safe to call concurrently on one allocator; blocks up to the timeout.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_lock_page_timeout(
    a: *const pagealloc,
    pfn: u64,
    timeout_ns: u64,
) -> pagealloc_status {
    run("pagealloc_lock_page_timeout", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks().lock_page_timeout(to_pfn(a, pfn)?, Duration::from_nanos(timeout_ns)).map_err(wait_err)
    })
}

/// Unlock a page. `PAGEALLOC_ERR_NOT_LOCKED` (nothing changed) if it was not locked.
/// Thread safety: safe to call concurrently on one allocator; any thread may
/// unlock (as in the kernel, the lock has no owner).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_unlock_page(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_unlock_page", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks().unlock_page(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Unlock a page and mark it up to date in one atomic step (the kernel's
/// `folio_end_read`). Errors as `pagealloc_unlock_page`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_unlock_page_uptodate(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_unlock_page_uptodate", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks().unlock_page_uptodate(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Store in `*uptodate` whether the page is marked up to date.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `uptodate` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_uptodate(
    a: *const pagealloc,
    pfn: u64,
    uptodate: *mut bool,
) -> pagealloc_status {
    run("pagealloc_page_uptodate", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let o = out(uptodate, "uptodate")?;
        let p = to_pfn(a, pfn)?;
        if p.as_u64() >= a.nr_pages() {
            return Err(pfn_out_of_range(a, pfn));
        }
        o.write(a.page_locks().page_uptodate(p));
        Ok(())
    })
}

/// Mark a page under writeback. `*was_set` (optional) gets true if this call
/// set the flag, false if it already was set.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `was_set` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_set_page_writeback(
    a: *const pagealloc,
    pfn: u64,
    was_set: *mut bool,
) -> pagealloc_status {
    run("pagealloc_set_page_writeback", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let set = a.page_locks().set_page_writeback(to_pfn(a, pfn)?).map_err(state_err)?;
        // SAFETY: the caller's contract.
        unsafe { opt_out(was_set, set) };
        Ok(())
    })
}

/// End writeback and wake its waiters. `PAGEALLOC_ERR_NOT_WRITEBACK` if the
/// page was not under writeback.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_end_page_writeback(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_end_page_writeback", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks().end_page_writeback(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Wait until the page is not under writeback.
/// Thread safety: safe to call concurrently on one allocator; blocks.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_wait_on_page_writeback(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_wait_on_page_writeback", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks().wait_on_page_writeback(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// `pagealloc_wait_on_page_writeback`, giving up after `timeout_ns`
/// nanoseconds (`PAGEALLOC_ERR_TIMED_OUT`).
/// Thread safety: safe to call concurrently on one allocator; blocks up to the timeout.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_wait_on_page_writeback_timeout(
    a: *const pagealloc,
    pfn: u64,
    timeout_ns: u64,
) -> pagealloc_status {
    run("pagealloc_wait_on_page_writeback_timeout", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.page_locks()
            .wait_on_page_writeback_timeout(to_pfn(a, pfn)?, Duration::from_nanos(timeout_ns))
            .map_err(wait_err)
    })
}
