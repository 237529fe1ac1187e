//! For fast paths written outside Rust (the C API, crates/pagealloc-capi):
//! the inline halves of the order-0 calls, and one thread's front cache as
//! raw memory for the C header-inline `pagealloc_tc_alloc_page` /
//! `pagealloc_tc_free_page` (`include/pagealloc_inline.h`). Nothing here
//! gives safe code a way into the allocator: the views are raw pointers
//! (using them is `unsafe`, or C) and the one call that trusts its caller,
//! [`free_claimed_order0`], is `unsafe`.
//!
//! The layout the C path relies on is an ABI ([`abi`]), versioned by
//! [`abi::VERSION`]: the C header passes the version it was compiled with
//! when it makes a thread cache, and the library refuses another
//! (`PAGEALLOC_ERR_ABI_MISMATCH`), so a program built against an older
//! header never runs its inline path over a newer layout.
//!
//! A [`ThreadFront`] holds the calling thread's slot (and the allocator's
//! core) alive and gives, in a [`FrontView`], every address and key the C
//! path needs. That path does what the inline Rust paths do, in the same
//! order, on the same words: the slot handshake of `front::raw`, the
//! descriptor's flags word (a release store of `HEAD` on allocation; on free
//! the claim, a compare-and-swap from exactly `HEAD` to `PCP` with acquire,
//! then the private word read again), the stack, the owner's event counters.
//! A free it claimed but cannot push goes to [`free_claimed_order0`].
//! The layouts it relies on are [`abi`]'s constants, asserted by the C API
//! crate against its own declarations.
//!
//! Invariant: a view is used only by the thread that made it (the C side
//! checks its thread pointer on every call), so the slot keeps one owner.

use crate::allocator::PageAllocator;
use crate::mm::Mm;
use pagealloc_core::front::{FrontSlot, NEVER};
use pagealloc_core::page::flags;
use pagealloc_core::types::{Gfp, Pfn};
use std::sync::Arc;

/// The addresses and keys of one thread's front cache (see the module doc).
///
/// # Examples
///
/// ```
/// use pagealloc::{ffi, Config, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
/// let t = ffi::thread_front(&a).unwrap(); // this thread's cache, held
/// let v = t.view;
/// assert_eq!(v.nr_pages, a.nr_pages());
/// assert!(!v.descs.is_null()); // raw addresses: using them is unsafe (or C)
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FrontView {
    /// The slot (`abi::SLOT_*` locate its words), or null: no front cache.
    pub slot: *mut u8,
    /// The page descriptors (`DESC_SIZE` bytes each, by pfn).
    pub descs: *const u8,
    /// The pageblock words (by `pfn >> PAGEBLOCK_ORDER`).
    pub blocks: *const u16,
    /// Pages in the arena: a pfn is valid below it.
    pub nr_pages: u64,
    /// The state an order-0 allocation may enter from (`u64::MAX`: never).
    pub alloc_key: u64,
    /// The same for an order-0 free.
    pub free_key: u64,
    /// The arena's address for the allocation's prefetch, 0 for none.
    pub prefetch_base: usize,
    /// The arena's address (frame `p` at `arena_base + p * PAGE_SIZE`), 0
    /// without backing memory.
    pub arena_base: usize,
}

/// A thread's front cache, held for a fast path outside Rust.
///
/// # Examples
///
/// ```
/// use pagealloc::{ffi, Config, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
/// let t = ffi::thread_front(&a).unwrap();
/// assert_eq!(t.view.nr_pages, a.nr_pages());
/// drop(t); // the slot stays with the thread; the view is gone
/// a.check_invariants().unwrap();
/// ```
pub struct ThreadFront {
    _slot: Option<Arc<FrontSlot>>,
    _core: Arc<Mm>,
    /// What the fast path uses (keys that never match when the cache is off).
    pub view: FrontView,
}

// SAFETY: the value itself only holds two Arcs (Send) and addresses it never
// dereferences; what may be done through those addresses, and by which
// thread, is the protocol's rule, which needs `unsafe` (or C) to act on. The C
// API destroys a cache on any thread.
unsafe impl Send for ThreadFront {}

/// The layouts a fast path outside Rust relies on.
pub mod abi {
    /// The version of this layout: raised whenever a constant here, or what
    /// the inline path must do with the words they locate, changes. The C
    /// header's `PAGEALLOC_INLINE_ABI_VERSION` must equal it.
    pub const VERSION: u32 = 1;

