//! `Pages`: an owned block of frames that frees itself on drop, for users who
//! prefer ownership to raw pfns.

use crate::allocator::PageAllocator;
use crate::error::{AllocError, FreeError};
use crate::types::{Gfp, Pfn, PAGE_SIZE};
use std::ptr::NonNull;

/// `1 << order` contiguous frames owned by this value. Dropping it frees them.
#[must_use = "dropping Pages frees them at once"]
pub struct Pages<'a> {
    alloc: &'a PageAllocator,
    pfn: Pfn,
    order: u32,
}

impl PageAllocator {
    /// Allocate an owned block (see [`PageAllocator::alloc_pages`]).
    pub fn alloc(&self, gfp: Gfp, order: u32) -> Result<Pages<'_>, AllocError> {
        let pfn = self.alloc_pages(gfp, order)?;
        Ok(Pages { alloc: self, pfn, order })
    }
}

impl<'a> Pages<'a> {
    /// First frame.
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }
    /// Order of the block.
    pub fn order(&self) -> u32 {
        self.order
    }
    /// Number of frames.
    pub fn len(&self) -> usize {
        1 << self.order
    }
    /// Always false: a block has at least one frame.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// The block's memory (`None` without backing).
    pub fn as_ptr(&self) -> Option<NonNull<u8>> {
        self.alloc.page_address(self.pfn)
    }
    /// The block's memory as a byte slice (`None` without backing).
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        let p = self.as_ptr()?;
        // SAFETY: the block's `len() * PAGE_SIZE` bytes are inside the arena
        // mapping and owned by this value alone (it is the only holder of the
        // allocation, and `&mut self` excludes other borrows of it).
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), self.len() * PAGE_SIZE) })
    }
    /// Give up ownership without freeing; returns the pfn.
    pub fn into_pfn(self) -> Pfn {
        let p = self.pfn;
        std::mem::forget(self);
        p
    }
    /// Free now and report any error (drop ignores it).
    pub fn free(self) -> Result<(), FreeError> {
        let (a, p, o) = (self.alloc, self.pfn, self.order);
        std::mem::forget(self);
        a.free_pages(p, o)
    }
}

impl Drop for Pages<'_> {
    fn drop(&mut self) {
        // A locked page cannot be freed; leaking it is the safe outcome.
        let _ = self.alloc.free_pages(self.pfn, self.order);
    }
}
