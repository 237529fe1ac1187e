//! One mapping: its sharded `index -> pfn` map, its source, its lifetime,
//! and the page cache's lookups on it (find, fill, delete). The byte-level
//! operations (read, write, writeback, fsync) are in `rw`. Invariants: the
//! parent module's doc.
//!
//! **Lifetime.** A mapping is live from its creation until
//! `PageCache::remove_mapping` (or the cache's drop) kills it. Killing sets
//! `dead` and then takes and releases every shard's write lock; a page is
//! inserted only under its shard's write lock, after reading `dead` there.
//! So an insertion either happened before the kill's pass over its shard
//! (and the truncation that follows the kill finds and drops the page), or
//! it reads `dead` set and inserts nothing: after the kill returns no page
//! can join the map, and after the truncation the map is empty for good.
//! Every public call on a dead mapping fails with
//! [`PageCacheError::MappingRemoved`] (lookups find nothing, deletes drop
//! nothing), so a handle that outlives its mapping, or its cache, can
//! neither leak a page nor write one into a mapping that reused the slot.
//! Loom model: `loom_tests::loom_insert_races_mapping_removal`.

use super::checked::{guarded, PageCacheError, PageIndex};
use super::handle::CacheLock;
use super::{CacheInner, PageHandle, PageSource};
use crate::allocator::PageAllocator;
use crossbeam_utils::CachePadded;
use pagealloc_core::page::flags::{DIRTY, GUARD, HEAD, LOCKED, REF_ONE, UPTODATE};
use pagealloc_core::pageref::{self, TryGet};
use pagealloc_core::sync::{AtomicBool, AtomicU64, Mutex, Ordering, RwLock};
use pagealloc_core::types::{Gfp, Pfn};
use std::io;
use std::sync::Arc;

const SHARDS: usize = 16;

/// Times a page-cache fill retries a failed allocation (see
/// `Mapping::alloc_cache_page`).
const FILL_RETRIES: u32 = 64;

/// The slot of a mapping that never had one (the cache was full): such a
/// mapping is born dead.
pub(crate) const NO_SLOT: usize = usize::MAX;

pub(crate) struct MappingInner {
    pub(crate) id: u64,
    pub(crate) slot: usize,
    /// Each shard on its own cache line: a lookup writes its shard's lock
    /// word, and sequential readers work on neighbouring shards at once.
    shards: [CachePadded<RwLock<super::index_map::IndexMap>>; SHARDS],
    pub(super) source: Arc<dyn PageSource>,
    nr: AtomicU64,
    /// Killed: no page joins the map any more (module doc).
    dead: AtomicBool,
    /// Readahead streams and their markers (`readahead`).
    pub(super) ra: super::ra_state::RaStreams,
    /// Writeback errors, for the fsyncs that must report them.
    pub(super) wb_error: Mutex<super::wb_error::WbErrors>,
}

