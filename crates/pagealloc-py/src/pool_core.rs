//! The KV-cache block pool's state, in plain Rust (no Python): blocks of
//! several kinds, each kind a buddy order, all from one `PageAllocator`.
//! The design follows vLLM's `BlockPool` (reference-counted blocks, a
//! block-hash map for prefix caching, unused cached blocks evicted oldest
//! first) with one change: a block no request uses and no hash names is
//! not kept on one free queue but goes back towards the buddy allocator,
//! so its frames can merge into a block of another kind's (larger) order.
//! It goes there a batch at a time, through its kind's free list
//! ([`crate::free_lists`]), so that the common request and free make no
//! allocator call; under memory pressure the lists are given back in full
//! before any cached block is evicted. Cached blocks no one uses wait on
//! the LRU list, where the allocator's shrinker (or the pool itself, when
//! an allocation fails) evicts them.
//!
//! The state is sharded by kind: each kind's blocks, cache map, LRU list
//! and free list sit behind its own lock, so that requests for different
//! kinds never wait for each other (and a block's handle names its kind, so
//! a free finds its shard without a lookup). What spans kinds takes every
//! shard's lock in kind order: eviction (the LRU order is global: stamps
//! come from one clock), the region search, reset, close and the reports.
//!
//! Invariants (per shard, under its lock), checked by [`Core::check`]:
//! - Every entry in `blocks` owns its buddy block of its kind's order
//!   (allocated by this pool, freed only by `free_ids`, eviction or close).
//! - Every block on `free` owns its buddy block too, and is not in `blocks`:
//!   to the pool's accounting it is free (`frames` leaves it out).
//! - An entry is on `lru` exactly when its `refs` is 0, and then it has a
//!   `key` (unused blocks without a key were freed at once).
//! - `cached[(kind, key)] == id` exactly when `blocks[id].key == Some(key)`
//!   and `blocks[id].kind == kind`; shard `k` holds only kind `k`'s blocks,
//!   and no id is in two shards.
//! - `frames[k]` is the sum of the kind's frames over its entries;
//!   `lru_frames` the same over the entries on `lru`.
//! - No allocation and no free is made with the lock held: the shrinker,
//!   called from inside an allocation that runs low, takes it.

use crate::free_lists::FreeLists;
use pagealloc::{AllocError, Gfp, PageAllocator, Pfn};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::hash_map::Entry::Occupied;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use whole::Evictor;

mod check;
mod exact;
mod region;
mod whole;

/// A block hash given by the user (vLLM's `BlockHash`: an int or bytes).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Key {
    Int(i128),
    Bytes(Box<[u8]>),
}

/// A multiplicative hasher: block ids are pfns (dense small integers) and
/// user keys are already hashes, so SipHash's cost buys nothing here.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type Fast = BuildHasherDefault<IdHasher>;

/// One kind of block: a name, a buddy order, and the frames a block holds:
/// `2^order`, or fewer for an exact kind ([`exact`]), whose blocks are the
/// first `frames` frames of an order-`order` block, the tail given back.
#[derive(Clone, Debug)]
pub(crate) struct Kind {
    pub name: String,
    pub order: u32,
    pub frames: u64,
}

impl Kind {
    pub(crate) fn exact(&self) -> bool {
        self.frames != 1 << self.order
    }
}

#[derive(Debug)]
struct Entry {
    kind: u8,
    refs: u32,
    key: Option<Key>,
    /// The LRU stamp while unused (0: in use).
    lru: u64,
}

/// Counters since creation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub queries: u64,
    pub hits: u64,
    pub evicted: u64,
    pub evicted_frames: u64,
    pub shrinker_scans: u64,
    pub own_evictions: u64,
}

#[derive(Default)]
struct State {
    blocks: HashMap<u64, Entry, Fast>,
    cached: HashMap<(u8, Key), u64, Fast>,
    /// Unused cached blocks, oldest first: stamp -> id.
    lru: BTreeMap<u64, u64>,
    frames: Vec<u64>,
    in_use: Vec<u64>,
    lru_frames: u64,
    counters: Counters,
    closed: bool,
    free: FreeLists,
}

/// The smallest order whose blocks are found by emptying a region
/// ([`region`]): below it, freeing the oldest cached blocks soon merges
/// into the order, and a scan of every block per allocation costs more.
const REGION_ORDER: u32 = 6;

