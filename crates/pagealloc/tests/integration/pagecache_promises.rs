//! The page cache's promises at its edges, each tried as a hostile user
//! would, through the public API only: indexes at and past the largest,
//! offsets that wrap, handles that outlive their mapping or their cache,
//! saturated reference counts, strangers racing the cache's frees, and
//! sources that panic. Every test that tears a cache down ends with exact
//! conservation: every page free again.

use crate::common;
use common::all_back;
use pagealloc::{
    Backing, Config, FileSource, FillFn, PageAllocator, PageCache, PageCacheConfig, PageCacheError, PageSource, Pfn,
    Readahead, MAX_FILE_BYTES, MAX_INDEX, PAGE_SIZE,
};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn alloc(mib: u64) -> Arc<PageAllocator> {
    Arc::new(PageAllocator::new(Config::small(mib << 20).backing(Backing::Anonymous)).unwrap())
}

fn cache(a: &Arc<PageAllocator>) -> PageCache {
    PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).unwrap()
}

/// The refusal an I/O error carries.
fn refusal(e: &io::Error) -> PageCacheError {
    PageCacheError::of(e).unwrap_or_else(|| panic!("not a page-cache refusal: {e:?}")).clone()
}

/// Run `f` on a thread; a hang (no return within `secs`) fails the test.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("hung (or panicked)")
}

/// A source of pages in memory: what `write_page` stored, else a pattern
/// of the index. Records every index written.
#[derive(Default)]
struct MemSource {
    pages: Mutex<HashMap<u64, Vec<u8>>>,
    writes: Mutex<Vec<u64>>,
}

impl MemSource {
    fn set(&self, i: u64, v: u8) {
        self.pages.lock().unwrap().insert(i, vec![v; PAGE_SIZE]);
    }
    fn byte(&self, i: u64) -> u8 {
        self.pages.lock().unwrap().get(&i).map_or(pattern(i), |p| p[0])
    }
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(31) % 251) as u8
}

impl PageSource for MemSource {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(self.byte(index));
        Ok(())
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        self.writes.lock().unwrap().push(index);
        self.pages.lock().unwrap().insert(index, buf.to_vec());
        Ok(())
    }
}

#[test]
fn indexes_past_the_largest_are_refused_and_never_alias_another_page() {
    let a = alloc(8);
    let pc = cache(&a);
    let s1 = Arc::new(MemSource::default());
    let s3 = Arc::new(MemSource::default());
    let m1 = pc.mapping(1, s1.clone());
    let _m2 = pc.mapping(2, Arc::new(MemSource::default()));
    let m3 = pc.mapping(3, s3.clone());
    s1.set(5, 0xAA);
    s3.set(7, 0x33);
    // The owner record holds 40 bits of index: 2^40 + 5 would alias page 5,
    // 2^41 + 7 in mapping 1 page 7 of mapping 3.
    for (index, what) in [((1u64 << 40) + 5, "aliases page 5"), ((1 << 41) + 7, "aliases mapping 3")] {
        let e = m1.write(index * PAGE_SIZE as u64, &[0xBB; PAGE_SIZE]).unwrap_err();
        assert!(matches!(refusal(&e), PageCacheError::RangeTooLarge { .. }), "{what}: {e}");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = m1.get(index).err().expect(what);
        assert_eq!(refusal(&e), PageCacheError::IndexTooLarge { index });
        assert!(matches!(m1.find_get(index), Err(ref e) if refusal(e) == PageCacheError::IndexTooLarge { index }));
        assert!(!m1.delete(index) && !m1.is_cached(index));
    }
    // The largest index itself is a page like any other.
    assert_eq!(m1.write(MAX_INDEX * PAGE_SIZE as u64, &[0xCC; PAGE_SIZE]).unwrap(), PAGE_SIZE);
    m1.fsync().unwrap();
    for _ in 0..8 {
        pc.shrink(1 << 20);
    }
    assert_eq!(*s1.writes.lock().unwrap(), vec![MAX_INDEX], "the index written is the index read");
    assert!(s3.writes.lock().unwrap().is_empty(), "another file was written");
    assert_eq!((s1.byte(5), s3.byte(7), s1.byte(MAX_INDEX)), (0xAA, 0x33, 0xCC));
    drop((m1, m3, _m2, pc));
    all_back(&a);
}

