//! [`PageHandle`]: one reference on a cached page, put on drop.

use crate::allocator::PageAllocator;
use crate::page::flags::GUARD;
use crate::types::{Pfn, PAGE_SIZE};

/// A referenced page-cache page: while it lives the page is neither freed
/// nor reclaimed (it may be removed from its mapping; it is then freed when
/// the last handle drops).
#[must_use = "dropping the handle puts its reference at once"]
pub struct PageHandle<'a> {
    pub(crate) alloc: &'a PageAllocator,
    pub(crate) pfn: Pfn,
    pub(crate) index: u64,
}

impl PageHandle<'_> {
    /// The page frame.
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }
    /// The page's index in its mapping.
    #[must_use]
    pub fn index(&self) -> u64 {
        self.index
    }
    /// Copy bytes `off..off + buf.len()` of the page into `buf`, with the page
    /// locked (contents are only touched under the page lock). Returns the
    /// bytes copied (clamped to the page).
    pub fn read(&self, off: usize, buf: &mut [u8]) -> usize {
        let r = self.alloc.cache_page_ref(self.pfn).expect("a referenced page is in range");
        // A referenced page is an allocated head: the lock cannot be refused.
        let _ = r.lock_as(GUARD, None, None);
        let n = buf.len().min(PAGE_SIZE.saturating_sub(off));
        let src = super::mapping::page_bytes(self.alloc, self.pfn);
        // SAFETY: see `page_bytes`: we hold the page lock and a reference.
        let src = unsafe { &*src };
        buf[..n].copy_from_slice(&src[off..off + n]);
        r.guard_unlock(false);
        n
    }
}

impl Drop for PageHandle<'_> {
    fn drop(&mut self) {
        let _ = self.alloc.core.put_page(self.pfn);
    }
}
