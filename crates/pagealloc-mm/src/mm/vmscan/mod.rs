//! Reclaim, all of it (the kernel's mm/vmscan.c and mm/swap.c): per-node
//! LRU lists of page-cache pages, per-CPU batches of pages waiting to join
//! them and page references (`put`), the LRU scan (`scan`), the shrinker
//! registry and direct reclaim (here), kswapd's wakeups (`wake`) and its
//! threads (`kswapd`), and the gauges `nr_dirty` / `nr_writeback` with the
//! dirty thresholds (`dirty`). The page cache fills the lists, registers
//! itself as a shrinker, and evicts the pages the scan isolates
//! (`pagecache::evict`); the allocation slow path wakes kswapd and calls
//! [`Vmscan::direct_reclaim`] through the core's slow-path hooks (`Mm`'s)
//! before it drains per-CPU lists and fails.
//!
//! LRU lists are threaded through the descriptors' `next`/`prev` links
//! (an allocated page uses neither), one pair (inactive, active) per node,
//! under that node's LRU lock. Invariants:
//! - `LRU` is set on a page iff it is linked on one of its node's lists; it is
//!   set and cleared only under that node's LRU lock; `ACTIVE` on a page with
//!   `LRU` says which list.
//! - A page on the lists, in a per-CPU batch or isolated by reclaim has a
//!   reference count above 0: a batch and an isolation each hold one
//!   reference; the lists themselves hold none (as in the kernel), so the last
//!   `put_page` takes the page off its list under the LRU lock before it frees
//!   it, and isolation only takes pages it could get a reference on.
//! - `nr_inactive`/`nr_active` equal the lists' lengths (under the lock).
//!
//! Lock order, for the whole reclaim design (outermost first; a thread holds
//! locks only in this order, and trylocks where it must go against it):
//! 1. page lock (`LOCKED`): reclaim only ever try-locks a page;
//! 2. a mapping's shard lock (the page cache's `mapping`), held for one map
//!    operation;
//! 3. a node's LRU lock (here), never held while calling out;
//! 4. a per-CPU LRU batch lock (here), dropped before the LRU lock is taken;
//! 5. per-CPU page lists and the zone lock (the allocator's own, taken by the
//!    frees reclaim does, with none of the above held).
//!
//! The page cache's dirty queue lock (`pagecache::writeback`) is a leaf: held
//! only to push or pop entries, with nothing taken under it.
//!
//! Allocation never happens under 2..4; shrinkers are called with none held.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod dirty;
pub(crate) mod kswapd;
pub mod lru;
mod put;
pub(crate) mod scan;
pub mod wake;

use crossbeam_utils::CachePadded;
use lru::NodeLru;
use pagealloc_core::memmap::MemMap;
use pagealloc_core::sync::{AtomicU64, Mutex, Ordering, RwLock};
use pagealloc_core::types::Order;
use std::cell::Cell;
use std::sync::Arc;

/// Pages per per-CPU LRU batch (the kernel's `PAGEVEC_SIZE`/folio batch: 15).
pub const LRU_BATCH: usize = 15;

/// What a shrinker is asked to do (the kernel's `shrink_control`).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator, ShrinkControl, Shrinker};
/// use std::sync::{Arc, Mutex};
/// struct Spy(Mutex<Vec<ShrinkControl>>); // frees nothing, notes each call
/// impl Shrinker for Spy {
///     fn count_objects(&self, sc: &ShrinkControl) -> u64 { self.0.lock().unwrap().push(*sc); 0 }
///     fn scan_objects(&self, _: &ShrinkControl) -> u64 { 0 }
/// }
/// let a = PageAllocator::new(Config::small(2 << 20)).unwrap();
/// let spy = Arc::new(Spy(Mutex::new(Vec::new())));
/// a.reclaim().register_shrinker(spy.clone());
/// while a.alloc_pages(Gfp::KERNEL, 0).is_ok() {} // until the allocator reclaims
/// assert!(spy.0.lock().unwrap().iter().any(|sc| sc.direct)); // asked by direct reclaim
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ShrinkControl {
    /// Objects to scan.
    pub nr_to_scan: u64,
    /// The node under pressure (`None`: any).
    pub nid: Option<u32>,
    /// True for direct reclaim (an allocation is waiting), false for kswapd.
    pub direct: bool,
}

