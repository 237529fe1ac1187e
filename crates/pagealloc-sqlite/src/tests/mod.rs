//! Every method through the C function pointers of [`METHODS`], each test on
//! its own group (so its own allocator) so that conservation is exact.
//! The budget and its overdraft are in `budget`, shared frames in `frames`,
//! the shards in `shards`.

mod budget;
mod frames;
mod shards;

use crate::ffi::{Sqlite3Pcache, Sqlite3PcachePage};
use crate::{cache_stats, page_charge, Config, CreateError, Group, InstallError, METHODS};
use std::sync::Arc;

const ARENA: u64 = 8 << 20;

/// A budget of `n` 4 KiB pages of the caches `open` makes (extra 200).
pub(super) fn pages(n: u64) -> Option<u64> {
    Some(n * page_charge(4096, 200))
}

fn group(budget: Option<u64>) -> Arc<Group> {
    Group::new(&Config { arena_bytes: ARENA, budget_bytes: budget, ..Config::default() }).unwrap()
}

/// A group whose hard cap is its budget: no overdraft.
fn capped(budget: u64) -> Arc<Group> {
    Group::new(&Config {
        arena_bytes: ARENA,
        budget_bytes: Some(budget),
        hard_cap_bytes: Some(budget),
        ..Config::default()
    })
    .unwrap()
}

/// The C entry points, unwrapped, over one cache.
pub(super) struct C(*mut Sqlite3Pcache);

impl C {
    pub(super) fn fetch(&self, key: u32, create: i32) -> *mut Sqlite3PcachePage {
        // SAFETY: self.0 is a live cache of the test's group.
        unsafe { METHODS.xFetch.unwrap()(self.0, key, create) }
    }
    pub(super) fn unpin(&self, p: *mut Sqlite3PcachePage, discard: bool) {
        // SAFETY: p is a pinned page of this cache.
        unsafe { METHODS.xUnpin.unwrap()(self.0, p, i32::from(discard)) }
    }
    pub(super) fn rekey(&self, p: *mut Sqlite3PcachePage, old: u32, new: u32) {
        // SAFETY: p is a page of this cache at `old`.
        unsafe { METHODS.xRekey.unwrap()(self.0, p, old, new) }
    }
    pub(super) fn truncate(&self, limit: u32) {
        // SAFETY: live cache.
        unsafe { METHODS.xTruncate.unwrap()(self.0, limit) }
    }
    pub(super) fn shrink(&self) {
        // SAFETY: live cache.
        unsafe { METHODS.xShrink.unwrap()(self.0) }
    }
    pub(super) fn cachesize(&self, n: i32) {
        // SAFETY: live cache.
        unsafe { METHODS.xCachesize.unwrap()(self.0, n) }
    }
    pub(super) fn pagecount(&self) -> i32 {
        // SAFETY: live cache.
        unsafe { METHODS.xPagecount.unwrap()(self.0) }
    }
    pub(super) fn stats(&self) -> crate::CacheStats {
        // SAFETY: live cache.
        unsafe { cache_stats(self.0) }
    }
    pub(super) fn destroy(self) {
        // SAFETY: live cache, not used again.
        unsafe { METHODS.xDestroy.unwrap()(self.0) }
    }
}

pub(super) fn open(g: &Arc<Group>, sz_page: usize, purgeable: bool) -> C {
    let c = C(g.create_cache(sz_page, 200, purgeable).unwrap());
    c.cachesize(1000);
    c
}

/// Write a tag into the page's buffer and check it reads back.
pub(super) fn tag(p: *mut Sqlite3PcachePage, v: u8, len: usize) {
    // SAFETY: a pinned page's buffer has `len` (its page size) bytes.
    unsafe { std::ptr::write_bytes((*p).p_buf.cast::<u8>(), v, len) }
}
pub(super) fn tag_of(p: *mut Sqlite3PcachePage, len: usize) -> Vec<u8> {
    // SAFETY: as in tag.
    unsafe { std::slice::from_raw_parts((*p).p_buf.cast::<u8>(), len).to_vec() }
}
pub(super) fn extra_head(p: *mut Sqlite3PcachePage) -> u64 {
    // SAFETY: the extra area has at least 8 bytes, 8-aligned.
    unsafe { (*p).p_extra.cast::<u64>().read() }
}
pub(super) fn set_extra_head(p: *mut Sqlite3PcachePage, v: u64) {
    // SAFETY: as in extra_head.
    unsafe { (*p).p_extra.cast::<u64>().write(v) }
}

