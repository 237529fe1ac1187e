//! A shard of a group: the caches whose ids fall in it, their maps and LRU
//! lists, and the shard's own LRU list over them, under one lock.
//!
//! A cache lives in shard `id % SHARDS`; ids are handed out lowest first,
//! so up to [`SHARDS`] open caches each have a shard, and lock, of their
//! own: a hit on one database never touches a line another database's
//! hits write. What a page fetch and unpin touch is its shard only; the
//! group's account (`budget`) is written on misses and evictions only.
//!
//! The group's global LRU order is the order of the unpin stamps (the
//! group's clock, `Group::stamp`): each shard's list is in stamp order,
//! and `Group`'s per-shard `heads` hold a lower bound of each list's
//! oldest stamp, which eviction reads without locks to pick the shard
//! holding the globally oldest page (`evict`).
//!
//! Invariants (under the shard's lock; `check` verifies them): a page is on
//! the shard's list iff its cache is purgeable and the page is unpinned,
//! and then it is on its cache's list too (`on_lru` set); stamps do not
//! decrease along the shard's list; the shard's `head` is at most the
//! stamp of its oldest page, and `u64::MAX` only if the list is empty;
//! `lru_eighths` is the sum over the shard's list of each page's eighths
//! of a frame ([`CacheState::eighths`]).

use crate::budget::Account;
use crate::frames::SubFrames;
use crate::lru::Lru;
use crate::page::{Kind, PagePtr, NO_SLOT};
use crate::CacheStats;
use pagealloc::{Pfn, PAGE_SIZE};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Shards per group: enough that the caches of a process with tens of
/// databases each have their own (their lock and lines), few enough that
/// eviction's look at every shard's oldest stamp reads 8 cache lines.
pub(crate) const SHARDS: usize = 64;

/// The page-number hash of a cache's map: one multiply (Fibonacci hashing),
/// as pcache1's `iKey % nHash` is one division. std's SipHash guards
/// against keys an attacker chooses; page numbers are SQLite's, and every
/// hit pays the hash under the shard lock.
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

/// One cache's state (under its shard's lock).
pub(crate) struct CacheState {
    pub(crate) map: KeyMap,
    /// This cache's unpinned pages, oldest first (purgeable caches only).
    pub(crate) lru: Lru,
    /// Order of a page's block (0 for pages that share frames).
    pub(crate) order: u32,
    pub(crate) sz_extra: usize,
    /// Heap bytes of one page's header with its extra area.
    pub(crate) hdr: u64,
    pub(crate) purgeable: bool,
    /// The soft limit (`xCachesize`), in pages.
    pub(crate) max: u64,
    pub(crate) n_pinned: u64,
    pub(crate) stats: CacheStats,
    /// The shared frames, for pages smaller than a frame (when sharing).
    pub(crate) sub: Option<SubFrames>,
    /// Above every key in the map (an upper bound, as pcache1's
    /// `iMaxKey`): `xTruncate` past it, which SQLite calls at the end of
    /// every write transaction, has nothing to drop and skips the walk.
    pub(crate) key_bound: u64,
}

impl CacheState {
    /// Map `key` to `p` (a page of this cache).
    pub(crate) fn insert(&mut self, key: u32, p: PagePtr) {
        self.map.insert(key, p);
        self.key_bound = self.key_bound.max(u64::from(key) + 1);
    }

    /// Bytes of one page's block (a whole frame for a page that shares one).
    pub(crate) fn block_bytes(&self) -> u64 {
        (PAGE_SIZE as u64) << self.order
    }

    /// Frames one page's block holds (1 for a page that shares one).
    pub(crate) fn block_frames(&self) -> u64 {
        1 << self.order
    }

    /// Eighths of a frame a page holds: what the shrinker counts.
    pub(crate) fn eighths(&self) -> u64 {
        match &self.sub {
            Some(s) => 8 / u64::from(s.slots()),
            None => 8 << self.order,
        }
    }

    /// Frames the cache's pages hold.
    pub(crate) fn frames_held(&self) -> u64 {
        self.sub.as_ref().map_or(self.map.len() as u64 * self.block_frames(), SubFrames::held)
    }

    /// Bytes charged for the cache's pages: their blocks and headers.
    pub(crate) fn charged(&self) -> u64 {
        self.frames_held() * PAGE_SIZE as u64 + self.map.len() as u64 * self.hdr
    }