/// Blocks smaller than a pageblock come from Reclaimable pageblocks (most
/// of them end as evictable cache), larger ones from Unmovable ones: the
/// allocator's grouping by migratetype then keeps the small blocks out of
/// the pageblocks a large block (a state page) needs whole.
fn kind_gfp(order: u32) -> Gfp {
    if order < pagealloc::PAGEBLOCK_ORDER {
        Gfp::RECLAIMABLE
    } else {
        Gfp::KERNEL
    }
}

thread_local! {
    /// Set while this thread fills a free list beyond what its request
    /// needs: the pool's own shrinker then offers nothing, so that filling a
    /// list never evicts cached blocks or empties the other lists.
    static REFILLING: Cell<bool> = const { Cell::new(false) };
}

/// Why a pool operation was refused; nothing changed.
#[derive(Debug)]
pub(crate) enum PoolError {
    OutOfMemory(String),
    InvalidFree(String),
    Invalid(String),
}

/// A snapshot of the pool's sizes and counters.
#[derive(Clone, Debug)]
pub(crate) struct Usage {
    /// Per kind: (blocks held, blocks in use, frames held).
    pub kinds: Vec<(u64, u64, u64)>,
    pub cached_blocks: u64,
    pub lru_blocks: u64,
    pub lru_frames: u64,
    /// Frames of the free blocks on the per-kind lists.
    pub free_list_frames: u64,
    pub counters: Counters,
}

pub(crate) struct Core {
    pub alloc: PageAllocator,
    pub kinds: Vec<Kind>,
    /// One per kind (see the module doc).
    shards: Box<[Mutex<State>]>,
    /// LRU stamps, one order over every shard (0 means in use). Relaxed:
    /// a stamp is read under the lock of the shard it was written in.
    clock: AtomicU64,
    shrinker: Mutex<Option<u64>>,
}

/// Shards locked for a call, in kind order, each with the ids it holds
/// (borrowed when the call names one kind, as a request's blocks do).
type Locked<'a> = Vec<(usize, MutexGuard<'a, State>, Cow<'a, [u64]>)>;

/// The kinds of a call's block ids: one for all (the common case), or one each.
pub(crate) enum Kinds {
    One(u8),
    Each(Vec<u8>),
}

impl Kinds {
    pub(crate) fn of(&self, i: usize) -> u8 {
        match self {
            Kinds::One(k) => *k,
            Kinds::Each(v) => v[i],
        }
    }
}

impl Core {
    /// A pool on `alloc`, registered as one of its shrinkers.
    /// Each kind's free list keeps at most `list_frames` frames, and at most
    /// 1/32 of the arena, so that a small arena is not all parked on lists.
    pub(crate) fn new(alloc: PageAllocator, kinds: Vec<Kind>, list_frames: u64) -> Arc<Self> {
        let n = kinds.len();
        let orders: Vec<u32> = kinds.iter().map(|k| k.order).collect();
        // An exact block is given back whole at once: no list keeps it.
        // Each shard has a slot per kind and uses its own (one list type
        // and one identity check for all shards).
        let shards = (0..n)
            .map(|_| {
                let mut free = FreeLists::new(&orders, list_frames.min(alloc.managed_pages() / 32));
                kinds.iter().enumerate().filter(|(_, k)| k.exact()).for_each(|(i, _)| free.disable(i));
                Mutex::new(State { frames: vec![0; n], in_use: vec![0; n], free, ..State::default() })
            })
            .collect();
        let core = Arc::new(Core { alloc, kinds, shards, clock: AtomicU64::new(1), shrinker: Mutex::new(None) });
        let id = core.alloc.reclaim().register_shrinker(Arc::new(Evictor(Arc::downgrade(&core))));
        *core.shrinker.lock().unwrap_or_else(PoisonError::into_inner) = Some(id);
        core
    }

