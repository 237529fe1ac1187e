//! A page cache over the allocator (the kernel's mm/filemap.c, reduced):
//! mappings keyed by a user id hold pages at page indexes, filled on demand
//! from a [`PageSource`] (a file read with `pread`/`pwrite` on a descriptor
//! the mapping owns, or a fill callback for caches of computed blocks), kept
//! on the allocator's per-node LRU lists, and reclaimed under memory
//! pressure by direct reclaim (the allocator calls this cache as a
//! [`Shrinker`]) and, optionally, one kswapd thread per node.
//!
//! Structure and invariants:
//! - A cached page is an order-0 MOVABLE block whose reference count
//!   (`pageref`) includes one reference held by the cache. Handles
//!   ([`PageHandle`]), the LRU add batch and reclaim's isolation each hold one
//!   more. The last `put_page` frees it through the allocator's claim.
//! - `owners[pfn]` names the mapping slot and index of a cached page (0: not
//!   in the cache). It is written before the page is inserted in its mapping
//!   and cleared after it is removed, both with the page locked or not yet
//!   published. This is the kernel's `page->mapping`/`page->index`, kept in a
//!   side table (8 bytes a frame) so the descriptor stays 16 bytes.
//! - A mapping's map holds `index -> pfn` for exactly the pages whose owner
//!   entry names it. Lookups take a shard's read lock for one probe and a
//!   reference (`try_get`) inside it; removal takes the write lock, so a page
//!   found under the read lock cannot have been freed: no re-check needed.
//! - A page is never freed or reclaimed while anyone holds a reference
//!   beyond the cache's own: reclaim freezes the count from exactly 2 (the
//!   cache's and its own) to 0 with the page locked, and the free claim
//!   refuses any word with a count or `LRU` (`flags::NO_RAW_FREE`).
//! - Page contents are read and written only with the page locked (fill,
//!   reads, writes), or while under writeback, which writers wait out while
//!   holding the lock: no two accesses race on a page's bytes.
//! - Only the cache changes a cached page's lock and state: it locks its
//!   pages as a guard (`GUARD` with `LOCKED`, so a raw `unlock_page` is
//!   refused with `HeldByGuard`), a page is born that way (its flags word
//!   is the allocation's own mark: `HEAD`, the lock and the references in
//!   one store, so no stranger finds it unlocked and unreferenced before it
//!   is published), and the public pfn API refuses to lock, unlock-uptodate,
//!   start or end writeback of, or mark a reference-counted page
//!   (`PageStateError::Referenced`, in the same CAS that would change the
//!   word). References outside the cache are `PageReference`s and
//!   `PageHandle`s, put on drop: no pfn-taking put can take the cache's own
//!   (test `strangers_cannot_unlock_or_mark_a_cache_page`).
//!
//! Map choice: a sharded `RwLock<HashMap>` (parking_lot's, loom's under
//! `--cfg loom`, through `pagealloc_core::sync`) per mapping (16
//! shards by index). A lookup holds a shard's read lock for one hash probe
//! and a CAS; writers hold it for one insert or remove, so a lookup never
//! waits on a long writer. It needs no new dependency, keeps the
//! reference-inside-the-read-lock argument above trivially true (with an
//! epoch-reclaimed map like `papaya` or `dashmap`'s guards the same holds but
//! costs a dependency and, for `papaya`, a re-check after the reference), and
//! sequential indexes spread evenly over shards. A radix tree of our own
//! (the kernel's xarray) would save the hash and allow ordered range walks
//! (readahead, range writeback); left for later.
//!
//! At most one page cache per allocator: the LRU lists hold its pages and
//! only it knows their mappings.
//!
//! Cached pages are movable: compaction and `alloc_contig_range` migrate
//! them through the hook this cache registers (`migrate`).
//!
//! loom models (`loom_tests`): lookup vs reclaim, lookup vs delete and
//! reuse, fill vs a reader waiting on the page lock, and a lookup, a write
//! and a delete each against migration.
//!
//! Dirty pages: a flusher thread and dirty limits (`writeback`, with the
//! settings in `vmscan::dirty`): writers are throttled at `dirty_ratio`, the
//! flusher writes the oldest dirty pages back above
//! `dirty_background_ratio`.
//!
//! Lock order: see `vmscan`'s module doc (page lock, mapping shard, LRU,
//! per-CPU batch, per-CPU lists and zone).

