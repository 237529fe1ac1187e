//! Unit and thread tests of the page cache, LRU and reclaim.

use super::*;
use crate::mm::vmscan::{ShrinkControl, Shrinker};
use crate::Pfn;
use crate::{Config, FreeError, Gfp, PageStateError, PAGE_SIZE};
use pagealloc_core::types::ZoneIdx;
use pagealloc_core::vmevent::VmEvent;
use std::io;
use std::sync::atomic::AtomicUsize;

fn cache(mib: u64, kswapd: bool) -> PageCache {
    let a = Arc::new(PageAllocator::new(Config::small(mib << 20).backing(crate::Backing::Anonymous)).unwrap());
    PageCache::new(a, PageCacheConfig { kswapd }).unwrap()
}

/// A page whose bytes all equal a function of its index.
fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(31) % 251) as u8
}

fn pattern_source() -> Arc<dyn PageSource> {
    Arc::new(FillFn(|i: u64, buf: &mut [u8]| {
        buf.fill(pattern(i));
        Ok(())
    }))
}

/// Everything is free again once the cache is gone and the lists drained.
pub(super) fn all_back(a: &PageAllocator) {
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.allocated, 0, "{c:?}");
    assert_eq!(c.free + c.pcp, a.managed_pages(), "{c:?}");
}

#[test]
fn fill_hit_references_and_raw_free_refused() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(7, pattern_source());
    let h = m.get(3).unwrap();
    let mut b = [0u8; 16];
    assert_eq!(h.read(100, &mut b), 16);
    assert!(b.iter().all(|&x| x == pattern(3)));
    // cache + handle + LRU batch
    assert_eq!(a.page_count(h.pfn()), 3);
    assert_eq!(a.free_pages(h.pfn(), 0), Err(FreeError::Referenced { pfn: h.pfn() }));
    let h2 = m.get(3).unwrap();
    assert_eq!(h2.pfn(), h.pfn(), "second get hits the cache");
    drop(h2);
    a.reclaim().lru_add_drain_all();
    assert_eq!(a.page_count(h.pfn()), 2);
    assert_eq!(a.reclaim().lru_sizes(0), (1, 0));
    assert!(pc.shrink(32) == 0, "a page with an outside reference is never reclaimed");
    assert!(m.is_cached(3));
    let pfn = h.pfn();
    drop(h);
    assert_eq!(pc.shrink(32), 1);
    assert!(!m.is_cached(3));
    assert_eq!(a.page_count(pfn), 0);
    assert!(a.stats().event_count(VmEvent::PgstealDirect) >= 1);
    drop(m);
    drop(pc);
    all_back(&a);
}

#[test]
fn fill_error_leaves_nothing_cached() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(
        1,
        Arc::new(FillFn(|i: u64, _b: &mut [u8]| if i == 5 { Err(io::Error::other("bad")) } else { Ok(()) })),
    );
    assert!(m.get(5).is_err());
    assert!(!m.is_cached(5));
    assert!(m.get(4).is_ok());
    assert_eq!(m.nr_pages(), 1);
    drop(m);
    drop(pc);
    all_back(&a);
}

