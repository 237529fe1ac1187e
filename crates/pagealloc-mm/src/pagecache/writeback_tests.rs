//! Tests of dirty limits, the flusher and throttled writers (`writeback`).

use super::*;
use crate::{Config, PAGE_SIZE};
use std::io;
use std::time::{Duration, Instant};

fn cache(mib: u64, kswapd: bool) -> PageCache {
    let a = Arc::new(PageAllocator::new(Config::small(mib << 20).backing(crate::Backing::Anonymous)).unwrap());
    PageCache::new(a, PageCacheConfig { kswapd }).unwrap()
}

/// A file in the temp directory, removed on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str) -> (Self, Arc<dyn PageSource>) {
        let path = std::env::temp_dir().join(format!("pagecache-wb-{tag}-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        (Self(path), Arc::new(FileSource(f)))
    }
}

/// A file whose writes take a while (a slow disk): writers outrun the
/// flusher and reclaim's writeback, so only throttling holds them back.
struct SlowFile(FileSource);

impl PageSource for SlowFile {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_page(index, buf)
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        std::thread::sleep(Duration::from_micros(50));
        self.0.write_page(index, buf)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The bytes of page `i` at version `v`: a checksum-friendly pattern.
fn image(i: u64, v: u64) -> Vec<u8> {
    let seed = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ v.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    (0..PAGE_SIZE).map(|k| (seed >> ((k % 8) * 8)) as u8 ^ k as u8).collect()
}

use super::tests::all_back;

fn nr_dirty(a: &PageAllocator) -> u64 {
    a.stats().vmstat().get("nr_dirty").unwrap()
}

#[test]
fn dirty_ratios_are_validated_and_reported_in_vmstat() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    assert_eq!(a.reclaim().dirty_ratios(), (crate::DEFAULT_DIRTY_BACKGROUND_RATIO, crate::DEFAULT_DIRTY_RATIO));
    assert!(matches!(a.reclaim().set_dirty_ratios(101, 20), Err(crate::ConfigError::Invalid { .. })));
    assert!(matches!(a.reclaim().set_dirty_ratios(10, 0), Err(crate::ConfigError::Invalid { .. })));
    assert_eq!(a.reclaim().dirty_ratios(), (10, 20), "a refused setting changes nothing");
    let t = a.reclaim().dirty_thresholds();
    assert!(t.dirtyable > 0 && t.dirtyable <= a.managed_pages(), "{t:?}");
    assert_eq!((t.background, t.limit), (t.dirtyable / 10, t.dirtyable / 5));
    let vm = a.stats().vmstat();
    assert_eq!(vm.get("nr_dirty_threshold"), Some(t.limit));
    assert_eq!(vm.get("nr_dirty_background_threshold"), Some(t.background));
    // Linux's position: right after the node stats, before the events.
    let keys: Vec<&str> = vm.items.iter().map(|(k, _)| *k).collect();
    let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
    assert_eq!(at("nr_dirtied"), at("nr_writeback") + 1);
    assert_eq!(at("nr_written"), at("nr_dirtied") + 1);
    assert_eq!(at("nr_dirty_threshold"), at("nr_written") + 1);
    assert_eq!(at("nr_dirty_background_threshold"), at("nr_dirty_threshold") + 1);
    a.reclaim().set_dirty_ratios(30, 20).unwrap();
    let t = a.reclaim().dirty_thresholds();
    assert_eq!(t.background, t.limit / 2, "background >= ratio: half the limit, as the kernel");
}

/// Two writers write three times the arena of dirty data through a file
/// mapping: `nr_dirty + nr_writeback` is never above the (highest) dirty
/// limit by more than one page per writer (the stated slack), writers were
/// throttled,
/// every page reads back with its checksum, and conservation holds. The
/// file is slow (`SlowFile`), so without throttling the dirty pages would
/// pile up far past the limit.
#[test]
fn writers_of_three_arenas_stay_under_the_dirty_limit_and_lose_nothing() {
    const WRITERS: u64 = 2;
    let pc = cache(8, true);
    let a = pc.allocator().clone();
    let (f, _) = TempFile::new("3x");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&f.0).unwrap();
    let m = pc.mapping(1, Arc::new(SlowFile(FileSource(file))));
    let pages = 3 * a.managed_pages();
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let m = pc.mapping(1, Arc::new(FillFn(|_: u64, _: &mut [u8]| Ok(()))));
            s.spawn(move || {
                for i in (t..pages).step_by(WRITERS as usize) {
                    m.write(i * PAGE_SIZE as u64, &image(i, 1)).unwrap();
                }
            });
        }
    });
    let st = pc.writeback_stats();
    let (lo, hi) = st.limit_range;
    assert!(st.throttled > 0 && st.throttle_written > 0, "a writer of three arenas is throttled: {st}");
    // The stated bound: never above the highest limit in force, plus one
    // page per writer; and that limit moved little (it follows free + file
    // pages, which move as pages sit on per-CPU lists and LRU batches).
    assert!(st.max_dirty <= hi + WRITERS, "nr_dirty + nr_writeback above the limit: {st}");
    assert!(hi - lo <= a.managed_pages() / 50, "the limit moved too much: {st}");
    assert!(st.max_over_limit <= WRITERS + (hi - lo), "{st}");
    assert_eq!(st.throttle_timeouts, 0, "{st}");
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..pages {
        m.read(i * PAGE_SIZE as u64, &mut buf).unwrap();
        assert!(buf == image(i, 1), "page {i} lost its data");
    }
    a.reclaim().lru_add_drain_all();
    a.check_invariants().unwrap();
    drop(m);
    drop(pc);
    all_back(&a);
}