mod checked;
mod direct;
mod evict;
mod handle;
mod index_map;
#[cfg(all(test, loom))]
mod loom_tests;
mod mapping;
mod migrate;
mod ra_state;
mod ra_worker;
mod readahead;
mod rw;
mod source;
#[cfg(all(test, not(loom)))]
mod tests;
mod wb_error;
mod writeback;
#[cfg(all(test, not(loom)))]
mod writeback_tests;

pub use checked::{PageCacheError, PageIndex, MAX_FILE_BYTES, MAX_INDEX, MAX_MAPPINGS};
pub use direct::{DirectFileSource, IoMode};
pub use handle::PageHandle;
pub use mapping::Mapping;
pub use ra_state::{Readahead, RA_MAX_LIMIT, RA_MAX_PAGES};
pub use source::{FileSource, FillFn, PageSource};
pub use writeback::WritebackStats;

use crate::allocator::PageAllocator;
use mapping::MappingInner;
use pagealloc_core::error::ConfigError;
use pagealloc_core::sync::{AtomicU64, Ordering, RwLock};
use std::collections::HashMap;
use std::sync::Arc;

/// Page cache settings.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, PageCache, PageCacheConfig};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cfg = PageCacheConfig { kswapd: false }; // direct reclaim only: no kswapd threads
/// let cache = PageCache::new(a.clone(), cfg.clone()).unwrap();
/// assert!(PageCache::new(a, cfg).is_err()); // one page cache per allocator
/// assert_eq!(cache.nr_pages(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct PageCacheConfig {
    /// Run one kswapd thread per node, woken when a zone falls below its low
    /// watermark and reclaiming to its high watermark. Default on; tests that
    /// count direct reclaim exactly turn it off.
    pub kswapd: bool,
}

impl Default for PageCacheConfig {
    fn default() -> Self {
        Self { kswapd: true }
    }
}

use checked::INDEX_BITS;

pub(crate) struct CacheInner {
    pub(crate) alloc: Arc<PageAllocator>,
    /// Per frame: (slot + 1) << 40 | index, or 0 (module doc).
    pub(crate) owners: Box<[AtomicU64]>,
    /// Mapping slots (index = slot).
    pub(crate) slots: RwLock<Vec<Option<Arc<MappingInner>>>>,
    /// User id -> slot.
    pub(crate) ids: RwLock<HashMap<u64, usize>>,
    pub(crate) kswapd: crate::mm::vmscan::kswapd::Kswapd,
    /// Failed page allocations a fill retried (`Mapping::alloc_cache_page`).
    pub(crate) fill_retries: AtomicU64,
    /// Readahead settings and workers (`readahead`, `ra_worker`).
    pub(crate) ra: ra_worker::RaPool,
    /// The dirty queue, the flusher and throttling counters (`writeback`).
    pub(crate) writeback: writeback::Writeback,
}

impl CacheInner {
    pub(crate) fn owner_word(slot: usize, index: u64) -> u64 {
        ((slot as u64 + 1) << INDEX_BITS) | index
    }
    /// (slot, index) of an owner word, or None for 0.
    pub(crate) fn split_owner(w: u64) -> Option<(usize, u64)> {
        (w != 0).then(|| ((w >> INDEX_BITS) as usize - 1, w & ((1 << INDEX_BITS) - 1)))
    }
    /// (slot, index) of a cached page, or None.
    pub(crate) fn owner_of(&self, pfn: u64) -> Option<(usize, u64)> {
        Self::split_owner(self.owners[pfn as usize].load(Ordering::Acquire))
    }
    pub(crate) fn mapping_at(&self, slot: usize) -> Option<Arc<MappingInner>> {
        self.slots.read().get(slot).cloned().flatten()
    }
    /// The mapping and index of cached page `p`, checked both ways: its
    /// owner word names a slot whose mapping maps that index to `p`. The one
    /// place that decides whether a page belongs to a mapping (reclaim,
    /// migration and writeback ask it before they write a page to a source
    /// or move it). Exact while the caller holds `p`'s lock: owner words and
    /// map entries of a page change only under its lock, or before it is
    /// published.
    pub(crate) fn owner(&self, p: u64) -> Option<(Arc<MappingInner>, u64)> {
        let (slot, index) = self.owner_of(p)?;
        let m = self.mapping_at(slot)?;
        m.maps(index, p).then_some((m, index))
    }
    /// Kill mapping `m`, drop its pages and free its slot (the lifetime rule:
    /// `mapping`'s module doc).
    fn remove(self: &Arc<Self>, m: Arc<MappingInner>) {
        m.kill();
        Mapping::new(self.clone(), m.clone()).truncate();
        debug_assert_eq!(m.nr_pages(), 0, "a killed mapping was truncated");
        let mut slots = self.slots.write();
        if slots.get(m.slot).is_some_and(|s| s.as_ref().is_some_and(|s| Arc::ptr_eq(s, &m))) {
            slots[m.slot] = None;
        }
    }
}

