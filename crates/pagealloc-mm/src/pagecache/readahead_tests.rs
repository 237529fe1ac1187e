//! Readahead: window growth down a sequential stream (synchronous, then
//! asynchronous at each marker), one page for random access, the source's
//! end and cached pages bound a window, a failed window leaves nothing
//! cached, inline and worker reads, `preadv` reads files exactly as `pread`.

use super::super::{FileSource, PageCache, PageCacheConfig, PageSource, Readahead};
use super::preadv_pages;
use crate::pagecache::ra_state::{RA_INIT_PAGES, RA_MAX_LIMIT, RA_MAX_PAGES};
use crate::{Config, PageAllocator, PAGE_SIZE};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

fn cache(mib: u64) -> PageCache {
    let a = Arc::new(PageAllocator::new(Config::small(mib << 20).backing(crate::Backing::Anonymous)).unwrap());
    PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap()
}

fn cache_ra(mib: u64, max_pages: u64, workers: usize) -> PageCache {
    let pc = cache(mib);
    pc.set_readahead(Readahead { max_pages, workers }).unwrap();
    pc
}

/// Wait for every window in flight (re-applying the settings drains the
/// workers' queue).
fn drain(pc: &PageCache) {
    pc.set_readahead(pc.readahead()).unwrap();
}

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(37) % 251) as u8
}

/// A source of `len` pages recording each window it is asked for, failing
/// the windows that include `fail_at`.
struct Windows {
    len: u64,
    fail_at: Option<u64>,
    calls: Mutex<Vec<(u64, u64)>>,
    /// The thread that made each call.
    tids: Mutex<Vec<ThreadId>>,
    pages: AtomicU64,
    /// Sleep this long in each call.
    delay_ms: u64,
}

impl Windows {
    fn new(len: u64, fail_at: Option<u64>) -> Arc<Self> {
        Self::slow(len, fail_at, 0)
    }
    fn slow(len: u64, fail_at: Option<u64>, delay_ms: u64) -> Arc<Self> {
        Arc::new(Windows {
            len,
            fail_at,
            calls: Mutex::new(Vec::new()),
            tids: Mutex::new(Vec::new()),
            pages: AtomicU64::new(0),
            delay_ms,
        })
    }
    fn calls(&self) -> Vec<(u64, u64)> {
        self.calls.lock().unwrap().clone()
    }
}

impl PageSource for Windows {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_pages(index, &mut [buf])
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        let n = bufs.len() as u64;
        self.calls.lock().unwrap().push((index, n));
        self.tids.lock().unwrap().push(std::thread::current().id());
        std::thread::sleep(std::time::Duration::from_millis(self.delay_ms));
        if self.fail_at.is_some_and(|f| (index..index + n).contains(&f)) {
            return Err(io::Error::other("injected"));
        }
        for (k, b) in bufs.iter_mut().enumerate() {
            b.fill(byte(index + k as u64));
        }
        self.pages.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }
    fn nr_pages(&self) -> Option<u64> {
        Some(self.len)
    }
    fn readahead(&self) -> bool {
        true
    }
}

fn read_all(m: &super::Mapping, pages: std::ops::Range<u64>) {
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in pages {
        m.read(i * PAGE_SIZE as u64, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == byte(i)), "page {i}");
    }
}

/// Down a sequential stream: one synchronous window, then only
/// asynchronous ones, growing 4, 8, 16, 32 (2x from 4, as 4 >= 32 / 16)
/// and then all of the maximum; every page read once, in order.
fn sequential_stream(workers: usize) {
    let pc = cache_ra(16, RA_MAX_PAGES, workers);
    let src = Windows::new(1000, None);
    let m = pc.mapping(1, src.clone());
    read_all(&m, 0..200);
    drain(&pc);
    let calls = src.calls();
    let sizes: Vec<u64> = calls.iter().map(|c| c.1).collect();
    assert_eq!(&sizes[..4], &[RA_INIT_PAGES, 8, 16, RA_MAX_PAGES], "{calls:?}");
    assert!(sizes[3..].iter().all(|&s| s == RA_MAX_PAGES), "{calls:?}");
    // Windows are contiguous and in order: every page read once.
    let mut next = 0;
    for &(i, n) in &calls {
        assert_eq!(i, next, "{calls:?}");
        next += n;
    }
    // One window ahead of the reader at most (plus the one it is in).
    assert!(next <= 200 + 2 * RA_MAX_PAGES, "read ahead to {next}");
    assert_eq!(pc.async_readahead_windows(), calls.len() as u64 - 1, "all but the first window asynchronous");
    // Every page read ahead holds the cache's reference only: all reclaimable.
    let a = pc.allocator().clone();
    a.reclaim().lru_add_drain_all();
    let cached = m.nr_pages();
    assert_eq!(cached, next);
    let counts: Vec<u32> = (0..cached).filter_map(|i| m.find_get(i).unwrap().map(|h| a.page_count(h.pfn()))).collect();
    assert!(counts.iter().all(|&c| c == 2), "cache + our lookup only: {counts:?}");
    // Read pages were referenced once: the first scan gives them a second
    // chance, the next frees them.
    let freed: u64 = (0..4).map(|_| pc.shrink(10_000)).sum();
    assert_eq!(freed, cached, "every cached page reclaimed");
    drop(m);
    pc.allocator().check_invariants().unwrap();
}

