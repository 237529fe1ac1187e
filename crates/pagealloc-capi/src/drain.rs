//! Draining the per-CPU lists and front caches back to the buddy: what a
//! caller does before it counts free pages exactly or hands memory back.

use crate::handle::{handle, pagealloc};
use crate::status::{pagealloc_status, run};

/// Return this CPU's per-CPU pages and this thread's front cache to the buddy.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_drain_local_pages(a: *const pagealloc) -> pagealloc_status {
    run("pagealloc_drain_local_pages", || {
        // SAFETY: the caller's contract.
        unsafe { handle(a) }?.drain_local_pages();
        Ok(())
    })
}

/// Return every per-CPU page and every thread's front cache to the buddy.
/// Thread safety: safe to call concurrently on one allocator (drains are
/// serialised inside).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_drain_all_pages(a: *const pagealloc) -> pagealloc_status {
    run("pagealloc_drain_all_pages", || {
        // SAFETY: the caller's contract.
        unsafe { handle(a) }?.drain_all_pages();
        Ok(())
    })
}