#[test]
fn second_access_activates_and_aging_deactivates() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(1, pattern_source());
    for i in 0..20 {
        drop(m.get(i).unwrap());
    }
    // 20 adds: one full batch of 15 went to the list, 5 wait.
    assert_eq!(a.reclaim().lru_sizes(0).0, 15);
    a.reclaim().lru_add_drain_all();
    assert_eq!(a.reclaim().lru_sizes(0), (20, 0));
    drop(m.get(0).unwrap()); // REFERENCED
    assert_eq!(a.reclaim().lru_sizes(0), (20, 0));
    drop(m.get(0).unwrap()); // activated
    assert_eq!(a.reclaim().lru_sizes(0), (19, 1));
    // zoneinfo's per-node section says the same, as the kernel's does.
    let zi = a.stats().zoneinfo();
    assert_eq!(
        zi.zones[0].node_stats,
        vec![("nr_inactive_file", 19), ("nr_active_file", 1), ("nr_dirty", 0), ("nr_writeback", 0)]
    );
    // And per zone (one zone here), where Linux prints them.
    let zs = &zi.zones[0].stats;
    assert!(zs.contains(&("nr_zone_inactive_file", 19)) && zs.contains(&("nr_zone_active_file", 1)), "{zs:?}");
    assert!(zs.contains(&("nr_zone_write_pending", 0)), "{zs:?}");
    assert!(zi.to_string().contains("  per-node stats\n      nr_inactive_file 19\n      nr_active_file 1\n"));
    assert_eq!(a.stats().event_count(VmEvent::Pgactivate), 1);
    a.check_invariants().unwrap();
    // Reclaim everything inactive: page 0 survives on the active list.
    assert_eq!(pc.shrink(64), 19);
    assert!(m.is_cached(0));
    // The active list now outweighs the inactive one: aging moves it down,
    // then it is reclaimed.
    assert_eq!(pc.shrink(64), 1);
    assert_eq!(a.stats().event_count(VmEvent::Pgdeactivate), 1);
    assert_eq!(m.nr_pages(), 0);
    drop(m);
    drop(pc);
    all_back(&a);
}

#[test]
fn file_write_fsync_reclaim_reread() {
    let dir = std::env::temp_dir().join(format!("pagecache-test-{}", std::process::id()));
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&dir).unwrap();
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(9, Arc::new(FileSource(f)));
    let data: Vec<u8> = (0..3 * PAGE_SIZE + 100).map(|i| (i % 253) as u8).collect();
    assert_eq!(m.write(50, &data).unwrap(), data.len());
    assert_eq!(a.stats().vmstat().get("nr_dirty"), Some(4));
    // Dirty pages are written back by reclaim (synchronously) and, clean
    // then, freed in the same pass.
    assert_eq!(pc.shrink(64), 4);
    assert_eq!(m.nr_pages(), 0);
    assert_eq!(a.stats().vmstat().get("nr_dirty"), Some(0));
    assert_eq!(a.stats().vmstat().get("nr_writeback"), Some(0));
    let disk = std::fs::read(&dir).unwrap();
    assert_eq!(&disk[50..50 + data.len()], &data[..], "written back before being freed");
    // A write into a reclaimed page reads it back from the file first.
    m.write(0, b"head").unwrap();
    m.fsync().unwrap();
    assert_eq!(a.stats().vmstat().get("nr_dirty"), Some(0));
    let disk = std::fs::read(&dir).unwrap();
    assert_eq!(&disk[..4], b"head");
    assert_eq!(&disk[50..50 + data.len()], &data[..]);
    // The write's miss at page 0 read the file's 4 pages ahead. Clean now:
    // reclaim drops them; a read comes back from the file.
    assert_eq!(m.nr_pages(), 4, "readahead: the whole 4-page file in one window");
    assert_eq!(pc.shrink(64), 4);
    assert_eq!(m.nr_pages(), 0);
    let mut back = vec![0u8; data.len()];
    m.read(50, &mut back).unwrap();
    assert_eq!(back, data);
    drop(m);
    drop(pc);
    all_back(&a);
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn direct_reclaim_reads_ten_times_the_arena() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(1, pattern_source());
    let n = 10 * a.managed_pages();
    let mut b = [0u8; 8];
    for i in 0..n {
        m.read(i * PAGE_SIZE as u64, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == pattern(i)), "page {i}");
    }
    assert_eq!(a.stats().event_count(VmEvent::AllocFail), 0);
    assert!(a.stats().event_count(VmEvent::PgstealDirect) > n / 2);
    assert!(a.stats().event_count(VmEvent::AllocstallMovable) > 0);
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.free + c.pcp + c.allocated, a.managed_pages());
    drop(m);
    drop(pc);
    all_back(&a);
}

