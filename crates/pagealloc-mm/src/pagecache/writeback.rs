//! Background writeback and dirty throttling (the kernel's flusher threads,
//! `wb_start_background_writeback`, and `balance_dirty_pages`), under the
//! limits of `vmscan::dirty` (`dirty_background_ratio`, `dirty_ratio`).
//!
//! - **Dirty queue.** Every clean-to-dirty transition of a cached page pushes
//!   the page's owner word (mapping slot and index) at the back of one FIFO,
//!   so the queue's front holds the pages dirtied longest ago (the kernel
//!   keeps inodes in `dirtied_when` order; one queue of pages is the same
//!   order at page grain). Invariant: every dirty page has at least one entry
//!   (pushed after its `DIRTY` bit is set; a failed writeback that re-dirties
//!   a page pushes it again; migration keeps the owner word). Entries may be
//!   stale (the page was cleaned, deleted or reclaimed): popping one looks
//!   the page up and writes it back only if it is still cached there and
//!   dirty, and writing a dirty page back early is always correct. The
//!   flusher drops stale entries when the queue grows past twice the dirty
//!   pages (plus [`COMPACT_SLACK`]), so it stays bounded.
//! - **Flusher.** One thread per page cache, started with it and stopped
//!   (joined) on drop. Woken ([`FlushWake`]) by a writer that leaves
//!   `nr_dirty` above the background threshold, and every 100 ms anyway; it
//!   writes back the oldest dirty pages (writeback bit set and ended around
//!   each write, `Mapping::writeback_locked`) until `nr_dirty` is at or below
//!   the background threshold.
//! - **Throttling.** A writer about to dirty a clean page while
//!   `nr_dirty + nr_writeback` is at or above the dirty limit is throttled:
//!   it wakes the flusher and writes back the oldest dirty pages itself until
//!   below the limit (waiting a little when all of them are already being
//!   written by others); if writeback makes no progress for [`MAX_PAUSE`]
//!   (the kernel's cap on one pause; failing writes), it goes on, counted. Concurrent writers may each pass the check before
//!   any of them dirties its page, so `nr_dirty + nr_writeback` stays at most
//!   the limit plus one page per concurrent writer (the slack the tests
//!   allow).
//!
//! [`FlushWake`]'s protocol (no lost wakeups): a waker sets `woken` with a
//! swap and unparks the flusher only if it changed it from false; the
//! flusher consumes the flag with a swap before each pass and parks only
//! when it was false. Both swaps are AcqRel on one word, so either the
//! flusher's consumption reads the waker's flag (and its pass sees the
//! waker's dirty page), or the waker's swap comes after it and unparks the
//! flusher (a park after an unpark returns at once). The flusher registers
//! its thread before its first check of `woken`, under the mutex wakers read
//! it under. `stop` is set before a final unpark; the flusher checks it only
//! after finding no wakeup pending, and once it reads it set it looks for a
//! pending wakeup once more (a wake made before the stop is served). Modelled
//! in `loom_tests` (`loom_flusher_wakeups_are_never_lost`).

// Under loom the flusher thread is not started (its wakeup is modelled alone).
#![cfg_attr(loom, allow(dead_code))]

use super::handle::CacheLock;
use super::mapping::{Mapping, MappingInner};
use super::CacheInner;
use pagealloc_core::page::flags::DIRTY;
use pagealloc_core::pageref;
use pagealloc_core::sync::{AtomicBool, AtomicU64, Mutex, Ordering};
use pagealloc_core::types::Pfn;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Pages the flusher writes back per queue visit.
const FLUSH_BATCH: usize = 32;
/// Pages a throttled writer writes back per round.
const THROTTLE_BATCH: usize = 8;
/// The longest a throttled writer waits with no writeback progress (the
/// kernel's `MAX_PAUSE`, 200 ms); past it the writer goes on (counted).
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(200);
/// Stale entries the dirty queue may hold beyond twice the dirty pages.
const COMPACT_SLACK: usize = 1024;
/// How often the flusher looks without being woken.
const FLUSH_PERIOD: Duration = Duration::from_millis(100);

/// The flusher's wakeup: see the module doc.
pub(crate) struct FlushWake {
    woken: AtomicBool,
    stop: AtomicBool,
    flusher: Mutex<Option<pagealloc_core::sync::thread::Thread>>,
}

/// Why [`FlushWake::wait`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woke {
    /// A wakeup was pending (consumed).
    Woken,
    /// Nothing pending (timeout or a stale unpark).
    Idle,
    /// Stop was asked and no wakeup is pending.
    Stop,
}

impl FlushWake {
    pub(crate) fn new() -> Self {
        Self { woken: AtomicBool::new(false), stop: AtomicBool::new(false), flusher: Mutex::new(None) }
    }

