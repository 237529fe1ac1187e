//! Thread caches: the order-0 fast path inlined into C callers.
//!
//! `pagealloc_tcache_create` gives the calling thread a `pagealloc_tcache`:
//! the addresses of its front-cache slot, of the descriptors and of the
//! pageblock words (`pagealloc::ThreadFront`). The header-inline functions
//! of `include/pagealloc_inline.h` (`pagealloc_tc_alloc`,
//! `pagealloc_tc_alloc_page`, `pagealloc_tc_free_page`) run the front
//! cache's owner protocol on them in the caller's code, as the Rust API's
//! inline paths do in Rust callers, and call `pagealloc_alloc_pages` /
//! `pagealloc_free_pages` for everything else (a miss, any argument they do
//! not take, a call from another thread, an unoptimised build);
//! `pagealloc_tc_page_address` computes a frame's address from the arena's.
//!
//! The layouts C reads are declared here (so cbindgen writes them into
//! `pagealloc.h`) and asserted below against the core's (`pagealloc::ffi::abi`); the
//! protocol is `pagealloc`'s `front::raw`.
//!
//! Invariants: a tcache is used by its own thread only (the inline functions
//! compare the thread pointer; another thread's call takes the full path);
//! it keeps its slot and the allocator's core alive until destroyed, and its
//! handle refuses `pagealloc_destroy` until then.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use std::sync::atomic::Ordering;

use ::pagealloc::ffi::{abi, ThreadFront};
use ::pagealloc::Gfp;

use crate::alloc::pagealloc_alloc_pages;
use crate::constants::{PAGEALLOC_GFP_MOVABLE, PAGEALLOC_GFP_RECLAIMABLE, PAGEALLOC_HOLE};
use crate::handle::{handle, pagealloc};
use crate::status::pagealloc_status::{self, *};
use crate::status::{fail, run, Res};

/// Bytes per page.
pub const PAGEALLOC__PAGE_SIZE: u32 = 4096;
/// Pages per front-cache stack.
pub const PAGEALLOC__STACK_CAP: u32 = 128;
/// Front-cache stacks per thread cache.
pub const PAGEALLOC__STACKS: u32 = 4;
/// A slot's state during an operation.
pub const PAGEALLOC__BUSY: u64 = 0;
/// A descriptor's flags: an allocated head; the same claimed by a free.
pub const PAGEALLOC__FLAG_HEAD: u32 = 1 << 9;
pub const PAGEALLOC__FLAG_PCP: u32 = 1 << 10;
/// pfn >> this = pageblock word index.
pub const PAGEALLOC__PAGEBLOCK_ORDER: u32 = 9;
/// The pageblock word bits a stack's key compares.
pub const PAGEALLOC__PB_KEY_MASK: u16 = 0xff0f;
/// The stacks of the three request types (`Gfp::migratetype`'s indexes).
pub const PAGEALLOC__STACK_UNMOVABLE: u32 = 0;
pub const PAGEALLOC__STACK_MOVABLE: u32 = 1;
pub const PAGEALLOC__STACK_RECLAIMABLE: u32 = 2;
/// The event counter a free onto a stack adds to.
pub const PAGEALLOC__EV_PGFREE: u32 = 2;
/// The gfp flags the inline allocation serves (every flag but ZERO).
pub const PAGEALLOC__INLINE_GFP: u32 = 0x117;

/// One front-cache stack (read and written by its thread's inline calls only).
#[repr(C)]
pub struct pagealloc_front_stack {
    /// The pages, coldest first.
    pub pfns: [u32; 128],
    /// How many.
    pub len: u32,
    /// The node of the stack's zone.
    pub nid: u32,
    /// The pageblock key a page must have to join the stack.
    pub key: u16,
    /// The event counter an allocation from the stack adds to.
    pub alloc_ev: u8,
    /// Padding.
    pub pad: u8,
}

