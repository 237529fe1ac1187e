//! A content-addressed KV-cache block manager on pagealloc, in the style of
//! an LLM server's prefix cache: blocks of several sizes, each a buddy block
//! of its own order (a hybrid model's layers want blocks of different sizes;
//! a fixed-slot pool would give each the largest slot), keyed by a hash of
//! their content, reference counted while a request uses them, kept on an
//! LRU list when no request does (a later request with the same prefix hits
//! them), and evicted through the allocator's shrinker when it runs low.
//!
//! Invariants:
//! - Every block in `map` owns its buddy block (allocated by this cache,
//!   freed only by `evict` or the cache's drop).
//! - A block is on the LRU list exactly when its reference count is 0; only
//!   blocks on the LRU list are evicted, so a block in use is never freed
//!   under its user.
//! - A block's bytes are written once, before it is published in `map`, and
//!   only read afterwards.
//! - No allocation is made with the state lock held: the shrinker, called
//!   from inside an allocation that runs low, takes that lock.
//!
//! Run: `cargo run --release -p pagealloc --example kv_block_cache`.

#![allow(dead_code)] // the test in tests/integration/kv_block_cache.rs uses more of it than main does

use pagealloc::{AllocError, Gfp, PageAllocator, Pfn, ShrinkControl, Shrinker, PAGE_SIZE};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

/// The largest block the cache stores: order 4 (64 KiB).
pub const MAX_BLOCK_ORDER: u32 = 4;

/// Counters of one cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvStats {
    /// Lookups that found the block cached.
    pub hits: u64,
    /// Lookups that had to allocate and fill it.
    pub misses: u64,
    /// Blocks evicted (each from the LRU list, never in use).
    pub evicted: u64,
    /// Times the allocator's reclaim called this cache's shrinker scan.
    pub shrinker_scans: u64,
    /// Times an allocation failed even after reclaim and the cache evicted
    /// on its own before retrying (fragmentation: the shrinker freed pages,
    /// but no block of the order needed).
    pub own_evictions: u64,
    /// Pages those blocks held.
    pub evicted_pages: u64,
    /// Blocks cached now, and the pages they hold.
    pub blocks: u64,
    pub pages: u64,
    /// Pages a cache giving every block the largest slot would hold.
    pub pages_if_largest_slot: u64,
}

struct Entry {
    pfn: Pfn,
    order: u32,
    len: usize,
    refs: u32,
    /// The LRU stamp while unused (key in `lru`).
    lru: Option<u64>,
}

#[derive(Default)]
struct State {
    map: HashMap<u64, Entry>,
    /// Unused blocks, oldest first: stamp -> content hash.
    lru: BTreeMap<u64, u64>,
    clock: u64,
    stats: KvStats,
}

struct Shared {
    alloc: PageAllocator,
    state: Mutex<State>,
}

/// The cache. Dropping it frees every block; blocks still referenced by a
/// [`BlockRef`] are freed when the last reference goes.
pub struct KvBlockCache {
    shared: Arc<Shared>,
    shrinker: u64,
}

/// A reference to a cached block: its bytes stay valid and it is never
/// evicted while the reference lives.
pub struct BlockRef {
    shared: Arc<Shared>,
    key: u64,
    pfn: Pfn,
    len: usize,
}

/// The allocator's view: unused blocks can be freed.
struct Evictor(Weak<Shared>);

/// The order of the smallest block holding `len` bytes.
#[must_use]
pub fn order_for(len: usize) -> Option<u32> {
    let pages = len.div_ceil(PAGE_SIZE).max(1);
    let order = pages.next_power_of_two().trailing_zeros();
    (order <= MAX_BLOCK_ORDER).then_some(order)
}