    use pagealloc_core::front::raw as fr;
    /// A slot's state during an operation.
    pub const STATE_BUSY: u64 = fr::STATE_BUSY;
    /// A slot's size and its words' offsets: the state (`u64`), the
    /// drainer's flag (one byte), the stacks, the event counters (`u64`s).
    pub const SLOT_SIZE: usize = fr::SLOT_SIZE;
    /// Offset of the slot's state word.
    pub const SLOT_STATE: usize = fr::SLOT_STATE;
    /// Offset of the drainer's flag.
    pub const SLOT_DRAIN_REQ: usize = fr::SLOT_DRAIN_REQ;
    /// Offset of the stacks.
    pub const SLOT_STACKS: usize = fr::SLOT_STACKS;
    /// Offset of the event counters.
    pub const SLOT_EVENTS: usize = fr::SLOT_EVENTS;
    /// Event counters in a slot.
    pub const NR_EVENTS: usize = fr::NR_EVENTS;
    /// Pages per stack, and stacks per slot.
    pub const STACK_CAP: usize = fr::STACK_CAP;
    /// Stacks per slot.
    pub const STACKS: usize = fr::STACKS;
    /// A stack's size and its fields' offsets: `pfns` (`u32`s), `len` (`u32`),
    /// `key` (`u16`), `alloc_ev` (`u8`).
    pub const STACK_SIZE: usize = fr::STACK_SIZE;
    /// Offset of a stack's pfns.
    pub const STACK_PFNS: usize = fr::STACK_PFNS;
    /// Offset of a stack's length.
    pub const STACK_LEN: usize = fr::STACK_LEN;
    /// Offset of a stack's pageblock key.
    pub const STACK_KEY: usize = fr::STACK_KEY;
    /// Offset of a stack's allocation counter index.
    pub const STACK_ALLOC_EV: usize = fr::STACK_ALLOC_EV;
    /// The counter a free onto a stack adds to.
    pub const EV_PGFREE: usize = fr::EV_PGFREE;
    /// A descriptor's size and its flags and private words' offsets.
    pub const DESC_SIZE: usize = std::mem::size_of::<pagealloc_core::page::PageDesc>();
    /// Offset of a descriptor's flags word.
    pub const DESC_FLAGS: usize = pagealloc_core::page::DESC_FLAGS_OFFSET;
    /// Offset of a descriptor's private word.
    pub const DESC_PRIVATE: usize = pagealloc_core::page::DESC_PRIVATE_OFFSET;
    /// Flags words: an allocated head, and one claimed by a free.
    pub const FLAG_HEAD: u32 = pagealloc_core::page::flags::HEAD;
    /// A flags word claimed by a free.
    pub const FLAG_PCP: u32 = pagealloc_core::page::flags::PCP;
    /// Pageblock words: the shift from pfn to word, and the key bits a stack
    /// compares (zone, type, isolation).
    pub const PAGEBLOCK_ORDER: u32 = pagealloc_core::types::PAGEBLOCK_ORDER;
    /// The pageblock word's bits a stack compares (zone, type, isolation).
    pub const PB_KEY_MASK: u16 = pagealloc_core::zone::PB_KEY_MASK;
    /// The gfp flags the inline allocation serves (every known one but ZERO).
    pub const INLINE_GFP: u32 = pagealloc_core::types::Gfp::all().bits() & !pagealloc_core::types::Gfp::ZERO.bits();
}

/// The inline part of `alloc_pages(gfp, 0)` alone: a page from this
/// thread's front cache, or `None` (changing nothing) where `alloc_pages`
/// would make its call; the caller then calls [`PageAllocator::alloc_pages`].
///
/// For callers whose entry point is a call already (the C API): the hit
/// then carries none of the full path's error handling, and a miss goes
/// on in a function of its own.
#[inline(always)]
#[must_use]
pub fn alloc0_front_only(a: &PageAllocator, gfp: Gfp) -> Option<Pfn> {
    a.core.alloc0_front(gfp, flags::HEAD)
}

/// The inline part of `free_pages(pfn, 0)` alone: true when this thread's
/// front cache took the page; false, changing nothing, where `free_pages`
/// would make its call (misuse included): the caller then calls
/// [`PageAllocator::free_pages`], which checks and reports.
#[inline(always)]
#[must_use]
pub fn free0_front_only(a: &PageAllocator, pfn: Pfn) -> bool {
    a.core.free0_front(pfn)
}

/// [`free0_front_only`] of a raw frame number: any `u64`,
/// false for one outside the arena (`u64::MAX`, which no [`Pfn`] holds,
/// included), so a caller holding raw numbers makes no test of its own.
#[inline(always)]
#[must_use]
pub fn free0_front_only_raw(a: &PageAllocator, pfn: u64) -> bool {
    a.core.free0_front_raw(pfn)
}

