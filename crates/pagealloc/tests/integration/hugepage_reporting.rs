//! Free page reporting with hugepage backing and movable pages (issue 18):
//! after a burst freed in random order no pageblock is wholly free, so
//! nothing can be released at 2 MiB granularity; compaction before release
//! packs the live pages into few pageblocks and the rest is released. Data
//! survives every move (checksummed), conservation holds.

use crate::common;
use common::{fill, intact};

use pagealloc::{Backing, Config, FreeError, Gfp, MovableOps, PageAllocator, Pfn, PAGEBLOCK_PAGES};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An owner of movable pages: pfn -> key; page `pfn` holds the words
/// `key * 0x9e37_79b9 + i`.
#[derive(Default)]
struct Owner {
    pages: Mutex<HashMap<u64, u64>>,
}

impl MovableOps for Owner {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut m = self.pages.lock().unwrap();
        let Some(k) = m.remove(&from.as_u64()) else { return false };
        m.insert(to.as_u64(), k);
        true
    }
}

fn violations(a: &PageAllocator, o: &Owner) -> usize {
    o.pages.lock().unwrap().iter().filter(|(&p, &k)| !intact(a, p, k)).count()
}

fn reported(a: &PageAllocator) -> u64 {
    a.reporting().residency().iter().map(|z| z.reported).sum()
}

/// The burst: 80% of the arena in order-0 pages, data written, three quarters
/// freed in random order; the quarter kept is registered movable with `o`
/// when `movable`. Returns the live pfns.
fn burst(a: &PageAllocator, o: &Arc<Owner>, movable: bool) -> Vec<u64> {
    let n = (a.managed_pages() * 8 / 10) as usize;
    let mut pages: Vec<u64> = (0..n).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap().as_u64()).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in (1..pages.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pages.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let live: Vec<u64> = pages.drain(..n / 4).collect();
    for p in pages {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    let id = a.compaction().register_movable_ops(o.clone());
    for (k, &p) in live.iter().enumerate() {
        fill(a, p, k as u64);
        o.pages.lock().unwrap().insert(p, k as u64);
        if movable {
            a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
        }
    }
    live
}

/// The end of a test: every page still in use holds its data, the
/// allocator is consistent, then everything is freed.
fn finish(a: &PageAllocator, o: &Owner) {
    assert_eq!(violations(a, o), 0, "data intact in every page still in use");
    a.check_invariants().unwrap();
    free_all(a, o);
}

fn free_all(a: &PageAllocator, o: &Owner) {
    let pfns: Vec<u64> = o.pages.lock().unwrap().keys().copied().collect();
    for p in pfns {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    a.check_invariants().unwrap();
}

/// Hugepage backing; kcompactd's proactive compaction off, so that the
/// compaction these tests see is the reporter's (with it on, kcompactd may
/// pack the pages first and leave the reporter nothing to compact).
fn huge(bytes: u64) -> Config {
    Config::new().arena_bytes(bytes).backing(Backing::HugePages).compaction_proactiveness(0)
}

#[test]
fn compaction_before_release_packs_movable_pages_and_releases_whole_pageblocks() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting(false)).unwrap();
    let o = Arc::new(Owner::default());
    let live = burst(&a, &o, true);
    a.drain_all_pages();
    let holes = a.reporting().free_pages_below_pageblock();
    assert!(holes >= 2 * PAGEBLOCK_PAGES, "random frees leave holes in every used pageblock: {holes}");
    let untouched = a.reporting().report_free_pages_now().pages;
    let (compacted, pass) = a.reporting().compact_and_report_now();
    assert!(compacted, "movable pages and holes: compaction ran");
    assert!(pass.pages > 0 && pass.errors == 0, "{pass:?}");
    let st = a.reporting().page_reporting_stats();
    assert_eq!(st.compactions, 1);
    assert!(st.compacted_pages > 0);
    let resident = a.managed_pages() - reported(&a);
    let used_blocks: HashSet<u64> = o.pages.lock().unwrap().keys().map(|p| p / PAGEBLOCK_PAGES).collect();
    let packed = (live.len() as u64).div_ceil(PAGEBLOCK_PAGES);
    assert!(
        used_blocks.len() as u64 <= packed + 1,
        "{} live pages in {} pageblocks (packed: {packed})",
        live.len(),
        used_blocks.len()
    );
    assert!(
        resident <= (used_blocks.len() as u64) * PAGEBLOCK_PAGES,
        "resident {resident} pages: only the live pages' pageblocks (before: {untouched} released untouched)"
    );
    finish(&a, &o);
}

#[test]
fn pinned_pages_are_not_compacted_and_stay_where_they_are() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting(false)).unwrap();
    let o = Arc::new(Owner::default());
    let live = burst(&a, &o, false);
    let (compacted, _) = a.reporting().compact_and_report_now();
    // Ops are registered but no page is movable: compaction runs and moves nothing.
    assert!(compacted);
    assert_eq!(a.reporting().page_reporting_stats().compacted_pages, 0);
    let now: HashSet<u64> = o.pages.lock().unwrap().keys().copied().collect();
    assert_eq!(now, live.iter().copied().collect::<HashSet<u64>>(), "pinned pages never move");
    assert!(a.reporting().free_pages_below_pageblock() >= 2 * PAGEBLOCK_PAGES, "the holes stay");
    finish(&a, &o);
}

