//! Strangers racing the page cache through the public pfn API (found by
//! review; each failed before its fix, the refused-insert one rarely): `unlock_page`,
//! `clear_page_uptodate`, `get_page` and `lock_page` of pfns the cache is
//! freeing, migrating, refusing or unlocking; a writeback racing an fsync;
//! and a user shrinker that panics inside a fill's allocation. Every test
//! ends with exact conservation.

use crate::common;
use common::all_back;
use pagealloc::{
    Backing, Config, FillFn, Gfp, PageAllocator, PageCache, PageCacheConfig, PageSource, PageStateError, Pfn,
    ShrinkControl, Shrinker,
};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn setup(mib: u64, cfg: impl FnOnce(Config) -> Config) -> (Arc<PageAllocator>, PageCache) {
    let a = Arc::new(PageAllocator::new(cfg(Config::small(mib << 20).backing(Backing::Anonymous))).unwrap());
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap();
    (a, pc)
}

fn filled() -> Arc<dyn PageSource> {
    Arc::new(FillFn(|i: u64, b: &mut [u8]| {
        b.fill(i as u8 ^ 0x5a);
        Ok(())
    }))
}

/// Run `stranger` on the pfn `target` names (u64::MAX: none) on its own
/// thread while `owner` runs; returns what the stranger counted.
fn with_stranger(
    a: &Arc<PageAllocator>,
    target: &Arc<AtomicU64>,
    stranger: impl Fn(&PageAllocator, Pfn) -> bool + Send + 'static,
    owner: impl FnOnce(),
) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let (a2, s2, t2) = (a.clone(), stop.clone(), target.clone());
    let t = std::thread::spawn(move || {
        let mut n = 0;
        while !s2.load(Ordering::Relaxed) {
            let p = t2.load(Ordering::Relaxed);
            if p != u64::MAX && stranger(&a2, Pfn::new(p)) {
                n += 1;
            }
        }
        n
    });
    owner();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap()
}

/// A stranger's `unlock_page` of a page on its way to the free (it made
/// the free fail: a panic in debug builds, the page lost in release).
#[test]
fn a_strangers_unlock_never_fails_a_cache_free() {
    let (a, pc) = setup(16, |c| c);
    let m = pc.mapping(1, filled());
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let stop = Instant::now() + Duration::from_millis(800);
    with_stranger(
        &a,
        &target,
        |a, p| matches!(a.page_locks().unlock_page(p), Err(PageStateError::HeldByGuard { .. })),
        || {
            let mut k = 0u64;
            while Instant::now() < stop {
                let h = m.get(k % 64).unwrap();
                a.reclaim().lru_add_drain_all();
                target.store(h.pfn().as_u64(), Ordering::Relaxed);
                m.delete(k % 64);
                drop(h);
                k += 1;
            }
        },
    );
    drop((m, pc));
    all_back(&a);
}

/// A stranger clearing a page's up-to-date bit while migration moves it
/// (the target was published not up to date, and every reader spun).
#[test]
fn a_strangers_mark_never_reaches_a_page_in_migration() {
    let (a, pc) = setup(8, |c| c.compaction_proactiveness(0));
    let m = pc.mapping(1, filled());
    drop(m.get(0).unwrap());
    a.reclaim().lru_add_drain_all();
    let target = Arc::new(AtomicU64::new(m.find_get(0).unwrap().unwrap().pfn().as_u64()));
    let stop = Instant::now() + Duration::from_millis(800);
    let mut moved = 0;
    with_stranger(
        &a,
        &target,
        |a, p| a.page_locks().clear_page_uptodate(p).is_ok(),
        || {
            while Instant::now() < stop {
                let p = target.load(Ordering::Relaxed);
                if a.contig().alloc_contig_range(Pfn::new(p), 1, Gfp::MOVABLE).is_ok() {
                    moved += 1;
                    a.contig().free_contig_range(Pfn::new(p), 1).unwrap();
                }
                target.store(m.find_get(0).unwrap().expect("page 0 left").pfn().as_u64(), Ordering::Relaxed);
                assert!(m.is_cached(0), "page 0 mapped but not up to date after {moved} moves");
            }
        },
    );
    assert!(moved > 0);
    let mut b = [0u8; 8];
    m.read(0, &mut b).unwrap();
    assert_eq!(b, [0x5a; 8]);
    drop((m, pc));
    all_back(&a);
}

/// A stranger's reference on a page a fill allocated but did not insert
/// (another fill won the index): the loser's give-back wiped it, and the
/// page was freed under the stranger's `PageReference`.
#[test]
fn a_strangers_reference_on_a_refused_page_is_kept() {
    let (a, pc) = setup(4, |c| c);
    let m = Arc::new(pc.mapping(1, filled()));
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let stop = Instant::now() + Duration::from_millis(800);
    let held = with_stranger(
        &a,
        &target,
        |a, p| {
            // The pfns around the last one seen: a loser's page is a
            // neighbour of the winner's more often than not.
            (p.as_u64().saturating_sub(3)..p.as_u64() + 4).any(|q| a.get_page(Pfn::new(q)).is_ok())
        },
        || {
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let (m, target) = (&m, &target);
                    s.spawn(move || {
                        let mut k = 0;
                        while Instant::now() < stop {
                            if let Ok(h) = m.get(k % 64) {
                                target.store(h.pfn().as_u64(), Ordering::Relaxed);
                            }
                            if t == 0 {
                                m.delete(k % 64);
                            }
                            k += 1;
                        }
                    });
                }
            });
        },
    );
    assert!(held > 0, "the stranger never held a reference");
    m.truncate();
    drop((Arc::into_inner(m).unwrap(), pc));
    all_back(&a);
}

