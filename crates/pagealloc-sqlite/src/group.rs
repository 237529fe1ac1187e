//! A group of page caches sharing one allocator and one memory account
//! (SQLite's `PGroup` in pcache1.c, with the frames coming from pagealloc).
//!
//! The caches live in [`SHARDS`] shards, each under its own lock (`shard`):
//! a fetch or unpin takes its cache's shard lock only, so no single mutex
//! sits on the hit path. Pages leave in the group's global LRU order: each
//! unpinned page carries the group clock's stamp of its unpin
//! ([`Group::clock`]), each shard's list is in stamp order, and eviction
//! ([`Group::evict_global`]) takes the oldest page of the shard whose
//! oldest stamp is lowest, found from the per-shard `heads` hints without
//! taking any lock. A thread holds at most one shard lock at a time (only
//! `Group::check_invariants` takes them all, in index order), and frames
//! are allocated and freed with none held, because the allocator's direct
//! reclaim calls back into [`GroupShrinker`], which takes them.
//!
//! The account (`budget`) is of memory, in bytes: a page is charged its
//! block of frames (or its share of one, `frames`) and its header on the
//! heap with SQLite's extra area, so that what the caches hold, headers
//! included, stays within the budget, or within the hard cap when SQLite
//! asks with every effort and nothing is left to evict.
//!
//! Invariants (checked by `check_invariants`, all shard locks held): the
//! account's charged bytes and used frames are the sums over the open
//! caches of their blocks and headers, plus those in flight; reserved is
//! the sum over open caches of one page's charge; `heads[s]` is at most
//! the stamp of shard `s`'s oldest unpinned page, and `u64::MAX` only when
//! it has none.

use crate::budget::{Account, Overdraft};
use crate::page::PagePtr;
use crate::shard::{Counts, Released, Shard, SHARDS};
use pagealloc::{Gfp, PageAllocator, ShrinkControl, Shrinker};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

/// Unpins of one shard between two ticks of the group clock: pages of
/// different shards unpinned less than a tick apart may leave in either
/// order. Small enough that a shard doing work moves the clock while a
/// quiet shard's pages age; large enough that the clock's line, read on
/// every unpin, is seldom written (a tick per 64 unpins per busy shard).
pub(crate) const TICK: u32 = 64;

/// Evictions in a row that free no frame after which reclaim stops.
const FRAMELESS: u32 = 16;

/// Flags of every cache frame: reclaimable through our shrinker, as the
/// kernel's slab caches with shrinkers are; not movable (nothing migrates them).
pub(crate) const CACHE_GFP: Gfp = Gfp::RECLAIMABLE;

/// A value alone on its cache lines (two, for the adjacent-line prefetcher).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

/// A shard's lock (see the crate's Cargo.toml for why a spin lock).
pub(crate) type ShardLock = spin::mutex::SpinMutex<Shard, Backoff>;

/// How a shard lock's waiter waits: spinning (the holder runs on another
/// CPU and holds the lock for a few hundred nanoseconds at most), and at
/// every 64th turn giving its CPU away, in case the holder was preempted.
/// Waiting is rare: a shard's caches are used by one connection at a time
/// each, and only eviction and the checker reach into other shards.
pub(crate) struct Backoff;

impl spin::relax::RelaxStrategy for Backoff {
    #[inline]
    fn relax() {
        thread_local!(static TURNS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) });
        let turn = TURNS.with(|t| {
            t.set(t.get().wrapping_add(1));
            t.get()
        });
        if turn.is_multiple_of(64) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}
/// A held shard lock.
pub(crate) type ShardGuard<'a> = spin::mutex::SpinMutexGuard<'a, Shard>;

/// Cache ids, lowest free first, so that open caches spread over shards.
#[derive(Default)]
struct Ids {
    free: BTreeSet<u32>,
    next: u32,
}