#[test]
fn offsets_that_wrap_or_pass_the_largest_file_are_refused() {
    let a = alloc(8);
    let pc = cache(&a);
    let src = Arc::new(MemSource::default());
    let m = pc.mapping(1, src.clone());
    let e = m.write(u64::MAX - 99, &[0xCD; 200]).unwrap_err();
    assert_eq!(refusal(&e), PageCacheError::RangeTooLarge { pos: u64::MAX - 99, len: 200 });
    let mut b = [0u8; 200];
    assert!(m.read(u64::MAX - 99, &mut b).is_err(), "page 0's bytes at the top of the range");
    assert!(m.write(MAX_FILE_BYTES - 100, &[1; 200]).is_err(), "crosses the end");
    assert_eq!(m.write(MAX_FILE_BYTES - 100, &[1; 100]).unwrap(), 100, "ends at it");
    assert_eq!(m.read(MAX_FILE_BYTES, &mut []).unwrap(), 0);
    assert_eq!(m.nr_pages(), 1, "only the last page");
    // get(u64::MAX) twice: refused both times (it panicked, then hung).
    for _ in 0..2 {
        let m2 = pc.mapping(1, src.clone());
        let e = within(10, move || m2.get(u64::MAX).err().map(|e| refusal(&e)));
        assert_eq!(e, Some(PageCacheError::IndexTooLarge { index: u64::MAX }));
    }
    let mut page0 = [0u8; 100];
    m.read(0, &mut page0).unwrap();
    assert!(page0.iter().all(|&v| v == pattern(0)), "page 0 clobbered");
    // A file source asked for a page whose offset does not fit.
    let f = FileSource(tempfile_with(b"abc"));
    let mut buf = vec![0u8; PAGE_SIZE];
    assert_eq!(f.read_page(1 << 52, &mut buf).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    assert!(f.write_page(u64::MAX, &buf).is_err());
    drop((m, pc));
    all_back(&a);
}

fn tempfile_with(bytes: &[u8]) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("pagealloc-promises-{}-{}", std::process::id(), bytes.len()));
    std::fs::write(&path, bytes).unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    f
}

#[test]
fn a_handle_of_a_removed_mapping_never_writes_into_the_slots_next_owner() {
    let a = alloc(8);
    let pc = cache(&a);
    let (s1, s2) = (Arc::new(MemSource::default()), Arc::new(MemSource::default()));
    let m1 = pc.mapping(1, s1.clone());
    assert!(pc.remove_mapping(1));
    assert!(!m1.is_live());
    let m2 = pc.mapping(2, s2.clone()); // reuses the slot
    s2.set(0, 0x22);
    let e = m1.write(0, &[0x11; PAGE_SIZE]).unwrap_err();
    assert_eq!(refusal(&e), PageCacheError::MappingRemoved { id: 1 });
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    assert!(m1.get(0).is_err() && m1.find_get(0).is_err() && m1.fsync().is_err());
    for _ in 0..8 {
        pc.shrink(1 << 20);
    }
    assert!(s2.writes.lock().unwrap().is_empty(), "mapping 2's file was written");
    let mut b = [0u8; 8];
    m2.read(0, &mut b).unwrap();
    assert_eq!(b, [0x22; 8]);
    // A new mapping under the old id is a new, empty one.
    let again = pc.mapping(1, s1);
    assert!(again.is_live() && !m1.is_live());
    assert_eq!(again.nr_pages(), 0);
    drop((m1, m2, again, pc));
    all_back(&a);
}