/// A stranger's `lock_page`, queued while the pfn was on its way to the
/// free, is never handed the lock of the cache page the pfn became.
#[test]
fn a_handoff_never_gives_a_stranger_a_cache_page() {
    let (a, pc) = setup(16, |c| c.page_lock_unfairness(0));
    let m = pc.mapping(
        1,
        Arc::new(FillFn(|i: u64, b: &mut [u8]| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(20) {}
            b.fill(i as u8);
            Ok(())
        })),
    );
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let stop = Instant::now() + Duration::from_millis(800);
    let got = with_stranger(
        &a,
        &target,
        |a, p| {
            if a.page_locks().lock_page(p).is_err() {
                return false;
            }
            let referenced = a.page_count(p) > 0;
            let _ = a.page_locks().unlock_page(p);
            referenced
        },
        || {
            while Instant::now() < stop {
                let h = m.get(0).unwrap();
                a.reclaim().lru_add_drain_all();
                target.store(h.pfn().as_u64(), Ordering::Relaxed);
                m.delete(0);
                drop(h);
            }
        },
    );
    assert_eq!(got, 0, "a stranger held the lock of a referenced page");
    drop((m, pc));
    all_back(&a);
}

/// An fsync racing another's writeback of the page it dirtied returns only
/// once the data is written (it skipped a page between the other's clear
/// of dirty and its set of writeback).
#[test]
fn fsync_never_returns_before_a_racing_writeback_is_written() {
    #[derive(Default)]
    struct Durable(AtomicU64);
    impl PageSource for Durable {
        fn read_page(&self, _: u64, b: &mut [u8]) -> io::Result<()> {
            b.fill(0);
            Ok(())
        }
        fn write_page(&self, _: u64, b: &[u8]) -> io::Result<()> {
            let v = u64::from_le_bytes(b[..8].try_into().unwrap());
            std::thread::sleep(Duration::from_micros(50));
            self.0.fetch_max(v, Ordering::SeqCst);
            Ok(())
        }
    }
    let (a, pc) = setup(16, |c| c);
    let src = Arc::new(Durable::default());
    let m = Arc::new(pc.mapping(1, src.clone()));
    let go = Arc::new(AtomicBool::new(true));
    let (m2, g2) = (m.clone(), go.clone());
    let other = std::thread::spawn(move || {
        while g2.load(Ordering::Relaxed) {
            let _ = m2.fsync();
        }
    });
    let stop = Instant::now() + Duration::from_millis(1500);
    let mut k = 0;
    while Instant::now() < stop {
        k += 1;
        m.write(0, &u64::to_le_bytes(k)).unwrap();
        m.fsync().unwrap();
        assert!(src.0.load(Ordering::SeqCst) >= k, "fsync {k} returned before its data was written");
    }
    go.store(false, Ordering::Relaxed);
    other.join().unwrap();
    drop((Arc::into_inner(m).unwrap(), pc));
    all_back(&a);
}

/// A user shrinker that panics inside the allocation of a readahead
/// window's pages: the fill goes on (the panic counts as nothing freed), no
/// page is left locked, and the next read works.
#[test]
fn a_panicking_shrinker_inside_a_fill_leaves_no_page_locked() {
    struct Reads;
    impl PageSource for Reads {
        fn read_page(&self, i: u64, b: &mut [u8]) -> io::Result<()> {
            b.fill(i as u8);
            Ok(())
        }
        fn readahead(&self) -> bool {
            true
        }
    }
    static ARMED: AtomicBool = AtomicBool::new(false);
    struct Boom;
    impl Shrinker for Boom {
        fn count_objects(&self, _: &ShrinkControl) -> u64 {
            1
        }
        fn scan_objects(&self, _: &ShrinkControl) -> u64 {
            assert!(!ARMED.load(Ordering::SeqCst), "injected panic in a user shrinker");
            0
        }
    }
    let (a, pc) = setup(16, |c| c);
    let id = a.reclaim().register_shrinker(Arc::new(Boom));
    let m = Arc::new(pc.mapping(1, Arc::new(Reads)));
    let mut raw = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) {
        raw.push(p);
    }
    // One page free: the window's first page takes it, its second reclaims.
    a.free_pages(raw.pop().unwrap(), 0).unwrap();
    ARMED.store(true, Ordering::SeqCst);
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.get(0).map(|h| h.pfn())));
    ARMED.store(false, Ordering::SeqCst);
    assert!(first.is_ok(), "the shrinker's panic unwound through the fill");
    for p in raw.drain(..) {
        a.free_pages(p, 0).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let m2 = m.clone();
    let t = std::thread::spawn(move || {
        let _ = tx.send(m2.get(0).map(|h| h.index()).ok());
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("get(0) hung"), Some(0));
    t.join().unwrap();
    a.reclaim().unregister_shrinker(id);
    drop((Arc::into_inner(m).unwrap(), pc));
    all_back(&a);
}