/// A cache that gives memory back under pressure (the kernel's `struct
/// shrinker`): `count_objects` says how much it could free, `scan_objects`
/// frees up to `nr_to_scan` and returns the pages freed. Called with no
/// allocator lock held; it must not block on memory. A call that panics
/// counts as 0 (nothing to free, nothing freed): the panic is caught, so
/// the allocation that reclaimed goes on.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator, ShrinkControl, Shrinker};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// /// A cache that could free `held` pages (freeing is only counted here).
/// struct Cache { held: AtomicU64 }
/// impl Shrinker for Cache {
///     fn count_objects(&self, _: &ShrinkControl) -> u64 {
///         self.held.load(Ordering::Relaxed)
///     }
///     fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
///         let n = sc.nr_to_scan.min(self.held.load(Ordering::Relaxed));
///         self.held.fetch_sub(n, Ordering::Relaxed);
///         n
///     }
/// }
/// let a = PageAllocator::new(Config::small(8 << 20)).unwrap();
/// let id = a.reclaim().register_shrinker(Arc::new(Cache { held: AtomicU64::new(10) }));
/// assert!(a.reclaim().unregister_shrinker(id));
/// ```
pub trait Shrinker: Send + Sync {
    /// Freeable objects (pages) now; 0 skips the scan.
    fn count_objects(&self, sc: &ShrinkControl) -> u64;
    /// Free up to `sc.nr_to_scan` objects; returns the pages freed.
    fn scan_objects(&self, sc: &ShrinkControl) -> u64;
}