/// A thread's front-cache slot (the inline calls use `state`, `drain_req`,
/// `stacks` and `events`, from the slot's own thread only).
#[repr(C)]
pub struct pagealloc_front_slot {
    /// The allocator's id between operations, `PAGEALLOC__BUSY` during one.
    pub state: u64,
    /// Set while a drainer holds the slot.
    pub drain_req: u8,
    /// The library's own words.
    pub reserved: [u8; 15],
    /// One stack per request type (and one that never takes a page).
    pub stacks: [pagealloc_front_stack; 4],
    /// Event counters, written by the slot's thread only.
    pub events: [u64; 38],
}

/// A page descriptor (the inline calls read `flags` and `private_word`).
#[repr(C)]
pub struct pagealloc_page_desc {
    /// The flags word.
    pub flags: u32,
    /// The order and type word.
    pub private_word: u32,
    /// List links.
    pub next: u32,
    /// List links.
    pub prev: u32,
}

/// A thread cache: what the header-inline calls need. Made by
/// `pagealloc_tcache_create` for its calling thread; read its fields only
/// through `pagealloc_inline.h`.
#[repr(C)]
pub struct pagealloc_tcache {
    /// The making thread's thread pointer.
    pub thread: *const c_void,
    /// The allocator, for every call the inline path does not serve.
    pub handle: *const pagealloc,
    /// The thread's slot.
    pub slot: *mut pagealloc_front_slot,
    /// The page descriptors, by pfn.
    pub descs: *mut pagealloc_page_desc,
    /// The pageblock words.
    pub blocks: *const u16,
    /// Pages in the arena.
    pub nr_pages: u64,
    /// The state an allocation enters from (never matches when the inline
    /// path is off).
    pub alloc_key: u64,
    /// The state a free enters from.
    pub free_key: u64,
    /// The arena's address for the prefetch (0: none).
    pub prefetch_base: usize,
    /// The arena's address (0: no backing memory).
    pub arena_base: usize,
    /// What keeps the slot alive (opaque).
    pub holder: *mut c_void,
}

/// The version of the layout `pagealloc_inline.h` works on (the thread
/// cache, slot, stack and descriptor structures and the constants above):
/// the header passes the value it was compiled with to
/// `pagealloc_tcache_create_abi`, which refuses any other, so a program
/// built against other headers than the library's never runs its inline
/// path over a layout it does not know.
pub const PAGEALLOC_INLINE_ABI_VERSION: u32 = 1;

/// The stack `pagealloc__tc_stack_of` names for these flags (the library's).
const fn stack(gfp: u32) -> u32 {
    Gfp::from_bits_retain(gfp).migratetype() as u32
}

const _: () = {
    assert!(PAGEALLOC_INLINE_ABI_VERSION == abi::VERSION);
    assert!(PAGEALLOC__STACK_CAP as usize == abi::STACK_CAP && PAGEALLOC__STACKS as usize == abi::STACKS);
    assert!(size_of::<pagealloc_front_stack>() == abi::STACK_SIZE);
    assert!(offset_of!(pagealloc_front_stack, pfns) == abi::STACK_PFNS);
    assert!(offset_of!(pagealloc_front_stack, len) == abi::STACK_LEN);
    assert!(offset_of!(pagealloc_front_stack, key) == abi::STACK_KEY);
    assert!(offset_of!(pagealloc_front_stack, alloc_ev) == abi::STACK_ALLOC_EV);
    assert!(size_of::<pagealloc_front_slot>() == abi::SLOT_SIZE);
    assert!(offset_of!(pagealloc_front_slot, state) == abi::SLOT_STATE);
    assert!(offset_of!(pagealloc_front_slot, drain_req) == abi::SLOT_DRAIN_REQ);
    assert!(offset_of!(pagealloc_front_slot, stacks) == abi::SLOT_STACKS);
    assert!(offset_of!(pagealloc_front_slot, events) == abi::SLOT_EVENTS);
    assert!(size_of::<[u64; 38]>() == abi::NR_EVENTS * 8);
    assert!(size_of::<pagealloc_page_desc>() == abi::DESC_SIZE);
    assert!(offset_of!(pagealloc_page_desc, flags) == abi::DESC_FLAGS);
    assert!(offset_of!(pagealloc_page_desc, private_word) == abi::DESC_PRIVATE);
    assert!(PAGEALLOC__BUSY == abi::STATE_BUSY && PAGEALLOC__PAGE_SIZE as usize == ::pagealloc::PAGE_SIZE);
    assert!(PAGEALLOC__FLAG_HEAD == abi::FLAG_HEAD && PAGEALLOC__FLAG_PCP == abi::FLAG_PCP);
    assert!(PAGEALLOC__PAGEBLOCK_ORDER == abi::PAGEBLOCK_ORDER && PAGEALLOC__PB_KEY_MASK == abi::PB_KEY_MASK);
    // The header's pagealloc__tc_stack_of: MOVABLE wins, then RECLAIMABLE.
    assert!(stack(0) == PAGEALLOC__STACK_UNMOVABLE && stack(PAGEALLOC_GFP_RECLAIMABLE) == PAGEALLOC__STACK_RECLAIMABLE);
    assert!(stack(PAGEALLOC_GFP_MOVABLE) == PAGEALLOC__STACK_MOVABLE);
    assert!(stack(PAGEALLOC_GFP_MOVABLE | PAGEALLOC_GFP_RECLAIMABLE) == PAGEALLOC__STACK_MOVABLE);
    assert!(PAGEALLOC__INLINE_GFP == abi::INLINE_GFP && PAGEALLOC__EV_PGFREE as usize == abi::EV_PGFREE);
};