#[test]
fn a_sequential_stream_reads_growing_windows_ahead_inline() {
    sequential_stream(0);
}

#[test]
fn a_sequential_stream_reads_growing_windows_ahead_on_a_worker() {
    sequential_stream(1);
}

#[test]
fn a_marker_starts_the_next_window_before_the_reader_needs_it() {
    let pc = cache_ra(16, 64, 1);
    let src = Windows::new(1000, None);
    let m = pc.mapping(1, src.clone());
    // Page 0 reads [0, 4) and puts the marker on page 1.
    read_all(&m, 0..1);
    assert_eq!(m.m.ra.markers(), vec![1]);
    assert_eq!(src.calls(), vec![(0, 4)]);
    // Reaching page 1 (cached) starts [4, 20) (4x: 4 < 64 / 16 is false, so
    // 2x: [4, 12)), with the marker on its first page.
    read_all(&m, 1..2);
    drain(&pc);
    assert_eq!(src.calls(), vec![(0, 4), (4, 8)]);
    assert_eq!(m.m.ra.markers(), vec![4]);
    assert!((4..12).all(|i| m.is_cached(i)), "read before the reader got there");
    // The worker read it, not the reader.
    let tids = src.tids.lock().unwrap().clone();
    assert_eq!(tids[0], std::thread::current().id());
    assert_ne!(tids[1], std::thread::current().id());
    // Pages 2 and 3 are no markers: nothing new.
    read_all(&m, 2..4);
    drain(&pc);
    assert_eq!(src.calls().len(), 2);
    // Inline: the reader reads the next window itself.
    pc.set_readahead(Readahead { max_pages: 64, workers: 0 }).unwrap();
    read_all(&m, 4..5);
    assert_eq!(src.calls()[2], (12, 16));
    assert_eq!(*src.tids.lock().unwrap().last().unwrap(), std::thread::current().id());
}

#[test]
fn windows_grow_to_a_larger_maximum() {
    let pc = cache_ra(64, 256, 1);
    let src = Windows::new(4000, None);
    let m = pc.mapping(1, src.clone());
    read_all(&m, 0..2000);
    drain(&pc);
    let sizes: Vec<u64> = src.calls().iter().map(|c| c.1).collect();
    // 4 -> 16 (4x while below 256 / 16), then 2x: 32, 64, 128, 256.
    assert_eq!(&sizes[..6], &[4, 16, 32, 64, 128, 256], "{sizes:?}");
    assert!(sizes[5..].iter().all(|&s| s == 256), "{sizes:?}");
    pc.allocator().check_invariants().unwrap();
}

#[test]
fn readahead_settings_are_validated() {
    let pc = cache(8);
    let before = pc.readahead();
    assert_eq!(before, Readahead::default());
    for bad in [Readahead { max_pages: 0, workers: 1 }, Readahead { max_pages: RA_MAX_LIMIT + 1, workers: 1 }] {
        assert!(pc.set_readahead(bad).is_err(), "{bad:?}");
    }
    assert!(pc.set_readahead(Readahead { max_pages: 32, workers: 65 }).is_err());
    assert_eq!(pc.readahead(), before, "a refused setting changes nothing");
    pc.set_readahead(Readahead { max_pages: 1, workers: 0 }).unwrap();
    let src = Windows::new(100, None);
    let m = pc.mapping(1, src.clone());
    read_all(&m, 0..20);
    assert!(src.calls().iter().all(|c| c.1 == 1), "max 1: no readahead");
}

#[test]
fn a_failed_asynchronous_window_drops_its_pages() {
    let pc = cache_ra(16, 32, 1);
    let a = pc.allocator().clone();
    let src = Windows::new(100, Some(6));
    let m = pc.mapping(1, src.clone());
    // [0, 4) reads; page 1 starts [4, 12), which fails: its pages go.
    read_all(&m, 0..4);
    drain(&pc);
    assert!((4..12).all(|i| !m.is_cached(i)));
    assert_eq!(m.nr_pages(), 4);
    // The reader of page 4 reads its own window (with page 6 in it), which
    // fails, then page 4 alone; page 6 itself fails.
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(m.read(4 * PAGE_SIZE as u64, &mut buf).unwrap(), PAGE_SIZE);
    assert_eq!(src.calls().last(), Some(&(4, 1)));
    assert!(m.read(6 * PAGE_SIZE as u64, &mut buf).is_err());
    read_all(&m, 7..8);
    drop(m);
    a.reclaim().lru_add_drain_all();
    a.check_invariants().unwrap();
}

