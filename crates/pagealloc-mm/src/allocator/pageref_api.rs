//! Page references, LRU batches and shrinkers on [`PageAllocator`] (the
//! machinery is in `page_alloc::put` and `vmscan`).

use super::handles::Reclaim;
use super::PageAllocator;
use crate::mm::vmscan::Shrinker;
use pagealloc_core::error::{FreeError, PageStateError};
use pagealloc_core::types::Pfn;
use std::sync::Arc;

/// One reference on a reference-counted page (a page-cache page), taken by
/// [`PageAllocator::get_page`]. While it lives the page is neither freed nor
/// reclaimed (it may leave its mapping); dropping it puts the reference
/// (`put_page`), and the last one frees the page through the ordinary claim,
/// off its LRU list first.
///
/// References belong to their holders: there is no pfn-taking `put_page`,
/// so no caller can put a reference it does not hold (the cache's own, a
/// handle's) and free a page its mapping still names.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FillFn, Gfp, PageAllocator, PageCache, PageCacheConfig};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap();
/// let m = cache.mapping(1, Arc::new(FillFn(|_: u64, buf: &mut [u8]| { buf.fill(0); Ok(()) })));
/// let pfn = m.get(0).unwrap().pfn(); // a page-cache page: reference counted
/// let r = a.get_page(pfn).unwrap(); // neither freed nor reclaimed while `r` lives
/// assert!(r.pfn() == pfn && a.page_count(pfn) >= 2); // the cache's and ours
/// let raw = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// assert!(a.get_page(raw).is_err()); // raw pages are not reference counted
/// ```
#[must_use = "dropping the reference puts it at once"]
pub struct PageReference<'a> {
    alloc: &'a PageAllocator,
    pfn: Pfn,
}

impl PageReference<'_> {
    /// The referenced page.
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }
}

impl std::fmt::Debug for PageReference<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageReference").field("pfn", &self.pfn).finish()
    }
}

impl Drop for PageReference<'_> {
    fn drop(&mut self) {
        // The count holds this reference, so the page is an allocated head
        // with a count of at least one: the put cannot be refused.
        let r: Result<(), FreeError> = self.alloc.core.put_page(self.pfn);
        debug_assert!(r.is_ok(), "put of a held reference on {:?} refused: {r:?}", self.pfn);
    }
}

impl PageAllocator {
    /// Take one more reference on a page that already has one (`get_page`),
    /// as a [`PageReference`] that puts it when dropped.
    ///
    /// # Errors
    /// `OutOfRange`, or `NotAllocated` for a page with no references (the
    /// raw pfn API's pages are not reference counted) or a saturated count.
    pub fn get_page(&self, pfn: Pfn) -> Result<PageReference<'_>, PageStateError> {
        self.core.get_page(pfn)?;
        Ok(PageReference { alloc: self, pfn })
    }

    /// Reference count of a page (racy; 0 for pages not reference counted).
    #[must_use]
    pub fn page_count(&self, pfn: Pfn) -> u32 {
        self.core.mm.descs().get(pfn.as_u64() as usize).map_or(0, |d| pagealloc_core::pageref::count_of(d.flags()))
    }
}

impl<'a> Reclaim<'a> {
    /// Move this CPU's pending LRU additions onto the lists (`lru_add_drain`).
    pub fn lru_add_drain(&self) {
        self.a.core.lru_add_drain();
    }

    /// Move every CPU's pending LRU additions onto the lists.
    pub fn lru_add_drain_all(&self) {
        self.a.core.lru_add_drain_all();
    }

    /// Register a shrinker, asked for memory by direct reclaim and kswapd;
    /// returns its id for [`Reclaim::unregister_shrinker`].
    pub fn register_shrinker(&self, s: Arc<dyn Shrinker>) -> u64 {
        self.a.core.vmscan.register(s)
    }

    /// Unregister a shrinker; false if the id was unknown.
    pub fn unregister_shrinker(&self, id: u64) -> bool {
        self.a.core.vmscan.unregister(id)
    }

    /// LRU list sizes of node `nid`: (inactive, active) (racy).
    #[must_use]
    pub fn lru_sizes(&self, nid: u32) -> (u64, u64) {
        self.a.core.vmscan.lru_sizes(nid as usize)
    }
}
