//! A cached page's header ([`PageHdr`], reached through [`PagePtr`]): the
//! `sqlite3_pcache_page` SQLite holds, the frame behind it, the links of
//! the two LRU lists it may be on ([`Kind`]; the lists are in `lru`), the
//! clock stamp of its unpin, and, for a page that shares its frame, its
//! place in that frame (`frames`).

use crate::ffi::Sqlite3PcachePage;
use pagealloc::Pfn;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering::Relaxed};

/// Which pair of links of a header a list uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The shard's list over its purgeable caches.
    Shard = 0,
    /// The page's own cache's list.
    Cache = 1,
}

/// `slot` of a page that has its block to itself.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// One cached page. `base` comes first: the `sqlite3_pcache_page*` SQLite
/// holds is the header's address. The mutable fields are atomics only so that
/// a shared reference is sound; every access is made under the lock of the
/// page's shard, which orders them (hence Relaxed).
#[repr(C)]
pub(crate) struct PageHdr {
    pub(crate) base: Sqlite3PcachePage,
    /// The block holding the page (the shared frame, for a page in a slot).
    pub(crate) pfn: Pfn,
    /// LRU links, `[Kind][prev, next]`; null while not on that list.
    links: [[AtomicPtr<PageHdr>; 2]; 2],
    /// The group clock when the page was last unpinned (`group::clock`).
    stamp: AtomicU64,
    key: AtomicU32,
    /// The cache the page belongs to (global eviction finds it from here).
    cache: AtomicU32,
    /// `frame index * 8 + slot` in its cache's shared frames, or [`NO_SLOT`].
    slot: AtomicU32,
    /// Words behind `base.p_extra`, which follow the header in its block
    /// (at least one, so the first 8 bytes exist).
    extra_words: u32,
    pinned: AtomicBool,
    /// On the LRU lists (unpinned, purgeable cache).
    pub(crate) on_lru: AtomicBool,
}

/// glibc malloc's chunk for a request of `n` bytes: 8 bytes of size word,
/// rounded up to 16, at least 32 (the minimum chunk on 64-bit).
const fn malloc_chunk(n: usize) -> usize {
    let c = (n + 8 + 15) & !15;
    if c < 32 {
        32
    } else {
        c
    }
}

/// Words of extra area for `sz_extra` bytes (at least one, so that the
/// first 8 bytes SQLite checks exist).
const fn extra_words(sz_extra: usize) -> usize {
    if sz_extra == 0 {
        1
    } else {
        sz_extra.div_ceil(8)
    }
}

/// The one heap block of a header with `words` words of extra area after it.
fn block_layout(words: usize) -> Layout {
    let size = std::mem::size_of::<PageHdr>() + words * 8;
    Layout::from_size_align(size, std::mem::align_of::<PageHdr>()).expect("a header block is small")
}

/// Heap bytes one page's header costs with `sz_extra` bytes of extra area:
/// one malloc chunk holding the [`PageHdr`] and the extra words.
pub(crate) const fn header_bytes(sz_extra: usize) -> u64 {
    malloc_chunk(std::mem::size_of::<PageHdr>() + extra_words(sz_extra) * 8) as u64
}

/// A page header owned by a cache map; the pointer is live while it is in one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PagePtr(NonNull<PageHdr>);

// SAFETY: a header is plain data reached only under its shard's lock (module
// invariants); the frame behind `p_buf` belongs to the group's allocator.
unsafe impl Send for PagePtr {}

impl PagePtr {
    /// A new pinned page at `buf` in block `pfn` (at `slot`, or [`NO_SLOT`])
    /// with `sz_extra` bytes of extra, all zero (SQLite needs the first 8
    /// zero on a new page).
    pub(crate) fn new(pfn: Pfn, buf: NonNull<u8>, slot: u32, cache: u32, key: u32, sz_extra: usize) -> Self {
        // One block: the header, then the extra area, so that the extra
        // SQLite touches on every fetch sits beside the header (one cache
        // line apart, not another allocation) and malloc's overhead is paid
        // once.
        let words = extra_words(sz_extra);
        let layout = block_layout(words);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<PageHdr>();
        let Some(hdr) = NonNull::new(raw) else { std::alloc::handle_alloc_error(layout) };
        // SAFETY: `raw` is a fresh block of the header's size and alignment
        // plus `words` words; the extra area starts right after the header,
        // 8-aligned because the header's size is a multiple of its
        // alignment (8), and is zero (alloc_zeroed).
        unsafe {
            let extra = raw.add(1).cast::<std::ffi::c_void>();
            raw.write(PageHdr {
                base: Sqlite3PcachePage { p_buf: buf.as_ptr().cast(), p_extra: extra },
                pfn,
                links: Default::default(),
                stamp: AtomicU64::new(0),
                key: AtomicU32::new(key),
                cache: AtomicU32::new(cache),
                slot: AtomicU32::new(slot),
                extra_words: words as u32,
                pinned: AtomicBool::new(true),
                on_lru: AtomicBool::new(false),
            });
        }
        PagePtr(hdr)
    }

