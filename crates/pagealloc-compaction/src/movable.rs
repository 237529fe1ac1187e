//! Movable operations (the kernel's `movable_operations`): how an owner of
//! raw pages lets the allocator move them, and the per-allocator state that
//! migration and compaction keep (the registry, pageblock skip hints).
//!
//! An owner registers a [`MovableOps`] once and gets a [`MovableId`]; it then
//! marks each order-0 page it allocated through the raw pfn API as movable
//! (`MOVABLE_OPS`, flag bit 13). Migration calls, in order:
//! 1. [`MovableOps::isolate`]: the owner stops using the page (takes it off
//!    its own lists) and says yes, or refuses;
//! 2. the library copies the page's bytes to the target (unless
//!    [`MovableOps::copies_data`] says the owner does);
//! 3. [`MovableOps::migrate`]: the owner now refers to the target instead;
//!    or, after any failure, [`MovableOps::putback`]: the page stays where
//!    it was, untouched, and the owner may use it again.
//!
//! Pages allocated without registration are pinned: never moved.
//!
//! Invariants: the id recorded for a pfn is meaningful only while the page's
//! flags carry `MOVABLE_OPS`; a registered ops object lives as long as the
//! allocator (ids are never reused).

use pagealloc_core::sync::{AtomicBool, AtomicU32, Mutex, Ordering};
use pagealloc_core::types::Pfn;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// What an owner of movable pages lets the allocator do (see the module doc).
///
/// Contract: between a successful `isolate` and the matching `migrate` or
/// `putback`, the owner neither reads nor writes the page nor frees it (a raw
/// free is refused meanwhile with `FreeError::Migrating`).
///
/// Panics: a panic in any of these methods fails that page's migration and
/// is caught first: the page's isolation is undone (a panicking `isolate`
/// gets no `putback`; any later panic is followed by one, whose own panic is
/// dropped), the target goes back to the free lists, `pgmigrate_fail`
/// counts it, and the owner may use and free the page as before. The panic
/// then goes on in the thread of the call that migrated
/// (`compact_memory`, `compact_zone`, `alloc_contig_range`,
/// `alloc_contig_pages`, `compact_and_report_now`, or an allocation of
/// order above 0 that compacted directly) once that call has restored its
/// state; in kcompactd's and the page reporter's threads it is dropped, and
/// the thread goes on.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, MovableOps, PageAllocator, Pfn};
/// use std::sync::{Arc, Mutex};
/// struct Owner(Mutex<Pfn>); // where the owner keeps its page
/// impl MovableOps for Owner {
///     fn migrate(&self, _from: Pfn, to: Pfn) -> bool {
///         *self.0.lock().unwrap() = to;
///         true
///     }
/// }
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
/// let owner = Arc::new(Owner(Mutex::new(pfn)));
/// a.compaction().set_page_movable(pfn, a.compaction().register_movable_ops(owner.clone())).unwrap();
/// a.contig().alloc_contig_range(pfn, 1, Gfp::MOVABLE).unwrap(); // wants pfn's frame: the page moves
/// assert_ne!(*owner.0.lock().unwrap(), pfn);
/// ```
pub trait MovableOps: Send + Sync {
    /// Stop using `pfn` for a moment; false refuses (the page stays, no
    /// further call for it).
    fn isolate(&self, _pfn: Pfn) -> bool {
        true
    }
    /// The page's contents are now at `to` (copied by the library unless
    /// [`MovableOps::copies_data`]); from now on the owner uses `to`, which is
    /// an allocated order-0 page it owns, registered with the same ops.
    /// False refuses: the move is undone and `putback(from)` follows.
    ///
    /// A panic is a refusal too (see the trait doc): the owner keeps `from`,
    /// `to` is freed, `putback(from)` follows, and the panic goes on in the
    /// thread that asked for the migration (dropped in kcompactd's).
    fn migrate(&self, from: Pfn, to: Pfn) -> bool;
    /// Migration of an isolated `pfn` did not happen: use it again as before.
    fn putback(&self, _pfn: Pfn) {}
    /// True when `migrate` copies the bytes itself (or there are none to copy).
    fn copies_data(&self) -> bool {
        false
    }
}