#[test]
fn off_switch_and_4k_reporting_never_compact() {
    for cfg in [
        huge(16 << 20).page_reporting(false).page_reporting_compact(false),
        Config::new().arena_bytes(16 << 20).page_reporting(false),
    ] {
        let a = PageAllocator::new(cfg).unwrap();
        let o = Arc::new(Owner::default());
        let live = burst(&a, &o, true);
        let (compacted, _) = a.reporting().compact_and_report_now();
        assert!(!compacted);
        assert_eq!(a.reporting().page_reporting_stats().compactions, 0);
        let now: HashSet<u64> = o.pages.lock().unwrap().keys().copied().collect();
        assert_eq!(now, live.iter().copied().collect::<HashSet<u64>>());
        free_all(&a, &o);
    }
}

#[test]
fn the_idle_reporter_compacts_then_releases_on_its_own() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting_delay_ms(100)).unwrap();
    let o = Arc::new(Owner::default());
    let live = burst(&a, &o, true);
    let want_blocks = (live.len() as u64).div_ceil(PAGEBLOCK_PAGES) + 1;
    let t0 = Instant::now();
    let resident = |a: &PageAllocator| a.managed_pages() - reported(a);
    while (a.reporting().page_reporting_stats().compactions == 0 || resident(&a) > want_blocks * PAGEBLOCK_PAGES)
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = a.reporting().page_reporting_stats();
    // One, or more when the owner was still marking its pages movable as
    // the idle period began (see the test below).
    assert!(st.compactions >= 1, "{st:?}");
    assert!(resident(&a) <= want_blocks * PAGEBLOCK_PAGES, "resident {} pages, {st:?}", resident(&a));
    finish(&a, &o);
}

#[test]
fn refills_take_resident_free_memory_before_released_pageblocks() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting(false)).unwrap();
    let o = Arc::new(Owner::default());
    let live = burst(&a, &o, false);
    a.drain_all_pages();
    // The pageblocks the burst never touched, released; the burst's holes
    // stay resident (no pageblock of them is wholly free).
    a.reporting().report_free_pages_now();
    let released = reported(&a);
    assert!(released > 0);
    let resident_free = a.reporting().free_pages_below_pageblock();
    assert!(resident_free > live.len() as u64);
    // Per-CPU refills want runs of blocks; the holes are small blocks. As many
    // pages as are live come from the holes, none from released memory.
    let again: Vec<Pfn> = (0..live.len()).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap()).collect();
    assert_eq!(reported(&a), released, "no released page was taken while resident ones were free");
    a.free_pages_bulk(&again).unwrap();
    a.check_invariants().unwrap();
    free_all(&a, &o);
}

/// An owner whose user frees and allocates pages while migration may move
/// them (see `TrackingOwner`).
use common::TrackingOwner as Busy;