/// Writers dirty more than the background threshold but less than the
/// limit, then stop: the flusher alone brings `nr_dirty` to the background
/// threshold or below, and what it wrote is in the file.
#[test]
fn the_flusher_brings_dirty_pages_below_the_background_threshold() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    a.reclaim().set_dirty_ratios(5, 60).unwrap();
    let (f, src) = TempFile::new("bg");
    let m = pc.mapping(1, src);
    let t = a.reclaim().dirty_thresholds();
    let n = (t.background + t.limit) / 2;
    for i in 0..n {
        m.write(i * PAGE_SIZE as u64, &image(i, 7)).unwrap();
    }
    assert_eq!(pc.writeback_stats().throttled, 0, "below the limit: nobody throttled");
    // Until the flusher has also counted what it cleaned: `nr_dirty` drops
    // page by page, its `flusher_written` at the end of each batch (it
    // failed about half the quiet release runs when read in between).
    let settled = |bg: u64| nr_dirty(&a) <= bg && pc.writeback_stats().flusher_written >= n.saturating_sub(bg);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !settled(a.reclaim().dirty_thresholds().background) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = a.reclaim().dirty_thresholds();
    assert!(nr_dirty(&a) <= t.background, "flusher left {} dirty, background {}", nr_dirty(&a), t.background);
    let st = pc.writeback_stats();
    assert!(st.flusher_runs > 0 && st.flusher_written >= n - t.background, "{st}");
    let vm = a.stats().vmstat();
    assert_eq!(vm.get("nr_dirtied"), Some(n), "each page dirtied once");
    assert!(vm.get("nr_written").unwrap() >= st.flusher_written, "{st} {vm:?}");
    // The flusher wrote the oldest pages first: page 0 is clean and in the file.
    let on_disk = std::fs::read(&f.0).unwrap();
    assert!(on_disk.len() >= PAGE_SIZE && on_disk[..PAGE_SIZE] == image(0, 7)[..], "page 0 not written back");
    m.fsync().unwrap();
    drop(m);
    drop(pc);
    all_back(&a);
}

/// Pages dirtied and cleaned again and again leave stale queue entries; a
/// flusher pass drops them (the queue stays within twice the dirty pages
/// plus its slack).
#[test]
fn the_dirty_queue_stays_bounded_under_fsync() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    let (_f, src) = TempFile::new("queue");
    let m = pc.mapping(1, src);
    for round in 0..3000u64 {
        m.write((round % 4) * PAGE_SIZE as u64, &[round as u8; 64]).unwrap();
        if round % 4 == 3 {
            m.fsync().unwrap();
        }
    }
    writeback::flush_pass(&pc.inner, &pc.inner.writeback.wake);
    let q = pc.writeback_stats().queued;
    assert!(q <= 2 * nr_dirty(&a) + 1024, "queue of {q} entries for {} dirty pages", nr_dirty(&a));
    drop(m);
    drop(pc);
    all_back(&a);
}

/// A source whose writes all fail.
struct Failing;

impl PageSource for Failing {
    fn read_page(&self, _: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(0);
        Ok(())
    }
    fn write_page(&self, _: u64, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("disk on fire"))
    }
}

