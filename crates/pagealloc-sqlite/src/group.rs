//! A group of page caches sharing one allocator and one budget (SQLite's
//! `PGroup` in pcache1.c, with the frames coming from pagealloc).
//!
//! Everything a cache holds is under the group's one mutex ([`State`]): the
//! caches' maps, their LRU lists and the global LRU. SQLite's own pcache1
//! does the same when its caches share memory (one `PGroup` mutex for all of
//! them); frames are allocated and freed with the mutex dropped, because the
//! allocator's direct reclaim calls back into [`GroupShrinker`], which takes it.
//!
//! The budget is of memory, in bytes: a page is charged its frames and its
//! header on the heap with SQLite's extra area (`CacheState::charge`), so
//! that what the caches hold, headers included, stays within the budget.
//!
//! Invariants (under the mutex; [`Group::check_invariants`] checks them):
//! - `used` == sum over open caches of `pages * frames_per_page`, plus
//!   `in_flight.0`, the frames of pages a fetch charged and is allocating
//!   with the mutex dropped;
//! - `charged` == sum over open caches of `pages * charge`, plus
//!   `in_flight.1`, and <= `budget`;
//! - `lru_frames` == sum over pages on `lru` of their cache's frames per page;
//! - a page is on `lru` iff its cache is purgeable and the page is unpinned,
//!   and then it is on its cache's `lru` too (`on_lru` set; [`crate::lru`]);
//! - `reserved` == sum over open caches of one page's charge <= `budget`.

use crate::lru::Lru;
use crate::page::Kind;
use crate::page::PagePtr;
use crate::CacheStats;
use pagealloc::{Gfp, PageAllocator, ShrinkControl, Shrinker};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// Flags of every cache frame: reclaimable through our shrinker, as the
/// kernel's slab caches with shrinkers are; not movable (nothing migrates them).
pub(crate) const CACHE_GFP: Gfp = Gfp::RECLAIMABLE;

/// The page-number hash of a cache's map: one multiply (Fibonacci hashing),
/// as pcache1's `iKey % nHash` is one division. std's SipHash guards
/// against keys an attacker chooses; page numbers are SQLite's, and every
/// hit pays the hash under the group mutex.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A cache's map: page number -> page.
pub(crate) type KeyMap = HashMap<u32, PagePtr, BuildHasherDefault<KeyHasher>>;

/// One cache's state (under the group mutex).
pub(crate) struct CacheState {
    pub(crate) map: KeyMap,
    /// This cache's unpinned pages, oldest first (purgeable caches only).
    pub(crate) lru: Lru,
    pub(crate) order: u32,
    pub(crate) frames: u64,
    /// Bytes one page costs: its frames, header and extra area.
    pub(crate) charge: u64,
    pub(crate) sz_extra: usize,
    pub(crate) purgeable: bool,
    /// The soft limit (`xCachesize`), in pages.
    pub(crate) max: u64,
    pub(crate) n_pinned: u64,
    pub(crate) stats: CacheStats,
}

/// Everything under the group mutex; see the module invariants.
pub(crate) struct State {
    pub(crate) caches: Vec<Option<CacheState>>,
    pub(crate) free_ids: Vec<u32>,
    /// Unpinned pages of purgeable caches, oldest first.
    pub(crate) lru: Lru,
    /// Frames held by every cache's pages.
    pub(crate) used: u64,
    /// Bytes charged for every cache's pages (frames and headers).
    pub(crate) charged: u64,
    /// Bytes of one page of each open cache.
    pub(crate) reserved: u64,
    /// (frames, bytes) charged for pages being allocated (mutex dropped).
    pub(crate) in_flight: (u64, u64),
    pub(crate) lru_frames: u64,
}

/// A page taken out of its cache, to free once the mutex is dropped.
pub(crate) struct Victim {
    pub(crate) page: PagePtr,
    pub(crate) order: u32,
}

