//! The operations of one cache (`xCreate` .. `xDestroy`), as methods of its
//! [`Group`] taking the cache's id. Each takes the cache's shard lock once
//! (a fetch that allocates takes it twice, allocating in between with it
//! dropped; one that must evict lets `Group::evict_global` take the
//! shards' locks one at a time) and frees what it took out of the cache
//! after dropping it.

use crate::ffi::Sqlite3PcachePage;
use crate::frames::SubFrames;
use crate::group::{Evicted, Group, ShardGuard, CACHE_GFP};
use crate::lru::Lru;
use crate::page::{Kind, PagePtr, NO_SLOT};
use crate::shard::{place, CacheState, KeyMap, Released, Shard};
use crate::{CacheStats, CreateError};
use pagealloc::{AllocError, Pfn, PAGE_SIZE};
use std::ptr::NonNull;
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
/// frame take one frame (order 0; pages under a frame share it unless
/// `Config::share_frames` is off), larger ones a block of
/// `sz_page / PAGE_SIZE` frames, so every page is in one buddy block that
/// reclaim gives back whole.
#[must_use]
pub fn page_order(sz_page: usize) -> u32 {
    (sz_page.max(PAGE_SIZE) / PAGE_SIZE).trailing_zeros()
}

/// Bytes one page of a cache with pages of `sz_page` and `sz_extra` bytes
/// of extra area is charged to the budget: its block of frames (for a page
/// under a frame, its share of a full shared frame: `sz_page`), and its
/// header with the extra area on the heap (with malloc's overhead). The
/// budget is of memory, so that what the caches hold, headers included,
/// stays within it.
#[must_use]
pub fn page_charge(sz_page: usize, sz_extra: usize) -> u64 {
    let block = ((PAGE_SIZE as u64) << page_order(sz_page)).min(sz_page.max(MIN_PAGE_SIZE) as u64);
    block + crate::page::header_bytes(sz_extra)
}

// A frame's slots hold pages of SQLite's smallest size.
const _: () = assert!(crate::frames::MAX_SLOTS * MIN_PAGE_SIZE == PAGE_SIZE);

/// Retries of a cheap (no-wait) allocation that lost a lock race.
const CHEAP_TRIES: u32 = 4;

