//! The page descriptor (the kernel's `struct page`, in 16 bytes).
//!
//! ```text
//!   flags   AtomicU32   state bits below; the page-lock protocol's word
//!   private LockedU32   order (bits 0..4) and a migratetype (bits 8..10): the free
//!                       list it is on, the type it was allocated for, or its pcp list
//!   next    LockedU32   pfn link of whichever list holds the page (NIL if none)
//!   prev    LockedU32
//! ```
//!
//! Invariants (checked by `check_invariants`):
//! - `BUDDY` is set only on the head of a free block in a zone's free lists, and
//!   then `private.order` is that block's order.
//! - `HEAD` is set only on the head of an allocated block, with its order and the
//!   migratetype it was allocated for in `private`. `OWNED` and the page-lock
//!   bits (`LOCKED`, `GUARD`, `WRITEBACK`, `UPTODATE`, `WAITERS`) appear only
//!   beside `HEAD`; `GUARD` only beside `LOCKED`.
//! - A block leaves `HEAD` for `PCP` or `BUDDY` only through one atomic
//!   read-modify-write (the free claim) that fails unless the word is an
//!   allocated head with none of `NO_RAW_FREE` set (`OWNED` allowed for the
//!   owning handle's own free): two frees of one block, or a free racing a
//!   lock, cannot both succeed.
//! - `PCP` is set only on an order-N page sitting on a per-CPU list or front
//!   cache (or claimed for freeing, on its way to one); `private`'s order is N.
//!   `PCP | OWNED` (`ARRAY_HELD`) is the exception: an order-0 page held in a
//!   `PageArray`, allocated but invisible to every pfn-taking call (none of
//!   which acts without `HEAD`). Only the array changes that word, with
//!   plain stores (to it at allocation, from it to `PCP` at its release):
//!   every other write needs `HEAD` through a compare-and-swap (locks,
//!   references, frees, the LRU's `LRU` bit), except a few atomic clears
//!   that run on any pfn (`unlock_page`, `end_page_writeback`, a waker's
//!   `WAITERS`) and clear bits such a word never has; so the array's
//!   release needs no compare-and-swap.
//! - At most one of `BUDDY`, `HEAD`, `PCP` is set. Pages inside a block (tails)
//!   have all three clear; their links are stale and never read.
//! - `next`/`prev` are read and written only by the holder of the lock of the
//!   list the page is on (zone lock, pcp lock, or a node's LRU lock for an
//!   allocated page with `LRU` set), or, for an allocated page on a
//!   `PageChain` (the bulk allocator's linked form), by the chain's owner.
//! - The page cache's bits (`REFERENCED`, `DIRTY`, `LRU`, `ACTIVE`) and the
//!   reference count (bits 16..31, `pageref`) appear only beside `HEAD`; a
//!   block with a count or `LRU` is freed only by its last `put_page`
//!   (`NO_RAW_FREE` includes them).

use crate::sync::{AtomicU32, LockedU32, Ordering};
use crate::types::{MigrateType, Order};

/// Link value meaning "no page".
pub const NIL: u32 = u32::MAX;