    /// Whether a page of this cache can be taken whole by a cache whose
    /// pages have blocks of their own of `order`, with `sz_extra` bytes of
    /// extra area: its block is its own too, and its geometry the same.
    pub(crate) fn same_block(&self, order: u32, sz_extra: usize) -> bool {
        self.sub.is_none() && self.order == order && self.sz_extra == sz_extra
    }

    /// (frames, bytes) a new page of this cache is charged: its header, and
    /// its block unless it can have a free slot of a shared frame.
    pub(crate) fn new_page_charge(&mut self) -> (u64, u64) {
        if self.sub.as_mut().is_some_and(|s| s.free_slot().is_some()) {
            (0, self.hdr)
        } else {
            (self.block_frames(), self.block_bytes() + self.hdr)
        }
    }
}

/// Counters of a shard (summed by `Group::totals`), written under its lock
/// so that no hit writes a line another shard's hits write.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct Counts {
    pub(crate) fetches: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) evictions: u64,
    /// Misses with createFlag 2 ("every effort").
    pub(crate) hard: u64,
    /// Misses with createFlag 1 ("only if cheap") that created nothing.
    pub(crate) cheap_refused: u64,
}

/// Blocks and headers taken out of the caches, to free with the lock dropped.
#[derive(Default)]
pub(crate) struct Released {
    pub(crate) headers: Vec<PagePtr>,
    pub(crate) blocks: Vec<(Pfn, u32)>,
    /// Pages evicted (not discarded): counted in the totals.
    pub(crate) evicted: u64,
    /// Bytes of charge given back.
    pub(crate) bytes: u64,
    /// Frames given back.
    pub(crate) frames: u64,
}

/// One shard; see the module documentation.
pub(crate) struct Shard {
    /// Caches by `id / SHARDS`.
    pub(crate) caches: Vec<Option<CacheState>>,
    /// Unpinned pages of the shard's purgeable caches, oldest first.
    pub(crate) lru: Lru,
    pub(crate) lru_eighths: u64,
    pub(crate) counts: Counts,
    /// Unpins since this shard last ticked the group clock.
    pub(crate) unpins: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Self { caches: Vec::new(), lru: Lru::new(Kind::Shard), lru_eighths: 0, counts: Counts::default(), unpins: 0 }
    }
}

/// Where cache `id` lives: (shard, index in the shard).
pub(crate) fn place(id: u32) -> (usize, usize) {
    (id as usize % SHARDS, id as usize / SHARDS)
}

impl Shard {
    pub(crate) fn cache(&self, id: u32) -> &CacheState {
        self.caches[place(id).1].as_ref().expect("a cache SQLite destroyed")
    }
    pub(crate) fn cache_mut(&mut self, id: u32) -> &mut CacheState {
        self.caches[place(id).1].as_mut().expect("a cache SQLite destroyed")
    }

    /// Put an unpinned page of a purgeable cache on both LRU lists, newest,
    /// stamped `now`; `head` is the shard's oldest-stamp hint.
    pub(crate) fn lru_add(&mut self, id: u32, p: PagePtr, now: u64, head: &AtomicU64) {
        debug_assert!(!p.hdr().on_lru.load(Relaxed) && p.cache() == id);
        // Stamps never decrease along the list, also if the clock were to.
        let now = self.lru.last().map_or(now, |q| now.max(q.stamp()));
        p.set_stamp(now);
        p.hdr().on_lru.store(true, Relaxed);
        // The hint stays a lower bound of the oldest stamp: only an empty
        // shard's (u64::MAX) must be lowered. Written under this lock.
        if head.load(Relaxed) == u64::MAX {
            head.store(now, Relaxed);
        }
        self.lru.push_back(p);
        let c = self.cache_mut(id);
        c.lru.push_back(p);
        let e = c.eighths();
        self.lru_eighths += e;
    }

    /// Take a page off both LRU lists (no-op when it is not on them). The
    /// head hint stays: a lower bound (eviction corrects it).
    pub(crate) fn lru_del(&mut self, id: u32, p: PagePtr) {
        if !p.hdr().on_lru.load(Relaxed) {
            return;
        }
        p.hdr().on_lru.store(false, Relaxed);
        self.lru.remove(p);
        let c = self.cache_mut(id);
        c.lru.remove(p);
        let e = c.eighths();
        self.lru_eighths -= e;
    }

