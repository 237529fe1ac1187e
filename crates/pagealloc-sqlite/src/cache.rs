//! The operations of one cache (`xCreate` .. `xDestroy`), as methods of its
//! [`Group`] taking the cache's id. Each takes the group mutex once (a fetch
//! that allocates takes it twice, allocating in between with it dropped) and
//! frees what it took out of the cache after dropping it.

use crate::ffi::Sqlite3PcachePage;
use crate::group::{CacheState, Group, KeyMap, Victim, CACHE_GFP};
use crate::lru::Lru;
use crate::page::Kind;
use crate::page::PagePtr;
use crate::{CacheStats, CreateError};
use pagealloc::{AllocError, Pfn, PAGE_SIZE};
use std::sync::atomic::Ordering::Relaxed;

/// Smallest and largest page sizes SQLite allows (`SQLITE_MAX_PAGE_SIZE`).
pub const MIN_PAGE_SIZE: usize = 512;
/// See [`MIN_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: usize = 65536;

/// The largest extra area accepted. SQLite asks for its `PgHdr` plus the
/// b-tree's `MemPage`, 208 bytes in Debian's 3.40.1 on 64-bit; the issue
/// bounds it under 250, and pcache1 asserts it under 300. Anything larger
/// is not SQLite and gets no cache (xCreate returns NULL: SQLITE_NOMEM).
pub const MAX_EXTRA: usize = 249;

/// Order of the block holding one page of `sz_page` bytes: pages up to a
/// frame take one frame each (order 0), larger ones a block of
/// `sz_page / PAGE_SIZE` frames, so every page is one buddy block that
/// reclaim gives back whole.
#[must_use]
pub fn page_order(sz_page: usize) -> u32 {
    (sz_page.max(PAGE_SIZE) / PAGE_SIZE).trailing_zeros()
}

/// Bytes one page of a cache with pages of `sz_page` and `sz_extra` bytes
/// of extra area is charged to the budget: its block of frames, and its
/// header with the extra area on the heap (with malloc's overhead). The
/// budget is of memory, so that what the caches hold, headers included,
/// stays within it.
#[must_use]
pub fn page_charge(sz_page: usize, sz_extra: usize) -> u64 {
    ((PAGE_SIZE as u64) << page_order(sz_page)) + crate::page::header_bytes(sz_extra)
}

/// Retries of a cheap (no-wait) allocation that lost a lock race.
const CHEAP_TRIES: u32 = 4;

