//! One mapping: its sharded `index -> pfn` map, its source, and the page
//! cache operations on it (lookup, fill, read, write, writeback, fsync,
//! delete). Invariants: the parent module's doc.

use super::{CacheInner, PageHandle};
use crate::allocator::PageAllocator;
use crate::page::flags::{DIRTY, GUARD, HEAD, LOCKED, REF_MASK, REF_ONE, UPTODATE};
use crate::pageref;
use crate::sync::{AtomicU64, Mutex, Ordering, RwLock};
use crate::types::{Gfp, Pfn, PAGE_SIZE};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

const SHARDS: usize = 16;

/// Times a page-cache fill retries a failed allocation (see
/// `Mapping::alloc_cache_page`).
const FILL_RETRIES: u32 = 64;

/// Where a mapping's pages come from and go to.
pub trait PageSource: Send + Sync {
    /// Fill `buf` (one page) with page `index`'s contents.
    ///
    /// # Errors
    /// Any I/O error; the page is then dropped and the error returned to the
    /// reader.
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Write page `index` back (default: nothing to write to).
    ///
    /// # Errors
    /// Any I/O error; the page stays dirty and `fsync` reports it.
    fn write_page(&self, _index: u64, _buf: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Make written pages durable (default: nothing).
    ///
    /// # Errors
    /// Any I/O error.
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    /// Fill `bufs` (pages) with pages `index..index + bufs.len()`: what a
    /// readahead window reads. The default reads them one by one; a file
    /// reads them with one `preadv`.
    ///
    /// # Errors
    /// Any I/O error; every page of the window is then dropped.
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        for (i, b) in bufs.iter_mut().enumerate() {
            self.read_page(index + i as u64, b)?;
        }
        Ok(())
    }
    /// The source's size in pages, if it has one: readahead does not read
    /// past it (default: none, no limit).
    fn nr_pages(&self) -> Option<u64> {
        None
    }
    /// Whether misses read ahead (see the `readahead` module): true for
    /// files (`FileSource`); a fill callback (the default) computes only the
    /// pages asked for.
    fn readahead(&self) -> bool {
        false
    }
}

/// A file, read with `pread` and written with `pwrite` on the descriptor the
/// source owns. Bytes past the end of the file read as zeros; writeback
/// writes whole pages (a file grows to a page multiple).
pub struct FileSource(pub File);

impl PageSource for FileSource {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], index * PAGE_SIZE as u64 + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf[done..].fill(0);
        Ok(())
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        self.0.write_all_at(buf, index * PAGE_SIZE as u64)
    }
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn readahead(&self) -> bool {
        true
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        super::readahead::preadv_pages(&self.0, index, bufs)
    }
    fn nr_pages(&self) -> Option<u64> {
        self.0.metadata().ok().map(|m| m.len().div_ceil(PAGE_SIZE as u64))
    }
}

/// A fill callback: a cache of computed blocks with no file behind it
/// (writes stay in memory; reclaim drops clean pages, writes back nothing).
pub struct FillFn<F>(pub F);

impl<F: Fn(u64, &mut [u8]) -> io::Result<()> + Send + Sync> PageSource for FillFn<F> {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        (self.0)(index, buf)
    }
}

pub(crate) struct MappingInner {
    pub(crate) id: u64,
    pub(crate) slot: usize,
    shards: [RwLock<HashMap<u64, u32>>; SHARDS],
    pub(super) source: Arc<dyn PageSource>,
    nr: AtomicU64,
    /// Readahead streams and their markers (`readahead`).
    pub(super) ra: super::readahead::RaStreams,
    /// The first writeback error since the last fsync.
    wb_error: Mutex<Option<io::Error>>,
}

impl MappingInner {
    pub(crate) fn new(id: u64, slot: usize, source: Arc<dyn PageSource>) -> Self {
        Self {
            id,
            slot,
            shards: std::array::from_fn(|_| RwLock::new(HashMap::new())),
            source,
            nr: AtomicU64::new(0),
            ra: super::readahead::RaStreams::new(),
            wb_error: Mutex::new(None),
        }
    }
    pub(super) fn shard(&self, index: u64) -> &RwLock<HashMap<u64, u32>> {
        &self.shards[index as usize % SHARDS]
    }
    pub(crate) fn nr_pages(&self) -> u64 {
        self.nr.load(Ordering::Relaxed)
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
}

impl MappingInner {
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

/// A handle on one mapping of a [`super::PageCache`].
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

