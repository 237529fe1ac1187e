//! The opaque `pagealloc` handle: its layout, how a pointer from C is checked
//! to be one (with a message, and quietly for the inline hit paths), and its
//! life from `pagealloc_create` to `pagealloc_destroy`, which refuses while
//! thread caches or page arrays made on it are alive.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use ::pagealloc::{Config, PageAllocator, Pfn, MAX_HOLES};

use crate::args::out;
use crate::config::pagealloc_config;
use crate::status::pagealloc_status::{self, *};
use crate::status::{config_err, fail, invalid, run, Res};

/// A handle's tag. 32 bits, so that the inline paths' test is one
/// compare of memory with an immediate (a 64-bit tag needs two
/// instructions on x86-64).
const MAGIC: u32 = 0x7061_6c63; // "palc"

/// An allocator. Opaque: made by `pagealloc_create`, ended by `pagealloc_destroy`.
pub struct pagealloc {
    magic: u32,
    inner: PageAllocator,
    /// Thread caches made on this handle and not yet destroyed
    /// (`pagealloc_destroy` refuses while there are any).
    pub(crate) tcaches: AtomicUsize,
    /// Page arrays made on this handle and not yet destroyed (the same).
    pub(crate) arrays: AtomicUsize,
}

/// The allocator behind a handle, or `PAGEALLOC_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `a` is null or points to readable memory at least as large as a handle
/// (a live handle from `pagealloc_create`, in a correct program).
#[inline(always)]
pub(crate) unsafe fn handle<'a>(a: *const pagealloc) -> Res<&'a PageAllocator> {
    if a.is_null() || !a.is_aligned() {
        return Err(bad_handle(a));
    }
    // SAFETY: non-null and aligned; readable by the caller's contract.
    let h = unsafe { &*a };
    if h.magic != MAGIC {
        return Err(bad_handle(a));
    }
    Ok(&h.inner)
}

#[cold]
#[inline(never)]
fn bad_handle(a: *const pagealloc) -> pagealloc_status {
    if a.is_null() {
        invalid("allocator handle is NULL")
    } else {
        invalid(format_args!("{a:p} is not a pagealloc handle"))
    }
}

