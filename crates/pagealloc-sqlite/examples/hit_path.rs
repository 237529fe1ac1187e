//! The page cache's hit path from several threads, against SQLite's own
//! pcache1 called the same way: each thread has its own cache (as each
//! SQLite connection does) holding `PAGES` pages, and fetches and unpins
//! them in a loop, through the `sqlite3_pcache_methods2` tables (pcache1's
//! own, read back with `SQLITE_CONFIG_GETPCACHE2`, then initialised by
//! `sqlite3_initialize`, and [`pagealloc_sqlite::METHODS`] over one
//! group). Prints, per cache, fetch+unpin pairs per second over all
//! threads and CPU nanoseconds per pair.
//!
//! ```sh
//! cargo run --release -p pagealloc-sqlite --example hit_path -- [THREADS] [SECS] [ROUNDS]
//! ```

use pagealloc_sqlite::ffi::{self, PcacheMethods2, Sqlite3Pcache};
use pagealloc_sqlite::{Config, Group, METHODS};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Pages each thread's cache holds and cycles through.
const PAGES: u32 = 64;

extern "C" {
    fn sqlite3_initialize() -> i32;
}

/// A cache pointer that may move to its thread (one thread uses it).
struct Cache(*mut Sqlite3Pcache);
// SAFETY: each cache is used by one thread at a time, as SQLite uses one.
unsafe impl Send for Cache {}

/// CPU seconds the process used so far.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).filter_map(|x| x.parse().ok()).collect();
    // SAFETY: sysconf reads a constant; no pointer involved.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    f.iter().sum::<u64>() as f64 / hz
}

/// One thread: fill its cache, then fetch and unpin until `stop`.
fn work(m: &PcacheMethods2, c: Cache, stop: &AtomicBool, counting: &AtomicBool, pairs: &AtomicU64) {
    let (fetch, unpin) = (m.xFetch.unwrap(), m.xUnpin.unwrap());
    // SAFETY: `c` is a live cache of `m`, used by this thread only; every
    // page is unpinned once per fetch.
    unsafe {
        m.xCachesize.unwrap()(c.0, 2000);
        for k in 1..=PAGES {
            let p = fetch(c.0, k, 2);
            assert!(!p.is_null());
            unpin(c.0, p, 0);
        }
        let (mut n, mut k) = (0u64, 0u32);
        while !stop.load(Relaxed) {
            for _ in 0..256 {
                k = k % PAGES + 1;
                let p = fetch(c.0, k, 0);
                debug_assert!(!p.is_null());
                unpin(c.0, p, 0);
            }
            if counting.load(Relaxed) {
                n += 256;
            }
        }
        pairs.fetch_add(n, Relaxed);
        m.xDestroy.unwrap()(c.0);
    }
}

/// Pairs per second and CPU ns per pair of `threads` threads on caches
/// made by `create`, for `secs` after a warm-up.
fn run(m: &PcacheMethods2, create: &dyn Fn() -> Cache, threads: usize, secs: f64) -> (f64, f64) {
    let (stop, counting, pairs) = (AtomicBool::new(false), AtomicBool::new(false), AtomicU64::new(0));
    let mut elapsed = 0.0;
    let mut cpu = 0.0;
    std::thread::scope(|s| {
        for _ in 0..threads {
            let c = create();
            let (stop, counting, pairs) = (&stop, &counting, &pairs);
            s.spawn(move || work(m, c, stop, counting, pairs));
        }
        std::thread::sleep(Duration::from_millis(300));
        let (t0, c0) = (Instant::now(), cpu_secs());
        counting.store(true, Relaxed);
        std::thread::sleep(Duration::from_secs_f64(secs));
        counting.store(false, Relaxed);
        (elapsed, cpu) = (t0.elapsed().as_secs_f64(), cpu_secs() - c0);
        stop.store(true, Relaxed);
    });
    let n = pairs.load(Relaxed) as f64;
    (n / elapsed, cpu * 1e9 / n.max(1.0))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    let secs = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let rounds = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    // SAFETY: copy SQLite's default methods table (pcache1) out:
    // SQLITE_CONFIG_GETPCACHE2 writes one into the pointer, before
    // sqlite3_initialize (which then runs pcache1's xInit).
    let pcache1 = unsafe {
        let mut m = std::mem::zeroed::<PcacheMethods2>();
        assert_eq!(ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETPCACHE2, &raw mut m), 0);
        assert_eq!(sqlite3_initialize(), 0);
        m
    };
    let g = Group::new(&Config { arena_bytes: 64 << 20, ..Config::default() }).expect("group");
    // SAFETY: xCreate takes plain integers (a 4 KiB page, SQLite's 208-byte
    // extra area, purgeable).
    let p1 = || Cache(unsafe { pcache1.xCreate.unwrap()(4096, 208, 1) });
    let pa = || Cache(g.create_cache(4096, 208, true).expect("cache"));
    for round in 0..rounds {
        for (name, m, create) in [("pcache1", &pcache1, &p1 as &dyn Fn() -> Cache), ("pagealloc", &METHODS, &pa)] {
            let (rate, ns) = run(m, create, threads, secs);
            println!("round {round} {name:<9} threads {threads}: {rate:>12.0} pairs/s  {ns:6.1} CPU ns/pair");
        }
    }
    g.check_invariants().expect("invariants");
}