#[test]
fn handles_that_outlive_the_cache_hold_no_page() {
    let a = alloc(8);
    let pc = cache(&a);
    let m = pc.mapping(1, Arc::new(MemSource::default()));
    let kept = m.get(3).unwrap().pfn();
    drop(pc);
    for i in 100..164 {
        let e = m.get(i).err().expect("a dead mapping served a page");
        assert_eq!(refusal(&e), PageCacheError::MappingRemoved { id: 1 });
    }
    assert!(m.write(0, &[1; 10]).is_err());
    assert_eq!(a.page_count(kept), 0);
    drop(m);
    all_back(&a);
}

/// Two threads open mapping 7 and fill pages while a third removes it over
/// and over: every page of every incarnation is freed in the end.
#[test]
fn removal_racing_fills_leaks_nothing() {
    let a = alloc(16);
    let pc = Arc::new(cache(&a));
    let stop = Instant::now() + Duration::from_millis(1500);
    let refused = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (pc, refused) = (&pc, &refused);
            s.spawn(move || {
                let mut i = t;
                while Instant::now() < stop {
                    let m = pc.mapping(7, Arc::new(MemSource::default()));
                    for _ in 0..64 {
                        i = (i + 7) % 4096;
                        match m.get(i) {
                            Ok(h) => assert_eq!(h.read(0, &mut [0u8; 1]), 1),
                            Err(e) => {
                                assert_eq!(refusal(&e), PageCacheError::MappingRemoved { id: 7 });
                                refused.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                }
            });
        }
        s.spawn(|| {
            while Instant::now() < stop {
                pc.remove_mapping(7);
                std::thread::yield_now();
            }
        });
    });
    pc.remove_mapping(7);
    assert_eq!(pc.nr_pages(), 0);
    drop(Arc::into_inner(pc).unwrap());
    all_back(&a);
}