impl Group {
    /// `xCreate`: a new cache, or why not.
    pub(crate) fn create(&self, sz_page: usize, sz_extra: usize, purgeable: bool) -> Result<u32, CreateError> {
        if !sz_page.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&sz_page) {
            return Err(CreateError::PageSize(sz_page));
        }
        if sz_extra > MAX_EXTRA {
            return Err(CreateError::Extra(sz_extra));
        }
        let order = page_order(sz_page);
        let frames = 1u64 << order;
        let charge = page_charge(sz_page, sz_extra);
        let mut st = self.state.lock();
        if st.reserved + charge > self.budget {
            return Err(CreateError::Budget { need: st.reserved + charge, budget: self.budget });
        }
        st.reserved += charge;
        let c = CacheState {
            map: KeyMap::default(),
            lru: Lru::new(Kind::Cache),
            order,
            frames,
            charge,
            sz_extra,
            purgeable,
            max: 100,
            n_pinned: 0,
            stats: CacheStats::default(),
        };
        let id = match st.free_ids.pop() {
            Some(id) => {
                st.caches[id as usize] = Some(c);
                id
            }
            None => {
                st.caches.push(Some(c));
                (st.caches.len() - 1) as u32
            }
        };
        self.totals.caches.fetch_add(1, Relaxed);
        Ok(id)
    }

    /// `xFetch`: the page for `key`, pinned, or null. `create`: 0 looks up
    /// only, 1 allocates if cheap, 2 makes every effort.
    pub(crate) fn fetch(&self, id: u32, key: u32, create: i32) -> *mut Sqlite3PcachePage {
        let mut st = self.state.lock();
        self.totals.fetches.fetch_add(1, Relaxed);
        let c = st.cache_mut(id);
        c.stats.fetches += 1;
        if let Some(&p) = c.map.get(&key) {
            c.stats.hits += 1;
            self.totals.hits.fetch_add(1, Relaxed);
            st.pin(id, p);
            return p.as_sqlite();
        }
        c.stats.misses += 1;
        self.totals.misses.fetch_add(1, Relaxed);
        if create == 0 {
            return std::ptr::null_mut();
        }
        drop(st);
        self.fetch_new(id, key, create >= 2)
    }

    /// A miss that may create: recycle the cache's own oldest unpinned page
    /// at its soft limit (as pcache1 does), or at the budget the group's
    /// oldest in place, else make room in the budget by evicting the coldest
    /// unpinned pages of any cache and allocate a frame (`hard`: with direct
    /// reclaim; else from free memory only).
    #[cold]
    fn fetch_new(&self, id: u32, key: u32, hard: bool) -> *mut Sqlite3PcachePage {
        let mut st = self.state.lock();
        let c = st.cache(id);
        let (order, frames, charge, sz_extra) = (c.order, c.frames, c.charge, c.sz_extra);
        if hard {
            self.totals.hard.fetch_add(1, Relaxed);
        }
        // pcache1's rule: a cheap creation leaves a tenth of the cache for
        // unpinned pages, so SQLite spills dirty pages rather than grow.
        if !hard && c.purgeable && c.n_pinned >= c.max * 9 / 10 {
            self.totals.cheap_refused.fetch_add(1, Relaxed);
            return std::ptr::null_mut();
        }
        if c.purgeable && c.map.len() as u64 >= c.max && !c.lru.is_empty() {
            return self.recycle_locked(&mut st, id, key);
        }
        if st.charged + charge > self.budget && !st.cache(id).map.contains_key(&key) {
            if let Some(p) = self.steal_locked(&mut st, id, key) {
                return p;
            }
        }
        let mut victims = Vec::new();
        if st.charged + charge > self.budget {
            // The oldest page is another size (or none is unpinned): evict
            // the coldest pages until this one fits, also when cheap. That
            // costs unlinking clean pages, no I/O and no allocator reclaim,
            // where refusing makes SQLite write dirty pages out first
            // (pcache1 likewise frees a mismatched LRU page and allocates).
            let short = st.charged + charge - self.budget;
            st.evict_global(0, short, &mut victims);
            if st.charged + charge > self.budget {
                drop(st);
                self.release(victims, true);
                self.count_refusal(hard);
                return std::ptr::null_mut();
            }
        }
        // Charge the page before allocating, so that racing fetches cannot
        // together overrun the budget.
        st.used += frames;
        st.charged += charge;
        st.in_flight.0 += frames;
        st.in_flight.1 += charge;
        drop(st);
        self.release(victims, true);
        let Some(pfn) = self.alloc_frame(order, hard) else {
            self.uncharge(frames, charge);
            self.count_refusal(hard);
            return std::ptr::null_mut();
        };
        let buf = self.alloc.page_address(pfn).expect("the arena has backing");
        let p = PagePtr::new(pfn, buf, id, key, sz_extra);
        let mut st = self.state.lock();
        st.in_flight.0 -= frames;
        st.in_flight.1 -= charge;
        let c = st.cache_mut(id);
        if let Some(&q) = c.map.get(&key) {
            // Another thread created the key meanwhile (SQLite serialises a
            // cache's calls, so only a misbehaving caller gets here): keep theirs.
            st.used -= frames;
            st.charged -= charge;
            st.pin(id, q);
            drop(st);
            self.release(vec![Victim { page: p, order }], false);
            return q.as_sqlite();
        }
        c.map.insert(key, p);
        c.n_pinned += 1;
        p.as_sqlite()
    }

    /// Give back what a fetch charged for a page it could not allocate.
    fn uncharge(&self, frames: u64, charge: u64) {
        let mut st = self.state.lock();
        st.used -= frames;
        st.charged -= charge;
        st.in_flight.0 -= frames;
        st.in_flight.1 -= charge;
    }

    /// Count a miss that created nothing at createFlag 1.
    fn count_refusal(&self, hard: bool) {
        if !hard {
            self.totals.cheap_refused.fetch_add(1, Relaxed);
        }
    }

    /// Reuse the cache's oldest unpinned page for `key` (no allocator call).
    fn recycle_locked(&self, st: &mut crate::group::State, id: u32, key: u32) -> *mut Sqlite3PcachePage {
        let p = st.cache(id).lru.first().expect("checked non-empty");
        let old = p.key();
        st.lru_del(id, p);
        let c = st.cache_mut(id);
        c.map.remove(&old);
        c.stats.evictions += 1;
        self.totals.evictions.fetch_add(1, Relaxed);
        p.set_key(key);
        p.set_pinned(true);
        p.zero_extra_head();
        c.map.insert(key, p);
        c.n_pinned += 1;
        p.as_sqlite()
    }

    /// At the budget: take the group's oldest unpinned page from its cache
    /// for `key` of cache `id`, frame and header as they are, when its page
    /// and extra sizes are this cache's (pcache1 recycles its group's LRU
    /// page the same way). A miss at the budget then costs no allocator
    /// call, no header allocation and no second `xFetch` with createFlag 2.
    fn steal_locked(&self, st: &mut crate::group::State, id: u32, key: u32) -> Option<*mut Sqlite3PcachePage> {
        let p = st.lru.first()?;
        let from = p.cache();
        let (src, dst) = (st.cache(from), st.cache(id));
        if src.order != dst.order || src.sz_extra != dst.sz_extra {
            return None;
        }
        let v = st.remove_page(from, p.key()).expect("an LRU page is in its cache's map");
        debug_assert_eq!(v.page, p);
        st.cache_mut(from).stats.evictions += 1;
        self.totals.evictions.fetch_add(1, Relaxed);
        let c = st.cache_mut(id);
        let (frames, charge) = (c.frames, c.charge);
        p.set_cache(id);
        p.set_key(key);
        p.set_pinned(true);
        p.zero_extra_head();
        c.map.insert(key, p);
        c.n_pinned += 1;
        st.used += frames;
        st.charged += charge;
        Some(p.as_sqlite())
    }

    /// A block of `1 << order` frames. `hard`: the ordinary path, whose slow
    /// path reclaims directly (our shrinker among others); else the no-wait
    /// path, which never reclaims and stays above the min watermark.
    fn alloc_frame(&self, order: u32, hard: bool) -> Option<Pfn> {
        if hard {
            return self.alloc.alloc_pages(CACHE_GFP, order).ok();
        }
        for _ in 0..CHEAP_TRIES {
            match self.alloc.alloc_pages_nolock(CACHE_GFP, order) {
                Ok(pfn) => return Some(pfn),
                Err(AllocError::WouldBlock { .. }) => std::hint::spin_loop(),
                Err(_) => return None,
            }
        }
        None
    }

    /// `xUnpin`: purgeable caches put the page on the LRU lists (newest);
    /// `discard` frees it at once. A non-purgeable cache keeps it in its map
    /// only: nothing but SQLite's discard, truncate or destroy drops it.
    pub(crate) fn unpin(&self, id: u32, p: PagePtr, discard: bool) {
        let mut st = self.state.lock();
        debug_assert!(p.pinned(), "xUnpin of an unpinned page");
        if discard {
            let v = st.remove_page(id, p.key());
            drop(st);
            self.release(v.into_iter().collect(), false);
            return;
        }
        p.set_pinned(false);
        let c = st.cache_mut(id);
        c.n_pinned -= 1;
        if c.purgeable {
            st.lru_add(id, p);
        }
    }

    /// `xRekey`: move `p` from `old` to `new`, dropping a page at `new`.
    pub(crate) fn rekey(&self, id: u32, p: PagePtr, old: u32, new: u32) {
        let mut st = self.state.lock();
        debug_assert_eq!(p.key(), old);
        let v = if old == new { None } else { st.remove_page(id, new) };
        if old != new {
            // The LRU lists link headers, not keys: the page keeps its place.
            st.cache_mut(id).map.remove(&old);
            p.set_key(new);
            st.cache_mut(id).map.insert(new, p);
        }
        drop(st);
        self.release(v.into_iter().collect(), false);
    }

    /// `xTruncate`: drop every page with key >= `limit`, pinned ones too.
    pub(crate) fn truncate(&self, id: u32, limit: u32) {
        let mut st = self.state.lock();
        let keys: Vec<u32> = st.cache(id).map.keys().copied().filter(|&k| k >= limit).collect();
        let victims = keys.into_iter().filter_map(|k| st.remove_page(id, k)).collect();
        drop(st);
        self.release(victims, false);
    }

    /// `xShrink`: free every unpinned page of a purgeable cache (a
    /// non-purgeable cache's unpinned pages are its only copy of the data).
    pub(crate) fn shrink(&self, id: u32) {
        let mut st = self.state.lock();
        let mut victims = Vec::new();
        while let Some(v) = st.evict_cache_oldest(id) {
            victims.push(v);
        }
        drop(st);
        self.release(victims, true);
    }

    /// `xCachesize`: the soft limit; a purgeable cache over it drops its
    /// oldest unpinned pages down to it.
    pub(crate) fn cachesize(&self, id: u32, n: i32) {
        let mut st = self.state.lock();
        let c = st.cache_mut(id);
        c.max = u64::try_from(n).unwrap_or(0);
        let mut victims = Vec::new();
        while st.cache(id).purgeable && st.cache(id).map.len() as u64 > st.cache(id).max {
            let Some(v) = st.evict_cache_oldest(id) else { break };
            victims.push(v);
        }
        drop(st);
        self.release(victims, true);
    }

    /// `xPagecount`: pages in the cache, pinned or not.
    pub(crate) fn pagecount(&self, id: u32) -> usize {
        self.state.lock().cache(id).map.len()
    }

    /// `xDestroy`: free every page and the cache itself.
    pub(crate) fn destroy(&self, id: u32) {
        let mut st = self.state.lock();
        let keys: Vec<u32> = st.cache(id).map.keys().copied().collect();
        let victims = keys.into_iter().filter_map(|k| st.remove_page(id, k)).collect();
        let c = st.caches[id as usize].take().expect("a cache SQLite destroyed");
        debug_assert!(c.lru.is_empty() && c.n_pinned == 0);
        st.reserved -= c.charge;
        st.free_ids.push(id);
        drop(st);
        self.release(victims, false);
    }

    /// The counters of cache `id`.
    pub(crate) fn stats(&self, id: u32) -> CacheStats {
        let st = self.state.lock();
        let c = st.cache(id);
        CacheStats { pinned: c.n_pinned, pages: c.map.len() as u64, ..c.stats }
    }
}
