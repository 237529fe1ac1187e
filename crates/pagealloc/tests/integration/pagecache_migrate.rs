//! Page-cache pages are movable (issue 17): compaction and contiguous
//! allocation migrate them (lock, freeze, copy, replace the mapping's entry,
//! free the source), their bytes (clean or dirty) survive every move, and
//! lookups racing the moves only ever see a live page with the right bytes.

use pagealloc::stats::events::VmEvent;
use pagealloc::{
    Backing, Config, FillFn, Gfp, Mapping, MovableOps, PageAllocator, PageCache, PageCacheConfig, PageStateError, Pfn,
    PAGEBLOCK_PAGES, PAGE_SIZE,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The byte page `i` of the source holds (a clean page's checksum).
fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(31) % 251) as u8
}

/// The bytes a test writes into page `i` (a dirty page's checksum).
fn written(i: u64) -> u8 {
    (i.wrapping_mul(17) % 241) as u8 ^ 0x5a
}

fn setup(mib: u64) -> (Arc<PageAllocator>, PageCache, Mapping) {
    // Proactive compaction off: the tests count the moves they cause.
    let a = Arc::new(
        PageAllocator::new(Config::small(mib << 20).backing(Backing::Anonymous).compaction_proactiveness(0)).unwrap(),
    );
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap();
    let m = pc.mapping(
        1,
        Arc::new(FillFn(|i: u64, buf: &mut [u8]| {
            buf.fill(pattern(i));
            Ok(())
        })),
    );
    (a, pc, m)
}

/// Cache about `share` of the arena in pages 0..n, then delete all but one
/// page for which `keep` says so, so every pageblock holds a few cached pages. Pages whose
/// index is a multiple of 3 are written (dirty). Returns the kept indexes.
fn scatter(a: &PageAllocator, m: &Mapping, share: f64, keep: impl Fn(u64) -> bool) -> Vec<u64> {
    let n = (a.managed_pages() as f64 * share) as u64;
    for i in 0..n {
        drop(m.get(i).unwrap());
    }
    let mut kept = Vec::new();
    for i in 0..n {
        if keep(i) {
            if i % 3 == 0 {
                m.write(i * PAGE_SIZE as u64, &vec![written(i); PAGE_SIZE]).unwrap();
            }
            kept.push(i);
        } else {
            assert!(m.delete(i));
        }
    }
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    kept
}

/// Every kept page still holds its bytes, read through the cache (a page
/// dropped and read in again would show the source's pattern, not what was
/// written). Returns the pfns.
fn verify(m: &Mapping, kept: &[u64]) -> Vec<u64> {
    let mut buf = vec![0u8; PAGE_SIZE];
    kept.iter()
        .map(|&i| {
            let h = m.find_get(i).unwrap().expect("a kept page left the cache");
            assert_eq!(h.read(0, &mut buf), PAGE_SIZE);
            let want = if i % 3 == 0 { written(i) } else { pattern(i) };
            assert!(buf.iter().all(|&b| b == want), "page {i} corrupted after migration");
            h.pfn().as_u64()
        })
        .collect()
}

/// Free pages in blocks of order 9 or more now (no allocation: a failing
/// one would reclaim the cache).
fn order9_blocks(a: &PageAllocator) -> u64 {
    a.drain_all_pages();
    a.stats().fragmentation().free_blocks.iter().enumerate().skip(9).map(|(o, n)| n << (o - 9)).sum()
}

fn conserved(a: &PageAllocator, pc: &PageCache) {
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.free + c.pcp + pc.nr_pages(), a.managed_pages(), "{c:?}");
    let (i, act) = a.reclaim().lru_sizes(0);
    assert_eq!(i + act, pc.nr_pages(), "every cached page is on an LRU list once");
}

