//! The shards: more caches than shards, the global LRU order across them,
//! and threads working caches of every shard while the invariants are
//! checked.

use super::{assert_conserved, open, pages, tag, tag_of, ARENA, C};
use crate::group::TICK;
use crate::shard::SHARDS;
use crate::{Config, Group};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn eviction_follows_the_unpin_order_across_shards() {
    // More caches than shards: ids 64.. share shards with 0...
    let n = SHARDS + 8;
    let g = Group::new(&Config { arena_bytes: ARENA, budget_bytes: pages(n as u64), ..Config::default() }).unwrap();
    // Every unpin ticks the clock: the order across shards is exact.
    g.set_tick(1);
    let caches: Vec<C> = (0..n).map(|_| open(&g, 4096, true)).collect();
    // Unpin one page per cache in a scrambled order: that is the LRU order.
    let order: Vec<usize> = (0..n).map(|i| i * 37 % n).collect();
    let held: Vec<_> = order.iter().map(|&i| caches[i].fetch(0, 2)).collect();
    for (&i, &p) in order.iter().zip(&held) {
        caches[i].unpin(p, false);
    }
    g.check_invariants().unwrap();
    // A new cache at the budget takes the oldest page each time (in place,
    // same geometry), wherever its shard.
    let x = open(&g, 4096, true);
    for (k, &i) in order.iter().enumerate() {
        let p = x.fetch(k as u32, 1);
        assert!(!p.is_null());
        assert_eq!(caches[i].pagecount(), 0, "step {k}: cache {i} held the oldest page");
        assert!(order[k + 1..].iter().all(|&j| caches[j].pagecount() == 1), "step {k}: a newer page went");
        x.unpin(p, false);
        // x's own page is now the newest; the next oldest is still order[k+1].
    }
    assert_eq!(g.used_frames(), n as u64);
    g.check_invariants().unwrap();
    for c in caches {
        c.destroy();
    }
    x.destroy();
    assert_conserved(&g);
}

#[test]
fn pages_a_tick_apart_leave_in_order() {
    // The default clock ticks every TICK unpins of a shard: a page of a
    // quiet cache unpinned before the busy cache's shard ticked is older
    // than the busy pages unpinned after, whichever shard is looked at
    // first (ties go to the lower shard).
    for quiet_first in [true, false] {
        let g = Group::new(&Config { arena_bytes: ARENA, budget_bytes: pages(3), ..Config::default() }).unwrap();
        let (a, b) = (open(&g, 4096, true), open(&g, 4096, true));
        let (quiet, busy) = if quiet_first { (&a, &b) } else { (&b, &a) };
        quiet.unpin(quiet.fetch(0, 2), false);
        for k in 0..2 * TICK + 2 {
            busy.unpin(busy.fetch(k % 2, 2), false);
        }
        // At the budget (3 pages: quiet's one, busy's two), a new page
        // takes the oldest: the quiet cache's.
        let x = open(&g, 4096, true);
        let p = x.fetch(0, 1);
        assert!(!p.is_null());
        assert_eq!((quiet.pagecount(), busy.pagecount()), (0, 2), "quiet first: {quiet_first}");
        x.unpin(p, false);
        for c in [a, b, x] {
            c.destroy();
        }
        assert_conserved(&g);
    }
}

/// One thread's random operations on its caches; pages carry a tag of
/// (cache, key) that every hit checks.
fn worker(g: &Arc<Group>, t: u64, stop: &AtomicBool) {
    let mut rng = Rng(0x9e37_79b9 ^ ((t + 1) * 0x1234_5678_9abc));
    let sizes = [4096usize, 1024, 512, 8192, 2048, 4096];
    let caches: Vec<(C, usize)> = (0..12)
        .map(|i| {
            let sz = sizes[(i + t as usize) % sizes.len()];
            let c = open(g, sz, i % 5 != 4);
            c.cachesize(if i % 4 == 0 { 8 } else { 500 });
            (c, sz)
        })
        .collect();
    let mut pinned: Vec<(usize, u32, *mut crate::ffi::Sqlite3PcachePage)> = Vec::new();
    let mark = |ci: usize, key: u32| (t as u8).wrapping_mul(31) ^ (ci as u8).wrapping_mul(7) ^ key as u8;
    for _ in 0..20_000 {
        let ci = rng.below(caches.len() as u64) as usize;
        let (c, sz) = &caches[ci];
        let key = rng.below(64) as u32;
        match rng.below(10) {
            0..=5 if !pinned.iter().any(|&(i, k, _)| i == ci && k == key) => {
                let hits = c.stats().hits;
                let p = c.fetch(key, 1 + rng.below(2) as i32);
                if p.is_null() {
                    continue;
                }
                // A page found again carries the tag written when it was
                // made (this thread alone calls this cache; others only
                // evict its unpinned pages).
                if c.stats().hits > hits {
                    assert_eq!(tag_of(p, *sz), vec![mark(ci, key); *sz], "thread {t} cache {ci} key {key}");
                }
                tag(p, mark(ci, key), *sz);
                pinned.push((ci, key, p));
            }
            6..=8 if !pinned.is_empty() => {
                let (i, _, p) = pinned.swap_remove(rng.below(pinned.len() as u64) as usize);
                caches[i].0.unpin(p, rng.below(8) == 0);
            }
            9 if pinned.iter().all(|&(i, _, _)| i != ci) => match rng.below(3) {
                0 => c.truncate(rng.below(64) as u32),
                1 => c.shrink(),
                _ => c.cachesize(4 + rng.below(100) as i32),
            },
            _ => {}
        }
        if stop.load(Relaxed) {
            break;
        }
    }
    for (i, _, p) in pinned {
        caches[i].0.unpin(p, false);
    }
    for (c, _) in caches {
        c.destroy();
    }
}

#[test]
fn threads_on_caches_of_every_shard_keep_the_invariants() {
    // 8 threads x 12 caches: more caches than shards; pages of 512 B to
    // 8 KiB; a budget of 160 4 KiB pages, overdrawn now and then.
    let g = Group::new(&Config { arena_bytes: ARENA, budget_bytes: pages(160), ..Config::default() }).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|t| {
                s.spawn({
                    let (g, stop) = (&g, &stop);
                    move || worker(g, t, stop)
                })
            })
            .collect();
        while !hs.iter().all(|h| h.is_finished()) {
            g.check_invariants().unwrap_or_else(|e| {
                stop.store(true, Relaxed);
                panic!("{e}")
            });
            std::thread::yield_now();
        }
    });
    let (caches, fetches, hits, misses, evictions) = g.totals();
    assert!(caches == 96 && fetches == hits + misses && hits > 0 && evictions > 0, "{:?}", g.totals());
    assert_conserved(&g);
}
