//! `Pages`: an owned block of frames that frees itself on drop, for users who
//! prefer ownership to raw pfns.
//!
//! Ownership is marked in the block's head descriptor (`OWNED`, set in the
//! same store that makes the block allocated), and the raw pfn API refuses an
//! owned block (`FreeError::Owned`): `free_pages`, the bulk frees and
//! `free_contig_range` cannot free it, so its frame can never be handed to a
//! second owner while the handle lives, and the `&mut [u8]` the handle gives
//! out is the only one over those bytes. Only the handle frees it (drop or
//! [`Pages::free`]), or gives the mark up ([`Pages::into_pfn`]).

use crate::allocator::PageAllocator;
use pagealloc_core::error::{AllocError, FreeError};
use pagealloc_core::page::flags;
use pagealloc_core::page_alloc::head_flags;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{Gfp, Pfn, PAGE_SIZE};
use std::ptr::NonNull;

/// `1 << order` contiguous frames owned by this value. Dropping it frees them.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator, FreeError};
/// let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
/// let mut p = a.alloc(Gfp::ZERO, 1).unwrap(); // two zeroed pages
/// assert_eq!(p.len(), 2); // frames
/// let bytes = p.as_mut_slice().unwrap(); // the bytes, through safe code
/// assert_eq!(bytes.len(), 8192);
/// bytes[8191] = 1;
/// // The raw pfn API cannot free what a handle owns.
/// assert!(matches!(a.free_pages(p.pfn(), 1), Err(FreeError::Owned { .. })));
/// drop(p); // frees them
/// ```
#[must_use = "dropping Pages frees them at once"]
pub struct Pages<'a> {
    alloc: &'a PageAllocator,
    pfn: Pfn,
    order: u32,
}

impl PageAllocator {
    /// Allocate an owned block (see [`PageAllocator::alloc_pages`]).
    ///
    /// # Errors
    /// As [`PageAllocator::alloc_pages`].
    #[inline]
    pub fn alloc(&self, gfp: Gfp, order: u32) -> Result<Pages<'_>, AllocError> {
        let pfn = self.core.alloc_pages(gfp, order, head_flags(true))?;
        Ok(Pages { alloc: self, pfn, order })
    }
}

impl<'a> Pages<'a> {
    /// The handle of a block whose head is already marked `HEAD | OWNED`
    /// and that no other handle holds (a `PageArray` hands a page over this
    /// way). Crate-private: a second handle of one block would free it
    /// twice (the handle's free is a plain store, `Core::free_owned`) and
    /// give two `&mut` over its bytes.
    pub(crate) fn from_owned(alloc: &'a PageAllocator, pfn: Pfn, order: u32) -> Self {
        Self { alloc, pfn, order }
    }

    /// First frame.
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }
    /// Order of the block.
    #[must_use]
    pub fn order(&self) -> u32 {
        self.order
    }
    /// Number of frames.
    #[must_use]
    pub fn len(&self) -> usize {
        1 << self.order
    }
    /// Always false: a block has at least one frame.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }
    /// The block's memory (`None` without backing).
    #[must_use]
    pub fn as_ptr(&self) -> Option<NonNull<u8>> {
        self.alloc.page_address(self.pfn)
    }
    /// The block's memory as a byte slice (`None` without backing).
    #[must_use]
    pub fn as_slice(&self) -> Option<&[u8]> {
        let p = self.as_ptr()?;
        // SAFETY: the block's `len() * PAGE_SIZE` bytes are inside the arena
        // mapping, which outlives `'a`, and belong to this handle alone (the
        // OWNED mark keeps every other path from freeing or re-handing them;
        // see the module doc); `&self` excludes a `&mut` from `as_mut_slice`.
        Some(unsafe { std::slice::from_raw_parts(p.as_ptr(), self.len() * PAGE_SIZE) })
    }
    /// The block's memory as a mutable byte slice (`None` without backing).
    #[must_use]
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        let p = self.as_ptr()?;
        // SAFETY: as in `as_slice`; `&mut self` excludes every other borrow
        // of these bytes through this handle, and no other handle or raw free
        // can reach them while it lives.
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), self.len() * PAGE_SIZE) })
    }
    /// Give up ownership without freeing; returns the pfn, which the raw pfn
    /// API may then free.
    pub fn into_pfn(self) -> Pfn {
        let p = self.pfn;
        disown(self.alloc, p);
        std::mem::forget(self);
        p
    }
    /// Free now and report any error (drop ignores it).
    ///
    /// # Errors
    /// None in practice: nothing but this handle can lock, mark or free its
    /// block. A block found in another state than the handle left it would
    /// take the raw free's checks and their errors (the block then stays
    /// allocated, and owned by nobody: leaked).
    pub fn free(self) -> Result<(), FreeError> {
        let (a, p, o) = (self.alloc, self.pfn, self.order);
        std::mem::forget(self);
        a.core.free_owned(p, o)
    }
}