impl Default for State {
    fn default() -> Self {
        Self {
            caches: Vec::new(),
            free_ids: Vec::new(),
            lru: Lru::new(Kind::Global),
            used: 0,
            charged: 0,
            reserved: 0,
            in_flight: (0, 0),
            lru_frames: 0,
        }
    }
}

impl State {
    pub(crate) fn cache(&self, id: u32) -> &CacheState {
        self.caches[id as usize].as_ref().expect("a cache SQLite destroyed")
    }
    pub(crate) fn cache_mut(&mut self, id: u32) -> &mut CacheState {
        self.caches[id as usize].as_mut().expect("a cache SQLite destroyed")
    }

    /// Put an unpinned page of a purgeable cache on both LRU lists, newest.
    pub(crate) fn lru_add(&mut self, id: u32, p: PagePtr) {
        debug_assert!(!p.hdr().on_lru.load(Relaxed) && p.cache() == id);
        p.hdr().on_lru.store(true, Relaxed);
        self.lru.push_back(p);
        let c = self.cache_mut(id);
        c.lru.push_back(p);
        let frames = c.frames;
        self.lru_frames += frames;
    }

    /// Take a page off both LRU lists (no-op when it is not on them).
    pub(crate) fn lru_del(&mut self, id: u32, p: PagePtr) {
        if !p.hdr().on_lru.load(Relaxed) {
            return;
        }
        p.hdr().on_lru.store(false, Relaxed);
        self.lru.remove(p);
        let c = self.cache_mut(id);
        c.lru.remove(p);
        let frames = c.frames;
        self.lru_frames -= frames;
    }

    /// Pin a page of cache `id` (no-op when pinned): off the LRU lists.
    pub(crate) fn pin(&mut self, id: u32, p: PagePtr) {
        if !p.pinned() {
            self.lru_del(id, p);
            p.set_pinned(true);
            self.cache_mut(id).n_pinned += 1;
        }
    }

    /// Take page `key` out of cache `id`, pinned or not, for freeing.
    pub(crate) fn remove_page(&mut self, id: u32, key: u32) -> Option<Victim> {
        let p = self.cache_mut(id).map.remove(&key)?;
        self.lru_del(id, p);
        let c = self.cache_mut(id);
        if p.pinned() {
            c.n_pinned -= 1;
        }
        let (frames, order, charge) = (c.frames, c.order, c.charge);
        self.used -= frames;
        self.charged -= charge;
        Some(Victim { page: p, order })
    }

    /// Evict the oldest unpinned page of cache `id` (counted as an eviction).
    pub(crate) fn evict_cache_oldest(&mut self, id: u32) -> Option<Victim> {
        let key = self.cache(id).lru.first()?.key();
        self.cache_mut(id).stats.evictions += 1;
        self.remove_page(id, key)
    }

    /// Evict the oldest unpinned pages of any cache until at least `frames`
    /// frames and `bytes` bytes of charge are freed, or none is left; the
    /// victims go to `out`. Returns the frames freed.
    pub(crate) fn evict_global(&mut self, frames: u64, bytes: u64, out: &mut Vec<Victim>) -> u64 {
        let (mut freed, mut freed_bytes) = (0, 0);
        while freed < frames || freed_bytes < bytes {
            // The global oldest is its cache's oldest too (crate::lru).
            let Some(p) = self.lru.first() else { break };
            let Some(v) = self.evict_cache_oldest(p.cache()) else { break };
            debug_assert_eq!(v.page, p);
            freed += 1 << v.order;
            freed_bytes += self.cache(p.cache()).charge;
            out.push(v);
        }
        freed
    }
}

/// Totals over every cache the group ever had, for the exit line.
#[derive(Default, Debug)]
pub(crate) struct Totals {
    pub(crate) caches: AtomicU64,
    pub(crate) fetches: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) evictions: AtomicU64,
    /// Misses with createFlag 2 ("every effort").
    pub(crate) hard: AtomicU64,
    /// Misses with createFlag 1 ("only if cheap") that created nothing.
    pub(crate) cheap_refused: AtomicU64,
}