impl MappingInner {
    pub(crate) fn new(id: u64, slot: usize, source: Arc<dyn PageSource>) -> Self {
        Self {
            id,
            slot,
            shards: std::array::from_fn(|_| CachePadded::new(RwLock::new(super::index_map::new_map()))),
            source,
            nr: AtomicU64::new(0),
            dead: AtomicBool::new(slot == NO_SLOT),
            ra: super::ra_state::RaStreams::new(),
            wb_error: Mutex::new(super::wb_error::WbErrors::default()),
        }
    }
    pub(super) fn shard(&self, index: u64) -> &RwLock<super::index_map::IndexMap> {
        &self.shards[index as usize % SHARDS]
    }
    pub(crate) fn nr_pages(&self) -> u64 {
        self.nr.load(Ordering::Relaxed)
    }
    /// Whether `index` maps `pfn` now.
    pub(crate) fn maps(&self, index: u64, pfn: u64) -> bool {
        self.shard(index).read().get(&index) == Some(&(pfn as u32))
    }
    /// Remove `index` if it still maps `pfn` (page locked by the caller).
    pub(crate) fn remove_if(&self, index: u64, pfn: u64) -> bool {
        let mut s = self.shard(index).write();
        if s.get(&index) == Some(&(pfn as u32)) {
            s.remove(&index);
            self.nr.fetch_sub(1, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
    /// Point `index` at `to` if it maps `from` now (migration, `from` locked
    /// and frozen by the caller). One write-locked store: a lookup under the
    /// read lock sees either page, never neither.
    pub(crate) fn replace(&self, index: u64, from: u64, to: u64) -> bool {
        let mut s = self.shard(index).write();
        match s.get_mut(&index) {
            Some(p) if *p == from as u32 => {
                *p = to as u32;
                true
            }
            _ => false,
        }
    }
    /// Kill the mapping: from the return on, no page joins its map (module
    /// doc). The caller then truncates it.
    pub(crate) fn kill(&self) {
        // Relaxed: each shard's lock orders this store before any insertion
        // that takes the lock after our pass (see the module doc).
        self.dead.store(true, Ordering::Relaxed);
        for s in &self.shards {
            drop(s.write());
        }
    }
    /// `MappingRemoved` once killed (or `TooManyMappings` if born so).
    pub(crate) fn live(&self) -> Result<(), PageCacheError> {
        match (self.dead.load(Ordering::Relaxed), self.slot) {
            (false, _) => Ok(()),
            (true, NO_SLOT) => Err(PageCacheError::TooManyMappings { id: self.id }),
            (true, _) => Err(PageCacheError::MappingRemoved { id: self.id }),
        }
    }
    /// The indexes cached now, sorted (no references taken).
    pub(super) fn cached_indexes(&self) -> Vec<u64> {
        let mut idx: Vec<u64> = self.shards.iter().flat_map(|s| s.read().keys().copied().collect::<Vec<_>>()).collect();
        idx.sort_unstable();
        idx
    }
}

/// Who asks a lookup for a reference: a user (a handle it keeps, limited to
/// `pageref::USER_REF_MAX`) or the cache itself (a short-lived reference
/// inside one of its own operations, which may use the count's reserve).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Who {
    User,
    Cache,
}

/// A handle on one mapping of a [`super::PageCache`].
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FillFn, PageAllocator, PageCache, PageCacheConfig};
/// use std::sync::Arc;
/// let a = Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// let m = cache.mapping(7, Arc::new(FillFn(|_: u64, buf: &mut [u8]| { buf.fill(0); Ok(()) })));
/// assert_eq!(m.write(4090, b"hello world").unwrap(), 11); // pages 0 and 1
/// let mut back = [0u8; 11];
/// assert_eq!(m.read(4090, &mut back).unwrap(), 11);
/// assert_eq!(&back, b"hello world");
/// assert_eq!((m.id(), m.nr_pages()), (7, 2));
/// ```
pub struct Mapping {
    pub(super) cache: Arc<CacheInner>,
    pub(super) m: Arc<MappingInner>,
}

impl Mapping {
    pub(crate) fn new(cache: Arc<CacheInner>, m: Arc<MappingInner>) -> Self {
        Self { cache, m }
    }

    pub(super) fn alloc(&self) -> &PageAllocator {
        &self.cache.alloc
    }

    /// The mapping's id.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.m.id
    }

    /// Pages cached now (racy).
    #[must_use]
    pub fn nr_pages(&self) -> u64 {
        self.m.nr_pages()
    }

    /// Whether the mapping still serves pages (not removed, its cache not
    /// dropped). A handle of a removed mapping fails every call with
    /// [`PageCacheError::MappingRemoved`].
    #[must_use]
    pub fn is_live(&self) -> bool {
        self.m.live().is_ok()
    }