    fn lock(&self, k: usize) -> MutexGuard<'_, State> {
        // Every update under the lock completes without panicking (checked
        // arithmetic aside), so a poisoned lock holds a consistent state.
        self.shards[k].lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn live(&self, k: usize) -> Result<MutexGuard<'_, State>, PoolError> {
        let st = self.lock(k);
        if st.closed {
            return Err(PoolError::Invalid("the block pool is closed".into()));
        }
        Ok(st)
    }

    /// Every shard, locked in kind order.
    fn lock_all(&self) -> Vec<MutexGuard<'_, State>> {
        (0..self.kinds.len()).map(|k| self.lock(k)).collect()
    }

    /// The shards that `ids` of `kinds` name, locked in kind order, each
    /// with its ids in the order given; refused on a closed pool.
    fn lock_for<'a>(&'a self, ids: &'a [u64], kinds: &Kinds) -> Result<Locked<'a>, PoolError> {
        let each = match kinds {
            Kinds::One(k) => return Ok(vec![(usize::from(*k), self.live(usize::from(*k))?, Cow::Borrowed(ids))]),
            Kinds::Each(each) => each,
        };
        let mut mask = 0u64;
        for &k in each {
            mask |= 1 << k;
        }
        let mut out = Vec::with_capacity(mask.count_ones() as usize);
        while mask != 0 {
            let k = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let sub: Vec<u64> = ids.iter().zip(each).filter(|x| usize::from(*x.1) == k).map(|x| *x.0).collect();
            out.push((k, self.live(k)?, Cow::Owned(sub)));
        }
        Ok(out)
    }

    /// A new LRU stamp, later than every earlier one.
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// `n` new blocks of `kind` from its free list alone, each referenced
    /// once, or `None` (nothing changed) when the list holds fewer. No
    /// allocator call: this path cannot block.
    pub(crate) fn get_new_listed(&self, kind: u8, n: usize) -> Result<Option<Vec<u64>>, PoolError> {
        let k = usize::from(kind);
        let mut st = self.live(k)?;
        if st.free.len(k) < n {
            return Ok(None);
        }
        let mut got = Vec::with_capacity(n);
        st.free.take(k, n, &mut got);
        self.adopt(&mut st, kind, &got);
        Ok(Some(got))
    }

    /// Enter free blocks `ids` of `kind` as in use, one reference each.
    fn adopt(&self, st: &mut State, kind: u8, ids: &[u64]) {
        let k = usize::from(kind);
        for &id in ids {
            st.blocks.insert(id, Entry { kind, refs: 1, key: None, lru: 0 });
        }
        st.frames[k] += ids.len() as u64 * self.kinds[k].frames;
        st.in_use[k] += ids.len() as u64;
    }

    /// `n` new blocks of `kind`, each referenced once; all or nothing. What
    /// the free list lacks comes from the allocator, with a batch more for
    /// the list. This path may reclaim and evict, so it can block.
    pub(crate) fn get_new(&self, kind: u8, n: usize) -> Result<Vec<u64>, PoolError> {
        let k = usize::from(kind);
        let order = self.kinds[k].order;
        let (mut got, batch) = {
            let mut st = self.live(k)?;
            let mut got = Vec::with_capacity(n);
            st.free.take(k, n, &mut got);
            (got, st.free.batch(k))
        };
        let need = n - got.len();
        let extra = if need > 0 { self.refill_batch(order, batch) } else { 0 };
        let mut spare = Vec::new();
        let res = if self.kinds[k].exact() {
            self.alloc_exact_blocks(k, need, &mut got)
        } else {
            self.alloc_blocks(order, need, extra, &mut got, &mut spare)
        };
        if let Err(e) = res {
            self.free_kind(&got, k);
            self.free_kind(&spare, k);
            return Err(PoolError::OutOfMemory(format!(
                "cannot get {n} blocks of kind {:?} (order {order}): {e}; {} unused cached blocks left to evict",
                self.kinds[k].name,
                self.lock(k).lru.len()
            )));
        }
        let mut st = self.lock(k);
        if st.closed {
            // Closed while this call allocated: nothing may stay held.
            drop(st);
            self.free_kind(&got, k);
            self.free_kind(&spare, k);
            return Err(PoolError::Invalid("the block pool is closed".into()));
        }
        self.adopt(&mut st, kind, &got);
        spare.retain(|&id| !st.free.put(k, id));
        spare.extend(st.free.spill(k));
        drop(st);
        self.free_kind(&spare, k);
        Ok(got)
    }

    /// Blocks a refill of a list of `order` takes beyond the request: its
    /// batch, or none when the arena is down to a few batches (a refill
    /// must not be what pushes the allocator into reclaim).
    fn refill_batch(&self, order: u32, batch: usize) -> usize {
        let frames = (batch as u64) << order;
        if self.alloc.nr_free_pages() < 4 * frames {
            return 0;
        }
        batch
    }

    /// `need` blocks of `order` onto `got` (failing only when eviction
    /// cannot make room), and up to `extra` more onto `spare`, for the free
    /// list, taken only from plainly free memory: no compaction, and no
    /// eviction by this pool's shrinker. Order 0 asks for both in one bulk
    /// call.
    fn alloc_blocks(
        &self,
        order: u32,
        need: usize,
        extra: usize,
        got: &mut Vec<u64>,
        spare: &mut Vec<u64>,
    ) -> Result<(), AllocError> {
        let target = got.len() + need;
        if order == 0 && need + extra > 1 {
            let mut pfns = Vec::with_capacity(need + extra);
            REFILLING.set(true);
            self.alloc.alloc_pages_bulk_list(Gfp::NO_COMPACT | kind_gfp(0), need + extra, &mut pfns);
            REFILLING.set(false);
            let split = pfns.len().min(need);
            got.extend(pfns[..split].iter().map(|p| p.as_u64()));
            spare.extend(pfns[split..].iter().map(|p| p.as_u64()));
        }
        // The request first: the spares must not take what it needs.
        while got.len() < target {
            got.push(self.alloc_block(order)?.as_u64());
        }
        REFILLING.set(true);
        while spare.len() < extra {
            match self.alloc.alloc_pages(Gfp::NO_COMPACT | kind_gfp(order), order) {
                Ok(p) => spare.push(p.as_u64()),
                Err(_) => break,
            }
        }
        REFILLING.set(false);
        Ok(())
    }

    /// A block of `order`. When the allocator fails even after asking its
    /// shrinkers (this pool among them), the frames freed may not have
    /// merged into a block of this order: first (a high order) empty whole
    /// regions of that order that only unused cached blocks keep busy
    /// ([`region`]), then give back the free lists and evict more, oldest
    /// first, and retry while anything is left.
    fn alloc_block(&self, order: u32) -> Result<Pfn, AllocError> {
        if order >= REGION_ORDER {
            if let Some(pfn) = self.alloc_block_by_region(order) {
                return Ok(pfn);
            }
        }
        loop {
            match self.alloc.alloc_pages(kind_gfp(order), order) {
                Ok(pfn) => return Ok(pfn),
                Err(AllocError::NoMemory { .. }) if self.drain() > 0 => {}
                Err(AllocError::NoMemory { .. }) if self.evict(u64::MAX, 2u64 << order) > 0 => {
                    self.lock(0).counters.own_evictions += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn free_frames(&self, ids: &[u64], order: u32) {
        if order == 0 && ids.len() > 1 {
            let pfns: Vec<Pfn> = ids.iter().map(|&id| Pfn::new(id)).collect();
            // Our own order-0 blocks: see below for why an error is ignored.
            let _ = self.alloc.free_pages_bulk(&pfns);
            return;
        }
        for &id in ids {
            // Our own blocks, allocated at this order: a failure is a bug in
            // the pool, and it is surfaced by `check`, not by a panic here.
            let _ = self.alloc.free_pages(Pfn::new(id), order);
        }
    }

    /// Each id must name a block of this pool with enough references for
    /// its occurrences in `ids`; checked for all before any change.
    fn check_held(st: &State, ids: &[u64], need_refs: bool) -> Result<(), PoolError> {
        // A request's worth of ids is sorted on the stack: this runs on
        // every free, where a heap copy costs as much as the sort.
        let mut small = [0u64; 32];
        let mut large = Vec::new();
        let sorted = if ids.len() <= small.len() {
            small[..ids.len()].copy_from_slice(ids);
            &mut small[..ids.len()]
        } else {
            large.extend_from_slice(ids);
            &mut large[..]
        };
        sorted.sort_unstable();
        for run in sorted.chunk_by(|a, b| a == b) {
            let id = run[0];
            let Some(e) = st.blocks.get(&id) else {
                return Err(PoolError::InvalidFree(format!("block {id} is not held by this pool (already freed?)")));
            };
            if need_refs && (e.refs as usize) < run.len() {
                return Err(PoolError::InvalidFree(format!(
                    "block {id} is freed {} time(s) but has {} reference(s) (double free?)",
                    run.len(),
                    e.refs
                )));
            }
        }
        Ok(())
    }

    /// Drop one reference from each block; unused blocks with a key go to
    /// the LRU tail in the order given, the others to their kind's free
    /// list, and a list over its mark gives a batch back to the allocator.
    /// Frees never wait for memory: this path does not block.
    pub(crate) fn free_ids(&self, ids: &[u64], kinds: &Kinds) -> Result<(), PoolError> {
        let mut victims = Vec::new();
        let mut locked = self.lock_for(ids, kinds)?;
        for (_, st, sub) in &locked {
            Self::check_held(st, sub, true)?;
        }
        for (k, st, sub) in &mut locked {
            let k = *k;
            let st = &mut **st;
            let frames = self.kinds[k].frames;
            let mut grown = false;
            for &id in sub.iter() {
                let Occupied(mut slot) = st.blocks.entry(id) else { unreachable!("checked above") };
                let e = slot.get_mut();
                e.refs -= 1;
                if e.refs > 0 {
                    continue;
                }
                st.in_use[k] -= 1;
                if e.key.is_some() {
                    let t = self.tick();
                    e.lru = t;
                    st.lru.insert(t, id);
                    st.lru_frames += frames;
                } else {
                    slot.remove();
                    st.frames[k] -= frames;
                    if st.free.put(k, id) {
                        grown = true;
                    } else {
                        victims.push((id, k));
                    }
                }
            }
            if grown {
                victims.extend(st.free.spill(k).into_iter().map(|id| (id, k)));
            }
        }
        drop(locked);
        self.free_victims(victims);
        Ok(())
    }

    /// Free `(id, kind)` pairs, the order-0 ones in one bulk call.
    fn free_victims(&self, mut victims: Vec<(u64, usize)>) {
        let plain_zero = |k: usize| self.kinds[k].order == 0 && !self.kinds[k].exact();
        let zeros: Vec<u64> = victims.iter().filter(|v| plain_zero(v.1)).map(|v| v.0).collect();
        self.free_frames(&zeros, 0);
        victims.retain(|v| !plain_zero(v.1));
        for (id, k) in victims {
            self.free_kind(&[id], k);
        }
    }

    /// Add a reference to each block (a prefix-cache hit), taking unused
    /// ones off the LRU list.
    pub(crate) fn touch(&self, ids: &[u64], kinds: &Kinds) -> Result<(), PoolError> {
        let mut locked = self.lock_for(ids, kinds)?;
        for (_, st, sub) in &locked {
            Self::check_held(st, sub, false)?;
            if let Some(id) = sub.iter().find(|id| st.blocks[id].refs as usize + sub.len() > u32::MAX as usize) {
                return Err(PoolError::Invalid(format!("block {id} has too many references")));
            }
        }
        for (k, st, sub) in &mut locked {
            let st = &mut **st;
            for &id in sub.iter() {
                let e = st.blocks.get_mut(&id).expect("checked above");
                if e.refs == 0 {
                    st.lru.remove(&e.lru);
                    st.lru_frames -= self.kinds[*k].frames;
                    st.in_use[*k] += 1;
                    e.lru = 0;
                }
                e.refs += 1;
            }
        }
        Ok(())
    }

    /// Publish full blocks under their hashes. A block already cached
    /// under another hash is an error; a hash already naming another block
    /// keeps that block (as vLLM does), and this one stays unnamed.
    pub(crate) fn cache(&self, ids: &[u64], kinds: &Kinds, keys: Vec<Key>) -> Result<usize, PoolError> {
        let mut locked = self.lock_for(ids, kinds)?;
        for (_, st, sub) in &locked {
            Self::check_held(st, sub, true)?;
        }
        // Shard index in `locked` per kind (a pool has at most 64 kinds).
        let mut slot = [0usize; 64];
        for (i, (k, _, _)) in locked.iter().enumerate() {
            slot[*k] = i;
        }
        let at = |k: usize| slot[k];
        for (i, (&id, key)) in ids.iter().zip(&keys).enumerate() {
            let k = kinds.of(i);
            if let Some(old) = &locked[at(usize::from(k))].1.blocks[&id].key {
                if old != key {
                    return Err(PoolError::Invalid(format!("block {id} is already cached under another hash")));
                }
            }
        }
        let mut added = 0;
        for (j, (&id, key)) in ids.iter().zip(keys).enumerate() {
            let i = at(usize::from(kinds.of(j)));
            let st = &mut *locked[i].1;
            let kind = st.blocks[&id].kind;
            if st.blocks[&id].key.is_some() || st.cached.contains_key(&(kind, key.clone())) {
                continue;
            }
            st.cached.insert((kind, key.clone()), id);
            st.blocks.get_mut(&id).expect("checked").key = Some(key);
            added += 1;
        }
        Ok(added)
    }

    /// The block cached under `key` for `kind`, if any (no reference taken:
    /// `touch` it to use it, as in vLLM).
    pub(crate) fn lookup(&self, kind: u8, key: Key) -> Result<Option<u64>, PoolError> {
        let mut st = self.live(usize::from(kind))?;
        st.counters.queries += 1;
        let hit = st.cached.get(&(kind, key)).copied();
        st.counters.hits += u64::from(hit.is_some());
        Ok(hit)
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.close();
    }
}