#[test]
fn compaction_moves_cache_pages_and_keeps_their_bytes() {
    let (a, pc, m) = setup(8);
    let kept = scatter(&a, &m, 0.9, |i| i % 4 == 0);
    let before = verify(&m, &kept);
    let blocks0 = order9_blocks(&a);
    assert!(blocks0 < 2, "the cached pages are spread over the pageblocks: {blocks0}");
    let ok0 = a.stats().event_count(VmEvent::PgmigrateSuccess);
    let out = a.compaction().compact_memory();
    let moved = a.stats().event_count(VmEvent::PgmigrateSuccess) - ok0;
    assert!(out.migrated > 100, "{out:?}");
    assert_eq!(moved, out.migrated);
    let after = verify(&m, &kept);
    let changed = before.iter().zip(&after).filter(|(x, y)| x != y).count() as u64;
    assert_eq!(changed, moved, "each migrated page changed frame once");
    assert_eq!(pc.nr_pages(), kept.len() as u64, "nothing was dropped");
    conserved(&a, &pc);
    let blocks1 = order9_blocks(&a);
    assert!(blocks1 > blocks0 + 1, "compaction made order-9 blocks: {blocks0} -> {blocks1}");
    // Dirty pages stay dirty: fsync writes them (FillFn writes nowhere) and
    // reclaim can then drop everything.
    m.fsync().unwrap();
    drop(m);
    drop(pc);
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

#[test]
fn referenced_and_locked_cache_pages_are_skipped() {
    let (a, pc, m) = setup(8);
    let kept = scatter(&a, &m, 0.9, |i| i % 4 == 0);
    // Hold a handle on some pages (an extra reference): never moved.
    let held: Vec<_> = kept.iter().step_by(7).map(|&i| m.find_get(i).unwrap().unwrap()).collect();
    let pfns: Vec<Pfn> = held.iter().map(|h| h.pfn()).collect();
    let fail0 = a.stats().event_count(VmEvent::PgmigrateFail);
    let out = a.compaction().compact_memory();
    assert!(out.migrated > 0);
    for (h, p) in held.iter().zip(&pfns) {
        assert_eq!(m.find_get(h.index()).unwrap().unwrap().pfn(), *p, "a referenced page moved");
    }
    assert!(a.stats().event_count(VmEvent::PgmigrateFail) > fail0, "refused freezes are counted");
    drop(held);
    // Released, they move on a later pass.
    let out2 = a.compaction().compact_memory();
    assert!(out2.migrated > 0, "{out2:?}");
    verify(&m, &kept);
    conserved(&a, &pc);
}

#[test]
fn contig_range_migrates_cache_pages_out() {
    let (a, pc, m) = setup(32);
    let kept = scatter(&a, &m, 0.97, |i| i % 6 != 5);
    // 80% or more full of cached pages; ask for 4 MiB.
    assert!(pc.nr_pages() * 10 >= a.managed_pages() * 8);
    let fill_free = a.nr_free_pages();
    let nr = (4 << 20) / PAGE_SIZE as u64;
    assert!(fill_free >= nr);
    let p = a.contig().alloc_contig_pages(nr, Gfp::MOVABLE).expect("contig with cache pages moved out");
    verify(&m, &kept);
    a.contig().free_contig_range(p, nr).unwrap();
    assert!(a.stats().event_count(VmEvent::PgmigrateSuccess) > 0);
    conserved(&a, &pc);
}

/// Ops that own nothing here: `set_page_movable` needs a registered id.
struct NoPages;

impl MovableOps for NoPages {
    fn migrate(&self, _from: Pfn, _to: Pfn) -> bool {
        false
    }
}

/// A page-cache page is the cache's to migrate: `set_page_movable` refuses
/// it (referenced by a handle, or only by its mapping on an LRU list), and
/// `alloc_contig_range` over its pageblock then migrates it out as it does
/// any cache page. Marked, the page used to block the range as `Unmovable`.
#[test]
fn set_page_movable_refuses_cache_pages_and_contig_still_moves_them() {
    let (a, pc, m) = setup(8);
    let id = a.compaction().register_movable_ops(Arc::new(NoPages));
    let kept = scatter(&a, &m, 0.5, |i| i % 16 == 0);
    let h = m.get(kept[1]).unwrap();
    let pfn = h.pfn();
    assert_eq!(a.compaction().set_page_movable(pfn, id), Err(PageStateError::Referenced { pfn }), "held by a handle");
    drop(h);
    a.reclaim().lru_add_drain_all();
    assert_eq!(a.compaction().set_page_movable(pfn, id), Err(PageStateError::Referenced { pfn }), "on its LRU list");
    let block = Pfn::new(pfn.as_u64() & !(PAGEBLOCK_PAGES - 1));
    a.contig()
        .alloc_contig_range(block, PAGEBLOCK_PAGES, Gfp::MOVABLE)
        .expect("the cache pages in the block moved out");
    assert_ne!(m.find_get(kept[1]).unwrap().unwrap().pfn(), pfn, "the page moved");
    verify(&m, &kept);
    a.contig().free_contig_range(block, PAGEBLOCK_PAGES).unwrap();
    conserved(&a, &pc);
}

/// Lookups and reads in 6 threads while compaction keeps moving the pages:
/// every lookup gets a live page with the right bytes, never a freed frame.
#[test]
fn lookups_race_migration() {
    let (a, pc, m) = setup(16);
    let kept = Arc::new(scatter(&a, &m, 0.9, |i| i % 4 == 0));
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let (kept, stop, reads, m) = (
                kept.clone(),
                stop.clone(),
                reads.clone(),
                pc.mapping(1, Arc::new(FillFn(|_: u64, _: &mut [u8]| Ok(())))),
            );
            s.spawn(move || {
                let mut buf = vec![0u8; 64];
                let mut k = t as usize;
                while !stop.load(Ordering::Relaxed) {
                    let i = kept[k % kept.len()];
                    k = k.wrapping_mul(7).wrapping_add(13);
                    let h = m.find_get(i).unwrap().expect("a kept page vanished");
                    h.read(PAGE_SIZE - 64, &mut buf);
                    let want = if i % 3 == 0 { written(i) } else { pattern(i) };
                    assert!(buf.iter().all(|&b| b == want), "lookup of {i} saw wrong bytes at pfn {:?}", h.pfn());
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // Compaction packs the pages at each zone's top; emptying whole
        // pageblocks with `alloc_contig_range` spreads them out again.
        let ok0 = a.stats().event_count(VmEvent::PgmigrateSuccess);
        let blocks = a.managed_pages() / PAGEBLOCK_PAGES;
        for round in 0..4 {
            a.compaction().compact_memory();
            for b in (0..blocks).rev().skip(round % 2) {
                if a.contig().alloc_contig_range(Pfn::new(b * PAGEBLOCK_PAGES), PAGEBLOCK_PAGES, Gfp::MOVABLE).is_ok() {
                    a.contig().free_contig_range(Pfn::new(b * PAGEBLOCK_PAGES), PAGEBLOCK_PAGES).unwrap();
                }
            }
        }
        let moved = a.stats().event_count(VmEvent::PgmigrateSuccess) - ok0;
        stop.store(true, Ordering::Relaxed);
        assert!(moved > 100, "moved {moved}");
    });
    assert!(reads.load(Ordering::Relaxed) > 0);
    verify(&m, &kept);
    conserved(&a, &pc);
}

/// A file in memory: pages written back are kept, the others read as
/// [`pattern`].
#[derive(Default)]
struct Store(std::sync::Mutex<std::collections::HashMap<u64, Vec<u8>>>);

impl pagealloc::PageSource for Store {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> std::io::Result<()> {
        match self.0.lock().unwrap().get(&index) {
            Some(v) => buf.copy_from_slice(v),
            None => buf.fill(pattern(index)),
        }
        Ok(())
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().insert(index, buf.to_vec());
        Ok(())
    }
}

/// Page `i` at version `v` (0: never written): a header (i, v) and a fill.
fn version_bytes(i: u64, v: u64) -> Vec<u8> {
    if v == 0 {
        return vec![pattern(i); PAGE_SIZE];
    }
    let mut b = vec![((i * 131 + v * 7) % 251) as u8 ^ 0xa5; PAGE_SIZE];
    b[..8].copy_from_slice(&i.to_le_bytes());
    b[8..16].copy_from_slice(&v.to_le_bytes());
    b
}

/// Writers and readers over more file than memory (reclaim by kswapd and
/// direct reclaim, writeback of dirty pages), while compaction, contiguous
/// allocations and kcompactd (proactiveness 100) move the cached pages:
/// every read returns the last version written, nothing is lost, and the
/// allocator's invariants and conservation hold at the end. 5 threads for
/// 4 s; `CHURN_THREADS` and `CHURN_SECS` change that (the soak:
/// `CHURN_THREADS=16 CHURN_SECS=60 cargo test --release -p pagealloc --test
/// pagecache_migrate checksummed -- --nocapture`).
#[test]
fn checksummed_churn_with_reclaim_compaction_and_kcompactd() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (threads, secs) = (env("CHURN_THREADS", 5), env("CHURN_SECS", 4));
    let a = Arc::new(
        PageAllocator::new(Config::small(16 << 20).backing(Backing::Anonymous).compaction_proactiveness(100)).unwrap(),
    );
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: true }).unwrap();
    let src: Arc<dyn pagealloc::PageSource> = Arc::new(Store::default());
    let stop = Arc::new(AtomicBool::new(false));
    let checks = AtomicU64::new(0);
    const PER: u64 = 1200;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (m, stop, checks) = (pc.mapping(1, src.clone()), stop.clone(), &checks);
            s.spawn(move || {
                let mut ver = vec![0u64; PER as usize];
                let mut x = t * 0x9e37_79b9 + 1;
                let mut buf = vec![0u8; PAGE_SIZE];
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = (x % PER) as usize;
                    let i = t * PER + k as u64;
                    if x % 3 == 0 {
                        ver[k] += 1;
                        m.write(i * PAGE_SIZE as u64, &version_bytes(i, ver[k])).unwrap();
                    } else {
                        m.read(i * PAGE_SIZE as u64, &mut buf).unwrap();
                        assert!(buf == version_bytes(i, ver[k]), "page {i}: not version {}", ver[k]);
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                }
                for (k, &v) in ver.iter().enumerate() {
                    let i = t * PER + k as u64;
                    m.read(i * PAGE_SIZE as u64, &mut buf).unwrap();
                    assert!(buf == version_bytes(i, v), "page {i}: not version {v} at the end");
                }
            });
        }
        let ok0 = a.stats().event_count(VmEvent::PgmigrateSuccess);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(secs) {
            a.compaction().compact_memory();
            if let Ok(p) = a.contig().alloc_contig_pages(PAGEBLOCK_PAGES, Gfp::MOVABLE) {
                a.contig().free_contig_range(p, PAGEBLOCK_PAGES).unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        assert!(a.stats().event_count(VmEvent::PgmigrateSuccess) > ok0, "nothing moved");
    });
    eprintln!(
        "{threads} threads, {secs} s: {} reads checked, {} pages migrated ({} failed), {} reclaimed, kcompactd scanned {}",
        checks.load(Ordering::Relaxed),
        a.stats().event_count(VmEvent::PgmigrateSuccess),
        a.stats().event_count(VmEvent::PgmigrateFail),
        a.stats().event_count(VmEvent::PgstealDirect) + a.stats().event_count(VmEvent::PgstealKswapd),
        a.stats().event_count(VmEvent::CompactDaemonMigrateScanned)
    );
    assert!(checks.load(Ordering::Relaxed) > 100);
    assert!(
        a.stats().event_count(VmEvent::PgstealDirect) + a.stats().event_count(VmEvent::PgstealKswapd) > 0,
        "no reclaim"
    );
    drop(pc);
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}