impl Drop for Pages<'_> {
    #[inline]
    fn drop(&mut self) {
        // Nobody but this handle writes the block's flags word (see
        // `Core::free_owned`): the free cannot be refused.
        let _ = self.alloc.core.free_owned(self.pfn, self.order);
    }
}

/// Clear the OWNED mark of a block its handle gives up.
fn disown(alloc: &PageAllocator, p: Pfn) {
    // The head is ours: it is allocated and OWNED until this clears it.
    alloc.core.mm.page(p.as_u64()).flags.fetch_and(!flags::OWNED, Ordering::Relaxed);
}

/// An owned block like [`Pages`], holding a clone of its allocator rather
/// than a borrow, for owners that cannot carry a lifetime (an object of
/// another language's runtime). The raw pfn API refuses its block the same
/// way: the OWNED mark is set in the store that allocates it.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FreeError, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let b = a.alloc_owned(Gfp::KERNEL, 1).unwrap();
/// assert!(matches!(a.free_pages(b.pfn(), 1), Err(FreeError::Owned { .. })));
/// let pfn = b.into_pfn(); // a raw block now
/// a.free_pages(pfn, 1).unwrap();
/// ```
#[must_use = "dropping an OwnedBlock frees it at once"]
pub struct OwnedBlock {
    alloc: PageAllocator,
    pfn: Pfn,
    order: u32,
}

impl PageAllocator {
    /// Allocate an [`OwnedBlock`] (see [`PageAllocator::alloc_pages`]).
    ///
    /// # Errors
    /// As [`PageAllocator::alloc_pages`].
    pub fn alloc_owned(&self, gfp: Gfp, order: u32) -> Result<OwnedBlock, AllocError> {
        let pfn = self.core.alloc_pages(gfp, order, head_flags(true))?;
        Ok(OwnedBlock { alloc: self.clone(), pfn, order })
    }
}

impl OwnedBlock {
    /// First frame.
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }
    /// Order of the block.
    #[must_use]
    pub fn order(&self) -> u32 {
        self.order
    }
    /// Give up ownership without freeing; returns the pfn, which the raw pfn
    /// API may then free.
    pub fn into_pfn(self) -> Pfn {
        disown(&self.alloc, self.pfn);
        let p = self.pfn;
        self.forget();
        p
    }
    /// Free now and report any error (drop ignores it).
    ///
    /// # Errors
    /// As [`Pages::free`].
    pub fn free(self) -> Result<(), FreeError> {
        let r = self.alloc.core.free_owned(self.pfn, self.order);
        self.forget();
        r
    }
    /// Drop the allocator clone without freeing the block.
    fn forget(self) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again; the clone is read
        // out once and dropped here, the block left as the caller made it.
        drop(unsafe { std::ptr::read(&me.alloc) });
    }
}

impl Drop for OwnedBlock {
    fn drop(&mut self) {
        // As `Pages`.
        let _ = self.alloc.core.free_owned(self.pfn, self.order);
    }
}