/// What [`Group::evict_global`] did.
pub(crate) enum Evicted {
    /// The oldest page, of the asker's geometry, taken whole for reuse: out
    /// of its cache, its charge moved to in flight.
    Stolen(PagePtr),
    /// Pages evicted; their blocks and headers to free.
    Freed(Released),
}

/// Caches sharing one allocator and one budget. Made by [`crate::install`]
/// for the process, or by [`Group::new`] for tests and embedders.
pub struct Group {
    pub(crate) alloc: PageAllocator,
    pub(crate) acct: Account,
    pub(crate) shards: Box<[Padded<ShardLock>]>,
    /// Per shard: at most the stamp of its oldest unpinned page, or
    /// `u64::MAX` when it has none. Written under that shard's lock only.
    pub(crate) heads: Box<[AtomicU64]>,
    /// Pages under a frame share frames (`Config::share_frames`).
    pub(crate) share_frames: bool,
    /// The group clock (`stamp`): read on every unpin, advanced every
    /// `tick` unpins of a shard.
    clock: Padded<AtomicU64>,
    /// Unpins of a shard per tick ([`TICK`]; 1 makes the order exact, for
    /// tests of the order across shards).
    tick: AtomicU32,
    ids: Mutex<Ids>,
    pub(crate) caches_created: AtomicU64,
    shrinker: u64,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("budget", &self.acct.soft).field("hard_cap", &self.acct.hard).finish()
    }
}

/// The group's LRU as the allocator's shrinker: direct reclaim (any thread
/// whose allocation runs short) evicts the coldest unpinned pages of every
/// purgeable cache. Weak, so that the allocator inside the group does not keep
/// the group alive.
struct GroupShrinker(Weak<Group>);

impl Shrinker for GroupShrinker {
    fn count_objects(&self, _sc: &ShrinkControl) -> u64 {
        self.0.upgrade().map_or(0, |g| g.shards.iter().map(|s| s.0.lock().lru_eighths).sum::<u64>() / 8)
    }
    fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(g) = self.0.upgrade() else { return 0 };
        match g.evict_global(0, sc.nr_to_scan.max(1), None) {
            Evicted::Freed(out) => {
                let freed = out.frames;
                g.release(out);
                freed
            }
            Evicted::Stolen(_) => unreachable!("no steal asked"),
        }
    }
}

impl Group {
    /// A group over a new allocator: a budget of `soft` bytes, a hard cap
    /// of `hard`, pages under a frame sharing frames if `share_frames`.
    pub(crate) fn with_allocator(alloc: PageAllocator, soft: u64, hard: u64, share_frames: bool) -> Arc<Self> {
        Arc::new_cyclic(|weak| {
            let shrinker = alloc.reclaim().register_shrinker(Arc::new(GroupShrinker(weak.clone())));
            Group {
                alloc,
                acct: Account::new(soft, hard),
                shards: (0..SHARDS).map(|_| Padded(ShardLock::new(Shard::default()))).collect(),
                heads: (0..SHARDS).map(|_| AtomicU64::new(u64::MAX)).collect(),
                share_frames,
                clock: Padded(AtomicU64::new(0)),
                tick: AtomicU32::new(TICK),
                ids: Mutex::new(Ids::default()),
                caches_created: AtomicU64::new(0),
                shrinker,
            }
        })
    }

    /// The stamp of an unpin in shard `sh` (under its lock): the group
    /// clock, a counter that each shard advances once every [`TICK`] of its
    /// unpins. Stamps never decrease along a shard's list (the counter only
    /// grows, and the lock orders its reads), and a page unpinned a tick
    /// or more after another, in any shard, has a larger stamp. A counter
    /// rather than a time: reading the time cost about 50 ns an unpin here,
    /// as much as the rest of a fetch and unpin together; reading a line
    /// written once per 64 unpins costs a few.
    #[inline]
    pub(crate) fn stamp(&self, sh: &mut Shard) -> u64 {
        let now = self.clock.0.load(Relaxed);
        sh.unpins += 1;
        if sh.unpins >= self.tick.load(Relaxed) {
            sh.unpins = 0;
            self.clock.0.fetch_add(1, Relaxed);
        }
        now
    }