/// Caches sharing one allocator and one budget. Made by [`crate::install`]
/// for the process, or by [`Group::new`] for tests and embedders.
pub struct Group {
    pub(crate) alloc: PageAllocator,
    /// The most bytes all caches' pages, headers included, may be charged.
    pub(crate) budget: u64,
    pub(crate) state: Mutex<State>,
    pub(crate) totals: Totals,
    shrinker: u64,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("budget", &self.budget).field("totals", &self.totals).finish()
    }
}

/// The group's LRU as the allocator's shrinker: direct reclaim (any thread
/// whose allocation runs short) evicts the coldest unpinned pages of every
/// purgeable cache. Weak, so that the allocator inside the group does not keep
/// the group alive.
struct GroupShrinker(Weak<Group>);

impl Shrinker for GroupShrinker {
    fn count_objects(&self, _sc: &ShrinkControl) -> u64 {
        self.0.upgrade().map_or(0, |g| g.state.lock().lru_frames)
    }
    fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(g) = self.0.upgrade() else { return 0 };
        let mut victims = Vec::new();
        let freed = g.state.lock().evict_global(sc.nr_to_scan.max(1), 0, &mut victims);
        g.release(victims, true);
        freed
    }
}

impl Group {
    /// A group over a new allocator with a budget of `budget_bytes`.
    pub(crate) fn with_allocator(alloc: PageAllocator, budget_bytes: u64) -> Arc<Self> {
        Arc::new_cyclic(|weak| {
            let shrinker = alloc.reclaim().register_shrinker(Arc::new(GroupShrinker(weak.clone())));
            Group {
                alloc,
                budget: budget_bytes,
                state: Mutex::new(State::default()),
                totals: Totals::default(),
                shrinker,
            }
        })
    }

    /// The allocator the group's frames come from.
    #[must_use]
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// The budget in frames (of its bytes; headers take part of it).
    #[must_use]
    pub fn budget_frames(&self) -> u64 {
        self.budget / pagealloc::PAGE_SIZE as u64
    }

    /// The budget in bytes.
    #[must_use]
    pub fn budget_bytes(&self) -> u64 {
        self.budget
    }

    /// Bytes charged to the budget now: frames and headers of every page.
    #[must_use]
    pub fn charged_bytes(&self) -> u64 {
        self.state.lock().charged
    }

    /// Misses with createFlag 2, and misses with createFlag 1 that created
    /// nothing (SQLite then spills or asks again with 2).
    #[must_use]
    pub fn create_counts(&self) -> (u64, u64) {
        (self.totals.hard.load(Relaxed), self.totals.cheap_refused.load(Relaxed))
    }

    /// Frames the group's pages hold now.
    #[must_use]
    pub fn used_frames(&self) -> u64 {
        self.state.lock().used
    }

    /// Free the victims' frames and headers (call with the mutex dropped).
    /// `evicted`: they were evicted, not discarded (counted in the totals).
    pub(crate) fn release(&self, victims: Vec<Victim>, evicted: bool) {
        if evicted && !victims.is_empty() {
            self.totals.evictions.fetch_add(victims.len() as u64, Relaxed);
        }
        for v in victims {
            let r = self.alloc.free_pages(v.page.hdr().pfn, v.order);
            debug_assert!(r.is_ok(), "freeing a cache frame failed: {r:?}");
            // SAFETY: a victim was taken out of its map and lists under the
            // mutex (remove_page) and is freed once, here; SQLite discarded
            // it, or it was unpinned (SQLite holds no pointer to an
            // unpinned page) when evicted.
            unsafe { v.page.free_header() };
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.alloc.reclaim().unregister_shrinker(self.shrinker);
        // Caches hold an Arc, so none is open: every page was freed.
        debug_assert_eq!(self.state.get_mut().used, 0);
    }
}