/// The cache dropped while threads fill, read and hold pages of its
/// mappings: the threads' calls fail with `MappingRemoved` from then on,
/// and every page comes back.
#[test]
fn dropping_the_cache_under_load_leaks_nothing() {
    let a = alloc(16);
    let pc = cache(&a);
    let maps: Vec<_> = (0..4).map(|id| pc.mapping(id, Arc::new(MemSource::default()))).collect();
    let go = Arc::new(AtomicBool::new(true));
    let workers: Vec<_> = maps
        .into_iter()
        .map(|m| {
            let go = go.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                let mut i = 0u64;
                while go.load(Ordering::Relaxed) {
                    i = (i + 13) % 2048;
                    match m.get(i) {
                        Ok(h) => held.push(h.pfn()),
                        // Four writers filling a 16 MiB arena: in a busy
                        // process direct reclaim can run out of rounds while
                        // the others take what it frees (a normal failure).
                        Err(e) if e.kind() == io::ErrorKind::OutOfMemory && PageCacheError::of(&e).is_none() => {}
                        Err(e) => assert_eq!(refusal(&e), PageCacheError::MappingRemoved { id: m.id() }),
                    }
                    if held.len() > 32 {
                        held.clear();
                    }
                    let _ = m.write(i * 4096 + 10, &[9; 100]);
                }
                assert!(!m.is_live());
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    drop(pc);
    std::thread::sleep(Duration::from_millis(100));
    go.store(false, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    all_back(&a);
}

#[test]
fn a_handle_read_past_the_page_is_clamped_and_unlocks() {
    let a = alloc(8);
    let pc = cache(&a);
    let m = pc.mapping(1, Arc::new(MemSource::default()));
    let h = m.get(0).unwrap();
    let mut b = [0u8; 16];
    assert_eq!(h.read(4097, &mut b), 0);
    assert_eq!(h.read(usize::MAX, &mut b), 0);
    assert_eq!(h.read(4090, &mut b), 6);
    drop(h);
    let m2 = pc.mapping(1, Arc::new(MemSource::default()));
    assert_eq!(within(10, move || m2.read(0, &mut [0u8; 8]).unwrap()), 8, "page 0 left locked");
    drop((m, pc));
    all_back(&a);
}

/// A user who saturates a page's count gets a typed refusal from lookups
/// (they spun forever), and the cache's own work on the page goes on.
#[test]
fn a_saturated_count_is_refused_not_spun_on() {
    let a = alloc(8);
    let pc = cache(&a);
    let m = pc.mapping(1, Arc::new(MemSource::default()));
    let pfn: Pfn = m.get(0).unwrap().pfn();
    let mut refs = Vec::new();
    let err = loop {
        match a.get_page(pfn) {
            Ok(r) => refs.push(r),
            Err(e) => break e,
        }
        assert!(refs.len() < 70_000, "the count wrapped");
    };
    assert_eq!(err, pagealloc::PageStateError::Saturated { pfn });
    assert!(refs.len() > 60_000, "{} references", refs.len());
    let m2 = pc.mapping(1, Arc::new(MemSource::default()));
    let (f, g) = within(10, move || (m2.find_get(0).err().map(|e| refusal(&e)), m2.get(0).err().map(|e| refusal(&e))));
    assert_eq!(f, Some(PageCacheError::Saturated { pfn }));
    assert_eq!(g, Some(PageCacheError::Saturated { pfn }));
    assert!(m.delete(0), "the cache's own reference still goes through");
    drop(refs);
    a.reclaim().lru_add_drain_all();
    assert_eq!(a.page_count(pfn), 0, "the last put freed it");
    drop((m, pc));
    all_back(&a);
}

/// Strangers try-locking every pfn while reclaim frees cache pages: no free
/// is lost (the cache frees its pages still locked and frozen).
#[test]
fn strangers_trylocking_pfns_never_make_a_cache_free_fail() {
    let a = alloc(8);
    let pc = Arc::new(cache(&a));
    let n = a.nr_pages();
    let stop = Instant::now() + Duration::from_millis(2000);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let a = &a;
            s.spawn(move || {
                let mut p = t;
                while Instant::now() < stop {
                    p = (p + 1) % n;
                    if a.page_locks().trylock_page(Pfn::new(p)) {
                        panic!("a stranger locked pfn {p}: no raw page exists in this test");
                    }
                }
            });
        }
        let pc = &pc;
        s.spawn(move || {
            let m = pc.mapping(1, Arc::new(MemSource::default()));
            let mut i = 0;
            while Instant::now() < stop {
                i += 1;
                drop(m.get(i % 4096).unwrap());
                if i % 64 == 0 {
                    pc.shrink(64);
                }
            }
        });
    });
    drop(Arc::into_inner(pc).unwrap());
    all_back(&a);
}

#[test]
fn shrink_of_any_size_returns() {
    let a = alloc(8);
    let pc = cache(&a);
    let m = pc.mapping(1, Arc::new(MemSource::default()));
    for i in 0..100 {
        drop(m.get(i).unwrap());
    }
    assert_eq!(pc.shrink(1 << 40), 100);
    assert_eq!(pc.shrink(u64::MAX), 0);
    drop((m, pc));
    all_back(&a);
}

/// A source that panics on the calls `when` picks (marker in the payload).
struct Panicky<S> {
    inner: S,
    calls: AtomicU64,
    when: fn(&'static str, u64) -> bool,
}

impl<S: PageSource> Panicky<S> {
    fn hit(&self, op: &'static str) {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        if (self.when)(op, n) {
            panic!("injected panic in {op}");
        }
    }
}

impl<S: PageSource> PageSource for Panicky<S> {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        self.hit("read_page");
        self.inner.read_page(index, buf)
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        self.hit("read_pages");
        for (k, b) in bufs.iter_mut().enumerate() {
            self.inner.read_page(index + k as u64, b)?;
        }
        Ok(())
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        self.hit("write_page");
        self.inner.write_page(index, buf)
    }
    fn readahead(&self) -> bool {
        true
    }
}

fn panicked(e: &io::Error) -> bool {
    matches!(refusal(e), PageCacheError::SourcePanicked { ref message, .. } if message.contains("injected"))
}

