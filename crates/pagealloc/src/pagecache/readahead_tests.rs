//! Readahead: window growth down a sequential stream, one page for random
//! access, the source's end and cached pages bound a window, a failed
//! window leaves nothing cached, `preadv` reads files exactly as `pread`.

use super::super::{FileSource, PageCache, PageCacheConfig, PageSource};
use super::{preadv_pages, RA_INIT_PAGES, RA_MAX_PAGES};
use crate::{Config, PageAllocator, PAGE_SIZE};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn cache(mib: u64) -> PageCache {
    let a = Arc::new(PageAllocator::new(Config::small(mib << 20).backing(crate::Backing::Anonymous)).unwrap());
    PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap()
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
    pages: AtomicU64,
}

impl Windows {
    fn new(len: u64, fail_at: Option<u64>) -> Arc<Self> {
        Arc::new(Windows { len, fail_at, calls: Mutex::new(Vec::new()), pages: AtomicU64::new(0) })
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

#[test]
fn a_sequential_stream_reads_growing_windows() {
    let pc = cache(16);
    let src = Windows::new(1000, None);
    let m = pc.mapping(1, src.clone());
    read_all(&m, 0..200);
    let calls = src.calls();
    let sizes: Vec<u64> = calls.iter().map(|c| c.1).collect();
    // Twice the cached run before the miss: 4, then 2 x 4, then 2 x 12.
    assert_eq!(&sizes[..4], &[RA_INIT_PAGES, 8, 24, RA_MAX_PAGES], "{calls:?}");
    assert!(sizes[3..].iter().all(|&s| s == RA_MAX_PAGES), "{calls:?}");
    // Windows are contiguous and in order: every page read once.
    let mut next = 0;
    for &(i, n) in &calls {
        assert_eq!(i, next, "{calls:?}");
        next += n;
    }
    assert!(calls.len() <= 3 + 200 / RA_MAX_PAGES as usize, "{} calls for 200 pages", calls.len());
    // Every page read ahead holds the cache's reference only: all reclaimable.
    let a = pc.allocator().clone();
    a.lru_add_drain_all();
    let cached = m.nr_pages();
    let counts: Vec<u32> = (0..cached).filter_map(|i| m.find_get(i).map(|h| a.page_count(h.pfn()))).collect();
    assert!(counts.iter().all(|&c| c == 2), "cache + our lookup only: {counts:?}");
    // Read pages were referenced once: the first scan gives them a second
    // chance, the next frees them.
    let freed: u64 = (0..4).map(|_| pc.shrink(10_000)).sum();
    assert_eq!(freed, cached, "every cached page reclaimed");
    drop(m);
    pc.allocator().check_invariants().unwrap();
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
fn a_failed_window_leaves_nothing_cached() {
    let pc = cache(16);
    let a = pc.allocator().clone();
    let src = Windows::new(100, Some(2));
    let m = pc.mapping(1, src.clone());
    let mut buf = vec![0u8; PAGE_SIZE];
    assert!(m.read(0, &mut buf).is_err(), "page 2's error fails the window of page 0");
    assert_eq!(m.nr_pages(), 0);
    assert_eq!(src.pages.load(Ordering::Relaxed), 0);
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
    // Every page read exactly once, though four streams overlapped windows
    // (the last stream's window may run up to a window past its range).
    let read = src.pages.load(Ordering::Relaxed);
    assert_eq!(read, m.nr_pages(), "each page read once and cached");
    assert!((2000..2000 + RA_MAX_PAGES).contains(&read), "{read}");
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
