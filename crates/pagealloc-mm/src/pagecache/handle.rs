//! [`PageHandle`]: one reference on a cached page, put on drop; and
//! [`CacheLock`], the cache's hold of a page's lock, released on drop.

use crate::allocator::PageAllocator;
use pagealloc_core::page::flags::GUARD;
use pagealloc_core::pagelock::PageRef;
use pagealloc_core::types::{Pfn, PAGE_SIZE};

/// A referenced page-cache page: while it lives the page is neither freed
/// nor reclaimed (it may be removed from its mapping; it is then freed when
/// the last handle drops).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FillFn, PageAllocator, PageCache, PageCacheConfig};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// let m = cache.mapping(1, Arc::new(FillFn(|i: u64, buf: &mut [u8]| { buf.fill(i as u8); Ok(()) })));
/// let h = m.get(3).unwrap(); // filled on the miss; kept while `h` lives
/// let mut b = [0u8; 4];
/// assert_eq!((h.index(), h.read(4094, &mut b)), (3, 2)); // clamped to the page
/// assert_eq!(b, [3, 3, 0, 0]);
/// ```
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
    /// bytes copied, clamped to the page: 0 for `off` at or past its end,
    /// and 0 for a page that is not up to date (a handle from
    /// [`Mapping::find_get`](super::Mapping::find_get) on a page whose fill
    /// failed: its frame holds no bytes of the file, only what the frame
    /// held before, which may be another file's).
    pub fn read(&self, off: usize, buf: &mut [u8]) -> usize {
        let n = buf.len().min(PAGE_SIZE.saturating_sub(off));
        if n == 0 {
            return 0;
        }
        // Once locked, a fill of the page has ended: up to date, or failed.
        let lock = CacheLock::lock(self.alloc, self.pfn);
        if !lock.page_ref().uptodate() {
            return 0;
        }
        let src = page_bytes(self.alloc, self.pfn);
        // SAFETY: see `page_bytes`: we hold the page lock and a reference.
        let src = unsafe { &*src };
        buf[..n].copy_from_slice(&src[off..off + n]);
        n
    }
}

impl Drop for PageHandle<'_> {
    fn drop(&mut self) {
        let _ = self.alloc.core.put_page(self.pfn);
    }
}

/// The page cache's hold of one of its pages' locks (`GUARD` with `LOCKED`,
/// so no raw unlock releases it), released when dropped, on every path out
/// of the holder, unwinding included: no panic leaves a cache page locked.
/// The holder holds a reference on the page for as long as this lives.
pub(crate) struct CacheLock<'a> {
    r: PageRef<'a>,
    /// Mark the page up to date in the unlock (a fill that succeeded).
    uptodate: bool,
}

impl<'a> CacheLock<'a> {
    /// Lock a referenced cache page, sleeping while another holds it.
    pub(crate) fn lock(alloc: &'a PageAllocator, pfn: Pfn) -> Self {
        let r = Self::page(alloc, pfn);
        // A referenced page is an allocated head: the lock cannot be refused,
        // and an untimed, uncancellable wait ends only with the lock.
        let _ = r.lock_as(GUARD, None, None);
        Self { r, uptodate: false }
    }

    /// Lock a cache page if nobody holds it; never blocks.
    pub(crate) fn try_lock(alloc: &'a PageAllocator, pfn: Pfn) -> Option<Self> {
        let r = Self::page(alloc, pfn);
        // `then`, not `then_some`: a guard built for a lock not taken would
        // release somebody else's lock when dropped.
        r.try_lock_as(GUARD).unwrap_or(false).then(|| Self { r, uptodate: false })
    }

    /// Take over a lock the caller holds already (a page born locked).
    pub(crate) fn adopt(alloc: &'a PageAllocator, pfn: Pfn) -> Self {
        Self { r: Self::page(alloc, pfn), uptodate: false }
    }

    fn page(alloc: &'a PageAllocator, pfn: Pfn) -> PageRef<'a> {
        alloc.core.cache_page_ref(pfn).expect("a cache page is in range")
    }

    /// The page's lock protocol (waits for writeback, marks).
    pub(crate) fn page_ref(&self) -> &PageRef<'a> {
        &self.r
    }

    /// Unlock, marking the page up to date (one RMW: `folio_end_read`).
    pub(crate) fn unlock_uptodate(mut self) {
        self.uptodate = true;
    }

    /// The page was frozen (`pageref::freeze`): its lock bits went with the
    /// frozen word, so there is nothing left to release.
    pub(crate) fn into_frozen(self) {
        std::mem::forget(self);
    }
}

impl Drop for CacheLock<'_> {
    fn drop(&mut self) {
        self.r.guard_unlock(self.uptodate);
    }
}

/// The bytes of page `pfn`.
///
/// Callers may dereference the pointer only while they hold a reference and
/// the page lock (or, for reading, while the page is under writeback, which
/// writers wait out under the lock): then no other access to the bytes runs.
pub(crate) fn page_bytes(alloc: &PageAllocator, pfn: Pfn) -> *mut [u8] {
    let p = alloc.page_address(pfn).expect("the page cache requires backing");
    std::ptr::slice_from_raw_parts_mut(p.as_ptr(), PAGE_SIZE)
}