/// The page cache: see the module doc.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FillFn, PageAllocator, PageCache, PageCacheConfig};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(16 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig::default()).unwrap();
/// // A mapping whose pages are computed on a miss (no file behind them).
/// let src = Arc::new(FillFn(|index: u64, buf: &mut [u8]| {
///     buf.fill(index as u8);
///     Ok(())
/// }));
/// let m = cache.mapping(1, src);
/// let page = m.get(5).unwrap(); // filled on this first lookup
/// let mut b = [0u8; 4];
/// assert_eq!(page.read(0, &mut b), 4);
/// assert_eq!(b, [5; 4]);
/// assert!(m.is_cached(5));
/// ```
pub struct PageCache {
    inner: Arc<CacheInner>,
    shrinker_id: u64,
}

impl PageCache {
    /// Attach a page cache to `alloc` (one per allocator), registering it as
    /// a shrinker and starting kswapd if configured.
    ///
    /// # Errors
    /// `ConfigError::Invalid` if the allocator already has a page cache or
    /// has no memory backing (pages need bytes).
    pub fn new(alloc: Arc<PageAllocator>, cfg: PageCacheConfig) -> Result<Self, ConfigError> {
        if alloc.page_address(pagealloc_core::types::Pfn::new(0)).is_none() {
            return Err(ConfigError::Invalid {
                field: "backing",
                why: "a page cache needs memory-backed frames".into(),
            });
        }
        if alloc.core.vmscan.cache_attached.swap(true, Ordering::AcqRel) {
            return Err(ConfigError::Invalid { field: "page cache", why: "this allocator has one already".into() });
        }
        let n = alloc.nr_pages() as usize;
        let inner = Arc::new(CacheInner {
            owners: (0..n).map(|_| AtomicU64::new(0)).collect(),
            slots: RwLock::new(Vec::new()),
            ids: RwLock::new(HashMap::new()),
            kswapd: crate::mm::vmscan::kswapd::Kswapd::new(),
            fill_retries: AtomicU64::new(0),
            ra: ra_worker::RaPool::new(),
            writeback: writeback::Writeback::new(),
            alloc,
        });
        ra_worker::configure(&inner, Readahead::default());
        let shrinker_id = inner.alloc.core.vmscan.register(Arc::new(evict::CacheShrinker(Arc::downgrade(&inner))));
        inner.alloc.core.mobility.set_lru_ops(Some(Arc::new(migrate::CacheMigrator(Arc::downgrade(&inner)))));
        pagealloc_compaction::compaction::kcompactd::start(&inner.alloc.core);
        if cfg.kswapd {
            inner.kswapd.start(&inner.alloc.core);
        }
        // The flusher (not under loom, whose models drive writeback
        // themselves; `loom_tests` models its wakeup).
        #[cfg(not(loom))]
        writeback::start(&inner);
        Ok(Self { inner, shrinker_id })
    }

    /// The allocator under this cache.
    #[must_use]
    pub fn allocator(&self) -> &Arc<PageAllocator> {
        &self.inner.alloc
    }