#[test]
fn the_reporter_compacts_while_the_owner_frees_and_allocates() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting_delay_ms(0)).unwrap();
    // Every third release fails, as a failing madvise would.
    a.reporting().inject_report_errors(3);
    let o = Arc::new(Busy::default());
    let id = a.compaction().register_movable_ops(o.clone());
    let n = (a.managed_pages() * 8 / 10) as usize;
    let mut pages: Vec<u64> = (0..n).map(|_| a.alloc_pages(Gfp::MOVABLE, 0).unwrap().as_u64()).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    for i in (1..pages.len()).rev() {
        pages.swap(i, rnd(i + 1));
    }
    let mut key = 0u64;
    for &p in &pages[..n / 4] {
        fill(&a, p, key);
        o.pages.lock().unwrap().insert(p, (key, false));
        a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
        key += 1;
    }
    for &p in &pages[n / 4..] {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    let t0 = Instant::now();
    let mut bad = 0;
    let mut deficit = 0;
    while t0.elapsed() < Duration::from_millis(1500) {
        // Allocate back what the last round freed (into the holes, or where
        // compaction made room), free over two pageblocks' worth at random
        // (holes enough for the reporter to compact), then idle a little:
        // the reporter drains and compacts, its last moves racing the next
        // round's frees and allocations.
        for _ in 0..deficit {
            let q = a.alloc_pages(Gfp::MOVABLE, 0).unwrap().as_u64();
            fill(&a, q, key);
            o.pages.lock().unwrap().insert(q, (key, false));
            a.compaction().set_page_movable(Pfn::new(q), id).unwrap();
            key += 1;
        }
        deficit = 0;
        for _ in 0..1100 {
            let taken = {
                let mut m = o.pages.lock().unwrap();
                let len = m.len();
                let skip = rnd(len);
                let p = m.iter().cycle().skip(skip).take(len).find(|(_, e)| !e.1).map(|(&p, _)| p);
                p.and_then(|p| m.remove(&p).map(|(k, _)| (p, k)))
            };
            let Some((p, k)) = taken else { continue };
            bad += usize::from(!intact(&a, p, k));
            // Migration may be looking at the page (isolating it, to be
            // refused): the free says so, and the owner retries.
            loop {
                match a.free_pages(Pfn::new(p), 0) {
                    Ok(()) => break,
                    Err(FreeError::Migrating { .. }) => std::thread::yield_now(),
                    Err(e) => panic!("free: {e}"),
                }
            }
            deficit += 1;
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    for _ in 0..deficit {
        let q = a.alloc_pages(Gfp::MOVABLE, 0).unwrap().as_u64();
        fill(&a, q, key);
        o.pages.lock().unwrap().insert(q, (key, false));
        a.compaction().set_page_movable(Pfn::new(q), id).unwrap();
        key += 1;
    }
    // No new pass starts once reporting is off; one under way ends.
    a.reporting().set_page_reporting(false);
    std::thread::sleep(Duration::from_millis(200));
    let st = a.reporting().page_reporting_stats();
    assert!(st.compactions > 0 && st.compacted_pages > 0, "{st:?}");
    assert!(st.errors > 0 && st.released_pages > 0, "{st:?}");
    let m = o.pages.lock().unwrap().clone();
    bad += m.iter().filter(|(&p, &(k, _))| !intact(&a, p, k)).count();
    assert_eq!(bad, 0, "data intact through every move, {st:?}");
    assert_eq!(m.len(), n / 4);
    a.check_invariants().unwrap();
    for p in m.keys() {
        a.free_pages(Pfn::new(*p), 0).unwrap();
    }
    a.check_invariants().unwrap();
}

/// The idle test's flake, made deterministic: the owner is preempted (here:
/// waits) after registering only half of its live pages as movable, long
/// enough for the reporter to find the allocator idle and compact; the
/// compaction moves that half and leaves the pinned half's pageblocks partly
/// used. When the owner has marked the rest movable, the reporter, still in
/// the same idle period (marking pages movable is no allocation traffic),
/// must compact again, because pages were marked since its last compaction
/// (and while a compaction moves pages), until one moves nothing and no
/// page was marked since.
#[test]
fn the_idle_reporter_compacts_again_when_pages_became_movable() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting_delay_ms(100)).unwrap();
    let o = Arc::new(Owner::default());
    let live = burst(&a, &o, false);
    let id = a.compaction().register_movable_ops(o.clone());
    let (first, rest) = live.split_at(live.len() / 2);
    for &p in first {
        a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
    }
    let t0 = Instant::now();
    // Under load the reporter may compact before the first half is marked
    // (moving nothing): the marks since make it compact again.
    while a.reporting().page_reporting_stats().compacted_pages == 0 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(a.reporting().page_reporting_stats().compacted_pages > 0, "{:?}", a.reporting().page_reporting_stats());
    for &p in rest {
        a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
    }
    let want_blocks = (live.len() as u64).div_ceil(PAGEBLOCK_PAGES) + 1;
    let resident = |a: &PageAllocator| a.managed_pages() - reported(a);
    while resident(&a) > want_blocks * PAGEBLOCK_PAGES && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = a.reporting().page_reporting_stats();
    assert!(resident(&a) <= want_blocks * PAGEBLOCK_PAGES, "resident {} pages, {st:?}", resident(&a));
    // The series ends: no compaction while nothing changes.
    std::thread::sleep(Duration::from_millis(300));
    let n = a.reporting().page_reporting_stats().compactions;
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(a.reporting().page_reporting_stats().compactions, n, "no compaction loop while idle");
    finish(&a, &o);
}

/// The same when the reporter's first compaction finds nothing movable yet
/// (ops registered, no page marked) and moves nothing: the marks that follow
/// still get a compaction in the same idle period.
#[test]
fn the_idle_reporter_compacts_after_an_empty_compaction_once_pages_are_marked() {
    let a = PageAllocator::new(huge(32 << 20).page_reporting_delay_ms(100)).unwrap();
    let o = Arc::new(Owner::default());
    let live = burst(&a, &o, false);
    let id = a.compaction().register_movable_ops(o.clone());
    let t0 = Instant::now();
    while a.reporting().page_reporting_stats().compactions == 0 && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = a.reporting().page_reporting_stats();
    assert!(st.compactions >= 1 && st.compacted_pages == 0, "nothing movable yet: {st:?}");
    for &p in &live {
        a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
    }
    let want_blocks = (live.len() as u64).div_ceil(PAGEBLOCK_PAGES) + 1;
    let resident = |a: &PageAllocator| a.managed_pages() - reported(a);
    while resident(&a) > want_blocks * PAGEBLOCK_PAGES && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = a.reporting().page_reporting_stats();
    assert!(resident(&a) <= want_blocks * PAGEBLOCK_PAGES, "resident {} pages, {st:?}", resident(&a));
    assert!(st.compacted_pages > 0, "{st:?}");
    finish(&a, &o);
}
