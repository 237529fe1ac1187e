//! Page references, LRU batches and shrinkers on [`PageAllocator`] (issue 16;
//! the machinery is in `page_alloc::put` and `vmscan`).

use super::PageAllocator;
use crate::error::{FreeError, PageStateError};
use crate::types::Pfn;
use crate::vmscan::Shrinker;
use std::sync::Arc;

impl PageAllocator {
    /// Take one more reference on a page that already has one (`get_page`).
    ///
    /// # Errors
    /// `OutOfRange`, or `NotAllocated` for a page with no references (the
    /// raw pfn API's pages are not reference counted) or a saturated count.
    pub fn get_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.core.get_page(pfn)
    }

    /// Drop a reference (`put_page`); the last one frees the page through
    /// the ordinary free claim (taking it off its LRU list first).
    ///
    /// # Errors
    /// A typed error if the page holds no reference (nothing changes).
    pub fn put_page(&self, pfn: Pfn) -> Result<(), FreeError> {
        self.core.put_page(pfn)
    }

    /// Reference count of a page (racy; 0 for pages not reference counted).
    #[must_use]
    pub fn page_count(&self, pfn: Pfn) -> u32 {
        self.core.mm.descs().get(pfn.as_u64() as usize).map_or(0, |d| crate::pageref::count_of(d.flags()))
    }

    /// Move this CPU's pending LRU additions onto the lists (`lru_add_drain`).
    pub fn lru_add_drain(&self) {
        self.core.lru_add_drain();
    }

    /// Move every CPU's pending LRU additions onto the lists.
    pub fn lru_add_drain_all(&self) {
        self.core.lru_add_drain_all();
    }

    /// Register a shrinker, asked for memory by direct reclaim and kswapd;
    /// returns its id for [`PageAllocator::unregister_shrinker`].
    pub fn register_shrinker(&self, s: Arc<dyn Shrinker>) -> u64 {
        self.core.vmscan.register(s)
    }

    /// Unregister a shrinker; false if the id was unknown.
    pub fn unregister_shrinker(&self, id: u64) -> bool {
        self.core.vmscan.unregister(id)
    }

    /// LRU list sizes of node `nid`: (inactive, active) (racy).
    #[must_use]
    pub fn lru_sizes(&self, nid: u32) -> (u64, u64) {
        self.core.vmscan.lru_sizes(nid as usize)
    }
}