    /// A referenced page at `index` if one is cached, whether or not it is up
    /// to date (`filemap_get_entry` + `folio_try_get`).
    ///
    /// # Errors
    /// [`PageCacheError`] inside the `io::Error`: `IndexTooLarge`,
    /// `MappingRemoved`, or `Saturated` when the page holds the most
    /// references its users may take.
    pub fn find_get(&self, index: u64) -> io::Result<Option<PageHandle<'_>>> {
        let i = PageIndex::new(index)?;
        self.m.live()?;
        Ok(self.lookup(i.get(), Who::User)?.map(|pfn| self.handle(pfn, index)))
    }

    /// A handle on a page the caller holds a reference on (the handle puts
    /// it).
    pub(super) fn handle(&self, pfn: Pfn, index: u64) -> PageHandle<'_> {
        PageHandle { alloc: self.alloc(), pfn, index }
    }

    /// The page cached at `index`, with a reference taken for `who`; `None`
    /// if none. Inside the shard's read lock the page cannot leave the map,
    /// so it is still cached and not freed; a count of 0 means reclaim or
    /// migration froze it and is about to remove or replace it: let it, and
    /// look again. A saturated count is the user's refusal; for the cache's
    /// own references it passes as soon as a short-lived holder puts.
    pub(super) fn lookup(&self, index: u64, who: Who) -> Result<Option<Pfn>, PageCacheError> {
        let max = if who == Who::User { pageref::USER_REF_MAX } else { pageref::REF_MAX };
        loop {
            let s = self.m.shard(index).read();
            let Some(&p) = s.get(&index) else { return Ok(None) };
            match pageref::try_get_below(&self.alloc().core.mm.page(u64::from(p)).flags, max) {
                TryGet::Got => return Ok(Some(Pfn::from_u32(p))),
                TryGet::Saturated if who == Who::User => {
                    return Err(PageCacheError::Saturated { pfn: Pfn::from_u32(p) })
                }
                TryGet::Saturated | TryGet::Zero => {}
            }
            drop(s);
            pagealloc_core::sync::spin_yield();
        }
    }

    /// An up-to-date referenced page at `index`, read in from the source if
    /// missing (`filemap_read` / `filemap_get_pages`). Concurrent readers of
    /// a page being filled wait on its page lock.
    ///
    /// # Errors
    /// The source's read error (a panicking source:
    /// [`PageCacheError::SourcePanicked`]), `OutOfMemory` if no page could
    /// be had, or the refusals of [`Mapping::find_get`].
    pub fn get(&self, index: u64) -> io::Result<PageHandle<'_>> {
        let i = PageIndex::new(index)?;
        self.m.live()?;
        loop {
            if let Some(pfn) = self.lookup(index, Who::User)? {
                let h = self.handle(pfn, index);
                // A stream's marker starts its next window before we wait.
                self.ra_hit(index)?;
                let r = self.alloc().core.cache_page_ref(pfn).map_err(io::Error::other)?;
                if !r.uptodate() {
                    let lock = CacheLock::lock(self.alloc(), pfn);
                    if !lock.page_ref().uptodate() {
                        // Its fill ended without filling it: a failed fill
                        // dropped it; one whose filler unwound left it
                        // mapped: drop it too. Then fill it ourselves.
                        self.delete_locked(pfn.as_u64(), index);
                        continue;
                    }
                }
                self.alloc().core.mark_page_accessed(pfn.as_u64());
                return Ok(h);
            }
            if let Some(h) = self.fill_window(i, self.ra_window(i)?)? {
                return Ok(h);
            }
        }
    }

    /// An order-0 page for the cache. Like the kernel's order-0 page-cache
    /// allocations ("too small to fail"), it does not give up after one
    /// slow path while the cache itself still holds pages that reclaim can
    /// free: under many concurrent readers and writers, the pages one
    /// reclaimer frees are often taken by the others first. It retries (up
    /// to `FILL_RETRIES` times, yielding to kswapd and the other
    /// reclaimers in between) and fails only then. Pages read ahead retry
    /// alike: a failed allocation counts as `pgalloc_fail`, which the
    /// file benches hold at 0.
    ///
    /// # Errors
    /// `OutOfMemory` when no page could be had.
    ///
    /// The page is born with `mark` as its flags word (the cache's lock and
    /// references with `HEAD`, in the allocation's own store), so no pfn
    /// call of a stranger finds it unreferenced and unlocked between its
    /// allocation and its insertion.
    fn alloc_cache_page(&self, mark: u32) -> io::Result<Pfn> {
        let a = self.alloc();
        let mut tries = 0;
        loop {
            match a.core.alloc_pages(Gfp::MOVABLE, 0, mark) {
                Ok(p) => return Ok(p),
                Err(_) if tries < FILL_RETRIES && self.m.nr_pages() > 0 => {
                    tries += 1;
                    self.cache.fill_retries.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                }
                Err(_) => return Err(io::Error::from(io::ErrorKind::OutOfMemory)),
            }
        }
    }

    /// Allocate a page for `index`, lock it, insert it and add it to the
    /// LRU, with `refs` references (the cache's, the LRU batch's, and the
    /// filler's: its handle's, or the read's, put when the read ends; a
    /// lock holder always holds a reference). `Ok(None)` if `index` was
    /// cached already (nothing changed).
    ///
    /// # Errors
    /// `OutOfMemory` if no page could be had; `MappingRemoved` once the
    /// mapping is killed (nothing changed).
    pub(super) fn alloc_insert(&self, index: PageIndex, refs: u32) -> io::Result<Option<Pfn>> {
        let (a, index) = (self.alloc(), index.get());
        // A mapping born dead has no slot to name; a killed one takes no
        // page (checked again under the shard lock below, where it counts).
        self.m.live()?;
        // Not published yet: locked for the cache (GUARD: no raw unlock can
        // release it), with its references.
        let pfn = self.alloc_cache_page(HEAD | LOCKED | GUARD | (refs * REF_ONE))?;
        let p = pfn.as_u64();
        a.core.kswapd_maybe_wake(p);
        self.cache.owners[p as usize].store(CacheInner::owner_word(self.m.slot, index), Ordering::Release);
        {
            let mut s = self.m.shard(index).write();
            // Under the shard's write lock: the lifetime rule (module doc).
            let refused = self.m.live().err();
            if refused.is_some() || s.contains_key(&index) {
                drop(s);
                self.cache.owners[p as usize].store(0, Ordering::Relaxed);
                self.unborn(pfn, refs);
                return refused.map_or(Ok(None), |e| Err(e.into()));
            }
            s.insert(index, p as u32);
            self.m.nr.fetch_add(1, Ordering::Relaxed);
        }
        a.core.lru_cache_add(p);
        Ok(Some(pfn))
    }

    /// Give back a page `alloc_insert` allocated (locked, with `refs`
    /// references) but did not insert. A stranger may have taken a
    /// reference on it meanwhile (`get_page` of its pfn): then it is
    /// unlocked and our references put, and the stranger's last put frees
    /// it; else it is frozen and freed at once.
    fn unborn(&self, pfn: Pfn, refs: u32) {
        let core = &self.alloc().core;
        match pageref::freeze(&core.mm.page(pfn.as_u64()).flags, refs) {
            Some(old) => core.free_frozen(pfn, old),
            None => {
                drop(CacheLock::adopt(self.alloc(), pfn));
                for _ in 0..refs {
                    let _ = core.put_page(pfn);
                }
            }
        }
    }

    /// Remove a locked, referenced page from the mapping and drop the cache's
    /// reference (the caller still holds its own).
    pub(super) fn delete_locked(&self, p: u64, index: u64) {
        if self.m.remove_if(index, p) {
            self.cache.owners[p as usize].store(0, Ordering::Release);
            let core = &self.alloc().core;
            let old = core.mm.page(p).flags.fetch_and(!DIRTY, Ordering::Relaxed);
            if old & DIRTY != 0 {
                core.vmscan.gauges.dirty(core.zone_of(p).idx.get(), false);
            }
            let _ = core.put_page(Pfn::new(p));
        }
    }

    /// Drop page `index` from the cache (`truncate_inode_folio`): it is freed
    /// once its last reference goes. Dirty data is discarded. False if it was
    /// not cached (an index past [`super::MAX_INDEX`] never is).
    pub fn delete(&self, index: u64) -> bool {
        PageIndex::new(index).is_ok_and(|i| self.delete_at(i.get()))
    }

    fn delete_at(&self, index: u64) -> bool {
        let Ok(Some(pfn)) = self.lookup(index, Who::Cache) else { return false };
        let _h = self.handle(pfn, index);
        let l = CacheLock::lock(self.alloc(), pfn);
        let _ = l.page_ref().wait_writeback(None, None);
        self.delete_locked(pfn.as_u64(), index);
        true
    }

    /// Drop every page (`truncate_inode_pages`).
    pub fn truncate(&self) {
        for i in self.m.cached_indexes() {
            self.delete_at(i);
        }
    }

    /// Whether page `index` is cached and up to date (racy).
    #[must_use]
    pub fn is_cached(&self, index: u64) -> bool {
        // Inside the read lock the page cannot be freed (module doc of the
        // parent): its word is a cache page's.
        let s = self.m.shard(index).read();
        s.get(&index)
            .is_some_and(|&p| self.alloc().core.mm.page(u64::from(p)).flags() & (HEAD | UPTODATE) == HEAD | UPTODATE)
    }

    /// Run the source's `op` through the unwind guard.
    pub(super) fn source_call<R>(
        &self,
        op: &'static str,
        f: impl FnOnce(&dyn PageSource) -> io::Result<R>,
    ) -> io::Result<R> {
        guarded(op, || f(&*self.m.source))
    }
}