/// A failing write leaves the page dirty and queued again; the flusher's
/// pass ends (it visits each entry once) instead of spinning on it.
#[test]
fn a_failing_writeback_requeues_the_page_and_the_flusher_pass_ends() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    a.reclaim().set_dirty_ratios(0, 50).unwrap();
    let m = pc.mapping(1, Arc::new(Failing));
    for i in 0..8 {
        m.write(i * PAGE_SIZE as u64, &[1; 8]).unwrap();
    }
    writeback::flush_pass(&pc.inner, &pc.inner.writeback.wake);
    // The cache's own flusher thread (background ratio 0: always due) may be
    // in a pass of its own at this moment, a page under writeback and some
    // entries off the queue; its pass ends too and puts them back.
    let t = std::time::Instant::now();
    let (dirty, queued) = loop {
        let (d, q) = (nr_dirty(&a), pc.writeback_stats().queued);
        if (d == 8 && q >= 8) || t.elapsed() > std::time::Duration::from_secs(5) {
            break (d, q);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(dirty, 8, "failed writes leave the pages dirty");
    assert!(queued >= 8, "and queued again");
    assert!(m.fsync().is_err());
    m.truncate();
    drop(m);
    drop(pc);
    all_back(&a);
}

#[test]
fn caches_with_flushers_start_and_stop_cleanly() {
    let a = Arc::new(PageAllocator::new(Config::small(4 << 20).backing(crate::Backing::Anonymous)).unwrap());
    for _ in 0..20 {
        let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap();
        pc.inner.writeback.wake.wake();
        drop(pc);
    }
    all_back(&a);
}

/// zoneinfo's per-zone counts over two nodes with a Movable zone each: per
/// node, the zones' `nr_zone_inactive_file` + `nr_zone_active_file` equal the
/// node's `nr_inactive_file` + `nr_active_file`, and their
/// `nr_zone_write_pending` the node's `nr_dirty` + `nr_writeback`; over all
/// nodes, vmstat's totals. Pages land in more than one zone.
#[test]
fn zoneinfo_per_zone_counts_add_up_to_the_nodes_and_vmstat() {
    let cfg = Config::small(16 << 20).nodes(2).movable_zone_bytes(2 << 20).backing(crate::Backing::Anonymous);
    let a = Arc::new(PageAllocator::new(cfg).unwrap());
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap();
    a.reclaim().set_dirty_ratios(100, 100).unwrap(); // no flusher work: exact dirty counts
    let m = pc.mapping(
        1,
        Arc::new(FillFn(|_: u64, buf: &mut [u8]| {
            buf.fill(3);
            Ok(())
        })),
    );
    let n = a.managed_pages() * 3 / 4;
    for i in 0..n {
        drop(m.get(i).unwrap());
    }
    drop(m.get(0).unwrap()); // page 0 active
    for i in (0..n).step_by(7) {
        m.write(i * PAGE_SIZE as u64, &[9; 16]).unwrap();
    }
    a.reclaim().lru_add_drain_all();
    a.core.vmscan.check(&a.core.mm).unwrap();
    let zi = a.stats().zoneinfo();
    let stat = |z: &crate::stats::report::ZoneInfoZone, k: &str| z.stats.iter().find(|s| s.0 == k).unwrap().1;
    let node = |z: &crate::stats::report::ZoneInfoZone, k: &str| z.node_stats.iter().find(|s| s.0 == k).map(|s| s.1);
    let mut used_zones = 0;
    let mut totals = [0u64; 3];
    for nid in 0..2 {
        let zs: Vec<_> = zi.zones.iter().filter(|z| z.nid == nid).collect();
        assert!(zs.len() >= 2, "node {nid} has a Movable zone");
        let sum = |k: &str| zs.iter().map(|z| stat(z, k)).sum::<u64>();
        let first = zs[0];
        let lru = sum("nr_zone_inactive_file") + sum("nr_zone_active_file");
        assert_eq!(sum("nr_zone_inactive_file"), node(first, "nr_inactive_file").unwrap(), "node {nid}");
        assert_eq!(sum("nr_zone_active_file"), node(first, "nr_active_file").unwrap(), "node {nid}");
        let dirty = node(first, "nr_dirty").unwrap() + node(first, "nr_writeback").unwrap();
        assert_eq!(sum("nr_zone_write_pending"), dirty, "node {nid}");
        used_zones +=
            zs.iter().filter(|z| stat(z, "nr_zone_inactive_file") + stat(z, "nr_zone_active_file") > 0).count();
        totals[0] += lru;
        totals[1] += dirty;
        totals[2] += sum("nr_zone_active_file");
    }
    let vm = a.stats().vmstat();
    assert_eq!(totals[0], vm.get("nr_inactive_file").unwrap() + vm.get("nr_active_file").unwrap());
    assert_eq!(totals[0], n, "every cached page counted in exactly one zone");
    assert_eq!(totals[1], vm.get("nr_dirty").unwrap() + vm.get("nr_writeback").unwrap());
    assert_eq!(totals[1], n.div_ceil(7));
    assert_eq!(totals[2], 1);
    assert!(used_zones >= 2, "pages in more than one zone ({used_zones})");
    drop(m);
    drop(pc);
    all_back(&a);
}

/// Over the dirty limit with every write failing, writeback makes no
/// progress: a throttled writer is let go after `MAX_PAUSE` (counted), it
/// does not hang.
#[test]
fn a_writer_over_the_limit_with_failing_writeback_goes_on_after_max_pause() {
    let pc = cache(8, false);
    let a = pc.allocator().clone();
    a.reclaim().set_dirty_ratios(0, 1).unwrap();
    let limit = a.reclaim().dirty_thresholds().limit;
    let m = pc.mapping(1, Arc::new(Failing));
    let t = Instant::now();
    for i in 0..limit + 2 {
        m.write(i * PAGE_SIZE as u64, &[1; 8]).unwrap();
    }
    let st = pc.writeback_stats();
    assert!(st.throttle_timeouts >= 1, "{st}");
    assert!(t.elapsed() >= writeback::MAX_PAUSE, "let go only after a pause");
    assert!(t.elapsed() < Duration::from_secs(15), "no hang");
    m.truncate();
    drop(m);
    drop(pc);
    all_back(&a);
}