/// The content hash that keys a block.
#[must_use]
pub fn content_key(data: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

impl KvBlockCache {
    /// A cache on `alloc`, registered as one of its shrinkers.
    pub fn new(alloc: &PageAllocator) -> Self {
        let shared = Arc::new(Shared { alloc: alloc.clone(), state: Mutex::new(State::default()) });
        let shrinker = alloc.reclaim().register_shrinker(Arc::new(Evictor(Arc::downgrade(&shared))));
        KvBlockCache { shared, shrinker }
    }

    /// The block holding `data`: the cached one if present (a hit), else a
    /// new block of the smallest order that fits, filled with `data`.
    ///
    /// # Errors
    /// `InvalidOrder` when `data` is larger than the largest block,
    /// `NoMemory` when nothing could be allocated even after the allocator
    /// asked its shrinkers (this cache among them) for memory.
    pub fn get_or_insert(&self, data: &[u8]) -> Result<BlockRef, AllocError> {
        let Some(order) = order_for(data.len()) else {
            return Err(AllocError::InvalidOrder { order: u32::MAX });
        };
        let key = content_key(data);
        if let Some(b) = self.lookup(key) {
            return Ok(b);
        }
        // Allocate and fill outside the lock: the allocation may call our
        // shrinker.
        let pfn = self.alloc_block(order)?;
        let base = self.shared.alloc.page_address(pfn).expect("an allocator with backing memory");
        // SAFETY: the block [pfn, pfn + 2^order) was just allocated to us and
        // is published to nobody yet: we are its only user, and `data` fits.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr(), data.len()) };
        let mut st = self.shared.state.lock().unwrap();
        if let Some(b) = self.take_ref(&mut st, key) {
            // Someone inserted the same content meanwhile: use theirs.
            drop(st);
            self.shared.alloc.free_pages(pfn, order).expect("our own block");
            return Ok(b);
        }
        st.map.insert(key, Entry { pfn, order, len: data.len(), refs: 1, lru: None });
        st.stats.misses += 1;
        st.stats.blocks += 1;
        st.stats.pages += 1 << order;
        st.stats.pages_if_largest_slot += 1 << MAX_BLOCK_ORDER;
        Ok(BlockRef { shared: Arc::clone(&self.shared), key, pfn, len: data.len() })
    }

    /// A block of `order`. When the allocator fails even after asking its
    /// shrinkers (this cache frees its oldest unused blocks there), the
    /// pages freed may not have merged into a block of this order: evict
    /// more, oldest first, and retry while there is anything to evict.
    fn alloc_block(&self, order: u32) -> Result<Pfn, AllocError> {
        loop {
            match self.shared.alloc.alloc_pages(Gfp::KERNEL, order) {
                Ok(pfn) => return Ok(pfn),
                Err(AllocError::NoMemory { .. }) if self.evict(2u64 << order) > 0 => {
                    self.shared.state.lock().unwrap().stats.own_evictions += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A reference to the cached block of content hash `key`, if cached.
    pub fn lookup(&self, key: u64) -> Option<BlockRef> {
        let mut st = self.shared.state.lock().unwrap();
        self.take_ref(&mut st, key)
    }

    /// [`KvBlockCache::lookup`] under the state lock.
    fn take_ref(&self, st: &mut State, key: u64) -> Option<BlockRef> {
        let e = st.map.get_mut(&key)?;
        e.refs += 1;
        if let Some(stamp) = e.lru.take() {
            st.lru.remove(&stamp);
        }
        let (pfn, len) = (e.pfn, e.len);
        st.stats.hits += 1;
        Some(BlockRef { shared: Arc::clone(&self.shared), key, pfn, len })
    }

    /// Evict up to `pages` pages of unused blocks, oldest first; the pages
    /// freed.
    pub fn evict(&self, pages: u64) -> u64 {
        self.shared.evict(pages)
    }

    /// The counters now.
    #[must_use]
    pub fn stats(&self) -> KvStats {
        self.shared.state.lock().unwrap().stats
    }

    /// Unused blocks' pages (what the shrinker could free now).
    #[must_use]
    pub fn unused_pages(&self) -> u64 {
        self.shared.unused_pages()
    }
}

impl Shared {
    fn unused_pages(&self) -> u64 {
        let st = self.state.lock().unwrap();
        st.lru.values().map(|k| 1u64 << st.map[k].order).sum()
    }

    fn evict(&self, pages: u64) -> u64 {
        let mut victims = Vec::new();
        {
            let mut st = self.state.lock().unwrap();
            let mut freed = 0;
            while freed < pages {
                let Some((_, key)) = st.lru.pop_first() else { break };
                let e = st.map.remove(&key).expect("LRU names a cached block");
                debug_assert_eq!(e.refs, 0);
                freed += 1u64 << e.order;
                st.stats.evicted += 1;
                st.stats.evicted_pages += 1 << e.order;
                st.stats.blocks -= 1;
                st.stats.pages -= 1 << e.order;
                st.stats.pages_if_largest_slot -= 1 << MAX_BLOCK_ORDER;
                victims.push((e.pfn, e.order));
            }
        }
        // Free outside the lock (a free may take allocator locks).
        let mut freed = 0;
        for (pfn, order) in victims {
            self.alloc.free_pages(pfn, order).expect("an evicted block is ours and unused");
            freed += 1u64 << order;
        }
        freed
    }
}

impl BlockRef {
    /// The block's content.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        let base = self.shared.alloc.page_address(self.pfn).expect("an allocator with backing memory");
        // SAFETY: the block is cached and referenced by us, so not evicted
        // or freed while `self` lives; its first `len` bytes were written
        // before it was published and are never written again.
        unsafe { std::slice::from_raw_parts(base.as_ptr(), self.len) }
    }

    /// The block's first frame.
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }
}

impl Drop for BlockRef {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock().unwrap();
        let st = &mut *st;
        let Some(e) = st.map.get_mut(&self.key) else {
            // The cache was dropped first; it left this block to us.
            return;
        };
        e.refs -= 1;
        if e.refs == 0 {
            st.clock += 1;
            e.lru = Some(st.clock);
            st.lru.insert(st.clock, self.key);
        }
    }
}

impl Drop for KvBlockCache {
    fn drop(&mut self) {
        self.shared.alloc.reclaim().unregister_shrinker(self.shrinker);
        let mut st = self.shared.state.lock().unwrap();
        let mut unused = Vec::new();
        st.map.retain(|_, e| {
            if e.refs == 0 {
                unused.push((e.pfn, e.order));
                return false;
            }
            // Blocks still referenced are leaked to their references' drop
            // (which finds no entry); free them with their last user.
            true
        });
        st.lru.clear();
        drop(st);
        for (pfn, order) in unused {
            self.shared.alloc.free_pages(pfn, order).expect("an unused block is ours");
        }
    }
}

impl Shrinker for Evictor {
    fn count_objects(&self, _sc: &ShrinkControl) -> u64 {
        self.0.upgrade().map_or(0, |s| s.unused_pages())
    }

    fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(s) = self.0.upgrade() else { return 0 };
        s.state.lock().unwrap().stats.shrinker_scans += 1;
        s.evict(sc.nr_to_scan)
    }
}

fn main() {
    let alloc = PageAllocator::new(pagealloc::Config::new().arena_bytes(64 << 20)).expect("arena");
    let cache = KvBlockCache::new(&alloc);
    // Requests share prefixes: block i of a "prompt" is the same content
    // for every request with that prompt. Block sizes cycle through a hybrid
    // model's kinds (full attention, sliding window, state) as orders 0..=4.
    let mut live: Vec<BlockRef> = Vec::new();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for req in 0..20_000u64 {
        // Popular prompts come back often: the product of two uniform
        // draws skews toward low prompt numbers.
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let prompt = ((rng >> 33) % 1000) * ((rng >> 13) % 1000) / 1000;
        for i in 0..4u64 {
            let order = ((prompt + i) % (MAX_BLOCK_ORDER as u64 + 1)) as usize;
            let len = (PAGE_SIZE << order) - 64;
            let mut data = vec![0u8; len];
            data[..16].copy_from_slice(&[prompt.to_le_bytes(), i.to_le_bytes()].concat());
            match cache.get_or_insert(&data) {
                Ok(b) => live.push(b),
                Err(e) => println!("request {req} block {i}: {e}"),
            }
        }
        // Requests finish; a few stay running.
        if live.len() > 64 {
            live.drain(..live.len() - 32);
        }
    }
    drop(live);
    let s = cache.stats();
    println!(
        "hits {} misses {} evicted {} ({} pages; {} shrinker scans, {} evictions of its own); \
         cached {} blocks in {} pages, {} pages with every block in the largest slot",
        s.hits,
        s.misses,
        s.evicted,
        s.evicted_pages,
        s.shrinker_scans,
        s.own_evictions,
        s.blocks,
        s.pages,
        s.pages_if_largest_slot
    );
    alloc.check_invariants().expect("allocator intact");
}