/// The slot of every thread cache without one: its state is 0 (`BUSY`),
/// which no key equals, so the inline calls miss before reading further.
/// Only its first word is ever read.
static NO_SLOT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The calling thread's thread pointer, as the header's
/// `pagealloc__thread_self` reads it; None where the header has no reading.
fn thread_self() -> Option<*const c_void> {
    #[cfg(target_arch = "x86_64")]
    {
        let tp: *const c_void;
        // SAFETY: reads the thread control block's self pointer (fs:0 on
        // x86-64 Linux); no memory is written.
        unsafe { std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
        Some(tp)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Make a thread cache for the calling thread on allocator `a`, in `*out`.
/// Use it with `pagealloc_inline.h`'s `pagealloc_tc_alloc_page` and
/// `pagealloc_tc_free_page` on this thread; destroy it with
/// `pagealloc_tcache_destroy` before the thread exits and before
/// `pagealloc_destroy` (which refuses while any exists). Where the front
/// cache is off (or the platform has no inline path) the cache still works:
/// every inline call then takes the full path.
///
/// `pagealloc_inline.h` turns this call into `pagealloc_tcache_create_abi`
/// with the header's `PAGEALLOC_INLINE_ABI_VERSION`, so that a program whose
/// inline path would read the cache checks its layout first; this entry
/// point, without the check, is for programs that use the cache only through
/// library calls.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `out`),
/// `PAGEALLOC_ERR_BUSY` (the thread is exiting).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_tcache_create(
    a: *const pagealloc,
    out: *mut *mut pagealloc_tcache,
) -> pagealloc_status {
    // SAFETY: the caller's contract, which is `tcache_create`'s.
    unsafe { tcache_create("pagealloc_tcache_create", a, out) }
}

/// `pagealloc_tcache_create` for a caller compiled against layout version
/// `abi_version` (`pagealloc_inline.h` passes its
/// `PAGEALLOC_INLINE_ABI_VERSION`): another version than this library's is
/// `PAGEALLOC_ERR_ABI_MISMATCH`, with `*out` set to NULL and nothing made.
///
/// Errors: as `pagealloc_tcache_create`, and `PAGEALLOC_ERR_ABI_MISMATCH`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_tcache_create_abi(
    a: *const pagealloc,
    abi_version: u32,
    out: *mut *mut pagealloc_tcache,
) -> pagealloc_status {
    if abi_version != PAGEALLOC_INLINE_ABI_VERSION {
        return run("pagealloc_tcache_create_abi", || {
            let o = crate::args::out(out, "out")?;
            o.write(std::ptr::null_mut());
            Err(fail(
                PAGEALLOC_ERR_ABI_MISMATCH,
                format_args!(
                    "pagealloc_inline.h of thread-cache ABI {abi_version}, this library's is {PAGEALLOC_INLINE_ABI_VERSION}"
                ),
            ))
        });
    }
    // SAFETY: the caller's contract.
    unsafe { tcache_create("pagealloc_tcache_create_abi", a, out) }
}

/// Both entry points' work.
///
/// # Safety
/// As `pagealloc_tcache_create`.
unsafe fn tcache_create(name: &'static str, a: *const pagealloc, out: *mut *mut pagealloc_tcache) -> pagealloc_status {
    run(name, || {
        // SAFETY: the caller's contract.
        let inner = unsafe { handle(a) }?;
        let o = crate::args::out(out, "out")?;
        let Some(t) = ::pagealloc::ffi::thread_front(inner) else {
            return Err(fail(PAGEALLOC_ERR_BUSY, "the calling thread is exiting"));
        };
        let v = t.view;
        let (thread, inline) = match thread_self() {
            Some(tp) => (tp, true),
            None => (std::ptr::null(), false),
        };
        let never = u64::MAX;
        // No slot (the front cache is off): one whose state no key matches.
        let slot = if v.slot.is_null() { NO_SLOT.as_ptr().cast() } else { v.slot.cast() };
        let tc = Box::new(pagealloc_tcache {
            thread,
            handle: a,
            slot,
            descs: v.descs.cast_mut().cast(),
            blocks: v.blocks,
            nr_pages: v.nr_pages,
            alloc_key: if inline { v.alloc_key } else { never },
            free_key: if inline { v.free_key } else { never },
            prefetch_base: v.prefetch_base,
            arena_base: v.arena_base,
            holder: Box::into_raw(Box::new(t)).cast(),
        });
        // SAFETY: a live handle (checked above).
        unsafe { (*a).tcaches.fetch_add(1, Ordering::AcqRel) };
        o.write(Box::into_raw(tc));
        Ok(())
    })
}

/// Destroy a thread cache (NULL: a no-op). Its pages stay in the thread's
/// front cache, where the thread's other calls (and drains) find them.
///
/// Thread safety: any thread, but not concurrently with a call using `tc`.
///
/// # Safety
/// `tc` is NULL or a live thread cache, used by no call now or later.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_tcache_destroy(tc: *mut pagealloc_tcache) -> pagealloc_status {
    run("pagealloc_tcache_destroy", || {
        if tc.is_null() {
            return Ok(());
        }
        // SAFETY: made by Box::into_raw in pagealloc_tcache_create and handed
        // back once (the caller's contract).
        let tc = unsafe { Box::from_raw(tc) };
        // SAFETY: as above: the holder is the Box made with it.
        drop(unsafe { Box::from_raw(tc.holder.cast::<ThreadFront>()) });
        // SAFETY: the handle refuses destruction while this cache lives.
        unsafe { (*tc.handle).tcaches.fetch_sub(1, Ordering::AcqRel) };
        Ok(())
    })
}