    /// The header of a page SQLite gave back.
    ///
    /// # Safety
    /// `p` must have come from this crate's `xFetch` and not have been freed.
    pub(crate) unsafe fn from_sqlite(p: *mut Sqlite3PcachePage) -> Self {
        // `base` is the first field of the repr(C) header.
        PagePtr(NonNull::new(p.cast::<PageHdr>()).expect("SQLite passed a null page"))
    }

    pub(crate) fn as_sqlite(self) -> *mut Sqlite3PcachePage {
        self.0.as_ptr().cast()
    }

    pub(crate) fn hdr(&self) -> &PageHdr {
        // SAFETY: a PagePtr is only made for a header this crate allocated and
        // used while it sits in a cache map or a victim list (freed only by
        // `free_header`, which consumes it), so the pointer is live.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn key(self) -> u32 {
        self.hdr().key.load(Relaxed)
    }
    pub(crate) fn set_key(self, k: u32) {
        self.hdr().key.store(k, Relaxed);
    }
    pub(crate) fn pinned(self) -> bool {
        self.hdr().pinned.load(Relaxed)
    }
    pub(crate) fn set_pinned(self, v: bool) {
        self.hdr().pinned.store(v, Relaxed);
    }
    pub(crate) fn cache(self) -> u32 {
        self.hdr().cache.load(Relaxed)
    }
    pub(crate) fn set_cache(self, id: u32) {
        self.hdr().cache.store(id, Relaxed);
    }
    pub(crate) fn stamp(self) -> u64 {
        self.hdr().stamp.load(Relaxed)
    }
    pub(crate) fn set_stamp(self, t: u64) {
        self.hdr().stamp.store(t, Relaxed);
    }
    /// The page's slot in its cache's shared frames, or [`NO_SLOT`].
    pub(crate) fn slot(self) -> u32 {
        self.hdr().slot.load(Relaxed)
    }
    /// Link `which` (0 prev, 1 next) of list `k`.
    pub(crate) fn link(self, k: Kind, which: usize) -> Option<PagePtr> {
        NonNull::new(self.hdr().links[k as usize][which].load(Relaxed)).map(PagePtr)
    }
    pub(crate) fn set_link(self, k: Kind, which: usize, to: Option<PagePtr>) {
        let raw = to.map_or(std::ptr::null_mut(), |p| p.0.as_ptr());
        self.hdr().links[k as usize][which].store(raw, Relaxed);
    }

    /// Zero the first 8 bytes of the extra area: the page is new to SQLite.
    /// Only for a page SQLite does not hold (just recycled).
    pub(crate) fn zero_extra_head(self) {
        // SAFETY: `p_extra` points to `extra_words >= 1` words this header
        // owns; SQLite holds no pointer into them while the page is unpinned.
        unsafe { self.hdr().base.p_extra.cast::<u64>().write(0) };
    }

    /// Free the header and its extra area (not the frame).
    ///
    /// # Safety
    /// The page is in no map or LRU list, SQLite holds no pointer to it, and
    /// no copy of this `PagePtr` is used afterwards.
    pub(crate) unsafe fn free_header(self) {
        let layout = block_layout(self.hdr().extra_words as usize);
        // SAFETY: `new` allocated the block with this layout; the caller's
        // contract says nothing else points to it. PageHdr needs no drop.
        unsafe { std::alloc::dealloc(self.0.as_ptr().cast(), layout) };
    }
}

// The extra area follows the header in its block and must be 8-aligned.
const _: () = assert!(std::mem::align_of::<PageHdr>() == 8 && std::mem::size_of::<PageHdr>().is_multiple_of(8));