#[test]
fn kswapd_reclaims_in_the_background() {
    let pc = cache(8, true);
    let a = pc.allocator().clone();
    let m = pc.mapping(1, pattern_source());
    let n = 5 * a.managed_pages();
    let mut b = [0u8; 1];
    for i in 0..n {
        m.read(i * PAGE_SIZE as u64, &mut b).unwrap();
    }
    assert_eq!(a.stats().event_count(VmEvent::AllocFail), 0);
    assert!(a.stats().event_count(VmEvent::PgstealKswapd) > 0, "{}", a.stats().vmstat());
    assert!(a.stats().event_count(VmEvent::Pageoutrun) > 0);
    eprintln!(
        "kswapd test: {n} pages read, pgsteal_kswapd {} pgsteal_direct {} allocstall_movable {} pageoutrun {}",
        a.stats().event_count(VmEvent::PgstealKswapd),
        a.stats().event_count(VmEvent::PgstealDirect),
        a.stats().event_count(VmEvent::AllocstallMovable),
        a.stats().event_count(VmEvent::Pageoutrun)
    );
    drop(m);
    drop(pc);
    all_back(&a);
}

/// Unrelated allocations reclaim the cache too, and a shrinker of the user's
/// is asked in proportion.
#[test]
fn user_shrinker_and_foreign_allocations() {
    struct Hoard(parking_lot::Mutex<Vec<Pfn>>, Arc<PageAllocator>, AtomicUsize);
    impl Shrinker for Hoard {
        fn count_objects(&self, _: &ShrinkControl) -> u64 {
            self.0.lock().len() as u64
        }
        fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
            self.2.fetch_add(1, Ordering::Relaxed);
            let mut v = self.0.lock();
            let k = (sc.nr_to_scan as usize).min(v.len());
            for p in v.drain(..k) {
                self.1.free_pages(p, 0).unwrap();
            }
            k as u64
        }
    }
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(1, pattern_source());
    let hoard = Arc::new(Hoard(parking_lot::Mutex::new(Vec::new()), a.clone(), AtomicUsize::new(0)));
    let id = a.reclaim().register_shrinker(hoard.clone());
    for i in 0..a.managed_pages() / 2 {
        drop(m.get(i).unwrap());
    }
    let mut mine = Vec::new();
    for k in 0..a.managed_pages() {
        match a.alloc_pages(Gfp::MOVABLE, 0) {
            Ok(p) if k % 2 == 0 => hoard.0.lock().push(p),
            Ok(p) => mine.push(p),
            Err(_) => break,
        }
    }
    assert!(hoard.2.load(Ordering::Relaxed) > 0, "the user's shrinker was asked");
    assert!(a.stats().event_count(VmEvent::PgstealDirect) > 0);
    assert!(a.reclaim().unregister_shrinker(id));
    for p in hoard.0.lock().drain(..) {
        a.free_pages(p, 0).unwrap();
    }
    for p in mine {
        a.free_pages(p, 0).unwrap();
    }
    drop(m);
    drop(pc);
    all_back(&a);
}

/// Lookups and fills racing deletes, reclaim and foreign allocations; every
/// read sees its page's contents; at the end every page comes back.
#[test]
fn threads_race_lookup_fill_delete_reclaim() {
    race(cache(8, true));
}

/// The same on two nodes (an LRU pair per node), kswapd off.
#[test]
fn threads_race_on_two_nodes() {
    let cfg = Config::small(8 << 20).backing(crate::Backing::Anonymous).nodes(2);
    let a = Arc::new(PageAllocator::new(cfg).unwrap());
    race(PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap());
}