/// The allocator behind a handle, checked without recording a message.
///
/// # Safety
/// As [`handle`].
/// The inline hit paths' form: no alignment test (one test and branch
/// fewer a call). The magic number is read unaligned, so a misaligned
/// pointer to anything else is refused like any other non-handle; a
/// misaligned pointer whose bytes at the magic's offset spell the magic
/// would get past, which only a pointer made to fool the check can do (the
/// caller's contract rules it out, as it rules out a dangling handle).
#[inline(always)]
pub(crate) unsafe fn handle_quiet<'a>(a: *const pagealloc) -> Res<&'a PageAllocator> {
    if a.is_null() {
        return Err(PAGEALLOC_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null; readable by the caller's contract; read unaligned.
    let magic = unsafe { ptr::addr_of!((*a).magic).read_unaligned() };
    if magic != MAGIC {
        return Err(PAGEALLOC_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: a handle (its magic is there), so aligned and live by the
    // caller's contract.
    Ok(unsafe { &(*a).inner })
}

/// A range of pages: `nr_pages` pages from pfn `start` (`Config::holes`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pagealloc_range {
    /// The first pfn.
    pub start: u64,
    /// Pages in the range.
    pub nr_pages: u64,
}

/// Build an allocator from `*cfg` (NULL: the defaults) and store its handle in
/// `*out_handle`. On error `*out_handle` is set to NULL and the code says why
/// (`PAGEALLOC_ERR_INVALID_CONFIG` with the field in the message,
/// `PAGEALLOC_ERR_MMAP`, `PAGEALLOC_ERR_NO_MEMORY` when the page descriptors
/// cannot be allocated, `PAGEALLOC_ERR_INVALID_ARGUMENT` for an unknown
/// backing or drain mode).
///
/// Thread safety: safe to call from any thread; each call makes a new allocator.
///
/// # Safety
/// `cfg` is NULL or points to a readable `pagealloc_config`; `out_handle` is
/// NULL or points to a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_create(
    cfg: *const pagealloc_config,
    out_handle: *mut *mut pagealloc,
) -> pagealloc_status {
    run("pagealloc_create", || {
        // SAFETY: the caller's contract.
        unsafe { create(cfg, Vec::new(), out_handle) }
    })
}

/// `pagealloc_create` with `nr_holes` page ranges at `holes` kept out of the
/// allocator (holes in a memory map, memory to give later with
/// `pagealloc_add_free_memory`); `holes` may be NULL when `nr_holes` is 0.
/// A bad range (empty, past the arena, overlapping another, more than
/// 4096 of them) is `PAGEALLOC_ERR_INVALID_CONFIG`.
///
/// Thread safety: as `pagealloc_create`.
///
/// # Safety
/// As `pagealloc_create`, and `holes` is NULL or points to `nr_holes`
/// readable `pagealloc_range`s.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_create_with_holes(
    cfg: *const pagealloc_config,
    holes: *const pagealloc_range,
    nr_holes: usize,
    out_handle: *mut *mut pagealloc,
) -> pagealloc_status {
    run("pagealloc_create_with_holes", || {
        if holes.is_null() && nr_holes > 0 {
            return Err(invalid(format_args!("holes is NULL with nr_holes {nr_holes}")));
        }
        // More than the most a configuration takes is refused unread.
        let n = nr_holes.min(MAX_HOLES + 1);
        let ranges = (0..n)
            .map(|i| {
                // SAFETY: i < nr_holes readable ranges by the caller's
                // contract; read unaligned, so any address works.
                let r = unsafe { holes.add(i).read_unaligned() };
                (Pfn::new(r.start.min(u64::MAX - 1)), r.nr_pages)
            })
            .collect();
        // SAFETY: the caller's contract.
        unsafe { create(cfg, ranges, out_handle) }
    })
}

/// The two creations' common part.
///
/// # Safety
/// As `pagealloc_create`.
unsafe fn create(cfg: *const pagealloc_config, holes: Vec<(Pfn, u64)>, out_handle: *mut *mut pagealloc) -> Res<()> {
    let o = out(out_handle, "out_handle")?;
    o.write(ptr::null_mut());
    let c = if cfg.is_null() {
        Config::default()
    } else {
        // SAFETY: non-null, readable by the caller's contract; read
        // unaligned, so any address works.
        unsafe { cfg.read_unaligned() }.to_rust()?
    };
    let inner = PageAllocator::new(c.holes(holes)).map_err(config_err)?;
    o.write(Box::into_raw(Box::new(pagealloc {
        magic: MAGIC,
        inner,
        tcaches: Default::default(),
        arrays: Default::default(),
    })));
    Ok(())
}

/// Destroy an allocator and unmap its arena. NULL is a no-op (returns
/// `PAGEALLOC_OK`), like `free(NULL)`; a pointer that is not a handle is
/// `PAGEALLOC_ERR_INVALID_ARGUMENT`; one with thread caches or page arrays
/// not yet destroyed (`pagealloc_tcache_create`, `pagealloc_page_array_create`)
/// is `PAGEALLOC_ERR_BUSY`, and stays.
///
/// Thread safety: NOT safe concurrently with any other call on this handle.
/// Every other thread must be done with the handle (and its page addresses)
/// first; using the handle afterwards is undefined behaviour.
///
/// # Safety
/// `a` is NULL or a handle from `pagealloc_create` not yet destroyed, with no
/// call on it running or to come.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_destroy(a: *mut pagealloc) -> pagealloc_status {
    run("pagealloc_destroy", || {
        if a.is_null() {
            return Ok(());
        }
        // SAFETY: a handle (checked as far as it can be) by the caller's contract.
        unsafe { handle(a) }?;
        // SAFETY: as above.
        let live = unsafe { (*a).tcaches.load(Ordering::Acquire) };
        if live != 0 {
            return Err(fail(
                PAGEALLOC_ERR_BUSY,
                format_args!("{live} thread caches of this allocator are not destroyed yet"),
            ));
        }
        // SAFETY: as above.
        let arrays = unsafe { (*a).arrays.load(Ordering::Acquire) };
        if arrays != 0 {
            return Err(fail(
                PAGEALLOC_ERR_BUSY,
                format_args!("{arrays} page arrays of this allocator are not destroyed yet"),
            ));
        }
        // SAFETY: as above; made by Box::into_raw in pagealloc_create, and the
        // caller gives up the handle. The magic is cleared first so that a
        // stale copy of the pointer is more likely to be refused.
        unsafe {
            (*a).magic = 0;
            drop(Box::from_raw(a));
        }
        Ok(())
    })
}
