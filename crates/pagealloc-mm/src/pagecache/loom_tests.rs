//! loom models of the page cache's races on one page: a lookup
//! taking a reference against reclaim and against delete, a fill against a
//! reader waiting on the page lock; and a lookup, a write and a
//! delete each against migration of the page. They run the real functions
//! (`Mapping::find_get`/`get`/`delete`, `PageCache::shrink`, the page lock,
//! `put_page`, the LRU) on a one-pageblock, memory-backed arena with one CPU
//! slot and no kswapd; every model ends with conservation (every page is
//! free, cached, or nowhere: none lost, none handed out twice) and the
//! allocator's invariants.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p pagealloc --release --lib loom`.

use super::{Mapping, PageCache, PageCacheConfig};
use crate::*;
use pagealloc_core::page::flags::{HEAD, LRU, REFERENCED, REF_MASK, UPTODATE};
use pagealloc_core::sync::Ordering;
use std::sync::Arc;

/// The byte every page of index `i` is filled with.
fn pattern(i: u64) -> u8 {
    0xA0 + i as u8
}

/// A tiny backed allocator, its page cache (no kswapd) and mapping 1, whose
/// pages are filled with [`pattern`].
fn world() -> (Arc<PageAllocator>, PageCache, Mapping) {
    let a = Arc::new(
        PageAllocator::new(Config::default().arena_bytes(2 << 20).nr_cpus(Some(1)).min_free_kbytes(Some(0))).unwrap(),
    );
    let cache = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap();
    let src: Arc<dyn super::PageSource> = Arc::new(super::FillFn(|i: u64, buf: &mut [u8]| {
        buf.fill(pattern(i));
        Ok(())
    }));
    let m = cache.mapping(1, src);
    (a, cache, m)
}

/// `loom::model` with room for a whole allocator's bookkeeping (the
/// teardown's drain and merge walk many descriptor words: more branches than
/// loom's default 1000 in one execution).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = 20_000;
    b.check(f);
}

/// A second handle on mapping 1 (for the other thread).
fn again(cache: &PageCache) -> Mapping {
    cache.mapping(1, Arc::new(super::FillFn(|_: u64, _: &mut [u8]| Ok(()))))
}

/// Page `index` cached, up to date, on the inactive list and not
/// `REFERENCED` (a fill does not mark the page accessed), so one reclaim
/// pass would take it. Returns its pfn.
fn cached_cold(a: &PageAllocator, m: &Mapping, index: u64) -> Pfn {
    let pfn = m.get(index).unwrap().pfn();
    a.core.lru_add_drain_all();
    let f = a.core.mm.page(pfn.as_u64()).flags();
    assert_eq!(f & (LRU | REFERENCED | UPTODATE), LRU | UPTODATE, "{f:#x}");
    pfn
}

/// A migration target, as compaction takes one (`MIGRATE_TARGET`: the
/// page copy refuses any other page).
fn alloc_target(a: &PageAllocator) -> Pfn {
    a.core.alloc_pages(Gfp::MOVABLE, 0, pagealloc_core::page::flags::MIGRATE_TARGET).unwrap()
}

/// Give back a target migration did not use, as compaction does (a plain
/// store of `PCP`: nobody else writes a target's word).
fn free_target(a: &PageAllocator, t: Pfn) {
    a.core.mm.page(t.as_u64()).set_flags(pagealloc_core::page::flags::PCP);
    a.core.free_as_is(t.as_u64(), pagealloc_core::page::flags::PCP);
}

/// A live reference on `pfn`: still an allocated head with a count, and its
/// bytes (read under the page lock) are the ones the fill wrote.
fn check_held(a: &PageAllocator, h: &super::PageHandle<'_>) {
    let f = a.core.mm.page(h.pfn().as_u64()).flags();
    assert!(f & HEAD != 0 && f & REF_MASK != 0, "a held page was freed: {f:#x}");
    let mut b = [0u8; 2];
    assert_eq!(h.read(PAGE_SIZE - 2, &mut b), 2);
    assert_eq!(b, [pattern(h.index()); 2], "a held page's bytes changed");
}