fn race(pc: PageCache) {
    let a = pc.allocator().clone();
    let pc = Arc::new(pc);
    let span = 2 * a.managed_pages();
    let stop = std::time::Instant::now() + std::time::Duration::from_millis(1200);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let pc = pc.clone();
            let a = a.clone();
            s.spawn(move || {
                let m = pc.mapping(1, pattern_source());
                let mut x = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut held = Vec::new();
                while std::time::Instant::now() < stop {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = x % span;
                    match x % 16 {
                        0 => {
                            m.delete(i);
                        }
                        1 => {
                            pc.shrink(16);
                        }
                        2 => {
                            if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) {
                                held.push(p);
                            }
                            if held.len() > 64 {
                                for p in held.drain(..) {
                                    a.free_pages(p, 0).unwrap();
                                }
                            }
                        }
                        _ => {
                            let h = m.get(i).unwrap();
                            let mut b = [0u8; 4];
                            h.read((x % 4000) as usize, &mut b);
                            assert!(b.iter().all(|&v| v == pattern(i)), "page {i}: {b:?}");
                        }
                    }
                }
                for p in held {
                    a.free_pages(p, 0).unwrap();
                }
            });
        }
    });
    assert_eq!(a.stats().event_count(VmEvent::AllocFail), 0);
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.free + c.pcp + c.allocated, a.managed_pages());
    let pc = Arc::into_inner(pc).unwrap();
    drop(pc);
    all_back(&a);
}

/// A real file ten times the arena, read once through the cache with
/// direct reclaim only: every byte right, 0 failed allocations, conservation
/// exact, every page back at the end.
#[test]
fn file_ten_times_the_arena_reads_once_with_direct_reclaim() {
    use std::io::Write;
    let pc = cache(4, false);
    let a = pc.allocator().clone();
    let n = 10 * a.managed_pages();
    let path = std::env::temp_dir().join(format!("pagecache-10x-{}", std::process::id()));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..n {
            f.write_all(&[pattern(i); PAGE_SIZE]).unwrap();
        }
    }
    let m = pc.mapping(3, Arc::new(FileSource(std::fs::File::open(&path).unwrap())));
    let mut b = vec![0u8; PAGE_SIZE];
    for i in 0..n {
        m.read(i * PAGE_SIZE as u64, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == pattern(i)), "page {i}");
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(a.stats().event_count(VmEvent::AllocFail), 0);
    assert_eq!(a.stats().event_count(VmEvent::PgstealKswapd), 0, "kswapd is off");
    let steal = a.stats().event_count(VmEvent::PgstealDirect);
    assert!(steal >= n - a.managed_pages(), "stole {steal} of {n}");
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.free + c.pcp + c.allocated, a.managed_pages());
    assert!(c.allocated <= a.managed_pages());
    drop(m);
    drop(pc);
    all_back(&a);
}

/// The public reference API on raw pages and cached pages: typed refusals,
/// references held as `PageReference`s, and the last one's drop frees.
#[test]
fn get_put_page_api() {
    let pc = cache(4, false);
    let a = pc.allocator().clone();
    let raw = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    assert_eq!(a.get_page(raw).err(), Some(PageStateError::NotAllocated { pfn: raw }), "raw pages are not counted");
    a.free_pages(raw, 0).unwrap();
    let m = pc.mapping(1, pattern_source());
    let h = m.get(0).unwrap();
    let p = h.pfn();
    let r = a.get_page(p).unwrap();
    assert_eq!(r.pfn(), p);
    assert_eq!(a.page_count(p), 4);
    m.delete(0);
    drop(h);
    a.reclaim().lru_add_drain_all();
    // Only our reference is left: it is the last, and its drop frees the
    // page (off the LRU list first).
    assert_eq!(a.page_count(p), 1);
    assert_eq!(a.reclaim().lru_sizes(0), (1, 0));
    drop(r);
    assert_eq!(a.reclaim().lru_sizes(0), (0, 0));
    assert!(a.get_page(p).is_err(), "a freed page takes no reference");
    drop(m);
    drop(pc);
    all_back(&a);
}

