//! `PageArray`: the bulk allocator's array form with slots the array owns.
//!
//! `alloc_pages_bulk` fills a caller's `&mut [Option<Pfn>]`, and its pages are
//! ordinary allocated pages: any thread may name one to `free_pages`,
//! `lock_page` or `get_page`, so a free must claim each page with a
//! compare-and-swap (two racing frees of one pfn: exactly one wins). That
//! one locked instruction a page is most of what an array round trip costs
//! (`pagealloc bench bulk` prints its floor).
//!
//! A `PageArray` keeps its slots to itself (the caller reads them, never
//! writes them) and marks each of its pages `ARRAY_HELD` (`PCP | OWNED`)
//! instead of `HEAD`. No pfn-taking call acts on a page without `HEAD`: a
//! raw free is refused (`FreeError::Owned`), a lock or a reference is
//! refused (`NotAllocated`), compaction and contiguous allocation see a
//! pinned page. So nobody but the array writes such a word, and the
//! release takes each page back with one plain store of `PCP` where a
//! free needs a claim. Safe code cannot alias a frame through it: a page
//! enters a slot only from the allocator (its lists or buddy), leaves it only by the
//! release or by [`PageArray::take`] / [`PageArray::take_pfn`] (which turn
//! it into an ordinary owned or raw allocated page first), and the bytes
//! are reachable only through `&self` / `&mut self`.
//!
//! Invariants: every populated slot holds a distinct order-0 page of this
//! allocator whose flags word is exactly `ARRAY_HELD` and which is on no
//! list; every `ARRAY_HELD` page of the arena is in exactly one live
//! array's slot. Dropping the array releases its pages.

use crate::allocator::PageAllocator;
use crate::pages::Pages;
use pagealloc_core::error::AllocError;
use pagealloc_core::page::flags;
use pagealloc_core::page_alloc::head_flags;
use pagealloc_core::types::{Gfp, Pfn, PAGE_SIZE};

/// A fixed number of slots, each empty or holding one order-0 page owned by
/// the array (see the module doc). Dropping it frees its pages.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
/// let mut arr = a.page_array(16).unwrap();
/// assert_eq!(arr.fill(Gfp::KERNEL), 16); // every slot now holds a page
/// arr.frame_mut(3).unwrap()[0] = 7;
/// assert_eq!(arr.frame(3).unwrap()[0], 7);
/// let page = arr.take(3).unwrap(); // out of the array, as an owned page
/// assert_eq!(arr.populated(), 15);
/// arr.release(); // frees the other 15; `page` frees its own on drop
/// drop(page);
/// ```
pub struct PageArray<'a> {
    alloc: &'a PageAllocator,
    slots: Box<[Option<Pfn>]>,
}

impl PageAllocator {
    /// An array of `n` empty slots for order-0 pages of this allocator;
    /// [`PageArray::fill`] fills them.
    ///
    /// # Errors
    /// [`AllocError::ArrayTooLarge`] when `n` is more than the arena's pages
    /// (such an array could never be filled) or its slots cannot be had.
    pub fn page_array(&self, n: usize) -> Result<PageArray<'_>, AllocError> {
        let nr_pages = self.nr_pages();
        let too_large = AllocError::ArrayTooLarge { slots: n, nr_pages };
        if n as u64 > nr_pages {
            return Err(too_large);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| too_large)?;
        v.resize(n, None);
        Ok(PageArray { alloc: self, slots: v.into_boxed_slice() })
    }
}

impl<'a> PageArray<'a> {
    /// Fill the empty slots with order-0 pages (as
    /// [`PageAllocator::alloc_pages_bulk`] does: this thread's front cache
    /// first, then one per-CPU list hold, then page by page) and return how
    /// many leading slots are now populated: short of [`PageArray::len`]
    /// when memory ran short (the first hole is there).
    #[inline(always)]
    pub fn fill(&mut self, gfp: Gfp) -> usize {
        self.alloc.core.alloc_pages_bulk_as(gfp, &mut self.slots, flags::ARRAY_HELD)
    }

    /// Free every page in the array; every slot is empty after.
    #[inline(always)]
    pub fn release(&mut self) {
        self.alloc.core.release_array(&mut self.slots);
    }

    /// The slots, in order (`None`: empty).
    #[must_use]
    pub fn slots(&self) -> &[Option<Pfn>] {
        &self.slots
    }

    /// Slot `i` (`None`: empty, or past the end).
    #[must_use]
    pub fn get(&self, i: usize) -> Option<Pfn> {
        self.slots.get(i).copied().flatten()
    }

    /// The number of slots (populated or not).
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True for an array of no slots.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many slots hold a page.
    #[must_use]
    pub fn populated(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// The memory of slot `i`'s page (`None`: empty slot, past the end, or
    /// no backing).
    #[must_use]
    pub fn frame(&self, i: usize) -> Option<&[u8]> {
        let p = self.alloc.page_address(self.get(i)?)?;
        // SAFETY: the page's PAGE_SIZE bytes are inside the arena mapping,
        // which outlives 'a, and belong to this array alone while the slot
        // holds it (ARRAY_HELD: no other path can free or hand out the
        // page; see the module doc); `&self` excludes the `&mut` of
        // `frame_mut`.
        Some(unsafe { std::slice::from_raw_parts(p.as_ptr(), PAGE_SIZE) })
    }

    /// The memory of slot `i`'s page, writable (`None` as for
    /// [`PageArray::frame`]).
    #[must_use]
    pub fn frame_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let p = self.alloc.page_address(self.get(i)?)?;
        // SAFETY: as in `frame`; `&mut self` excludes every other borrow of
        // these bytes through this array, and the pages of distinct slots
        // are distinct frames.
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), PAGE_SIZE) })
    }

    /// Take slot `i`'s page out as an owned [`Pages`] handle (the slot is
    /// empty after; `None` if it was).
    pub fn take(&mut self, i: usize) -> Option<Pages<'a>> {
        let p = self.take_marked(i, head_flags(true))?;
        Some(Pages::from_owned(self.alloc, p, 0))
    }

    /// Take slot `i`'s page out as an ordinary allocated page of the raw
    /// pfn API (free it with [`PageAllocator::free_pages`] at order 0); the
    /// slot is empty after (`None` if it was).
    pub fn take_pfn(&mut self, i: usize) -> Option<Pfn> {
        self.take_marked(i, flags::HEAD)
    }

    /// Empty slot `i`, storing `word` as its page's flags.
    fn take_marked(&mut self, i: usize, word: u32) -> Option<Pfn> {
        let p = self.slots.get_mut(i)?.take()?;
        let d = self.alloc.core.mm.page(p.as_u64());
        debug_assert_eq!(d.flags(), flags::ARRAY_HELD);
        // A plain store: nobody but this array writes an ARRAY_HELD word.
        // Release, as every allocation's mark (the page's private word,
        // order 0 and its type, is as the allocation left it).
        d.set_flags(word);
        Some(p)
    }
}

impl Drop for PageArray<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for PageArray<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageArray").field("len", &self.len()).field("populated", &self.populated()).finish()
    }
}