#[test]
fn a_panicking_fill_fails_that_read_and_the_next_one_works() {
    let a = alloc(8);
    let pc = cache(&a);
    // The window's read and the fallback read of the page alone both panic.
    let src = Panicky { inner: MemSource::default(), calls: AtomicU64::new(0), when: |_, n| n < 2 };
    let m = Arc::new(pc.mapping(1, Arc::new(src)));
    let e = m.get(0).err().expect("the panicking read succeeded");
    assert!(panicked(&e), "{e:?}");
    assert!(!m.is_cached(0));
    let m2 = m.clone();
    let b = within(10, move || m2.get(0).map(|h| h.read(0, &mut [0u8; 1])).unwrap());
    assert_eq!(b, 1, "the page was left locked");
    drop((Arc::into_inner(m).unwrap(), pc));
    all_back(&a);
}

#[test]
fn a_panicking_write_inside_fsync_ends_the_writeback() {
    let a = alloc(8);
    let pc = cache(&a);
    let src =
        Arc::new(Panicky { inner: MemSource::default(), calls: AtomicU64::new(0), when: |op, _| op == "write_page" });
    let m = Arc::new(pc.mapping(1, src.clone()));
    m.write(0, &[5; 64]).unwrap();
    let e = m.fsync().unwrap_err();
    assert!(panicked(&e), "{e:?}");
    // Still dirty: the next fsync tries again (and fails again, cleanly).
    let m2 = m.clone();
    assert!(within(10, move || m2.fsync().is_err()), "the second fsync hung or passed");
    let m3 = m.clone();
    assert!(within(10, move || m3.delete(0)), "delete hung on the writeback bit");
    drop((Arc::into_inner(m).unwrap(), pc));
    all_back(&a);
}

#[test]
fn a_panicking_readahead_worker_leaves_no_window_locked() {
    let a = alloc(8);
    let pc = cache(&a);
    pc.set_readahead(Readahead { max_pages: 32, workers: 1 }).unwrap();
    // Every third window read panics (in the worker or the reader).
    let src = Arc::new(Panicky {
        inner: MemSource::default(),
        calls: AtomicU64::new(0),
        when: |op, n| op == "read_pages" && n % 3 == 1,
    });
    let m = Arc::new(pc.mapping(1, src.clone()));
    let m2 = m.clone();
    let (ok, failed) = within(30, move || {
        let (mut ok, mut failed) = (0, 0);
        for i in 0..512 {
            match m2.get(i) {
                Ok(h) => {
                    let mut b = [0u8; 1];
                    h.read(0, &mut b);
                    assert_eq!(b[0], pattern(i));
                    ok += 1;
                }
                Err(e) => {
                    assert!(panicked(&e), "{e:?}");
                    failed += 1;
                }
            }
        }
        (ok, failed)
    });
    // A failed window falls back to reading the page alone, which fails
    // only when the schedule (shared with the worker) hits it too: most
    // pages are served, none hangs, and every failure is the panic's error.
    assert_eq!(ok + failed, 512);
    assert!(ok > failed, "ok {ok} failed {failed}");
    assert!(src.calls.load(Ordering::Relaxed) >= 4, "no window read panicked");
    drop((Arc::into_inner(m).unwrap(), pc));
    all_back(&a);
}

#[test]
fn fill_callbacks_that_panic_are_errors_too() {
    let a = alloc(8);
    let pc = cache(&a);
    let m = pc.mapping(
        1,
        Arc::new(FillFn(|i: u64, b: &mut [u8]| {
            assert!(i != 9, "injected panic in a fill callback");
            b.fill(1);
            Ok(())
        })),
    );
    assert!(panicked(&m.get(9).err().unwrap()));
    assert!(m.get(8).is_ok());
    drop((m, pc));
    all_back(&a);
}