#[test]
fn dropping_the_cache_waits_for_windows_in_flight() {
    let pc = cache_ra(16, 32, 1);
    let a = pc.allocator().clone();
    let src = Windows::slow(1000, None, 30);
    let m = pc.mapping(1, src.clone());
    read_all(&m, 0..2);
    // [4, 12) is queued or being read, its pages locked.
    drop(m);
    drop(pc);
    assert_eq!(src.calls().len(), 2, "the queued window was read, not dropped");
    super::super::tests::all_back(&a);
}

#[test]
fn random_access_reads_one_page_at_a_time() {
    let pc = cache(16);
    let src = Windows::new(1000, None);
    let m = pc.mapping(1, src.clone());
    for i in [500u64, 17, 900, 301, 733] {
        read_all(&m, i..i + 1);
    }
    assert!(src.calls().iter().all(|c| c.1 == 1), "{:?}", src.calls());
    assert_eq!(m.nr_pages(), 5);
}

#[test]
fn windows_stop_at_the_end_and_at_cached_pages() {
    let pc = cache(16);
    let src = Windows::new(10, None);
    let m = pc.mapping(1, src.clone());
    read_all(&m, 6..7);
    read_all(&m, 0..10);
    // 6 was cached first: [0, 4), then [4, 6) stopped by 6, then [7, 10)
    // stopped by the end.
    assert_eq!(src.calls(), vec![(6, 1), (0, 4), (4, 2), (7, 3)]);
    assert_eq!(m.nr_pages(), 10, "nothing cached past the end");
}

#[test]
fn a_failed_window_leaves_only_the_page_asked_for() {
    let pc = cache(16);
    let a = pc.allocator().clone();
    let src = Windows::new(100, Some(2));
    let m = pc.mapping(1, src.clone());
    let mut buf = vec![0u8; PAGE_SIZE];
    // Page 2's error fails the window of page 0; its pages go, and page 0
    // is read again alone.
    assert_eq!(m.read(0, &mut buf).unwrap(), PAGE_SIZE);
    assert_eq!(src.calls(), vec![(0, 4), (0, 1)]);
    assert_eq!(m.nr_pages(), 1, "only page 0");
    assert!(m.read(2 * PAGE_SIZE as u64, &mut buf).is_err(), "the bad page itself fails");
    assert_eq!(m.nr_pages(), 1);
    // Pages past the failing one read fine on their own.
    read_all(&m, 3..4);
    drop(m);
    a.check_invariants().unwrap();
}

#[test]
fn readers_of_one_window_share_it() {
    let pc = cache(16);
    let src = Windows::new(4096, None);
    let m = pc.mapping(1, src.clone());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let m = &m;
            s.spawn(move || read_all(m, t * 500..t * 500 + 500));
        }
    });
    drain(&pc);
    // Every page read exactly once, though four streams overlapped windows
    // (the last stream's may run up to two windows past its range).
    let read = src.pages.load(Ordering::Relaxed);
    assert_eq!(read, m.nr_pages(), "each page read once and cached");
    assert!((2000..2000 + 2 * RA_MAX_PAGES).contains(&read), "{read}");
}

#[test]
fn preadv_reads_what_pread_reads_and_zeros_past_the_end() {
    let path = std::env::temp_dir().join(format!("pagealloc-ra-{}", std::process::id()));
    let len = 2 * PAGE_SIZE + PAGE_SIZE / 2;
    let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    let mut pages = vec![vec![0xffu8; PAGE_SIZE]; 4];
    let mut bufs: Vec<&mut [u8]> = pages.iter_mut().map(|p| p.as_mut_slice()).collect();
    preadv_pages(&f, 0, &mut bufs).unwrap();
    let flat: Vec<u8> = pages.concat();
    assert_eq!(&flat[..len], &data[..]);
    assert!(flat[len..].iter().all(|&b| b == 0), "past the end reads zeros");
    // The same through a mapping: FileSource's size bounds the window.
    let pc = cache(8);
    let m = pc.mapping(2, Arc::new(FileSource(f)));
    let mut buf = vec![0u8; len];
    m.read(0, &mut buf).unwrap();
    assert_eq!(buf, data);
    assert_eq!(m.nr_pages(), 3);
    let _ = std::fs::remove_file(&path);
}