/// Rounds of eviction a miss tries before it gives up on the budget
/// (others may take what it freed): then createFlag 2 overdraws.
const EVICT_TRIES: u32 = 4;

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
        let hdr = crate::page::header_bytes(sz_extra);
        // A cache's first page takes a whole block, shared or not.
        let one = ((PAGE_SIZE as u64) << order) + hdr;
        let c = CacheState {
            map: KeyMap::default(),
            lru: Lru::new(Kind::Cache),
            order,
            sz_extra,
            hdr,
            purgeable,
            max: 100,
            n_pinned: 0,
            stats: CacheStats::default(),
            sub: (self.share_frames && sz_page < PAGE_SIZE).then(|| SubFrames::new(sz_page)),
            key_bound: 0,
        };
        let id = self.take_id();
        let (s, ix) = place(id);
        let mut sh = self.lock(s);
        // Under the shard lock, as every change to the account (budget).
        if let Err(need) = self.acct.reserve(one) {
            drop(sh);
            self.put_id(id);
            return Err(CreateError::HardCap { need, cap: self.acct.hard });
        }
        if sh.caches.len() <= ix {
            sh.caches.resize_with(ix + 1, || None);
        }
        sh.caches[ix] = Some(c);
        drop(sh);
        self.caches_created.fetch_add(1, Relaxed);
        Ok(id)
    }

    /// `xFetch`: the page for `key`, pinned, or null. `create`: 0 looks up
    /// only, 1 allocates if cheap, 2 makes every effort.
    #[inline]
    pub(crate) fn fetch(&self, id: u32, key: u32, create: i32) -> *mut Sqlite3PcachePage {
        let (s, ix) = place(id);
        let mut guard = self.lock(s);
        let sh = &mut *guard;
        sh.counts.fetches += 1;
        let c = sh.caches[ix].as_mut().expect("a cache SQLite destroyed");
        c.stats.fetches += 1;
        if let Some(&p) = c.map.get(&key) {
            c.stats.hits += 1;
            sh.counts.hits += 1;
            sh.pin(id, p);
            return p.as_sqlite();
        }
        c.stats.misses += 1;
        sh.counts.misses += 1;
        if create == 0 {
            return std::ptr::null_mut();
        }
        self.fetch_new(guard, id, key, create >= 2)
    }

    /// A miss that may create: recycle the cache's own oldest unpinned page
    /// at its soft limit (as pcache1 does); else charge a new page within
    /// the budget, evicting the group's oldest unpinned pages (or taking the
    /// oldest whole, when its geometry is this cache's) until it fits; when
    /// nothing is left to evict, `hard` (createFlag 2) goes over the budget
    /// up to the hard cap, and createFlag 1 refuses.
    #[cold]
    fn fetch_new<'a>(&'a self, mut sh: ShardGuard<'a>, id: u32, key: u32, hard: bool) -> *mut Sqlite3PcachePage {
        let s = place(id).0;
        if hard {
            sh.counts.hard += 1;
        }
        let c = sh.cache(id);
        // pcache1's rules: a cheap creation leaves a tenth of the cache for
        // unpinned pages, so SQLite spills dirty pages rather than grow;
        // a cache about to reach its soft limit recycles its oldest page.
        if !hard && c.purgeable && c.n_pinned >= c.max * 9 / 10 {
            sh.counts.cheap_refused += 1;
            return std::ptr::null_mut();
        }
        if c.purgeable && c.map.len() as u64 + 1 >= c.max && !c.lru.is_empty() {
            return recycle_own(&mut sh, id, key);
        }
        let steal = c.sub.is_none().then_some((c.order, c.sz_extra));
        for _ in 0..EVICT_TRIES {
            let (frames, bytes) = sh.cache_mut(id).new_page_charge();
            if self.acct.try_charge(frames, bytes, self.acct.soft) {
                return self.create_page(sh, id, key, (frames, bytes), hard);
            }
            // At the budget, when this shard holds the group's oldest page
            // and it is this cache's, or has its geometry: reuse it in
            // place, with no other lock (a cache with its own shard finds
            // its oldest page here).
            if let Some(p) = self.shard_oldest_for(&sh, s, id, steal) {
                return recycle_in_shard(&mut sh, p, id, key);
            }
            drop(sh);
            let short = (self.acct.charged() + bytes).saturating_sub(self.acct.soft).max(1);
            let progress = match self.evict_global(short, 0, steal) {
                Evicted::Stolen(p) => return self.adopt(id, key, p),
                Evicted::Freed(out) => {
                    let freed = out.bytes > 0;
                    self.release(out);
                    freed
                }
            };
            sh = self.lock(s);
            if !progress {
                break;
            }
        }
        let (frames, bytes) = sh.cache_mut(id).new_page_charge();
        if hard && self.acct.try_charge(frames, bytes, self.acct.hard) {
            return self.create_page(sh, id, key, (frames, bytes), hard);
        }
        if !hard {
            sh.counts.cheap_refused += 1;
        }
        std::ptr::null_mut()
    }

    /// Shard `s`'s oldest page, if it is the group's oldest and cache `id`
    /// can take it whole: its own, or one of `steal`'s geometry.
    fn shard_oldest_for(&self, sh: &Shard, s: usize, id: u32, steal: Option<(u32, usize)>) -> Option<PagePtr> {
        let p = sh.lru.first()?;
        let fits = p.cache() == id || steal.is_some_and(|(o, x)| sh.cache(p.cache()).same_block(o, x));
        (fits && p.stamp() <= self.oldest_hint_except(s)).then_some(p)
    }

    /// A new page for `key`, its charge taken: in a free slot of a shared
    /// frame when `charge` has no block in it, else in a block allocated
    /// with the lock dropped (`hard`: with direct reclaim).
    fn create_page<'a>(
        &'a self,
        mut sh: ShardGuard<'a>,
        id: u32,
        key: u32,
        charge: (u64, u64),
        hard: bool,
    ) -> *mut Sqlite3PcachePage {
        let (frames, bytes) = charge;
        let c = sh.cache_mut(id);
        let (order, sz_extra) = (c.order, c.sz_extra);
        if frames > 0 {
            self.acct.in_flight(frames, bytes, true);
            drop(sh);
            let block = self.alloc_frame(order, hard);
            sh = self.lock(place(id).0);
            self.acct.in_flight(frames, bytes, false);
            let Some(pfn) = block else {
                self.acct.uncharge(frames, bytes);
                if !hard {
                    sh.counts.cheap_refused += 1;
                }
                return std::ptr::null_mut();
            };
            if sh.cache(id).sub.is_none() {
                let p = self.new_page(pfn, 0, NO_SLOT, id, key, sz_extra);
                return self.insert(sh, id, key, p);
            }
            sh.cache_mut(id).sub.as_mut().expect("checked").add_frame(pfn);
        }
        let sub = sh.cache_mut(id).sub.as_mut().expect("a slot is charged only to a cache that shares frames");
        let (code, pfn, offset) = sub.free_slot().expect("a shared frame with a free slot");
        let p = self.new_page(pfn, offset, code, id, key, sz_extra);
        sub.fill(code, p);
        self.insert(sh, id, key, p)
    }

    /// A header for a new page at byte `offset` of block `pfn`.
    fn new_page(&self, pfn: Pfn, offset: usize, slot: u32, id: u32, key: u32, sz_extra: usize) -> PagePtr {
        let base = self.alloc.page_address(pfn).expect("the arena has backing");
        // wrapping_add: a plain address computation (the offset is within
        // the frame); the pointer is only dereferenced by SQLite.
        let buf = NonNull::new(base.as_ptr().wrapping_add(offset)).expect("inside the arena");
        PagePtr::new(pfn, buf, slot, id, key, sz_extra)
    }

    /// Put the new, pinned, charged page `p` in cache `id` at `key`.
    fn insert(&self, mut sh: ShardGuard<'_>, id: u32, key: u32, p: PagePtr) -> *mut Sqlite3PcachePage {
        let c = sh.cache_mut(id);
        c.n_pinned += 1;
        if let Some(&q) = c.map.get(&key) {
            // Another thread created the key meanwhile (SQLite serialises a
            // cache's calls, so only a misbehaving caller gets here): keep
            // theirs, drop ours.
            c.insert(key, p);
            let mut out = Released::default();
            sh.remove_page(id, key, &self.acct, &mut out);
            sh.cache_mut(id).insert(key, q);
            sh.pin(id, q);
            drop(sh);
            self.release(out);
            return q.as_sqlite();
        }
        c.insert(key, p);
        p.as_sqlite()
    }

    /// Put the oldest page of the group, taken whole, in cache `id` at
    /// `key`: new to SQLite (extra head zeroed), pinned.
    fn adopt(&self, id: u32, key: u32, p: PagePtr) -> *mut Sqlite3PcachePage {
        let sh = self.lock(place(id).0);
        let c = sh.cache(id);
        self.acct.in_flight(c.block_frames(), c.block_bytes() + c.hdr, false);
        p.set_cache(id);
        p.set_key(key);
        p.zero_extra_head();
        p.set_pinned(true);
        self.insert(sh, id, key, p)
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

    /// `xUnpin`: `discard` frees the page at once; a purgeable cache frees
    /// it too when the cache is over its soft limit or the group over its
    /// budget (pcache1 frees at unpin over its limit), and otherwise puts it
    /// on the LRU lists, newest. A non-purgeable cache keeps it in its map
    /// only: nothing but SQLite's discard, truncate or destroy drops it.
    #[inline]
    pub(crate) fn unpin(&self, id: u32, p: PagePtr, discard: bool) {
        let s = place(id).0;
        let mut sh = self.lock(s);
        // SQLite unpins only pages it holds, each once, on their own
        // cache; anything else would corrupt the counts: ignore it.
        if !p.pinned() || p.cache() != id {
            debug_assert!(false, "xUnpin of a page not pinned in this cache");
            return;
        }
        sh.unpin(id, p);
        let c = sh.cache(id);
        if discard || (c.purgeable && (c.map.len() as u64 > c.max || self.acct.overdrawn())) {
            let mut out = Released::default();
            if discard {
                sh.remove_page(id, p.key(), &self.acct, &mut out);
            } else {
                sh.evict_page(id, p, &self.acct, &mut out);
            }
            drop(sh);
            self.release(out);
        } else if c.purgeable {
            let now = self.stamp(&mut sh);
            sh.lru_add(id, p, now, &self.heads[s]);
        }
    }

    /// `xRekey`: move `p` from `old` to `new`, dropping a page at `new`.
    pub(crate) fn rekey(&self, id: u32, p: PagePtr, old: u32, new: u32) {
        let mut sh = self.lock(place(id).0);
        debug_assert_eq!(p.key(), old);
        if old == new {
            return;
        }
        let mut out = Released::default();
        sh.remove_page(id, new, &self.acct, &mut out);
        // The LRU lists link headers, not keys: the page keeps its place.
        let c = sh.cache_mut(id);
        c.map.remove(&old);
        p.set_key(new);
        c.insert(new, p);
        drop(sh);
        self.release(out);
    }

    /// `xTruncate`: drop every page with key >= `limit`, pinned ones too.
    pub(crate) fn truncate(&self, id: u32, limit: u32) {
        let mut sh = self.lock(place(id).0);
        let c = sh.cache_mut(id);
        if u64::from(limit) >= c.key_bound {
            return;
        }
        c.key_bound = u64::from(limit);
        let keys: Vec<u32> = c.map.keys().copied().filter(|&k| k >= limit).collect();
        let mut out = Released::default();
        for k in keys {
            sh.remove_page(id, k, &self.acct, &mut out);
        }
        drop(sh);
        self.release(out);
    }

    /// `xShrink`: free every unpinned page of a purgeable cache (a
    /// non-purgeable cache's unpinned pages are its only copy of the data).
    pub(crate) fn shrink(&self, id: u32) {
        let mut sh = self.lock(place(id).0);
        let mut out = Released::default();
        while sh.evict_cache_oldest(id, &self.acct, &mut out) {}
        drop(sh);
        self.release(out);
    }

    /// `xCachesize`: the soft limit; a purgeable cache over it drops its
    /// oldest unpinned pages down to it.
    pub(crate) fn cachesize(&self, id: u32, n: i32) {
        let mut sh = self.lock(place(id).0);
        let c = sh.cache_mut(id);
        c.max = u64::try_from(n).unwrap_or(0);
        let mut out = Released::default();
        while sh.cache(id).purgeable
            && sh.cache(id).map.len() as u64 > sh.cache(id).max
            && sh.evict_cache_oldest(id, &self.acct, &mut out)
        {}
        drop(sh);
        self.release(out);
    }

    /// `xPagecount`: pages in the cache, pinned or not.
    pub(crate) fn pagecount(&self, id: u32) -> usize {
        self.lock(place(id).0).cache(id).map.len()
    }

    /// `xDestroy`: free every page and the cache itself.
    pub(crate) fn destroy(&self, id: u32) {
        let (s, ix) = place(id);
        let mut sh = self.lock(s);
        let keys: Vec<u32> = sh.cache(id).map.keys().copied().collect();
        let mut out = Released::default();
        for k in keys {
            sh.remove_page(id, k, &self.acct, &mut out);
        }
        let c = sh.caches[ix].take().expect("a cache SQLite destroyed");
        debug_assert!(c.lru.is_empty() && c.n_pinned == 0);
        self.acct.unreserve(c.block_bytes() + c.hdr);
        drop(sh);
        self.put_id(id);
        self.release(out);
    }

    /// The counters of cache `id`.
    pub(crate) fn stats(&self, id: u32) -> CacheStats {
        let sh = self.lock(place(id).0);
        let c = sh.cache(id);
        CacheStats { pinned: c.n_pinned, pages: c.map.len() as u64, ..c.stats }
    }
}

/// Reuse the cache's oldest unpinned page for `key` (no allocator call).
fn recycle_own(sh: &mut Shard, id: u32, key: u32) -> *mut Sqlite3PcachePage {
    let p = sh.cache(id).lru.first().expect("checked non-empty");
    recycle_in_shard(sh, p, id, key)
}

/// Reuse unpinned page `p` of this shard (of cache `id`, or of a cache with
/// its geometry) for `key` of cache `id`: new to SQLite (extra head
/// zeroed), pinned. The two caches' charges per page are equal, so the
/// account does not move.
fn recycle_in_shard(sh: &mut Shard, p: PagePtr, id: u32, key: u32) -> *mut Sqlite3PcachePage {
    let from = p.cache();
    sh.lru_del(from, p);
    sh.counts.evictions += 1;
    let c = sh.cache_mut(from);
    c.map.remove(&p.key());
    c.stats.evictions += 1;
    p.set_cache(id);
    p.set_key(key);
    p.zero_extra_head();
    sh.cache_mut(id).insert(key, p);
    sh.pin(id, p);
    p.as_sqlite()
}