/// Unpin `pages` of `c`, destroy it, and check that every frame is back
/// (the group's only cache).
pub(super) fn close(g: &Group, c: C, pages: impl IntoIterator<Item = *mut Sqlite3PcachePage>) {
    for p in pages {
        c.unpin(p, false);
    }
    c.destroy();
    assert_conserved(g);
}

/// Every frame is back: nothing leaked, nothing freed twice.
pub(super) fn assert_conserved(g: &Group) {
    g.check_invariants().unwrap();
    assert_eq!(g.used_frames(), 0);
    assert_eq!(g.charged_bytes(), 0);
    let a = g.allocator();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.check_invariants().unwrap();
}

#[test]
fn pin_unpin_hit_and_discard() {
    let g = group(None);
    let c = open(&g, 4096, true);
    assert!(c.fetch(7, 0).is_null(), "lookup only never creates");
    let p = c.fetch(7, 2);
    assert!(!p.is_null());
    assert_eq!(extra_head(p), 0, "a new page's extra head is zero");
    tag(p, 0xab, 4096);
    set_extra_head(p, 99);
    c.unpin(p, false);
    let q = c.fetch(7, 0);
    assert_eq!(q, p, "an unpinned page is found again");
    assert_eq!(tag_of(q, 4096), vec![0xab; 4096]);
    assert_eq!(extra_head(q), 99, "a hit keeps the extra area");
    let s = c.stats();
    assert_eq!((s.fetches, s.hits, s.misses, s.pinned, s.pages), (3, 1, 2, 1, 1));
    c.unpin(q, true);
    assert_eq!(c.pagecount(), 0, "discard frees at once");
    assert!(c.fetch(7, 0).is_null());
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn rekey_moves_and_replaces() {
    let g = group(None);
    let c = open(&g, 4096, true);
    let a = c.fetch(1, 2);
    let b = c.fetch(2, 2);
    tag(a, 1, 4096);
    c.unpin(b, false);
    c.rekey(a, 1, 2);
    assert_eq!(c.pagecount(), 1, "the page at the new key was dropped");
    assert!(c.fetch(1, 0).is_null());
    assert_eq!(c.fetch(2, 0), a);
    assert_eq!(tag_of(a, 4096), vec![1; 4096]);
    c.unpin(a, false);
    c.rekey(a, 2, 5);
    assert_eq!(c.fetch(5, 0), a, "an unpinned page moves too");
    c.unpin(a, false);
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn truncate_drops_pinned_pages_too() {
    let g = group(None);
    let c = open(&g, 4096, true);
    let ps: Vec<_> = (0..10).map(|k| c.fetch(k, 2)).collect();
    for &p in &ps[..5] {
        c.unpin(p, false);
    }
    c.unpin(ps[8], false);
    c.truncate(3);
    assert_eq!(c.pagecount(), 3);
    assert_eq!(c.stats().pinned, 0, "pages 5..10 were pinned and are gone");
    assert!((3..10).all(|k| c.fetch(k, 0).is_null()));
    assert!((0..3).all(|k| !c.fetch(k, 0).is_null()));
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn shrink_frees_unpinned_pages_of_purgeable_caches_only() {
    let g = group(None);
    let c = open(&g, 4096, true);
    let m = open(&g, 4096, false);
    let pinned = c.fetch(0, 2);
    for k in 1..6 {
        c.unpin(c.fetch(k, 2), false);
        m.unpin(m.fetch(k, 2), false);
    }
    c.shrink();
    m.shrink();
    assert_eq!(c.pagecount(), 1, "only the pinned page is left");
    assert_eq!(c.fetch(0, 0), pinned);
    assert_eq!(c.stats().evictions, 5);
    assert_eq!(m.pagecount(), 5, "a non-purgeable cache loses nothing");
    c.destroy();
    m.destroy();
    assert_conserved(&g);
}

#[test]
fn cachesize_is_a_soft_limit_that_recycles() {
    let g = group(None);
    let c = open(&g, 4096, true);
    c.cachesize(4);
    // pcache1's rule: a page that would bring the cache to its limit
    // recycles the oldest instead, so 3 pages are made ...
    for k in 0..3 {
        let p = c.fetch(k, 2);
        set_extra_head(p, 0xdead);
        c.unpin(p, false);
    }
    let used = g.used_frames();
    // ... and the fourth recycles.
    let p = c.fetch(100, 2);
    assert_eq!(c.pagecount(), 3, "at the limit the oldest page is recycled");
    assert_eq!(g.used_frames(), used, "recycling allocates nothing");
    assert_eq!(extra_head(p), 0, "a recycled page is new: extra head zeroed");
    assert!(c.fetch(0, 0).is_null(), "key 0 was the oldest");
    // Pinned pages may exceed the soft limit with createFlag 2 ...
    let more: Vec<_> = (200..206).map(|k| c.fetch(k, 2)).collect();
    assert!(more.iter().all(|p| !p.is_null()));
    // ... but a cheap creation is refused once 90% of the limit is pinned.
    assert!(c.fetch(300, 1).is_null());
    // Unpinned over the limit, pages are freed at once (pcache1 does so).
    assert_eq!(c.pagecount(), 7);
    for q in more {
        c.unpin(q, false);
    }
    assert_eq!(c.pagecount(), 4);
    c.unpin(p, false);
    assert_eq!(c.pagecount(), 4);
    c.cachesize(2);
    assert_eq!(c.pagecount(), 2, "lowering the limit drops unpinned pages");
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn page_sizes_map_to_orders() {
    let g = group(None);
    for (sz, frames) in [(512usize, 1u64), (1024, 1), (4096, 1), (8192, 2), (65536, 16)] {
        let c = open(&g, sz, true);
        let p = c.fetch(1, 2);
        tag(p, 0x5a, sz);
        assert_eq!(tag_of(p, sz), vec![0x5a; sz]);
        assert_eq!(g.used_frames(), frames, "page size {sz}");
        assert_eq!(crate::page_order(sz), frames.trailing_zeros());
        c.destroy();
    }
    assert_conserved(&g);
}

#[test]
fn bad_page_sizes_are_refused() {
    let g = group(None);
    for sz in [0usize, 256, 1000, 4097, 131072] {
        assert_eq!(g.create_cache(sz, 100, true).unwrap_err(), CreateError::PageSize(sz));
    }
    assert!(matches!(g.create_cache(4096, 1 << 20, true), Err(CreateError::Extra(_))));
    assert_conserved(&g);
}

#[test]
fn hard_cap_below_one_page_per_cache_refuses_creation() {
    // 3 pages: two 4 KiB caches fit, a third does not, nor a 64 KiB one.
    let cap = pages(3).unwrap();
    let g = capped(cap);
    let a = open(&g, 4096, true);
    let b = open(&g, 4096, true);
    let need = 2 * page_charge(4096, 200) + page_charge(65536, 100);
    let e = g.create_cache(65536, 100, true).unwrap_err();
    assert_eq!(e, CreateError::HardCap { need, cap });
    let c = open(&g, 4096, true);
    assert!(matches!(g.create_cache(4096, 200, true), Err(CreateError::HardCap { .. })));
    // A 512-byte page's cache reserves a whole frame: its first page takes one.
    assert!(matches!(g.create_cache(512, 200, true), Err(CreateError::HardCap { .. })));
    g.check_invariants().unwrap();
    for x in [a, b, c] {
        x.destroy();
    }
    let bad = |budget, cap| {
        Group::new(&Config { arena_bytes: ARENA, budget_bytes: budget, hard_cap_bytes: cap, ..Config::default() })
    };
    assert!(matches!(bad(Some(100), None), Err(InstallError::Budget { .. })));
    assert!(matches!(bad(Some(2 * ARENA), None), Err(InstallError::Budget { .. })));
    assert!(matches!(bad(Some(ARENA / 2), Some(ARENA / 4)), Err(InstallError::HardCap { .. })));
    assert!(matches!(bad(Some(ARENA / 2), Some(2 * ARENA)), Err(InstallError::HardCap { .. })));
    assert!(matches!(bad(None, Some(ARENA / 2)), Err(InstallError::HardCap { .. })));
    assert!(matches!(Group::new(&Config { arena_bytes: 12345, ..Config::default() }), Err(InstallError::Arena(12345))));
    assert!(matches!(Group::new(&Config { arena_bytes: 0, ..Config::default() }), Err(InstallError::Arena(0))));
    assert!(matches!(
        Group::new(&Config { arena_bytes: 1 << 60, ..Config::default() }),
        Err(InstallError::Allocator(_))
    ));
    assert_conserved(&g);
}

#[test]
fn budget_recycles_the_groups_coldest_page() {
    let g = capped(pages(8).unwrap());
    let a = open(&g, 4096, true);
    let b = open(&g, 4096, true);
    for k in 0..8 {
        a.unpin(a.fetch(k, 2), false);
    }
    assert_eq!(g.used_frames(), 8);
    let p = b.fetch(0, 1);
    assert!(!p.is_null(), "cheap: the coldest page of cache a is recycled in place, as pcache1 does");
    assert_eq!(g.used_frames(), 8, "no frame allocated");
    assert_eq!(a.pagecount(), 7);
    assert!(a.fetch(0, 0).is_null(), "key 0 was the coldest");
    assert_eq!(a.stats().evictions, 1);
    // All pinned: nothing to evict, and the hard cap is the budget: even
    // every effort fails (SQLITE_NOMEM; with room under a hard cap it
    // would overdraw: tests::budget).
    let pins: Vec<_> = (1..8).map(|k| a.fetch(k, 0)).collect();
    assert!(b.fetch(1, 1).is_null());
    assert!(b.fetch(1, 2).is_null());
    for q in pins {
        a.unpin(q, false);
    }
    b.unpin(p, false);
    a.destroy();
    b.destroy();
    assert_conserved(&g);
}

#[test]
fn allocator_reclaim_evicts_unpinned_pages_through_the_shrinker() {
    // Budget = arena: the allocator runs short before the budget does, and
    // its direct reclaim calls the group's shrinker.
    let g = group(None);
    let c = open(&g, 4096, true);
    c.cachesize(i32::MAX);
    let managed = g.allocator().managed_pages();
    let mut created = 0u32;
    while created < managed as u32 + 64 {
        let p = c.fetch(created, 2);
        assert!(!p.is_null(), "reclaim must make room for page {created}");
        c.unpin(p, false);
        created += 1;
    }
    assert!(c.stats().evictions > 0);
    assert!((c.pagecount() as u64) < managed);
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn destroy_frees_pinned_and_unpinned_pages() {
    let g = group(None);
    let c = open(&g, 16384, true);
    let m = open(&g, 4096, false);
    for k in 0..20 {
        let p = c.fetch(k, 2);
        if k % 2 == 0 {
            c.unpin(p, false);
        }
        let q = m.fetch(k, 2);
        if k % 3 == 0 {
            m.unpin(q, false);
        }
    }
    assert_eq!(g.used_frames(), 20 * 4 + 20);
    c.destroy();
    m.destroy();
    assert_conserved(&g);
}

#[test]
fn recycling_follows_the_global_lru_across_caches() {
    let g = group(pages(3));
    // Every unpin ticks the clock: the order across shards is exact.
    g.set_tick(1);
    let a = open(&g, 4096, true);
    let b = open(&g, 4096, true);
    a.unpin(a.fetch(0, 2), false);
    b.unpin(b.fetch(0, 2), false);
    a.unpin(a.fetch(1, 2), false);
    // A hit makes a0 the newest: b0 is now the oldest, then a1.
    a.unpin(a.fetch(0, 0), false);
    // A rekey of a pinned page: unpinned, it is the newest under its new key.
    let r = a.fetch(1, 0);
    a.rekey(r, 1, 7);
    a.unpin(r, false);
    let p = a.fetch(2, 1);
    assert!(!p.is_null(), "cheap creation at the budget recycles b0 in place");
    assert!(b.fetch(0, 0).is_null(), "b0 was the oldest");
    assert_eq!(b.stats().evictions, 1);
    let q = b.fetch(1, 1);
    assert!(!q.is_null());
    assert!(a.fetch(0, 0).is_null(), "a0 was next");
    let r = a.fetch(7, 0);
    assert!(!r.is_null(), "a7 (was a1) was the newest");
    a.unpin(r, false);
    assert_eq!((a.pagecount(), b.pagecount(), g.used_frames()), (2, 1, 3));
    a.unpin(p, false);
    b.unpin(q, false);
    a.destroy();
    b.destroy();
    assert_conserved(&g);
}

#[test]
fn the_budget_charges_headers_and_the_checker_sees_drift() {
    // A page costs its frame and more: its header and SQLite's extra area.
    let charge = page_charge(4096, 200);
    assert!((4096 + 200 + 64..4096 + 512).contains(&charge), "{charge}");
    assert_eq!(page_charge(16384, 200) - page_charge(4096, 200), 3 * 4096);
    // A budget of 4 whole frames holds 3 pages once headers are charged.
    let g = capped(4 * 4096);
    let c = open(&g, 4096, true);
    let held: Vec<_> = (0..4).map(|k| c.fetch(k, 2)).collect();
    assert!(held[..3].iter().all(|p| !p.is_null()) && held[3].is_null());
    assert_eq!((g.used_frames(), g.charged_bytes()), (3, 3 * charge));
    g.check_invariants().unwrap();
    // Bookkeeping drift is caught: a frame counted that no page holds.
    assert!(g.acct.try_charge(1, 0, u64::MAX));
    assert!(g.check_invariants().unwrap_err().contains("account"));
    g.acct.uncharge(1, 0);
    // A pin count that disagrees with the pages.
    g.lock(0).cache_mut(0).n_pinned += 1;
    assert!(g.check_invariants().unwrap_err().contains("pinned"));
    g.lock(0).cache_mut(0).n_pinned -= 1;
    // A head hint over its shard's oldest stamp: eviction would skip it.
    c.unpin(held[0], false);
    let head = g.heads[0].swap(u64::MAX - 1, std::sync::atomic::Ordering::Relaxed);
    assert!(g.check_invariants().unwrap_err().contains("head hint"));
    g.heads[0].store(head, std::sync::atomic::Ordering::Relaxed);
    let held: Vec<_> = std::iter::once(c.fetch(0, 0)).chain(held.into_iter().skip(1)).collect();
    for p in held.into_iter().filter(|p| !p.is_null()) {
        c.unpin(p, false);
    }
    g.check_invariants().unwrap();
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn cheap_creation_evicts_a_page_of_another_size() {
    let g = group(Some(2 * page_charge(16384, 200)));
    let a = open(&g, 16384, true);
    let b = open(&g, 4096, true);
    a.unpin(a.fetch(0, 2), false);
    a.unpin(a.fetch(1, 2), false);
    // At the budget, the oldest page is 16 KiB: no in-place recycling for
    // a 4 KiB cache, so it is evicted and a frame allocated, at createFlag 1.
    let p = b.fetch(0, 1);
    assert!(!p.is_null(), "cheap creation evicts a clean page of another size");
    assert!(a.fetch(0, 0).is_null(), "a0 was the oldest");
    assert_eq!((a.stats().evictions, a.pagecount()), (1, 1));
    // With a1 pinned nothing is left to evict: cheap creation fills the
    // room left and then refuses, leaving a1 alone.
    let q = a.fetch(1, 0);
    let mut held = vec![p];
    loop {
        let r = b.fetch(held.len() as u32, 1);
        if r.is_null() {
            break;
        }
        held.push(r);
    }
    assert!(held.len() >= 2 && a.pagecount() == 1 && g.create_counts().1 == 1);
    g.check_invariants().unwrap();
    a.unpin(q, false);
    for r in held {
        b.unpin(r, false);
    }
    a.destroy();
    b.destroy();
    assert_conserved(&g);
}