/// A `find_get` handle on a page whose fill then fails reads nothing, not
/// the bytes the frame held before (another mapping's: the frames here all
/// held mapping 1's secret). Found by the page-cache soak.
#[test]
fn a_handle_on_a_page_whose_fill_failed_reads_nothing() {
    let a = alloc(16);
    let pc = cache(&a);
    let secret = pc.mapping(
        1,
        Arc::new(FillFn(|_: u64, b: &mut [u8]| {
            b.fill(0x5a);
            Ok(())
        })),
    );
    for i in 0..3000 {
        drop(secret.get(i).unwrap());
    }
    secret.truncate();
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g = gate.clone();
    let m = pc.mapping(
        2,
        Arc::new(FillFn(move |_: u64, _: &mut [u8]| {
            g.wait();
            g.wait();
            Err(io::Error::other("EIO"))
        })),
    );
    std::thread::scope(|s| {
        s.spawn(|| assert!(m.get(0).is_err()));
        gate.wait();
        let h = m.find_get(0).unwrap().expect("page 0 is mapped while it fills");
        gate.wait();
        let mut buf = vec![0u8; PAGE_SIZE];
        assert_eq!(h.read(0, &mut buf), 0, "a page that was never filled has no bytes");
        assert!(buf.iter().all(|&b| b == 0), "mapping 1's bytes through mapping 2");
    });
    drop((secret, m, pc));
    all_back(&a);
}

/// A page the source cannot read does not fail the reads of its good
/// neighbours through the readahead windows that hold it: a failed window
/// falls back to the page asked for alone.
#[test]
fn a_bad_page_in_a_readahead_window_does_not_fail_its_neighbours() {
    struct BadPage5;
    impl PageSource for BadPage5 {
        fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
            if index == 5 {
                return Err(io::Error::other("EIO at page 5"));
            }
            buf.fill(index as u8);
            Ok(())
        }
        fn readahead(&self) -> bool {
            true
        }
        fn nr_pages(&self) -> Option<u64> {
            Some(64)
        }
    }
    let a = alloc(16);
    let pc = cache(&a);
    let m = pc.mapping(1, Arc::new(BadPage5));
    for i in 0..4 {
        drop(m.get(i).unwrap());
    }
    for _ in 0..10 {
        let h = m.get(4).expect("good page 4 failed with page 5's error");
        let mut b = [0u8; 1];
        assert_eq!((h.read(0, &mut b), b[0]), (1, 4));
    }
    assert!(m.get(5).is_err(), "the bad page itself still fails");
    assert_eq!(m.get(6).map(|h| h.index()).ok(), Some(6));
    drop((m, pc));
    all_back(&a);
}

/// Two fsyncs racing one failed write back both fail (one slot that the
/// first fsync took let the other return `Ok` with the page still dirty).
#[test]
fn two_fsyncs_racing_a_failed_writeback_both_fail() {
    struct SlowFailingWrite {
        gate: std::sync::Barrier,
        failed: AtomicBool,
    }
    impl PageSource for SlowFailingWrite {
        fn read_page(&self, _: u64, buf: &mut [u8]) -> io::Result<()> {
            buf.fill(0);
            Ok(())
        }
        fn write_page(&self, _: u64, _: &[u8]) -> io::Result<()> {
            if self.failed.swap(true, Ordering::SeqCst) {
                return Ok(());
            }
            self.gate.wait();
            self.gate.wait();
            Err(io::Error::other("EIO"))
        }
    }
    let a = alloc(16);
    let pc = cache(&a);
    let src = Arc::new(SlowFailingWrite { gate: std::sync::Barrier::new(2), failed: AtomicBool::new(false) });
    let m = pc.mapping(1, src.clone());
    m.write(0, &[7u8; 64]).unwrap();
    let (first, second) = std::thread::scope(|s| {
        let b = s.spawn(|| m.fsync());
        src.gate.wait(); // page 0 is under writeback in b's write_page
        let c = s.spawn(|| m.fsync());
        std::thread::sleep(Duration::from_millis(200)); // c waits on it
        src.gate.wait();
        (b.join().unwrap(), c.join().unwrap())
    });
    assert!(first.is_err() && second.is_err(), "fsyncs: {first:?}, {second:?}");
    assert!(m.fsync().is_ok(), "reported; the page was written back by then");
    drop((m, pc));
    all_back(&a);
}