    /// Tick the group clock every `n` unpins of a shard (tests: 1 orders
    /// every unpin).
    #[cfg(test)]
    pub(crate) fn set_tick(&self, n: u32) {
        self.tick.store(n.max(1), Relaxed);
    }

    /// Lock shard `s`.
    #[inline]
    pub(crate) fn lock(&self, s: usize) -> ShardGuard<'_> {
        self.shards[s].0.lock()
    }

    /// A new cache id (lowest free).
    pub(crate) fn take_id(&self) -> u32 {
        let mut ids = self.ids.lock();
        ids.free.pop_first().unwrap_or_else(|| {
            ids.next += 1;
            ids.next - 1
        })
    }

    /// Caches open now (created and not destroyed).
    #[must_use]
    pub fn open_caches(&self) -> u64 {
        let ids = self.ids.lock();
        u64::from(ids.next) - ids.free.len() as u64
    }

    /// Give back the id of a destroyed cache.
    pub(crate) fn put_id(&self, id: u32) {
        self.ids.lock().free.insert(id);
    }

    /// The shard with the lowest oldest-page hint, and the lowest hint of
    /// the others (a bound no other shard's oldest page is under); None
    /// when every shard's list is empty.
    fn oldest_shard(&self) -> Option<(usize, u64)> {
        let (mut best, mut first, mut second) = (0, u64::MAX, u64::MAX);
        for (s, h) in self.heads.iter().enumerate() {
            let h = h.load(Relaxed);
            if h < first {
                (best, second, first) = (s, first, h);
            } else if h < second {
                second = h;
            }
        }
        (first != u64::MAX).then_some((best, second))
    }

    /// The lowest oldest-page hint of the shards other than `s`.
    pub(crate) fn oldest_hint_except(&self, s: usize) -> u64 {
        self.heads.iter().enumerate().filter(|&(t, _)| t != s).map(|(_, h)| h.load(Relaxed)).min().unwrap_or(u64::MAX)
    }

    /// Evict unpinned pages of any purgeable cache, oldest first, until at
    /// least `bytes` bytes and `frames` frames are freed or none is left.
    /// With `steal` (a block order and extra size), when the oldest page
    /// has that geometry, take it whole instead (pcache1 recycles its
    /// group's LRU page in place the same way). Takes one shard lock at a
    /// time; the caller holds none, and frees what comes back. Asked for
    /// frames (reclaim), it stops after [`FRAMELESS`] evictions in a row
    /// that free none (pages whose shared frames have pinned neighbours):
    /// evicting more of them would empty the caches and free nothing.
    pub(crate) fn evict_global(&self, bytes: u64, frames: u64, steal: Option<(u32, usize)>) -> Evicted {
        let mut out = Released::default();
        // Each stale hint met is corrected, so the retries are bounded by
        // the shards whose oldest pages others take meanwhile.
        let (mut stale, mut frameless) = (0, 0);
        while (out.bytes < bytes || out.frames < frames) && stale < 4 * SHARDS && frameless < FRAMELESS {
            let Some((s, bound)) = self.oldest_shard() else { break };
            let mut sh = self.lock(s);
            let real = sh.lru.first().map_or(u64::MAX, PagePtr::stamp);
            self.heads[s].store(real, Relaxed);
            if real == u64::MAX || real > bound {
                stale += 1;
                continue;
            }
            if let (Some(geometry), true) = (steal, out.headers.is_empty()) {
                if let Some(p) = self.take_oldest(&mut sh, geometry) {
                    self.heads[s].store(sh.lru.first().map_or(u64::MAX, PagePtr::stamp), Relaxed);
                    return Evicted::Stolen(p);
                }
            }
            // Evict from this shard while its oldest page is the group's.
            while (out.bytes < bytes || out.frames < frames)
                && frameless < FRAMELESS
                && sh.lru.first().is_some_and(|p| p.stamp() <= bound)
            {
                let before = out.frames;
                sh.evict_oldest(&self.acct, &mut out);
                frameless = if frames > 0 && out.frames == before { frameless + 1 } else { 0 };
            }
            self.heads[s].store(sh.lru.first().map_or(u64::MAX, PagePtr::stamp), Relaxed);
        }
        Evicted::Freed(out)
    }

    /// Take the shard's oldest page out of its cache for reuse, when its
    /// block is its own and of `geometry`; its charge stays, in flight.
    fn take_oldest(&self, sh: &mut Shard, (order, sz_extra): (u32, usize)) -> Option<PagePtr> {
        let p = sh.lru.first()?;
        let id = p.cache();
        if !sh.cache(id).same_block(order, sz_extra) {
            return None;
        }
        sh.lru_del(id, p);
        let c = sh.cache_mut(id);
        c.map.remove(&p.key());
        c.stats.evictions += 1;
        let (frames, bytes) = (c.block_frames(), c.block_bytes() + c.hdr);
        sh.counts.evictions += 1;
        self.acct.in_flight(frames, bytes, true);
        Some(p)
    }

    /// Free what was taken out of the caches (call with no lock held).
    pub(crate) fn release(&self, out: Released) {
        for (pfn, order) in out.blocks {
            let r = self.alloc.free_pages(pfn, order);
            debug_assert!(r.is_ok(), "freeing a cache frame failed: {r:?}");
        }
        for p in out.headers {
            // SAFETY: each header was taken out of its map and lists under
            // its shard's lock (remove_page) and is freed once, here;
            // SQLite discarded it, or it was unpinned (SQLite holds no
            // pointer to an unpinned page) when evicted.
            unsafe { p.free_header() };
        }
    }

    /// The counters of every shard, summed.
    pub(crate) fn counts(&self) -> Counts {
        let mut t = Counts::default();
        for s in self.shards.iter() {
            let c = s.0.lock().counts;
            t.fetches += c.fetches;
            t.hits += c.hits;
            t.misses += c.misses;
            t.evictions += c.evictions;
            t.hard += c.hard;
            t.cheap_refused += c.cheap_refused;
        }
        t
    }

    /// The allocator the group's frames come from.
    #[must_use]
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// The budget in frames (of its bytes; headers take part of it).
    #[must_use]
    pub fn budget_frames(&self) -> u64 {
        self.acct.soft / pagealloc::PAGE_SIZE as u64
    }

    /// The budget in bytes: createFlag 1 is served within it.
    #[must_use]
    pub fn budget_bytes(&self) -> u64 {
        self.acct.soft
    }

    /// The hard cap in bytes: createFlag 2 may go over the budget up to it.
    #[must_use]
    pub fn hard_cap_bytes(&self) -> u64 {
        self.acct.hard
    }

    /// Bytes charged now: frames and headers of every page.
    #[must_use]
    pub fn charged_bytes(&self) -> u64 {
        self.acct.charged()
    }

    /// Bytes over the budget now, the peak, and the charges that went over.
    #[must_use]
    pub fn overdraft(&self) -> Overdraft {
        self.acct.overdraft()
    }

    /// Misses with createFlag 2, and misses with createFlag 1 that created
    /// nothing (SQLite then spills or asks again with 2).
    #[must_use]
    pub fn create_counts(&self) -> (u64, u64) {
        let t = self.counts();
        (t.hard, t.cheap_refused)
    }

    /// Frames the group's pages hold now.
    #[must_use]
    pub fn used_frames(&self) -> u64 {
        self.acct.used()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.alloc.reclaim().unregister_shrinker(self.shrinker);
        // Caches hold an Arc, so none is open: every page was freed.
        debug_assert_eq!(self.acct.used(), 0);
    }
}