/// Conservation: free + cached == managed once the caches are drained, and
/// again (all free) after the page cache is torn down.
fn conserved(a: &Arc<PageAllocator>, cache: PageCache, cached: u64) {
    assert_eq!(cache.nr_pages(), cached);
    a.core.lru_add_drain_all();
    a.core.vmscan.check(&a.core.mm).unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages() + cached, a.managed_pages());
    drop(cache);
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// A lookup (`find_get`: probe under the shard's read lock, `try_get`)
/// against reclaim of the same cold page (isolate, try-lock, freeze from 2,
/// remove, free to the buddy lists). Either the lookup misses, or it holds a
/// live page that reclaim did not free (reclaim's freeze then failed and the
/// page stays cached); the page is freed exactly once.
#[test]
fn loom_pagecache_lookup_races_reclaim() {
    model(|| {
        let (a, cache, m) = world();
        let pfn = cached_cold(&a, &m, 0);
        let (m2, a2) = (again(&cache), a.clone());
        let t = loom::thread::spawn(move || {
            let h = m2.find_get(0).unwrap();
            if let Some(h) = &h {
                assert_eq!(h.pfn(), pfn);
                check_held(&a2, h);
            }
            h.is_some()
        });
        let freed = cache.shrink(1);
        let found = t.join().unwrap();
        assert!(freed <= 1);
        if freed == 1 {
            assert!(m.find_get(0).unwrap().is_none(), "a reclaimed page is still mapped");
        } else {
            assert!(found, "reclaim of a cold, unreferenced page only fails against a reference");
            assert!(m.find_get(0).unwrap().is_some());
        }
        conserved(&a, cache, 1 - freed);
    });
}

/// A lookup against delete (`truncate`) and reuse: delete locks the page,
/// removes it and drops the cache's reference, then the deleter fills index
/// 1, which takes a freed frame (the same one, if the page was freed). The
/// looker's handle keeps the page alive (its bytes intact) until it drops
/// it, and a looker never ends up with index 1's page under index 0 (the
/// reference is taken inside the shard's read lock).
#[test]
fn loom_pagecache_lookup_races_delete() {
    model(|| {
        let (a, cache, m) = world();
        let pfn = cached_cold(&a, &m, 0);
        let (m2, a2) = (again(&cache), a.clone());
        let t = loom::thread::spawn(move || {
            if let Some(h) = m2.find_get(0).unwrap() {
                assert_eq!(h.index(), 0);
                check_held(&a2, &h);
                assert_eq!(h.pfn(), pfn);
            }
        });
        assert!(m.delete(0));
        let h1 = m.get(1).unwrap();
        check_held(&a, &h1);
        drop(h1);
        t.join().unwrap();
        assert!(m.find_get(0).unwrap().is_none());
        conserved(&a, cache, 1);
    });
}

/// A fill against a reader of the same index (`Mapping::get` on both
/// sides): one of them allocates, locks, inserts and reads the page in, sets
/// `UPTODATE` and unlocks; the other either finds the page and waits on its
/// lock (the waiters bit protocol) or loses the insert race and frees its
/// own page. Both must return (no lost wakeup: loom reports a deadlock) with
/// the same page, up to date, with the fill's bytes; one page stays cached.
#[test]
fn loom_pagecache_fill_races_waiter() {
    model(|| {
        let (a, cache, m) = world();
        let (m2, a2) = (again(&cache), a.clone());
        let t = loom::thread::spawn(move || {
            let h = m2.get(0).unwrap();
            assert!(a2.core.mm.page(h.pfn().as_u64()).flags() & UPTODATE != 0);
            check_held(&a2, &h);
            h.pfn()
        });
        let h = m.get(0).unwrap();
        let f = a.core.mm.page(h.pfn().as_u64()).flags.load(Ordering::Acquire);
        assert!(f & UPTODATE != 0, "get returned a page not up to date: {f:#x}");
        check_held(&a, &h);
        let other = t.join().unwrap();
        assert_eq!(h.pfn(), other, "two pages cached for one index");
        drop(h);
        conserved(&a, cache, 1);
    });
}