    /// Lockless-ish lookup (`filemap_get_entry` + `folio_try_get`): a
    /// referenced page if `index` is cached, whether or not it is up to date.
    pub fn find_get(&self, index: u64) -> Option<PageHandle<'_>> {
        loop {
            let s = self.m.shard(index).read();
            let &p = s.get(&index)?;
            // Inside the read lock: the page cannot leave the map, so it is
            // still cached and not freed; a count of 0 means reclaim froze
            // it and is about to remove it: let it, and look again.
            if pageref::try_get(&self.alloc().core.mm.page(p as u64).flags) {
                return Some(PageHandle { alloc: self.alloc(), pfn: Pfn::from_u32(p), index });
            }
            drop(s);
            crate::sync::spin_yield();
        }
    }

    /// An up-to-date referenced page at `index`, read in from the source if
    /// missing (`filemap_read` / `filemap_get_pages`). Concurrent readers of
    /// a page being filled wait on its page lock.
    ///
    /// # Errors
    /// The source's read error, or `OutOfMemory` if no page could be had.
    pub fn get(&self, index: u64) -> io::Result<PageHandle<'_>> {
        loop {
            if let Some(h) = self.find_get(index) {
                // A stream's marker starts its next window before we wait.
                self.ra_hit(index);
                let r = self.alloc().cache_page_ref(h.pfn).map_err(io::Error::other)?;
                if !r.uptodate() {
                    let _ = r.lock_as(GUARD, None, None);
                    let ok = r.uptodate();
                    r.guard_unlock(false);
                    if !ok {
                        continue; // the fill failed and dropped the page: try ourselves
                    }
                }
                self.alloc().core.mark_page_accessed(h.pfn.as_u64());
                return Ok(h);
            }
            if let Some(h) = self.fill_window(index, self.ra_window(index))? {
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
    /// caller's if it keeps a handle, or the read's for a page read ahead
    /// asynchronously). `Ok(None)` if `index` was cached already (nothing
    /// changed).
    ///
    /// # Errors
    /// `OutOfMemory` if no page could be had.
    pub(super) fn alloc_insert(&self, index: u64, refs: u32) -> io::Result<Option<Pfn>> {
        let a = self.alloc();
        // Not published yet: locked for the cache (GUARD: no raw unlock can
        // release it), with its references.
        let pfn = self.alloc_cache_page(HEAD | LOCKED | GUARD | (refs * REF_ONE))?;
        let p = pfn.as_u64();
        super::kswapd::Kswapd::maybe_wake(a, p);
        let d = a.core.mm.page(p);
        self.cache.owners[p as usize].store(CacheInner::owner_word(self.m.slot, index), Ordering::Release);
        {
            let mut s = self.m.shard(index).write();
            if s.contains_key(&index) {
                drop(s);
                self.cache.owners[p as usize].store(0, Ordering::Relaxed);
                d.flags.fetch_and(!(LOCKED | GUARD | REF_MASK), Ordering::Release);
                let _ = a.free_pages(pfn, 0);
                return Ok(None);
            }
            s.insert(index, p as u32);
            self.m.nr.fetch_add(1, Ordering::Relaxed);
        }
        a.core.lru_cache_add(p);
        Ok(Some(pfn))
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

    /// Copy `buf.len()` bytes at byte offset `pos` into `buf` through the
    /// cache. Returns the bytes read (all of them: the source defines the
    /// contents of every page).
    ///
    /// # Errors
    /// As [`Mapping::get`].
    pub fn read(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let at = pos + done as u64;
            let (index, off) = (at / PAGE_SIZE as u64, (at % PAGE_SIZE as u64) as usize);
            let h = self.get(index)?;
            done += h.read(off, &mut buf[done..]);
        }
        Ok(done)
    }

    /// Write `data` at byte offset `pos` through the cache: pages are read in
    /// if missing, written with the page locked (after any writeback of them
    /// ends) and marked dirty.
    ///
    /// # Errors
    /// As [`Mapping::get`].
    pub fn write(&self, pos: u64, data: &[u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < data.len() {
            let at = pos + done as u64;
            let (index, off) = (at / PAGE_SIZE as u64, (at % PAGE_SIZE as u64) as usize);
            let h = self.get(index)?;
            let core = &self.alloc().core;
            if core.mm.page(h.pfn.as_u64()).flags() & DIRTY == 0 {
                // About to dirty a clean page: over the dirty limit, wait
                // (holding no page lock).
                super::writeback::balance_dirty_pages(&self.cache);
            }
            let r = self.alloc().cache_page_ref(h.pfn).map_err(io::Error::other)?;
            let _ = r.lock_as(GUARD, None, None);
            let _ = r.wait_writeback(None, None);
            let n = (data.len() - done).min(PAGE_SIZE - off);
            // SAFETY: see `page_bytes`: locked, referenced, not under writeback.
            let dst = unsafe { &mut *page_bytes(self.alloc(), h.pfn) };
            dst[off..off + n].copy_from_slice(&data[done..done + n]);
            let newly = core.mm.page(h.pfn.as_u64()).flags.fetch_or(DIRTY, Ordering::Relaxed) & DIRTY == 0;
            if newly {
                core.vmscan.gauges.dirty(core.zone_of(h.pfn.as_u64()).idx.get(), true);
            }
            r.guard_unlock(false);
            if newly {
                super::writeback::dirtied(&self.cache, CacheInner::owner_word(self.m.slot, index));
            }
            done += n;
        }
        Ok(done)
    }

    /// Write one locked, referenced dirty page back (`folio_clear_dirty_for_io`,
    /// `folio_start_writeback`, the write, `folio_end_writeback`); unlocks it.
    pub(crate) fn writeback_locked(cache: &CacheInner, m: &MappingInner, pfn: Pfn, index: u64) {
        let core = &cache.alloc.core;
        let r = cache.alloc.cache_page_ref(pfn).expect("in range");
        let d = core.mm.page(pfn.as_u64());
        if d.flags.fetch_and(!DIRTY, Ordering::Relaxed) & DIRTY == 0 {
            r.guard_unlock(false);
            return;
        }
        let zone = core.zone_of(pfn.as_u64()).idx.get();
        core.vmscan.gauges.dirty(zone, false);
        let _ = r.set_writeback();
        core.vmscan.gauges.writeback(zone, true);
        r.guard_unlock(false);
        // SAFETY: see `page_bytes`: under writeback with a reference held;
        // writers wait for writeback to end before touching the bytes.
        let res = m.source.write_page(index, unsafe { &*page_bytes(&cache.alloc, pfn) });
        if res.is_ok() {
            core.vmscan.gauges.nr_written.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(e) = res {
            if d.flags.fetch_or(DIRTY, Ordering::Relaxed) & DIRTY == 0 {
                core.vmscan.gauges.dirty(zone, true);
                // Dirty again: queued again for the flusher.
                cache.writeback.push(CacheInner::owner_word(m.slot, index));
            }
            m.wb_error.lock().get_or_insert(e);
        }
        core.vmscan.gauges.writeback(zone, false);
        let _ = r.end_writeback();
    }

    /// The indexes cached now, sorted (no references taken).
    fn cached_indexes(&self) -> Vec<u64> {
        let mut idx: Vec<u64> =
            self.m.shards.iter().flat_map(|s| s.read().keys().copied().collect::<Vec<_>>()).collect();
        idx.sort_unstable();
        idx
    }

    /// Write every dirty page back, wait for all writeback, sync the source
    /// (`vfs_fsync`). Returns the first error since the last fsync.
    ///
    /// A page is referenced only while it is looked at (as the kernel's
    /// writeback takes a batch of pages at a time): holding a reference on
    /// every page of the mapping for the whole walk would keep reclaim from
    /// freeing any of them meanwhile (reclaim frees only pages nobody else
    /// references), which under memory pressure made concurrent fills fail.
    ///
    /// # Errors
    /// A writeback or sync error of the source.
    pub fn fsync(&self) -> io::Result<()> {
        let idx = self.cached_indexes();
        let core = &self.alloc().core;
        for &i in &idx {
            let Some(h) = self.find_get(i) else { continue };
            if core.mm.page(h.pfn.as_u64()).flags() & DIRTY == 0 {
                continue;
            }
            let r = self.alloc().cache_page_ref(h.pfn).map_err(io::Error::other)?;
            let _ = r.lock_as(GUARD, None, None);
            Self::writeback_locked(&self.cache, &self.m, h.pfn, h.index);
        }
        // Writeback others (reclaim) started on pages of this mapping.
        for &i in &idx {
            if let Some(h) = self.find_get(i) {
                let _ = self.alloc().cache_page_ref(h.pfn).map_err(io::Error::other)?.wait_writeback(None, None);
            }
        }
        if let Some(e) = self.m.wb_error.lock().take() {
            return Err(e);
        }
        self.m.source.sync()
    }

    /// Drop page `index` from the cache (`truncate_inode_folio`): it is freed
    /// once its last reference goes. Dirty data is discarded. False if it was
    /// not cached.
    pub fn delete(&self, index: u64) -> bool {
        let Some(h) = self.find_get(index) else { return false };
        let Ok(r) = self.alloc().cache_page_ref(h.pfn) else { return false };
        let _ = r.lock_as(GUARD, None, None);
        let _ = r.wait_writeback(None, None);
        self.delete_locked(h.pfn.as_u64(), index);
        r.guard_unlock(false);
        true
    }

    /// Drop every page (`truncate_inode_pages`).
    pub fn truncate(&self) {
        for i in self.cached_indexes() {
            self.delete(i);
        }
    }

    /// Whether page `index` is cached and up to date (racy).
    #[must_use]
    pub fn is_cached(&self, index: u64) -> bool {
        self.find_get(index)
            .is_some_and(|h| self.alloc().core.mm.page(h.pfn.as_u64()).flags() & (HEAD | UPTODATE) == HEAD | UPTODATE)
    }
}