/// Every pfn call a stranger can make on every page, while the cache fills a
/// page (locked for the cache) and once it is cached (unlocked): nothing
/// the pfn API does may release the cache's lock or change a cache page's
/// state. Before, a raw `unlock_page` released the lock of a page being
/// filled, so a reader could copy its bytes while the fill wrote them.
#[test]
fn strangers_cannot_unlock_or_mark_a_cache_page() {
    use std::sync::Barrier;
    let pc = cache(4, false);
    let a = pc.allocator().clone();
    let nr = a.managed_pages();
    let (in_fill, go) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (f1, f2) = (in_fill.clone(), go.clone());
    let src: Arc<dyn PageSource> = Arc::new(FillFn(move |i: u64, buf: &mut [u8]| {
        f1.wait();
        f2.wait();
        buf.fill(pattern(i));
        Ok(())
    }));
    let m = pc.mapping(1, src);
    // Every call on every pfn; returns the pfns refused as `Referenced`.
    let stranger = |a: &PageAllocator| -> Vec<Pfn> {
        let mut cache_pages = Vec::new();
        for p in (0..nr).map(Pfn::new) {
            assert!(a.page_locks().unlock_page(p).is_err(), "{p:?}: a raw unlock succeeded");
            assert!(a.page_locks().unlock_page_uptodate(p).is_err(), "{p:?}");
            assert!(!a.page_locks().trylock_page(p), "{p:?}: a raw lock succeeded");
            assert!(a.page_locks().trylock_page_guard(p).is_err(), "{p:?}");
            assert!(a.page_locks().set_page_writeback(p).is_err(), "{p:?}");
            assert!(a.page_locks().end_page_writeback(p).is_err(), "{p:?}");
            assert!(a.page_locks().clear_page_uptodate(p).is_err(), "{p:?}");
            assert!(a.page_locks().set_page_uptodate(p).is_err(), "{p:?}");
            assert!(a.free_pages(p, 0).is_err(), "{p:?}");
            match a.page_locks().lock_page(p) {
                Err(PageStateError::Referenced { pfn }) => cache_pages.push(pfn),
                Err(_) => {}
                Ok(()) => panic!("{p:?}: a raw lock succeeded"),
            }
        }
        cache_pages
    };
    std::thread::scope(|s| {
        let filler = s.spawn(|| {
            let h = m.get(0).unwrap();
            let mut buf = [0u8; PAGE_SIZE];
            assert_eq!(h.read(0, &mut buf), PAGE_SIZE);
            assert!(buf.iter().all(|&b| b == pattern(0)), "the page's bytes changed");
            h.pfn()
        });
        in_fill.wait();
        // The fill waits for `go` whatever the stranger's checks found, so
        // a failed check fails the test instead of hanging it.
        let filling = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stranger(&a)));
        go.wait();
        let p = filler.join().unwrap();
        let filling = filling.unwrap_or_else(|e| std::panic::resume_unwind(e));
        assert_eq!(filling, [p], "the page being filled is the one cache page");
    });
    let h = m.get(0).unwrap();
    let flags = a.core.mm.page(h.pfn().as_u64()).flags();
    assert_eq!(stranger(&a), [h.pfn()]);
    assert_eq!(a.core.mm.page(h.pfn().as_u64()).flags(), flags, "a stranger changed the cached page's word");
    drop(h);
    drop(m);
    drop(pc);
    all_back(&a);
}