/// Page flag bits, at the kernel's positions where the kernel has them.
pub mod flags {
    /// The page is locked (PG_locked).
    pub const LOCKED: u32 = 1 << 0;
    /// The page is under writeback (PG_writeback).
    pub const WRITEBACK: u32 = 1 << 1;
    /// The page's contents are valid (PG_uptodate).
    pub const UPTODATE: u32 = 1 << 3;
    /// Someone may be waiting on this page in the hashed wait queues (PG_waiters).
    pub const WAITERS: u32 = 1 << 7;
    /// Head of a free block in the buddy lists (the kernel's PageBuddy).
    pub const BUDDY: u32 = 1 << 8;
    /// Head of an allocated block.
    pub const HEAD: u32 = 1 << 9;
    /// On a per-CPU list or a thread's front cache.
    pub const PCP: u32 = 1 << 10;
    /// The allocated block is owned by a `Pages` handle: the raw pfn API may
    /// not free it (only the handle's drop or `free` does).
    pub const OWNED: u32 = 1 << 11;
    /// The page lock is held by a `PageLockGuard`: only the guard releases it
    /// (set and cleared together with `LOCKED`).
    pub const GUARD: u32 = 1 << 12;
    /// The page's owner registered movable operations for it (migration):
    /// compaction may move it. Only beside `HEAD`, on order-0 pages.
    pub const MOVABLE_OPS: u32 = 1 << 13;
    /// The page is isolated for migration: beside `HEAD | MOVABLE_OPS` while
    /// the bytes are copied, alone (no `HEAD`) during the hand-over to the
    /// owner. Raw frees are refused meanwhile.
    pub const ISOLATED_MIGRATE: u32 = 1 << 14;
    /// Free page reporting: on a `BUDDY` head, the block's memory has been
    /// released (the kernel's PageReported). Cleared whenever the head stops
    /// being a free head. Kept beside `PCP` on pages refilled from a released
    /// block (they read zero until allocated); on no other page at a quiescent
    /// moment, except transiently on a head just taken off the lists (see
    /// `zone::Zone::rmqueue`).
    pub const REPORTED: u32 = 1 << 15;
    /// The page cache's "accessed since the LRU last looked" bit (PG_referenced).
    pub const REFERENCED: u32 = 1 << 2;
    /// The page's contents differ from its backing store (PG_dirty).
    pub const DIRTY: u32 = 1 << 4;
    /// The page is on one of its node's LRU lists (PG_lru): its `next`/`prev`
    /// links belong to the LRU lock.
    pub const LRU: u32 = 1 << 5;
    /// The page is on the active LRU list (PG_active).
    pub const ACTIVE: u32 = 1 << 6;
    /// Shift of the page reference count (bits 16..31; see `pageref`).
    pub(crate) const REF_SHIFT: u32 = 16;
    /// One page reference.
    pub const REF_ONE: u32 = 1 << REF_SHIFT;
    /// The page reference count (the kernel's `_refcount`, 16 bits here).
    pub const REF_MASK: u32 = 0xffff << REF_SHIFT;
    /// A migration target between its allocation and its hand-over to the
    /// page's owner (or its return to the lists): `ISOLATED_MIGRATE` alone,
    /// without `HEAD`, so no pfn-taking call acts on it (raw frees read
    /// `Migrating`, locks and references `NotAllocated`) while migration
    /// writes its bytes and stores its word. Before, targets were plain
    /// allocated heads, and a stray `free_pages` of one in mid-migration
    /// handed the frame to a second owner.
    pub const MIGRATE_TARGET: u32 = ISOLATED_MIGRATE;
    /// An order-0 page held by a `PageArray` (see the module doc): `PCP`
    /// (no pfn-taking call acts on it) with `OWNED` (not on any list: it
    /// counts as allocated).
    pub const ARRAY_HELD: u32 = PCP | OWNED;

    /// Whether flags word `f` is a `PageArray`'s page (both `ARRAY_HELD` bits).
    #[inline(always)]
    pub const fn array_held(f: u32) -> bool {
        f & ARRAY_HELD == ARRAY_HELD
    }

    /// Whether flags word `f` starts an allocation whose private word has
    /// the type it was allocated for: an allocated head, or a `PageArray`'s
    /// order-0 page (which the censuses count as allocated, not per-CPU).
    #[inline(always)]
    pub(crate) const fn typed_allocation(f: u32) -> bool {
        f & HEAD != 0 || array_held(f)
    }
    /// Whether flags word `f` is a page-cache page's: it has a reference
    /// count (only the cache makes counted pages) or sits on an LRU list.
    /// The one place that decides whether a descriptor belongs to the page
    /// cache: such a page is freed only by its last `put_page` and migrated
    /// only by the cache's own migrator, so the raw pfn API neither frees it
    /// nor marks it movable. A page the cache is freeing has a zero count
    /// and is held by a lock guard instead (`GUARD`), which callers refuse
    /// on its own.
    #[inline(always)]
    pub const fn cache_owned(f: u32) -> bool {
        f & (REF_MASK | LRU) != 0
    }