/// `pagealloc_tc_alloc` past its inline hit: `pagealloc_alloc_pages(a,
/// gfp_flags, 0)`'s pfn, or `PAGEALLOC_HOLE` when it failed (the calling
/// thread's last error says why).
/// Thread safety: as `pagealloc_alloc_pages`.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_tc_alloc_slow(a: *const pagealloc, gfp_flags: u32) -> u64 {
    let mut pfn = PAGEALLOC_HOLE;
    // SAFETY: a live handle or NULL; pfn is writable.
    if unsafe { pagealloc_alloc_pages(a, gfp_flags, 0, &mut pfn) } != PAGEALLOC_OK {
        return PAGEALLOC_HOLE;
    }
    pfn
}

/// Internal to `pagealloc_inline.h`: free an order-0 page whose claim the
/// inline free holds (it replaced the page's flags word, exactly HEAD, by
/// PCP) and could not push. Never call it yourself.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle; nothing freed).
///
/// # Safety
/// `a` is the live handle of the caller's thread cache (or NULL); the
/// caller holds `pfn`'s claim, which this consumes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc__tc_free_claimed(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_tc_free_page", || -> Res {
        // SAFETY: the caller's contract: a live handle or NULL, checked here
        // as every entry point checks its handle.
        let inner = unsafe { handle(a) }?;
        // SAFETY: the caller holds the claim.
        unsafe { ::pagealloc::ffi::free_claimed_order0(inner, pfn) };
        Ok(())
    })
}