/// How one page's migration ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Moved: the source is free, the target is the owner's.
    Yes,
    /// Not isolated (not registered, busy, or the owner refused to isolate):
    /// nothing happened.
    Busy,
    /// Isolated, then failed: put back untouched (counted in pgmigrate_fail).
    Failed,
}

/// How migration reaches pages on the LRU lists (page-cache pages): the
/// page cache, which alone knows their mappings, registers one (the
/// kernel's `address_space_operations::migrate_folio`).
pub trait LruMigrate: Send + Sync {
    /// Move the LRU page `from` to `target` (an allocated order-0 page,
    /// `HEAD` only, owned by the caller). On anything but [`Moved::Yes`] the
    /// target is still the caller's and `from` is as it was.
    fn migrate_lru(&self, from: u64, target: u64) -> Moved;
}

/// The handle of a registered [`MovableOps`] (never reused in one allocator).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, MovableOps, PageAllocator, Pfn};
/// use std::sync::Arc;
/// struct Refuse; // an owner that never lets its pages move
/// impl MovableOps for Refuse { fn migrate(&self, _: Pfn, _: Pfn) -> bool { false } }
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let (one, two) = (a.compaction().register_movable_ops(Arc::new(Refuse)), a.compaction().register_movable_ops(Arc::new(Refuse)));
/// assert_ne!(one, two);
/// let pfn = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
/// a.compaction().set_page_movable(pfn, one).unwrap();
/// assert_eq!(a.compaction().mobility_census().movable, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MovableId(pub u32);

/// Registry and compaction state of one allocator.
pub struct Mobility {
    ops: RwLock<Vec<Arc<dyn MovableOps>>>,
    /// Ops id per registered pfn (stale entries are harmless: see the module doc).
    page_ops: Mutex<HashMap<u64, u32>>,
    /// Whether any ops were ever registered (gates direct compaction: without
    /// movable pages there is nothing to move).
    any: AtomicBool,
    /// Pageblock skip hints, one per pageblock (0 = scan, 1 = skip).
    skip: Box<[AtomicU32]>,
    /// The page cache's migration of LRU pages, while one is attached.
    lru: RwLock<Option<Arc<dyn LruMigrate>>>,
    /// kcompactd's wakeups and threads (the loop: `compaction::kcompactd`).
    pub kcompactd: KcompactdState,
}

impl Mobility {
    pub fn new(nblocks: usize, nr_nodes: usize) -> Self {
        Self {
            ops: RwLock::new(Vec::new()),
            page_ops: Mutex::new(HashMap::new()),
            any: AtomicBool::new(false),
            skip: (0..nblocks).map(|_| AtomicU32::new(0)).collect(),
            lru: RwLock::new(None),
            kcompactd: KcompactdState::new(nr_nodes),
        }
    }

    /// Register `ops`; its id.
    pub fn register(&self, ops: Arc<dyn MovableOps>) -> MovableId {
        let mut v = self.ops.write().unwrap_or_else(|e| e.into_inner());
        v.push(ops);
        self.any.store(true, Ordering::Release);
        MovableId(v.len() as u32 - 1)
    }

    /// The ops behind `id`.
    pub fn ops(&self, id: u32) -> Option<Arc<dyn MovableOps>> {
        self.ops.read().unwrap_or_else(|e| e.into_inner()).get(id as usize).cloned()
    }