    /// Pin a page of cache `id` (no-op when pinned): off the LRU lists.
    #[inline]
    pub(crate) fn pin(&mut self, id: u32, p: PagePtr) {
        if !p.pinned() {
            self.lru_del(id, p);
            p.set_pinned(true);
            let c = self.cache_mut(id);
            c.n_pinned += 1;
            if let Some(s) = &mut c.sub {
                s.set_pinned(p.slot(), true);
            }
        }
    }

    /// Unpin a pinned page of cache `id` (the LRU lists are the caller's).
    pub(crate) fn unpin(&mut self, id: u32, p: PagePtr) {
        debug_assert!(p.pinned(), "xUnpin of an unpinned page");
        p.set_pinned(false);
        let c = self.cache_mut(id);
        c.n_pinned -= 1;
        if let Some(s) = &mut c.sub {
            s.set_pinned(p.slot(), false);
        }
    }

    /// Take page `key` out of cache `id`, pinned or not, uncharging it from
    /// `acct`; its header and (when no page is left on it) its block go to
    /// `out`, to free with the lock dropped.
    pub(crate) fn remove_page(&mut self, id: u32, key: u32, acct: &Account, out: &mut Released) -> Option<PagePtr> {
        let p = self.cache_mut(id).map.remove(&key)?;
        self.lru_del(id, p);
        let c = self.cache_mut(id);
        let pinned = p.pinned();
        if pinned {
            c.n_pinned -= 1;
        }
        let (mut frames, mut bytes) = (0, c.hdr);
        let block = match &mut c.sub {
            Some(s) => s.remove(p.slot(), pinned).map(|pfn| (pfn, 0)),
            None => Some((p.hdr().pfn, c.order)),
        };
        if let Some(b) = block {
            frames = c.block_frames();
            bytes += c.block_bytes();
            out.blocks.push(b);
        }
        acct.uncharge(frames, bytes);
        out.frames += frames;
        out.bytes += bytes;
        out.headers.push(p);
        Some(p)
    }

    /// Evict page `p` of cache `id` (unpinned) as an eviction.
    pub(crate) fn evict_page(&mut self, id: u32, p: PagePtr, acct: &Account, out: &mut Released) {
        debug_assert!(!p.pinned());
        self.cache_mut(id).stats.evictions += 1;
        self.counts.evictions += 1;
        out.evicted += 1;
        self.remove_page(id, p.key(), acct, out);
    }

    /// Evict the oldest unpinned page of cache `id`; false when none.
    pub(crate) fn evict_cache_oldest(&mut self, id: u32, acct: &Account, out: &mut Released) -> bool {
        let Some(p) = self.cache(id).lru.first() else { return false };
        self.evict_page(id, p, acct, out);
        true
    }

    /// Evict from this shard's oldest page, as reclaim should: a page with
    /// a block of its own, or a shared frame whose pages are all unpinned
    /// (all of them go: the frame is freed). When the oldest page's frame
    /// has a pinned neighbour, the next few pages are looked at for a page
    /// that frees a frame; failing that, the oldest goes alone (it frees
    /// its slot and header). False when the list is empty.
    pub(crate) fn evict_oldest(&mut self, acct: &Account, out: &mut Released) -> bool {
        /// Pages looked at past the oldest for one that frees a frame.
        const LOOK: usize = 8;
        let Some(first) = self.lru.first() else { return false };
        let mut pick = first;
        let mut cur = Some(first);
        for _ in 0..=LOOK {
            let Some(p) = cur else { break };
            if self.frees_frame(p) {
                pick = p;
                break;
            }
            cur = p.link(Kind::Shard, 1);
        }
        let id = pick.cache();
        let neighbours: Vec<PagePtr> = match &self.cache(id).sub {
            Some(s) if s.all_unpinned(pick.slot()) => s.neighbours(pick.slot()).collect(),
            _ => vec![pick],
        };
        for q in neighbours {
            self.evict_page(id, q, acct, out);
        }
        true
    }

    /// Whether evicting `p` (and its frame's other pages) frees a frame.
    fn frees_frame(&self, p: PagePtr) -> bool {
        p.slot() == NO_SLOT || self.cache(p.cache()).sub.as_ref().is_some_and(|s| s.all_unpinned(p.slot()))
    }
}