/// An asynchronous readahead window (`readahead`): the reader that
/// claimed a marker inserts the window's page locked with the read's
/// reference (`alloc_insert(.., 3)`) and another thread (a readahead worker)
/// reads it, sets `UPTODATE`, unlocks it and puts the read's reference
/// (`read_window(.., put = true)`), while a reader `get`s the same index. The
/// reader must return (no lost wakeup) the same page, up to date, with the
/// source's bytes; the read's reference is gone afterwards (only the cache
/// holds the page once the handle drops).
#[test]
fn loom_pagecache_async_window_races_reader() {
    model(|| {
        let (a, cache, m) = world();
        let pfn = m.alloc_insert(super::PageIndex::new(0).unwrap(), 3).unwrap().unwrap();
        let (c, mi) = (m.cache.clone(), m.m.clone());
        let t = loom::thread::spawn(move || {
            super::readahead::read_window(&c, &mi, 0, &[pfn], None).unwrap();
        });
        let m2 = again(&cache);
        let h = m2.get(0).unwrap();
        assert_eq!(h.pfn(), pfn, "the reader filled a second page");
        assert!(a.core.mm.page(pfn.as_u64()).flags() & UPTODATE != 0);
        check_held(&a, &h);
        drop(h);
        t.join().unwrap();
        a.core.lru_add_drain_all();
        assert_eq!(a.page_count(pfn), 1, "the read's reference was put");
        conserved(&a, cache, 1);
    });
}

/// A lookup (`find_get`, then reading the bytes under the page lock) against
/// migration of the same page (isolate from the LRU, try-lock, freeze from
/// 2, copy, publish the target locked, replace the map entry, free the
/// source, unlock the target). The lookup gets either the old page before
/// the move (and the move fails, or waits until the handle is gone) or the
/// new one after it, always live and with the fill's bytes, never a freed
/// frame; afterwards exactly one page is cached, at the frame the move's
/// outcome says.
#[test]
fn loom_pagecache_lookup_races_migration() {
    model(|| {
        let (a, cache, m) = world();
        let from = cached_cold(&a, &m, 0);
        let to = alloc_target(&a);
        let (m2, a2) = (again(&cache), a.clone());
        let t = loom::thread::spawn(move || {
            let h = m2.find_get(0).unwrap().expect("a cached page is always found");
            assert!(h.pfn() == from || h.pfn() == to);
            check_held(&a2, &h);
        });
        let moved = super::migrate::migrate(&cache.inner, from.as_u64(), to.as_u64());
        t.join().unwrap();
        let now = m.find_get(0).unwrap().unwrap().pfn();
        match moved {
            pagealloc_compaction::movable::Moved::Yes => {
                assert_eq!(now, to);
                let f = a.core.mm.page(from.as_u64()).flags();
                assert!(f & HEAD == 0, "the source was not freed: {f:#x}");
            }
            _ => {
                assert_eq!(now, from);
                free_target(&a, to);
            }
        }
        conserved(&a, cache, 1);
    });
}

/// A write through the cache (`get`, page lock, copy in, `DIRTY`, unlock)
/// against migration of the same page: the writer holds a reference, so the
/// move either happens before it found the page (it writes the new page) or
/// fails; the written bytes are never left behind in the old frame.
#[test]
fn loom_pagecache_write_races_migration() {
    model(|| {
        let (a, cache, m) = world();
        let from = cached_cold(&a, &m, 0);
        let to = alloc_target(&a);
        let m2 = again(&cache);
        let t = loom::thread::spawn(move || {
            m2.write(PAGE_SIZE as u64 - 2, &[0x11, 0x22]).unwrap();
        });
        let moved = super::migrate::migrate(&cache.inner, from.as_u64(), to.as_u64());
        t.join().unwrap();
        let h = m.find_get(0).unwrap().unwrap();
        let mut b = [0u8; 2];
        h.read(PAGE_SIZE - 2, &mut b);
        assert_eq!(b, [0x11, 0x22], "a write was lost to a migration");
        drop(h);
        if moved != pagealloc_compaction::movable::Moved::Yes {
            free_target(&a, to);
        }
        conserved(&a, cache, 1);
    });
}