    /// Whether `id` names registered ops.
    pub fn valid(&self, id: MovableId) -> bool {
        (id.0 as usize) < self.ops.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether anything is movable: registered ops or an attached LRU
    /// migrator (page cache).
    pub fn any_registered(&self) -> bool {
        self.any.load(Ordering::Acquire) || self.lru_ops().is_some()
    }

    /// Attach (Some) or detach (None) the LRU migrator.
    pub fn set_lru_ops(&self, m: Option<Arc<dyn LruMigrate>>) {
        *self.lru.write().unwrap_or_else(|e| e.into_inner()) = m;
    }

    /// The LRU migrator, if a page cache is attached.
    pub(crate) fn lru_ops(&self) -> Option<Arc<dyn LruMigrate>> {
        self.lru.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Record the ops id of `pfn` (before its `MOVABLE_OPS` bit is set).
    pub(crate) fn set_page(&self, pfn: u64, id: u32) {
        self.page_ops.lock().insert(pfn, id);
    }

    /// The ops id recorded for `pfn`.
    pub(crate) fn page_id(&self, pfn: u64) -> Option<u32> {
        self.page_ops.lock().get(&pfn).copied()
    }

    /// Forget `pfn`'s id (after it moved away).
    pub fn forget(&self, pfn: u64) {
        self.page_ops.lock().remove(&pfn);
    }

    pub(crate) fn skip_hint(&self, block: usize) -> bool {
        self.skip.get(block).is_some_and(|b| b.load(Ordering::Relaxed) != 0)
    }

    pub(crate) fn set_skip_hint(&self, block: usize, on: bool) {
        if let Some(b) = self.skip.get(block) {
            b.store(on as u32, Ordering::Relaxed);
        }
    }
}

/// Allocated pages by mobility (see `PageAllocator::mobility_census`).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let _pfn = a.alloc_pages(Gfp::KERNEL, 1).unwrap();
/// let c = a.compaction().mobility_census();
/// assert_eq!((c.movable, c.pinned, c.isolated), (0, 2, 0)); // not registered: pinned
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MobilityCensus {
    /// Allocated blocks' pages registered movable.
    pub movable: u64,
    /// Allocated pages not registered: never moved.
    pub pinned: u64,
    /// Pages isolated for migration right now.
    pub isolated: u64,
}

struct KcompactdNode {
    woken: AtomicBool,
    /// The highest order asked for since the last run (0: none).
    order: AtomicU32,
    lock: parking_lot::Mutex<()>,
    cv: parking_lot::Condvar,
}

/// kcompactd's per-node wakeups (the kernel's `pgdat->kcompactd_wait` and
/// `kcompactd_max_order`) and its threads. Same protocol as kswapd's
/// (`vmscan::wake`): a waker raises the node's order, sets `woken` and
/// notifies under the mutex only when it changed it; the sleeper tests
/// `woken` under that mutex, so no wakeup is lost. The threads are joined by
/// [`KcompactdState::stop_and_join`] when the last user handle drops.
#[cfg_attr(loom, allow(dead_code))] // the threads do not run under loom
pub struct KcompactdState {
    nodes: Box<[KcompactdNode]>,
    pub stop: AtomicBool,
    pub started: AtomicBool,
    pub threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

#[cfg_attr(loom, allow(dead_code))]
impl KcompactdState {
    fn new(nr_nodes: usize) -> Self {
        Self {
            nodes: (0..nr_nodes)
                .map(|_| KcompactdNode {
                    woken: AtomicBool::new(false),
                    order: AtomicU32::new(0),
                    lock: parking_lot::Mutex::new(()),
                    cv: parking_lot::Condvar::new(),
                })
                .collect(),
            stop: AtomicBool::new(false),
            started: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        }
    }

    /// Wake node `nid`'s kcompactd for `order` (`wakeup_kcompactd`).
    pub fn wake(&self, nid: usize, order: u32) {
        let Some(w) = self.nodes.get(nid) else { return };
        w.order.fetch_max(order, Ordering::Relaxed);
        if !w.woken.swap(true, Ordering::AcqRel) {
            let _g = w.lock.lock();
            w.cv.notify_one();
        }
    }

    /// Sleep until woken or `timeout`; the order asked for if woken.
    pub fn sleep(&self, nid: usize, timeout: std::time::Duration) -> Option<u32> {
        let w = &self.nodes[nid];
        {
            let mut g = w.lock.lock();
            if !w.woken.load(Ordering::Acquire) {
                w.cv.wait_for(&mut g, timeout);
            }
        }
        w.woken.swap(false, Ordering::AcqRel).then(|| w.order.swap(0, Ordering::Relaxed))
    }

    /// Stop the threads and wait for them (idempotent).
    pub fn stop_and_join(&self) {
        self.stop.store(true, Ordering::Release);
        for n in 0..self.nodes.len() {
            self.wake(n, 0);
        }
        let ts: Vec<_> = self.threads.lock().drain(..).collect();
        for t in ts {
            // A kcompactd thread may drop the last user handle itself (it
            // held the last reference to a page cache holding one): it ends
            // at its next stop check, detached.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