/// A page-cache page whose references are put once too often (inside the
/// crate: the public API has no pfn-taking put) is freed while this CPU's
/// LRU batch still names it, and an array takes the frame. The batch's
/// drain must then leave the array's word alone (before, it set `LRU` on it
/// and linked the page on an LRU list, and the array's release wiped the bit
/// with the page still linked).
#[test]
fn a_stale_lru_batch_entry_leaves_an_arrays_page_alone() {
    let pc = cache(16, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(1, pattern_source());
    let h = m.get(0).unwrap();
    let pfn = h.pfn();
    // The misuse: two references that are not the caller's.
    a.core.put_page(pfn).unwrap();
    a.core.put_page(pfn).unwrap();
    drop(h);
    let mut arr = a.page_array(1).unwrap();
    assert_eq!(arr.fill(Gfp::MOVABLE), 1);
    let got = arr.get(0);
    a.reclaim().lru_add_drain_all();
    a.check_invariants().unwrap();
    if got == Some(pfn) {
        assert_eq!(a.free_pages(pfn, 0), Err(FreeError::Owned { pfn }), "the array's page changed hands");
    }
    arr.release();
    a.check_invariants().unwrap();
    drop(arr);
    // Not dropped: after the misuse the mapping still names the frame, and
    // its teardown would wait for a reference it can never take.
    std::mem::forget(m);
    std::mem::forget(pc);
}

/// The allocation slow path wakes kswapd when a zone is below its low
/// watermark (a plain allocation, not a page-cache fill), and direct reclaim
/// while kswapd runs raises its boost. kswapd's threads are off; its
/// `running` flag is set by hand so that the wakeups are recorded.
#[test]
fn slow_path_wakes_kswapd_and_direct_reclaim_boosts_it() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let k = &a.core.vmscan.kswapd;
    let m = pc.mapping(1, pattern_source());
    // Fill the cache to well below the low watermark (kswapd not running:
    // fills wake nobody).
    for i in 0..a.managed_pages() {
        drop(m.get(i).unwrap());
    }
    assert!(!k.pending(0));
    k.running.store(true, Ordering::Relaxed);
    let mut mine = Vec::new();
    for _ in 0..256 {
        mine.push(a.alloc_pages(Gfp::MOVABLE, 0).unwrap());
    }
    assert!(k.pending(0), "the slow path woke node 0's kswapd");
    assert!(k.boost_of(0) > 0, "direct reclaim with kswapd running boosts it: {}", a.stats().vmstat());
    let z = &a.core.zones[ZoneIdx::FIRST];
    assert!(k.boost_of(0) <= z.wmark[pagealloc_core::zone::Wmark::High as usize] * 3 / 2);
    k.running.store(false, Ordering::Relaxed);
    for p in mine {
        a.free_pages(p, 0).unwrap();
    }
    drop(m);
    drop(pc);
    all_back(&a);
}

/// One kswapd run (called directly, no thread) reclaims until every zone is
/// above its high watermark plus the boost, and the pages it frees are in
/// the buddy lists (counted by the watermark), not on its own caches.
#[test]
fn kswapd_run_reclaims_to_high_plus_boost_into_the_buddy() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let m = pc.mapping(1, pattern_source());
    for i in 0..a.managed_pages() {
        drop(m.get(i).unwrap());
    }
    a.drain_all_pages();
    assert!(a.core.below_high(0));
    a.core.vmscan.kswapd.boost(0, 64, 64);
    let pcp_before = a.census().pcp;
    let freed = a.core.balance_node(0, &pagealloc_core::sync::AtomicBool::new(false));
    assert!(freed > 0);
    assert!(!a.core.below_high(0), "balanced after the run");
    let z = &a.core.zones[ZoneIdx::FIRST];
    let high = z.wmark[pagealloc_core::zone::Wmark::High as usize];
    // Decayed by a sixteenth at the end of the run.
    assert_eq!(a.core.vmscan.kswapd.boost_of(0), 60);
    assert!(z.free_pages_racy() >= high + 64, "free {} high {high}", z.free_pages_racy());
    assert_eq!(a.census().pcp, pcp_before, "kswapd's frees bypass the per-CPU lists");
    assert_eq!(a.stats().event_count(VmEvent::PgstealKswapd), freed);
    a.check_invariants().unwrap();
    drop(m);
    drop(pc);
    all_back(&a);
}