/// Delete (`truncate`: lookup, lock, remove, put) against migration: the
/// page deleted is the old one or the new one, and whichever frames are not
/// cached end up free exactly once.
#[test]
fn loom_pagecache_delete_races_migration() {
    model(|| {
        let (a, cache, m) = world();
        let from = cached_cold(&a, &m, 0);
        let to = alloc_target(&a);
        let m2 = again(&cache);
        let t = loom::thread::spawn(move || assert!(m2.delete(0)));
        let moved = super::migrate::migrate(&cache.inner, from.as_u64(), to.as_u64());
        t.join().unwrap();
        assert!(m.find_get(0).unwrap().is_none());
        if moved != pagealloc_compaction::movable::Moved::Yes {
            free_target(&a, to);
        }
        conserved(&a, cache, 0);
    });
}

/// The flusher's wakeup protocol (`writeback::FlushWake`): two writers each
/// dirty a page (a count here) and wake the flusher; the flusher consumes
/// wakeups and cleans what it sees, parking when none is pending (loom's
/// park has no timeout, so a lost wakeup is a deadlock or a failed
/// assertion, never rescued by the real flusher's 100 ms period); then the
/// flusher is stopped. Every dirtying is cleaned before the flusher exits.
#[test]
fn loom_flusher_wakeups_are_never_lost() {
    use super::writeback::{FlushWake, Woke};
    use pagealloc_core::sync::AtomicU64;
    model(|| {
        let w = loom::sync::Arc::new(FlushWake::new());
        let dirty = loom::sync::Arc::new(AtomicU64::new(0));
        let (w2, d2) = (w.clone(), dirty.clone());
        let flusher = loom::thread::spawn(move || {
            w2.register();
            let mut cleaned = 0;
            loop {
                // As the real flusher: a pass on every return but Stop.
                if w2.wait(std::time::Duration::ZERO) == Woke::Stop {
                    return cleaned;
                }
                cleaned += d2.swap(0, Ordering::AcqRel);
            }
        });
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (w, d) = (w.clone(), dirty.clone());
                loom::thread::spawn(move || {
                    d.fetch_add(1, Ordering::Relaxed);
                    w.wake();
                })
            })
            .collect();
        for t in writers {
            t.join().unwrap();
        }
        w.stop();
        assert_eq!(flusher.join().unwrap(), 2, "a dirtying was left when the flusher stopped");
    });
}

/// The mapping lifetime rule: a fill of page 0 against `remove_mapping`
/// (kill: the dead flag, then a pass over every shard's write lock; then
/// truncate). Either the fill's insertion came first and the truncation
/// drops the page, or the fill reads the mapping dead under the shard lock
/// and inserts nothing (`MappingRemoved`); never a page left in a removed
/// mapping's map (the leak), and the filler's handle, if it got one, reads
/// the right bytes.
#[test]
fn loom_insert_races_mapping_removal() {
    model(|| {
        let (a, cache, m) = world();
        let cache = Arc::new(cache);
        let c2 = cache.clone();
        let t = loom::thread::spawn(move || {
            assert!(c2.remove_mapping(1));
        });
        match m.get(0) {
            Ok(h) => check_held(&a, &h),
            Err(e) => {
                assert_eq!(super::PageCacheError::of(&e), Some(&super::PageCacheError::MappingRemoved { id: 1 }));
            }
        }
        t.join().unwrap();
        assert!(!m.is_live());
        assert_eq!(m.nr_pages(), 0, "a page joined a removed mapping");
        drop(m);
        conserved(&a, Arc::into_inner(cache).unwrap(), 0);
    });
}

/// The last put of a cache page (a handle dropped after the page was
/// deleted) against a stranger's `trylock_page` of its pfn: the put
/// freezes the page locked in its own RMW and frees it, so the stranger is
/// refused (by the count before, by the lock after, or finds it free) and
/// the free never fails.
#[test]
fn loom_last_put_races_a_strangers_trylock() {
    model(|| {
        let (a, cache, m) = world();
        let h = m.get(0).unwrap();
        let pfn = h.pfn();
        a.core.lru_add_drain_all();
        assert!(m.delete(0));
        let a2 = a.clone();
        let t = loom::thread::spawn(move || a2.page_locks().trylock_page(pfn));
        drop(h);
        assert!(!t.join().unwrap(), "a stranger locked a page on its way to the free");
        conserved(&a, cache, 0);
    });
}