    /// Bits that forbid freeing a block through the raw pfn API: a lock,
    /// writeback, an owning handle, a page reference (the last `put_page`
    /// frees), links owned by the LRU lock, or a migration in progress.
    pub const NO_RAW_FREE: u32 = LOCKED | WRITEBACK | OWNED | GUARD | REF_MASK | LRU | ISOLATED_MIGRATE;
}

/// One page frame's descriptor (the kernel's `struct page`, in 16 bytes):
/// its flags and reference count, its order and type, and its free-list
/// links. Opaque outside the allocator; a kernel names it only to set aside
/// storage for the descriptors (`FrameAllocator::with_descriptors`).
#[derive(Debug)]
#[repr(C)]
pub struct PageDesc {
    #[doc(hidden)]
    pub flags: AtomicU32,
    private: LockedU32,
    pub(crate) next: LockedU32,
    pub(crate) prev: LockedU32,
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<PageDesc>() <= 16, "a page descriptor must fit in 16 bytes");

/// Where the flags and private words sit in a descriptor (the C API's
/// header-inline fast path reads them; `allocator::thread_front`).
#[cfg(not(loom))]
pub const DESC_FLAGS_OFFSET: usize = core::mem::offset_of!(PageDesc, flags);
#[cfg(not(loom))]
pub const DESC_PRIVATE_OFFSET: usize = core::mem::offset_of!(PageDesc, private);

/// The private word's layout: the migratetype's index in bits 0..3, the
/// order in bits 3..8. The type is low so that an order-0 page's word *is*
/// its type's index: the inline free takes its front-cache stack from the
/// word and one compare (`word < NR_STACKS`) checks order 0 as well.
const MT_MASK: u32 = 7;
/// See [`MT_MASK`].
const ORDER_SHIFT: u32 = 3;
/// The order bits of the private word (order 0 when they are clear).
pub(crate) const ORDER_MASK: u32 = 0x1f << ORDER_SHIFT;
/// On a `BUDDY` head only, bits 16..32 of the private word hold the coarse
/// time the block went on its free list (free page reporting's age; see
/// `zone::free_clock`). Nothing reads them on any other page.
pub(crate) const STAMP_SHIFT: u32 = 16;

/// The private word of a block of `order` for (or on the lists of) `mt`.
#[inline(always)]
pub const fn private_word(order: Order, mt: MigrateType) -> u32 {
    private_word_raw(order, mt as usize)
}

/// [`private_word`] with the type as its index.
#[inline(always)]
pub const fn private_word_raw(order: Order, mt_index: usize) -> u32 {
    (order.get() << ORDER_SHIFT) | mt_index as u32
}

/// The order in a private word made by [`private_word_raw`] (other bits
/// above the order's are ignored).
#[inline(always)]
pub(crate) const fn private_order(w: u32) -> u32 {
    (w & ORDER_MASK) >> ORDER_SHIFT
}

impl Default for PageDesc {
    fn default() -> Self {
        Self::new()
    }
}

impl PageDesc {
    /// A free, unlinked descriptor (outside loom, descriptors are made by
    /// zero-filling instead).
    pub fn new() -> Self {
        Self {
            flags: AtomicU32::new(0),
            private: LockedU32::new(0),
            next: LockedU32::new(NIL),
            prev: LockedU32::new(NIL),
        }
    }

    /// Lock-free read of the flags (may race with the lock protocol; the
    /// allocator's own bits change only under its locks).
    #[inline(always)]
    pub fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Overwrite the flags. Only for pages nobody else may legitimately touch:
    /// free pages, or the allocated head being freed after its checks.
    /// Release: an allocation stores the private word first and then
    /// `HEAD` here, so a claim whose CAS reads that `HEAD` (acquire) reads
    /// the block's private word as the allocation left it (the claim's
    /// check that the block did not change under it relies on this). A
    /// plain store on x86-64.
    #[inline(always)]
    pub fn set_flags(&self, f: u32) {
        self.flags.store(f, Ordering::Release)
    }

