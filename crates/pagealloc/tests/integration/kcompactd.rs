//! kcompactd and proactive compaction (issue 17): with nobody calling
//! `compact_memory`, a fragmented node's score comes down below the low
//! watermark, data intact; proactiveness 0 leaves it alone; a high-order
//! request that wakes kswapd gets kcompactd woken after reclaim; threads
//! go with the last handle.

use pagealloc::stats::events::VmEvent;
use pagealloc::{
    Backing, Config, ConfigError, FillFn, Gfp, MovableOps, PageAllocator, PageCache, PageCacheConfig, Pfn, PAGE_SIZE,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An owner of movable pages whose bytes are a checksum of a key: pfn -> key;
/// its `migrate` panics once while armed (`.1`), before it changes anything.
#[derive(Default)]
struct Owner(Mutex<HashMap<u64, u64>>, AtomicBool);

impl MovableOps for Owner {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        if self.1.swap(false, Ordering::Relaxed) {
            panic!("the owner's migrate panics on {from:?}");
        }
        let mut m = self.0.lock().unwrap();
        let Some(k) = m.remove(&from.as_u64()) else { return false };
        m.insert(to.as_u64(), k);
        true
    }
}

fn word(key: u64, i: usize) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64
}

fn words(a: &PageAllocator, pfn: u64) -> *mut u64 {
    a.page_address(Pfn::new(pfn)).unwrap().as_ptr().cast()
}

/// Fill the arena with order-0 pages, keep a random quarter of them
/// (movable, checksummed), free the rest.
fn fragment(a: &PageAllocator, o: &Arc<Owner>) {
    let id = a.compaction().register_movable_ops(o.clone());
    let mut all = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 0) {
        all.push(p);
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for p in all {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x.is_multiple_of(4) {
            let b = words(a, p.as_u64());
            for i in 0..PAGE_SIZE / 8 {
                // SAFETY: our allocated page, not yet movable: nobody else
                // touches it.
                unsafe { b.add(i).write(word(p.as_u64(), i)) };
            }
            o.0.lock().unwrap().insert(p.as_u64(), p.as_u64());
            a.compaction().set_page_movable(p, id).unwrap();
        } else {
            a.free_pages(p, 0).unwrap();
        }
    }
    a.drain_all_pages();
}

/// Pages whose bytes are not their checksum, with nothing moving (kcompactd
/// stopped or idle: the caller waited for it).
fn corrupted(a: &PageAllocator, o: &Owner) -> usize {
    let m = o.0.lock().unwrap();
    m.iter()
        .filter(|(&p, &k)| {
            let b = words(a, p);
            // SAFETY: the owner's allocated page; the allocator only reads
            // it when moving it, and the owner's map lock is held.
            (0..PAGE_SIZE / 8).any(|i| unsafe { b.add(i).read() } != word(k, i))
        })
        .count()
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

#[test]
fn proactiveness_is_validated() {
    let e = PageAllocator::new(Config::small(8 << 20).compaction_proactiveness(101)).err();
    assert!(matches!(e, Some(ConfigError::Invalid { field: "compaction_proactiveness", .. })), "{e:?}");
    let a = PageAllocator::new(Config::small(8 << 20)).unwrap();
    assert_eq!(a.config().compaction_proactiveness, 20);
    assert_eq!(a.compaction().fragmentation_score_wmarks(), (80, 90));
    let b = PageAllocator::new(Config::small(8 << 20).compaction_proactiveness(100)).unwrap();
    assert_eq!(b.compaction().fragmentation_score_wmarks(), (5, 15));
    assert_eq!(a.compaction().fragmentation_score(0), Some(0), "a fresh arena is all max-order blocks");
    assert_eq!(a.compaction().fragmentation_score(1), None);
}

#[test]
fn proactive_compaction_lowers_the_score_unasked() {
    let a = PageAllocator::new(Config::small(32 << 20).backing(Backing::Anonymous)).unwrap();
    let o = Arc::new(Owner::default());
    fragment(&a, &o);
    let (low, high) = a.compaction().fragmentation_score_wmarks();
    let s0 = a.compaction().fragmentation_score(0).unwrap();
    assert!(s0 > high, "the fill fragments the node: score {s0}");
    // Nobody calls compact_memory: kcompactd's periodic check does it.
    assert!(
        wait_for(Duration::from_secs(10), || a.compaction().fragmentation_score(0).unwrap() <= low),
        "score stayed {s0}"
    );
    let s1 = a.compaction().fragmentation_score(0).unwrap();
    // The score falls while the zone's compaction runs; kcompactd counts
    // the compaction's scans when it returns.
    wait_for(Duration::from_secs(10), || a.stats().event_count(VmEvent::CompactDaemonMigrateScanned) > 0);
    assert!(a.stats().event_count(VmEvent::CompactDaemonMigrateScanned) > 0);
    assert!(a.stats().event_count(VmEvent::CompactDaemonFreeScanned) > 0);
    assert!(a.stats().event_count(VmEvent::PgmigrateSuccess) > 0);
    assert_eq!(a.stats().event_count(VmEvent::CompactDaemonWake), 0, "no kswapd wakeup: proactive only");
    assert!(a.stats().fragmentation().free_blocks[9..].iter().sum::<u64>() > 0, "order-9 blocks came back");
    // Below the high watermark kcompactd leaves the node alone: wait until
    // the counters stand still, then check every page's bytes.
    let mut last = u64::MAX;
    assert!(wait_for(Duration::from_secs(5), || {
        std::thread::sleep(Duration::from_millis(600));
        let n = a.stats().event_count(VmEvent::PgmigrateSuccess);
        std::mem::replace(&mut last, n) == n
    }));
    assert_eq!(corrupted(&a, &o), 0, "score {s0} -> {s1}");
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.free + c.pcp + o.0.lock().unwrap().len() as u64, a.managed_pages(), "{c:?}");
}

