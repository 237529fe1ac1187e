//! The KV block cache example (examples/kv_block_cache.rs) under memory
//! pressure: blocks of mixed orders far beyond the arena, some held in use
//! throughout, from several threads. Unused blocks are evicted through the
//! allocator's shrinker; blocks in use never are; contents stay intact;
//! the allocator's pages are conserved.

#[path = "../../examples/kv_block_cache.rs"]
mod kv;

use kv::{content_key, order_for, BlockRef, KvBlockCache, MAX_BLOCK_ORDER};
use pagealloc::{Config, PageAllocator, PAGE_SIZE};

/// Block `n`'s content: its length picks its order (0..=4), its bytes say
/// who it is.
fn content(n: u64) -> Vec<u8> {
    let order = (n % (MAX_BLOCK_ORDER as u64 + 1)) as usize;
    let len = (PAGE_SIZE << order) - 8 * (n % 7) as usize;
    (0..len).map(|i| (n.wrapping_mul(31) as usize + i * 7) as u8).collect()
}

fn check(b: &BlockRef, n: u64) {
    assert!(b.bytes() == content(n).as_slice(), "block {n} at {:?} changed", b.pfn());
}

/// The allocator's allocated pages are exactly the cache's plus `extra`.
fn conserved(a: &PageAllocator, cache: &KvBlockCache, extra: u64) {
    a.check_invariants().expect("allocator intact");
    a.drain_all_pages();
    let c = a.census();
    assert_eq!(c.allocated, cache.stats().pages + extra, "allocated pages are the cache's blocks: {c:?}");
}

#[test]
fn orders_fit_their_content() {
    assert_eq!(order_for(1), Some(0));
    assert_eq!(order_for(PAGE_SIZE), Some(0));
    assert_eq!(order_for(PAGE_SIZE + 1), Some(1));
    assert_eq!(order_for(PAGE_SIZE << MAX_BLOCK_ORDER), Some(MAX_BLOCK_ORDER));
    assert_eq!(order_for((PAGE_SIZE << MAX_BLOCK_ORDER) + 1), None);
}

#[test]
fn same_content_hits_the_same_block_until_evicted() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let cache = KvBlockCache::new(&a);
    let b1 = cache.get_or_insert(&content(3)).unwrap();
    let b2 = cache.get_or_insert(&content(3)).unwrap();
    assert_eq!(b1.pfn(), b2.pfn());
    check(&b2, 3);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.blocks, s.pages), (1, 1, 1, 8));
    // In use: nothing to evict.
    assert_eq!(cache.evict(u64::MAX), 0);
    drop((b1, b2));
    assert_eq!(cache.unused_pages(), 8);
    assert!(cache.lookup(content_key(&content(3))).is_some());
    assert_eq!(cache.evict(1), 8, "the whole block goes");
    assert!(cache.lookup(content_key(&content(3))).is_none());
    conserved(&a, &cache, 0);
}

#[test]
fn pressure_evicts_unused_blocks_through_the_shrinker_never_blocks_in_use() {
    // 8 MiB: 2048 pages; the run inserts about 20,000 pages of blocks.
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let cache = KvBlockCache::new(&a);
    // Held throughout: one block of each order.
    let pinned: Vec<(u64, BlockRef)> =
        (1_000_000..1_000_005).map(|n| (n, cache.get_or_insert(&content(n)).unwrap())).collect();
    let mut held: Vec<(u64, BlockRef)> = Vec::new();
    for n in 0..3200u64 {
        let b = cache.get_or_insert(&content(n)).unwrap_or_else(|e| panic!("block {n}: {e}"));
        check(&b, n);
        held.push((n, b));
        if held.len() > 12 {
            held.remove(0);
        }
        if n % 400 == 0 {
            conserved(&a, &cache, 0);
        }
    }
    for (n, b) in pinned.iter().chain(held.iter()) {
        check(b, *n);
    }
    let s = cache.stats();
    let inserted: u64 = (0..3200).chain(1_000_000..1_000_005).map(|n| 1u64 << (n % 5)).sum();
    assert!(inserted > 9 * a.nr_pages(), "the run must overfill the arena");
    assert_eq!(s.pages + s.evicted_pages, inserted, "every block inserted is cached or was evicted: {s:?}");
    assert!(s.shrinker_scans > 0, "the allocator's reclaim called the shrinker: {s:?}");
    assert!(s.evicted > 2000, "{s:?}");
    conserved(&a, &cache, 0);
    drop(held);
    drop(pinned);
    drop(cache);
    a.drain_all_pages();
    assert_eq!(a.census().allocated, 0, "the cache's drop freed every block");
}

#[test]
fn threads_share_blocks_under_pressure() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let cache = KvBlockCache::new(&a);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                let mut held: Vec<(u64, BlockRef)> = Vec::new();
                let mut rng = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for _ in 0..1500 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Shared popular blocks and private ones.
                    let n = if rng % 3 == 0 { rng % 40 } else { 10_000 * (t + 1) + rng % 2000 };
                    let b = cache.get_or_insert(&content(n)).unwrap_or_else(|e| panic!("block {n}: {e}"));
                    check(&b, n);
                    held.push((n, b));
                    if held.len() > 6 {
                        let (m, old) = held.remove(0);
                        check(&old, m);
                    }
                }
            });
        }
    });
    let s = cache.stats();
    assert!(s.hits > 0 && s.evicted > 0, "{s:?}");
    conserved(&a, &cache, 0);
    drop(cache);
    a.drain_all_pages();
    assert_eq!(a.census().allocated, 0);
}