    /// Open (or create) the mapping `id` over `source`. An existing mapping
    /// keeps its source. With [`MAX_MAPPINGS`] mappings open already, the
    /// handle is born removed: every call on it fails with
    /// [`PageCacheError::TooManyMappings`].
    pub fn mapping(&self, id: u64, source: Arc<dyn PageSource>) -> Mapping {
        let mut ids = self.inner.ids.write();
        if let Some(&slot) = ids.get(&id) {
            if let Some(m) = self.inner.mapping_at(slot) {
                return Mapping::new(self.inner.clone(), m);
            }
        }
        let mut slots = self.inner.slots.write();
        let slot = slots.iter().position(Option::is_none).or_else(|| {
            (slots.len() < MAX_MAPPINGS).then(|| {
                slots.push(None);
                slots.len() - 1
            })
        });
        let Some(slot) = slot else {
            return Mapping::new(self.inner.clone(), Arc::new(MappingInner::new(id, mapping::NO_SLOT, source)));
        };
        let m = Arc::new(MappingInner::new(id, slot, source));
        slots[slot] = Some(m.clone());
        ids.insert(id, slot);
        Mapping::new(self.inner.clone(), m)
    }

    /// Drop every page of mapping `id` (each freed when its last reference
    /// goes) and forget the mapping. Its handles fail from now on with
    /// [`PageCacheError::MappingRemoved`]; a later `mapping(id, ..)` opens
    /// a new, empty one. False if there was none.
    pub fn remove_mapping(&self, id: u64) -> bool {
        let Some(slot) = self.inner.ids.write().remove(&id) else { return false };
        let Some(m) = self.inner.mapping_at(slot) else { return false };
        self.inner.remove(m);
        true
    }

    /// Change the readahead settings (window size, worker threads; the
    /// default is [`Readahead::default`]). Windows in flight finish first.
    ///
    /// # Errors
    /// `ConfigError::Invalid` for settings out of range (nothing changes).
    pub fn set_readahead(&self, ra: Readahead) -> Result<(), ConfigError> {
        ra.validate()?;
        ra_worker::configure(&self.inner, ra);
        Ok(())
    }

    /// The readahead settings now.
    #[must_use]
    pub fn readahead(&self) -> Readahead {
        self.inner.ra.settings()
    }

    /// Readahead windows started at a stream's marker so far (racy).
    #[must_use]
    pub fn async_readahead_windows(&self) -> u64 {
        self.inner.ra.async_windows.load(Ordering::Relaxed)
    }

    /// Page allocations for fills that failed once and were retried
    /// (racy; see `Mapping`'s fills).
    #[must_use]
    pub fn fill_retries(&self) -> u64 {
        self.inner.fill_retries.load(Ordering::Relaxed)
    }

    /// Pages in the cache now (racy).
    #[must_use]
    pub fn nr_pages(&self) -> u64 {
        self.inner.slots.read().iter().flatten().map(|m| m.nr_pages()).sum()
    }

    /// The flusher's and throttled writers' counters, and the high-water
    /// marks of `nr_dirty + nr_writeback` (this crate's own report; the
    /// thresholds themselves are in `vmstat`).
    #[must_use]
    pub fn writeback_stats(&self) -> WritebackStats {
        self.inner.writeback.stats()
    }

    /// Reclaim up to `nr` pages now as direct reclaim would; returns pages
    /// freed.
    pub fn shrink(&self, nr: u64) -> u64 {
        self.inner.alloc.core.shrink_lru(&*self.inner, nr, None, true)
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        self.inner.writeback.stop();
        self.inner.kswapd.stop(&self.inner.alloc.core);
        self.inner.ra.stop();
        self.inner.alloc.core.vmscan.unregister(self.shrinker_id);
        self.inner.alloc.core.mobility.set_lru_ops(None);
        // Every mapping is killed and emptied: handles that outlive the
        // cache fail with `MappingRemoved` and hold no page.
        let ids: Vec<u64> = self.inner.ids.read().keys().copied().collect();
        for id in ids {
            self.remove_mapping(id);
        }
        self.inner.alloc.core.lru_add_drain_all();
        self.inner.alloc.core.vmscan.cache_attached.store(false, Ordering::Release);
    }
}