/// The calling thread's front cache for a fast path outside Rust (the C
/// API's thread caches). None while the thread is exiting. With the
/// front cache off, a view whose keys never match (every call misses).
#[must_use]
pub fn thread_front(a: &PageAllocator) -> Option<ThreadFront> {
    let c = &a.core;
    // The inline paths' own keys (`NEVER` where a path is off); with
    // fail-inject, never (as the Rust inline paths step aside while
    // armed, every allocation must meet the injection).
    let (ak, fk) = if cfg!(feature = "fail-inject") { (NEVER, NEVER) } else { c.fronts.inline_keys() };
    let slot = if c.front_on { Some(c.fronts.current_shared()?) } else { None };
    let view = FrontView {
        slot: slot.as_ref().map_or(std::ptr::null_mut(), |s| s.base()),
        descs: c.mm.descs().as_ptr().cast(),
        blocks: c.mm.blocks_ptr(),
        nr_pages: c.mm.nr_pages(),
        alloc_key: ak,
        free_key: fk,
        prefetch_base: c.prefetch_base,
        arena_base: c.mm.prefetch_base(),
    };
    Some(ThreadFront { _slot: slot, _core: c.clone(), view })
}

/// Free an order-0 page whose claim the caller holds, where it goes now
/// (the C fast path's free when its stack cannot take the page, or the
/// page changed under the claim).
///
/// # Safety
/// The caller's compare-and-swap replaced `pfn`'s flags word, exactly
/// `HEAD`, with `PCP`, and nothing has freed it since: the claim is the
/// caller's to hand over, once.
pub unsafe fn free_claimed_order0(a: &PageAllocator, pfn: u64) {
    if pfn < a.core.mm.nr_pages() {
        a.core.free_as_is(pfn, flags::HEAD);
    }
}

#[cfg(test)]
mod tests {
    use super::abi;
    use crate::{Config, PageAllocator};

    /// The view names this thread's slot and the allocator's keys, and a page
    /// pushed through the raw words (as the C path does) comes back from the
    /// Rust inline allocation.
    #[test]
    fn a_view_reaches_the_slot_the_rust_paths_use() {
        let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
        let p = a.alloc_pages(crate::Gfp::KERNEL, 0).unwrap();
        let Some(t) = super::thread_front(&a) else { return };
        let v = t.view;
        if v.free_key == u64::MAX {
            return; // no front cache here (no membarrier)
        }
        // Onto the stack through Rust.
        a.free_pages(p, 0).unwrap();
        // SAFETY: the view's words are this thread's slot, alive in `t`; no
        // operation is running on it (we are between calls), so reading the
        // stack of type 0 is what the owner may do.
        unsafe {
            assert_eq!(*v.slot.add(abi::SLOT_STATE).cast::<u64>(), v.alloc_key);
            let st = v.slot.add(abi::SLOT_STACKS).add(crate::Gfp::KERNEL.migratetype().index() * abi::STACK_SIZE);
            let len = *st.add(abi::STACK_LEN).cast::<u32>();
            assert!(len >= 1);
            let top = *st.add(abi::STACK_PFNS).cast::<u32>().add(len as usize - 1);
            assert_eq!(u64::from(top), p.as_u64());
        }
        assert_eq!(a.alloc_pages(crate::Gfp::KERNEL, 0).unwrap(), p);
        a.free_pages(p, 0).unwrap();
        drop(t);
        a.check_invariants().unwrap();
    }

    /// A view kept past its thread's exit: the slot reads a state no key
    /// matches (so a stale C cache misses), a drain takes the pages it held,
    /// and the view's memory stays valid after the drain forgot the slot.
    #[test]
    fn a_view_outliving_its_thread_never_matches_a_key() {
        let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
        a.drain_all_pages();
        let free0 = a.nr_free_pages();
        let t = std::thread::scope(|s| {
            s.spawn(|| {
                let t = super::thread_front(&a);
                let p = a.alloc_pages(crate::Gfp::KERNEL, 0).unwrap();
                a.free_pages(p, 0).unwrap();
                t
            })
            .join()
            .unwrap()
        });
        let Some(t) = t else { panic!("a running thread gets a view") };
        let v = t.view;
        if v.slot.is_null() {
            return; // no front cache here (no membarrier)
        }
        // The second drain forgets the orphaned slot.
        a.drain_all_pages();
        a.drain_all_pages();
        // SAFETY: `t` holds the slot; its thread is gone, so nobody writes it.
        let state = unsafe { *v.slot.add(abi::SLOT_STATE).cast::<u64>() };
        assert!(state != v.alloc_key && state != v.free_key && state != abi::STATE_BUSY, "state {state:#x}");
        assert_eq!(a.nr_free_pages(), free0);
        drop(t);
        a.check_invariants().unwrap();
    }
}