    /// The flusher: register this thread as the one to unpark.
    pub(crate) fn register(&self) {
        *self.flusher.lock() = Some(pagealloc_core::sync::thread::current());
    }

    fn unpark(&self) {
        if let Some(t) = &*self.flusher.lock() {
            t.unpark();
        }
    }

    /// Wake the flusher (cheap when a wakeup is pending already).
    pub(crate) fn wake(&self) {
        if !self.woken.swap(true, Ordering::AcqRel) {
            self.unpark();
        }
    }

    /// Ask the flusher to stop once no wakeup is pending.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.unpark();
    }

    fn take(&self) -> Option<Woke> {
        if self.woken.swap(false, Ordering::AcqRel) {
            return Some(Woke::Woken);
        }
        if !self.stop.load(Ordering::Acquire) {
            return None;
        }
        // Stopping: a wake made before the stop was asked (and so before
        // the stop we just read) is still served first. Without this second
        // look, a wake whose swap came after our first one would be lost
        // (found by the loom model).
        Some(if self.woken.swap(false, Ordering::AcqRel) { Woke::Woken } else { Woke::Stop })
    }

    /// The flusher: consume a pending wakeup, or park until one comes (or,
    /// outside loom, `timeout` passes).
    pub(crate) fn wait(&self, timeout: Duration) -> Woke {
        if let Some(w) = self.take() {
            return w;
        }
        #[cfg(loom)]
        {
            let _ = timeout;
            pagealloc_core::sync::thread::park();
        }
        #[cfg(not(loom))]
        pagealloc_core::sync::thread::park_timeout(timeout);
        self.take().unwrap_or(Woke::Idle)
    }
}

/// Counters of the flusher and of throttled writers (this crate's own, not
/// the kernel's: see [`super::PageCache::writeback_stats`]).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, PageCache, PageCacheConfig, WritebackStats};
/// let a = std::sync::Arc::new(PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap());
/// let cache = PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap();
/// let s: WritebackStats = cache.writeback_stats();
/// assert_eq!((s.throttled, s.flusher_written), (0, 0)); // nothing written yet
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WritebackStats {
    /// Page dirtyings that found the dirty limit reached (writers throttled).
    pub throttled: u64,
    /// Pages written back by throttled writers themselves.
    pub throttle_written: u64,
    /// Pauses of throttled writers that found nothing to write themselves.
    pub throttle_waits: u64,
    /// Throttled writers let go after `MAX_PAUSE` (200 ms) over the limit
    /// with no writeback progress.
    pub throttle_timeouts: u64,
    /// Flusher passes that found `nr_dirty` above the background threshold.
    pub flusher_runs: u64,
    /// Pages the flusher wrote back.
    pub flusher_written: u64,
    /// The most `nr_dirty + nr_writeback` seen right after a dirtying.
    pub max_dirty: u64,
    /// The most `nr_dirty + nr_writeback` was above the dirty limit then in
    /// force, right after a dirtying (0: never above).
    pub max_over_limit: u64,
    /// The lowest and highest dirty limit in force at a dirtying (the limit
    /// follows the memory the page cache can use, which moves a little as
    /// pages sit on per-CPU lists and LRU batches); (0, 0) before any.
    pub limit_range: (u64, u64),
    /// Entries in the dirty queue now.
    pub queued: u64,
}

impl fmt::Display for WritebackStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = [
            ("dirty_throttled", self.throttled),
            ("dirty_throttle_written", self.throttle_written),
            ("dirty_throttle_waits", self.throttle_waits),
            ("dirty_throttle_timeouts", self.throttle_timeouts),
            ("flusher_runs", self.flusher_runs),
            ("flusher_written", self.flusher_written),
            ("dirty_max", self.max_dirty),
            ("dirty_max_over_limit", self.max_over_limit),
            ("dirty_limit_min", self.limit_range.0),
            ("dirty_limit_max", self.limit_range.1),
            ("dirty_queued", self.queued),
        ];
        for (k, v) in rows {
            writeln!(f, "{k} {v}")?;
        }
        Ok(())
    }
}

/// The page cache's writeback state: see the module doc.
pub(crate) struct Writeback {
    queue: Mutex<VecDeque<u64>>,
    pub(crate) wake: Arc<FlushWake>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    throttled: AtomicU64,
    throttle_written: AtomicU64,
    throttle_waits: AtomicU64,
    throttle_timeouts: AtomicU64,
    flusher_runs: AtomicU64,
    flusher_written: AtomicU64,
    max_dirty: AtomicU64,
    max_over_limit: AtomicU64,
    limit_min: AtomicU64,
    limit_max: AtomicU64,
}