/// An owner's panic in kcompactd's thread is one failed migration
/// (counted), not the end of the thread: the same proactive compaction goes
/// on and brings the score down, nothing is left isolated, nothing lost.
#[test]
fn kcompactd_survives_a_panicking_owner() {
    let a = PageAllocator::new(Config::small(32 << 20).backing(Backing::Anonymous).page_reporting(false)).unwrap();
    let o = Arc::new(Owner::default());
    o.1.store(true, Ordering::Relaxed);
    fragment(&a, &o);
    let (low, _) = a.compaction().fragmentation_score_wmarks();
    let s0 = a.compaction().fragmentation_score(0).unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || a.compaction().fragmentation_score(0).unwrap() <= low),
        "score stayed {s0}"
    );
    assert!(!o.1.load(Ordering::Relaxed), "the owner panicked");
    assert!(a.stats().event_count(VmEvent::PgmigrateFail) >= 1, "counted as a failed migration");
    // Wait until kcompactd is idle, then check every page and the census.
    let mut last = u64::MAX;
    assert!(wait_for(Duration::from_secs(5), || {
        std::thread::sleep(Duration::from_millis(600));
        let n = a.stats().event_count(VmEvent::PgmigrateSuccess);
        std::mem::replace(&mut last, n) == n
    }));
    assert_eq!(corrupted(&a, &o), 0);
    assert_eq!(a.compaction().mobility_census().isolated, 0, "a page stayed isolated for migration");
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.free + c.pcp + o.0.lock().unwrap().len() as u64, a.managed_pages(), "{c:?}");
}

#[test]
fn proactiveness_zero_leaves_the_node_fragmented() {
    let a =
        PageAllocator::new(Config::small(16 << 20).backing(Backing::Anonymous).compaction_proactiveness(0)).unwrap();
    let o = Arc::new(Owner::default());
    fragment(&a, &o);
    let s0 = a.compaction().fragmentation_score(0).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(a.compaction().fragmentation_score(0).unwrap(), s0);
    assert_eq!(a.stats().event_count(VmEvent::CompactDaemonMigrateScanned), 0);
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateSuccess), 0);
    assert_eq!(corrupted(&a, &o), 0);
}

/// A page cache (kswapd on) full of scattered pages, proactive compaction
/// off: an order-9 request without direct compaction wakes kswapd, whose
/// reclaim leaves no order-9 block, so kcompactd is woken and compacts.
#[test]
fn kswapd_wakes_kcompactd_for_a_high_order_request() {
    let a = Arc::new(
        PageAllocator::new(Config::small(16 << 20).backing(Backing::Anonymous).compaction_proactiveness(0)).unwrap(),
    );
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: true }).unwrap();
    let m = pc.mapping(
        1,
        Arc::new(FillFn(|i: u64, buf: &mut [u8]| {
            buf.fill(i as u8);
            Ok(())
        })),
    );
    let n = a.managed_pages() * 97 / 100;
    for i in 0..n {
        drop(m.get(i).unwrap());
    }
    for i in 0..n {
        if i % 4 != 0 {
            m.delete(i);
        }
    }
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    assert_eq!(a.stats().fragmentation().free_blocks[9..].iter().sum::<u64>(), 0, "no order-9 block free yet");
    // The kept pages referenced meanwhile: neither the request's direct
    // reclaim nor kswapd can free them into an order-9 block (either would
    // make kcompactd's wakeup unneeded, and the test flaky): only
    // compaction could make one, so kswapd must hand over to kcompactd.
    let held: Vec<_> = (0..n).step_by(4).filter_map(|i| m.find_get(i).unwrap()).collect();
    assert!(a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 9).is_err());
    assert!(
        wait_for(Duration::from_secs(5), || a.stats().event_count(VmEvent::CompactDaemonWake) > 0),
        "kcompactd was not woken"
    );
    assert!(wait_for(Duration::from_secs(5), || a.stats().event_count(VmEvent::CompactDaemonMigrateScanned) > 0));
    drop(held);
    let mut b = [0u8; 8];
    for i in (0..n).step_by(4) {
        if let Ok(h) = m.get(i) {
            h.read(0, &mut b);
            assert_eq!(b, [i as u8; 8]);
        }
    }
    drop(m);
    drop(pc);
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().unwrap();
}

/// The threads hold the core, not a user handle: dropping the last handle
/// stops and joins them (a leaked thread would keep the arena mapped).
#[test]
fn last_handle_drop_joins_kcompactd() {
    for _ in 0..20 {
        let a = PageAllocator::new(Config::small(8 << 20)).unwrap();
        a.compaction().register_movable_ops(Arc::new(Owner::default()));
        let b = a.clone();
        drop(a);
        drop(b);
    }
    let names = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|n| n.starts_with("kcompactd"))
        .count();
    // Other tests of this binary may run allocators meanwhile: at most
    // theirs remain, never 20 of ours.
    assert!(names < 10, "{names} kcompactd threads left");
}