thread_local! {
    /// This thread is reclaiming (the kernel's PF_MEMALLOC): an allocation
    /// it makes does not reclaim again.
    static IN_RECLAIM: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` marked as reclaiming; None if this thread already is.
pub(crate) fn as_reclaimer<R>(f: impl FnOnce() -> R) -> Option<R> {
    if IN_RECLAIM.with(|c| c.replace(true)) {
        return None;
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_RECLAIM.with(|c| c.set(false));
        }
    }
    let _r = Reset;
    Some(f())
}

/// Gauges the page cache keeps (the kernel's node stats `nr_dirty`,
/// `nr_writeback`, and per zone `nr_zone_write_pending`): totals, read by
/// writers' throttling and `vmstat`, and per zone (global zone index),
/// read by `zoneinfo`. Change them only through [`Gauges::dirty`] and
/// [`Gauges::writeback`], which keep the two in step.
#[derive(Debug)]
pub struct Gauges {
    /// Dirty pages (`nr_dirty`).
    pub nr_dirty: AtomicU64,
    /// Pages under writeback (`nr_writeback`).
    pub nr_writeback: AtomicU64,
    /// Pages whose writeback ended with a successful write (`nr_written`).
    pub nr_written: AtomicU64,
    /// Per zone: [dirty, writeback].
    zones: Box<[[AtomicU64; 2]]>,
}

impl Gauges {
    fn new(nr_zones: usize) -> Self {
        Self {
            nr_dirty: AtomicU64::new(0),
            nr_writeback: AtomicU64::new(0),
            nr_written: AtomicU64::new(0),
            zones: (0..nr_zones).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect(),
        }
    }
    fn add(total: &AtomicU64, zone: Option<&AtomicU64>, up: bool) {
        for c in std::iter::once(total).chain(zone) {
            if up {
                c.fetch_add(1, Ordering::Relaxed);
            } else {
                c.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
    /// One dirty page more (`up`) or less in zone `zone`.
    pub fn dirty(&self, zone: usize, up: bool) {
        Self::add(&self.nr_dirty, self.zones.get(zone).map(|z| &z[0]), up);
    }
    /// One page under writeback more (`up`) or less in zone `zone`.
    pub fn writeback(&self, zone: usize, up: bool) {
        Self::add(&self.nr_writeback, self.zones.get(zone).map(|z| &z[1]), up);
    }
    /// Zone `zone`'s (dirty, writeback) pages (racy).
    pub fn zone(&self, zone: usize) -> (u64, u64) {
        self.zones.get(zone).map_or((0, 0), |z| (z[0].load(Ordering::Relaxed), z[1].load(Ordering::Relaxed)))
    }
}

/// See the module doc.
pub struct Vmscan {
    /// Each node's LRU lists.
    pub(crate) lrus: Box<[CachePadded<Mutex<NodeLru>>]>,
    /// Per-CPU-slot batches of pages (each holding a reference) waiting to
    /// join an LRU list.
    pub batches: Box<[CachePadded<Mutex<Vec<u32>>>]>,
    shrinkers: RwLock<Vec<(u64, Arc<dyn Shrinker>)>>,
    next_shrinker: AtomicU64,
    /// Dirty and writeback counts.
    pub gauges: Gauges,
    /// A page cache is attached (at most one per allocator: the LRU lists
    /// hold its pages, and only it can reclaim them).
    pub(crate) cache_attached: pagealloc_core::sync::AtomicBool,
    /// Per-node kswapd wakeups (the threads: `kswapd`).
    pub kswapd: wake::KswapdWake,
    /// Dirty limits (`dirty_ratio`, `dirty_background_ratio`).
    pub dirty: dirty::DirtyLimits,
}

impl Vmscan {
    /// Empty lists and batches for `nr_nodes` nodes, `nr_zones` zones and
    /// `nr_cpus` CPU slots, no shrinker.
    pub fn new(nr_nodes: usize, nr_zones: usize, nr_cpus: usize) -> Self {
        Self {
            lrus: (0..nr_nodes).map(|_| CachePadded::new(Mutex::new(NodeLru::default()))).collect(),
            batches: (0..nr_cpus).map(|_| CachePadded::new(Mutex::new(Vec::with_capacity(LRU_BATCH)))).collect(),
            shrinkers: RwLock::new(Vec::new()),
            next_shrinker: AtomicU64::new(1),
            gauges: Gauges::new(nr_zones),
            cache_attached: pagealloc_core::sync::AtomicBool::new(false),
            kswapd: wake::KswapdWake::new(nr_nodes),
            dirty: dirty::DirtyLimits::default(),
        }
    }

    /// Register a shrinker; the id unregisters it.
    pub fn register(&self, s: Arc<dyn Shrinker>) -> u64 {
        let id = self.next_shrinker.fetch_add(1, Ordering::Relaxed);
        self.shrinkers.write().push((id, s));
        id
    }

    /// Unregister; false if `id` was not registered.
    pub(crate) fn unregister(&self, id: u64) -> bool {
        let mut v = self.shrinkers.write();
        let n = v.len();
        v.retain(|(i, _)| *i != id);
        v.len() != n
    }

    /// Whether any shrinker is registered.
    pub(crate) fn has_shrinkers(&self) -> bool {
        !self.shrinkers.read().is_empty()
    }

    /// Ask every shrinker for about `nr` pages, each in proportion to what it
    /// says it could free (`do_shrink_slab`); returns the pages freed.
    pub(crate) fn shrink_all(&self, nr: u64, nid: Option<u32>, direct: bool) -> u64 {
        let list: Vec<Arc<dyn Shrinker>> = self.shrinkers.read().iter().map(|(_, s)| s.clone()).collect();
        let probe = ShrinkControl { nr_to_scan: 0, nid, direct };
        let counts: Vec<u64> = list.iter().map(|s| guarded(|| s.count_objects(&probe))).collect();
        let total: u64 = counts.iter().fold(0, |a, &c| a.saturating_add(c));
        if total == 0 {
            return 0;
        }
        let mut freed = 0u64;
        for (s, c) in list.iter().zip(counts) {
            if c == 0 {
                continue;
            }
            let share = (nr.saturating_mul(c) / total).max(1).min(c);
            freed = freed.saturating_add(guarded(|| s.scan_objects(&ShrinkControl { nr_to_scan: share, nid, direct })));
        }
        freed
    }

    /// Direct reclaim for an allocation of `order` that found every zone
    /// below its min watermark: shrinkers (the page cache is one) are asked
    /// for at least 32 pages (`SWAP_CLUSTER_MAX`) or the request, whichever is
    /// more, in up to 4 rounds while they make progress. False if nothing was
    /// freed (or this thread is already reclaiming).
    pub fn direct_reclaim(&self, order: Order) -> bool {
        if self.shrinkers.read().is_empty() {
            return false;
        }
        let want = 32u64.max(2u64 << order.get());
        as_reclaimer(|| {
            let mut got = 0;
            for _ in 0..4 {
                let f = self.shrink_all(want - got.min(want), None, true);
                got += f;
                if f == 0 || got >= want {
                    break;
                }
            }
            got > 0
        })
        .unwrap_or(false)
    }

    /// Move this CPU slot's batch onto the LRU lists; the pages' references
    /// are returned to the caller, who must put them.
    pub(crate) fn take_batch(&self, slot: usize) -> Vec<u32> {
        std::mem::take(&mut *self.batches[slot % self.batches.len()].lock())
    }

    /// Zone `z`'s (inactive, active) LRU pages (`z` a global zone index on
    /// node `nid`).
    pub(crate) fn zone_lru_sizes(&self, nid: usize, z: usize) -> (u64, u64) {
        self.lrus.get(nid).map_or((0, 0), |l| l.lock().zone_sizes(z))
    }

    /// Racy LRU list sizes of node `nid`: (inactive, active).
    pub fn lru_sizes(&self, nid: usize) -> (u64, u64) {
        self.lrus.get(nid).map_or((0, 0), |l| l.lock().sizes_racy())
    }

    /// Every list's walk agrees with its counter and flags (for tests).
    pub fn check(&self, mm: &MemMap) -> Result<(), String> {
        for (nid, l) in self.lrus.iter().enumerate() {
            l.lock().check(mm).map_err(|e| format!("node {nid}: {e}"))?;
        }
        Ok(())
    }
}

/// A user shrinker's call, with its panic caught: a shrinker that panics
/// counted or freed nothing. Shrinkers run inside allocations (direct
/// reclaim), where the caller may hold page locks of pages it is inserting
/// (a page-cache fill's window): a panic unwinding from here would leave
/// them held.
fn guarded(f: impl FnOnce() -> u64) -> u64 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(0)
}