impl Writeback {
    pub(crate) fn new() -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            wake: Arc::new(FlushWake::new()),
            thread: Mutex::new(None),
            throttled: AtomicU64::new(0),
            throttle_written: AtomicU64::new(0),
            throttle_waits: AtomicU64::new(0),
            throttle_timeouts: AtomicU64::new(0),
            flusher_runs: AtomicU64::new(0),
            flusher_written: AtomicU64::new(0),
            max_dirty: AtomicU64::new(0),
            max_over_limit: AtomicU64::new(0),
            limit_min: AtomicU64::new(u64::MAX),
            limit_max: AtomicU64::new(0),
        }
    }

    pub(crate) fn stats(&self) -> WritebackStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WritebackStats {
            throttled: r(&self.throttled),
            throttle_written: r(&self.throttle_written),
            throttle_waits: r(&self.throttle_waits),
            throttle_timeouts: r(&self.throttle_timeouts),
            flusher_runs: r(&self.flusher_runs),
            flusher_written: r(&self.flusher_written),
            max_dirty: r(&self.max_dirty),
            max_over_limit: r(&self.max_over_limit),
            limit_range: match r(&self.limit_min) {
                u64::MAX => (0, 0),
                lo => (lo, r(&self.limit_max)),
            },
            queued: self.queue.lock().len() as u64,
        }
    }

    /// Queue a page that just became dirty (or was re-dirtied by a failed
    /// write).
    pub(crate) fn push(&self, owner_word: u64) {
        self.queue.lock().push_back(owner_word);
    }

    /// Stop and join the flusher (idempotent).
    pub(crate) fn stop(&self) {
        self.wake.stop();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

/// `nr_dirty`, `nr_writeback` now.
fn dirty_now(c: &CacheInner) -> (u64, u64) {
    let g = &c.alloc.core.vmscan.gauges;
    (g.nr_dirty.load(Ordering::Relaxed), g.nr_writeback.load(Ordering::Relaxed))
}

/// Start the page cache's flusher thread.
pub(crate) fn start(c: &Arc<CacheInner>) {
    let weak = Arc::downgrade(c);
    let wake = c.writeback.wake.clone();
    c.alloc.refresh_dirty_thresholds();
    let t = std::thread::Builder::new().name("flusher".into()).spawn(move || {
        pagealloc_core::cpu::block_async_signals();
        run(&weak, &wake);
    });
    if let Ok(t) = t {
        *c.writeback.thread.lock() = Some(t);
    }
}

fn run(weak: &Weak<CacheInner>, wake: &FlushWake) {
    wake.register();
    loop {
        if wake.wait(FLUSH_PERIOD) == Woke::Stop {
            return;
        }
        let Some(c) = weak.upgrade() else { return };
        flush_pass(&c, wake);
    }
}

/// One flusher pass: refresh the thresholds, drop stale queue entries if
/// the queue grew, and write back the oldest dirty pages while `nr_dirty` is
/// above the background threshold (at most one visit of each entry queued
/// now, so failing writes cannot keep it spinning).
pub(crate) fn flush_pass(c: &CacheInner, wake: &FlushWake) -> u64 {
    let t = c.alloc.refresh_dirty_thresholds();
    let wb = &c.writeback;
    let queued = wb.queue.lock().len();
    if queued > 2 * dirty_now(c).0 as usize + COMPACT_SLACK {
        compact(c);
    }
    if dirty_now(c).0 <= t.background {
        return 0;
    }
    wb.flusher_runs.fetch_add(1, Ordering::Relaxed);
    let mut budget = wb.queue.lock().len();
    let mut written = 0;
    while budget > 0 && dirty_now(c).0 > t.background && !wake.stop.load(Ordering::Acquire) {
        let n = FLUSH_BATCH.min(budget);
        budget -= n;
        written += write_oldest(c, n);
    }
    wb.flusher_written.fetch_add(written, Ordering::Relaxed);
    written
}

/// Keep only the queue entries whose page is cached and dirty now (once
/// each, in order); entries pushed meanwhile stay behind them. See the
/// module doc for why a page dirtied during the walk keeps an entry.
fn compact(c: &CacheInner) {
    let old = std::mem::take(&mut *c.writeback.queue.lock());
    let mut seen = std::collections::HashSet::with_capacity(old.len() / 2);
    let mut keep: VecDeque<u64> = old
        .into_iter()
        .filter(|&w| {
            let Some((slot, index)) = CacheInner::split_owner(w) else { return false };
            let dirty = c.mapping_at(slot).is_some_and(|m| {
                m.shard(index).read().get(&index).is_some_and(|&p| {
                    c.alloc.core.mm.page(u64::from(p)).flags() & DIRTY != 0
                        && c.owners[p as usize].load(Ordering::Acquire) == w
                })
            });
            dirty && seen.insert(w)
        })
        .collect();
    let mut q = c.writeback.queue.lock();
    keep.extend(q.drain(..));
    *q = keep;
}

/// A reference on the page cached at `index` of `m`, if any.
fn get_ref(c: &CacheInner, m: &MappingInner, index: u64) -> Option<Pfn> {
    let s = m.shard(index).read();
    let &p = s.get(&index)?;
    pageref::try_get(&c.alloc.core.mm.page(u64::from(p)).flags).then(|| Pfn::from_u32(p))
}

/// Pop up to `nr` entries from the front of the dirty queue and write back
/// those pages that are still cached there and dirty; returns the pages
/// written back and clean (a failed write does not count).
pub(crate) fn write_oldest(c: &CacheInner, nr: usize) -> u64 {
    let batch: Vec<u64> = {
        let mut q = c.writeback.queue.lock();
        let k = nr.min(q.len());
        q.drain(..k).collect()
    };
    let core = &c.alloc.core;
    let mut written = 0;
    for w in batch {
        let Some((slot, index)) = CacheInner::split_owner(w) else { continue };
        let Some(m) = c.mapping_at(slot) else { continue };
        let Some(pfn) = get_ref(c, &m, index) else { continue };
        let p = pfn.as_u64();
        if core.mm.page(p).flags() & DIRTY != 0 {
            let lock = CacheLock::lock(&c.alloc, pfn);
            // Still this mapping's page (not deleted meanwhile) and dirty.
            let ours = c.owners[p as usize].load(Ordering::Acquire) == w
                && c.owner(p).is_some_and(|(o, _)| Arc::ptr_eq(&o, &m));
            if ours && core.mm.page(p).flags() & DIRTY != 0 {
                Mapping::writeback_locked(c, &m, lock, pfn, index);
                // A failed write leaves it dirty (and queued again): not
                // progress.
                if core.mm.page(p).flags() & DIRTY == 0 {
                    written += 1;
                }
            }
        }
        let _ = core.put_page(pfn);
    }
    written
}

/// A page at `owner_word` was just dirtied (clean to dirty): queue it, keep
/// the high-water marks, refresh the thresholds every `REFRESH_EVERY`
/// dirtyings, and wake the flusher above the background threshold.
pub(crate) fn dirtied(c: &CacheInner, owner_word: u64) {
    let wb = &c.writeback;
    wb.push(owner_word);
    let lim = &c.alloc.core.vmscan.dirty;
    if lim.dirtied.fetch_add(1, Ordering::Relaxed).is_multiple_of(crate::mm::vmscan::dirty::REFRESH_EVERY) {
        c.alloc.refresh_dirty_thresholds();
    }
    let (bg, limit) = lim.cached();
    let (dirty, writeback) = dirty_now(c);
    // High-water marks: a load first, so that writers share the lines
    // read-only until a mark actually moves.
    let raise = |a: &AtomicU64, v: u64| {
        if v > a.load(Ordering::Relaxed) {
            a.fetch_max(v, Ordering::Relaxed);
        }
    };
    raise(&wb.max_dirty, dirty + writeback);
    raise(&wb.limit_max, limit);
    if limit < wb.limit_min.load(Ordering::Relaxed) {
        wb.limit_min.fetch_min(limit, Ordering::Relaxed);
    }
    if dirty + writeback > limit {
        raise(&wb.max_over_limit, dirty + writeback - limit);
    }
    if dirty > bg {
        wb.wake.wake();
    }
}

/// `balance_dirty_pages`: called by a writer before it dirties a clean page
/// (holding no page lock). See the module doc.
pub(crate) fn balance_dirty_pages(c: &CacheInner) {
    let lim = &c.alloc.core.vmscan.dirty;
    let over = |limit: u64| {
        let (d, w) = dirty_now(c);
        d + w >= limit
    };
    if !over(lim.cached().1) {
        return;
    }
    let wb = &c.writeback;
    let limit = c.alloc.refresh_dirty_thresholds().limit;
    if !over(limit) {
        return;
    }
    wb.throttled.fetch_add(1, Ordering::Relaxed);
    // The pause is counted from the last progress (a page this writer wrote
    // back, or fewer dirty + writeback pages than it last saw), so that a
    // writer preempted on a busy machine is not let through while writeback
    // still moves: only writeback that stalls (failing writes) lets it go.
    let mut start = Instant::now();
    let mut idle = 0u32;
    let mut last = u64::MAX;
    while over(limit) {
        wb.wake.wake();
        let n = write_oldest(c, THROTTLE_BATCH);
        wb.throttle_written.fetch_add(n, Ordering::Relaxed);
        let (d, w) = dirty_now(c);
        if n > 0 || d + w < last {
            start = Instant::now();
        }
        last = d + w;
        if n > 0 || !over(limit) {
            idle = 0;
            continue;
        }
        if start.elapsed() >= MAX_PAUSE {
            wb.throttle_timeouts.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Everything dirty is being written by others: wait for them.
        wb.throttle_waits.fetch_add(1, Ordering::Relaxed);
        idle += 1;
        if idle < 16 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