    /// The order in the private word, as stored: a lockless reader may see
    /// a stale or foreign word, so this is a plain number (at most 31).
    #[inline(always)]
    pub fn order(&self) -> u32 {
        private_order(self.private.get())
    }

    /// The order of a free (`BUDDY`) head read under its zone's lock, where
    /// the word is the one `set_buddy` stored from an [`Order`].
    #[inline(always)]
    pub fn buddy_order(&self) -> Order {
        let o = self.order();
        debug_assert!(self.is_buddy() && o <= crate::types::MAX_ORDER, "order {o} on a free head");
        Order::new(o).unwrap_or(Order::MAX)
    }

    #[inline(always)]
    pub fn private_mt(&self) -> MigrateType {
        MigrateType::from_index((self.private.get() & MT_MASK) as usize)
    }

    #[inline(always)]
    pub fn set_private(&self, order: Order, mt: MigrateType) {
        self.private.set(private_word(order, mt))
    }

    /// Store a private word made by [`private_word`] or [`private_word_raw`].
    #[inline(always)]
    pub(crate) fn set_private_raw(&self, w: u32) {
        self.private.set(w)
    }

    /// The private word as stored (compare with [`private_word`]).
    #[inline(always)]
    pub(crate) fn private_raw(&self) -> u32 {
        self.private.get()
    }

    /// Set the private word to `order` and `mt` unless it already holds them
    /// (a load of a line the caller has just read, instead of a store).
    #[inline(always)]
    pub fn ensure_private(&self, order: Order, mt: MigrateType) {
        self.ensure_private_raw(private_word(order, mt));
    }

    /// [`PageDesc::ensure_private`] with the word made by [`private_word_raw`].
    #[inline(always)]
    pub(crate) fn ensure_private_raw(&self, w: u32) {
        if self.private.get() != w {
            self.private.set(w);
        }
    }

    /// The block after this one on its free list (read under the zone
    /// lock that owns the list; None at the tail). Read-only: the links are
    /// the list's.
    #[inline(always)]
    pub fn list_next(&self) -> Option<u64> {
        let next = self.next.get();
        (next != NIL).then_some(next as u64)
    }

    #[inline(always)]
    pub fn is_buddy(&self) -> bool {
        self.flags() & flags::BUDDY != 0
    }

    /// Mark as the head of a free block of `order` on the `mt` list. The list's
    /// type is recorded so removal always finds the right list; `extra` is
    /// `REPORTED` or 0, `stamp` the coarse time it went free.
    #[inline(always)]
    pub fn set_buddy(&self, order: Order, mt: MigrateType, extra: u32, stamp: u16) {
        self.private.set(private_word(order, mt) | (stamp as u32) << STAMP_SHIFT);
        self.set_flags(flags::BUDDY | extra);
    }

    /// The free-time stamp of a `BUDDY` head.
    #[inline(always)]
    pub fn stamp(&self) -> u16 {
        (self.private.get() >> STAMP_SHIFT) as u16
    }

    /// Mark as the head of an allocated block of `order` for `mt`.
    #[inline(always)]
    pub fn set_allocated(&self, order: Order, mt: MigrateType) {
        self.set_private(order, mt);
        self.set_flags(flags::HEAD);
    }

    /// A page just taken off the free lists as a migration target (order 0,
    /// Movable, `MIGRATE_TARGET`).
    pub fn set_migrate_target(&self) {
        self.set_private(Order::ZERO, MigrateType::Movable);
        self.set_flags(flags::MIGRATE_TARGET);
    }

    /// Clear every mark: the page becomes a tail of some larger block.
    #[inline(always)]
    pub fn clear(&self) {
        self.set_flags(0);
    }
}
