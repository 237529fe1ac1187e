//! `pagealloc stress --pagecache`: issue 16's page-cache soak. A page cache
//! with kswapd (and kcompactd's proactive compaction) over a small arena, one
//! mapping backed by a real file on tmpfs (`/dev/shm`) twice the arena, and
//! worker threads that look up, read, write (single pages and bursts of 64),
//! fsync and delete pages while one more thread asks for reclaim through the
//! shrinker, compacts (page-cache pages migrate) and switches the dirty
//! ratios between the kernel's defaults and a tight pair every second (the
//! flusher writes back, writers are throttled). `nr_dirty + nr_writeback`
//! above the highest dirty limit in force plus one page per writer is a
//! violation.
//!
//! Every page carries its own check: its index, a version, and bytes that are
//! a function of both. Thread `t` alone writes the indexes `i` with
//! `i % threads == t`, so it knows the version each of its pages must hold:
//! a read of an own page that shows another version is a lost write (through
//! writeback, reclaim, migration or readahead), a read of any page whose
//! bytes do not match its header is corruption. Deletes discard dirty data
//! (truncate semantics), so a thread deletes only pages it has fsynced since
//! their last write. At the end the cache is dropped and every page must be
//! free again: free + per-CPU == managed, allocated == 0.
//!
//! A read or write refused for want of a page (a fill's allocation failed
//! even after its retries) loses nothing: it is counted and reported
//! (issue 16's target is 0), not a violation.
//!
//! Exit status: 0 clean, 1 violations, 2 setup failure or a hang (no worker
//! progressed for `--hang-timeout` seconds).

use crate::stress::StressArgs;
use pagealloc::{Config, FileSource, Mapping, PageAllocator, PageCache, PageCacheConfig, PAGE_SIZE};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bytes of page `index` at `version`.
fn page_image(index: u64, version: u64, buf: &mut [u8]) {
    buf[..8].copy_from_slice(&index.to_le_bytes());
    buf[8..16].copy_from_slice(&version.to_le_bytes());
    let seed = index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ version.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    for (k, b) in buf[16..].iter_mut().enumerate() {
        *b = (seed >> ((k % 8) * 8)) as u8 ^ k as u8;
    }
}

/// The version a page image holds, or why it is not one.
fn check_image(index: u64, buf: &[u8], scratch: &mut [u8]) -> Result<u64, String> {
    let got_index = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    let version = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
    if got_index != index {
        return Err(format!("page {index} holds page {got_index}'s header"));
    }
    page_image(index, version, scratch);
    if buf != scratch {
        return Err(format!("page {index} version {version}: bytes do not match the header"));
    }
    Ok(version)
}

struct Shared {
    mapping: Mapping,
    pages: u64,
    threads: u64,
    stop: AtomicBool,
    violations: AtomicU64,
    /// Reads and writes refused for want of a page (`OutOfMemory`): not a
    /// violation (nothing is lost or corrupted), but issue 16's target is 0.
    failed_fills: AtomicU64,
    ops: AtomicU64,
    /// Per worker: ops done (the watchdog's progress signal).
    beats: Vec<AtomicU64>,
}

impl Shared {
    /// An I/O error of a read or write: a failed fill is counted, anything
    /// else is a violation.
    fn io_error(&self, msg: String, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::OutOfMemory {
            self.failed_fills.fetch_add(1, Ordering::Relaxed);
        } else {
            self.violation(msg);
        }
    }

    fn violation(&self, msg: String) {
        if self.violations.fetch_add(1, Ordering::Relaxed) < 20 {
            eprintln!("stress --pagecache: VIOLATION: {msg}");
        }
    }
}

/// One worker's knowledge of its own pages.
struct Own {
    /// Version last written, per own page (`index / threads`).
    version: Vec<u64>,
    /// Written since this thread's last fsync.
    dirty: Vec<bool>,
}

fn worker(sh: &Shared, t: u64, mut rng: u64) {
    let own_count = (sh.pages - t).div_ceil(sh.threads);
    let mut own = Own { version: vec![0; own_count as usize], dirty: vec![false; own_count as usize] };
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut scratch = vec![0u8; PAGE_SIZE];
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let k = (rng >> 8) % own_count;
        let mine = t + k * sh.threads;
        match rng % 100 {
            // Read a random page: consistent with its header.
            0..=39 => {
                let i = (rng >> 20) % sh.pages;
                match sh.mapping.read(i * PAGE_SIZE as u64, &mut buf) {
                    Ok(_) => {
                        if let Err(e) = check_image(i, &buf, &mut scratch) {
                            sh.violation(e);
                        }
                    }
                    Err(e) => sh.io_error(format!("read of page {i} failed: {e}"), &e),
                }
            }
            // Read a run of own pages sequentially (readahead): each holds
            // exactly the version this thread last wrote.
            40..=59 => {
                for step in 0..8u64.min(own_count - k) {
                    let (kk, i) = (k + step, mine + step * sh.threads);
                    match sh.mapping.read(i * PAGE_SIZE as u64, &mut buf) {
                        Ok(_) => match check_image(i, &buf, &mut scratch) {
                            Ok(v) if v != own.version[kk as usize] => sh.violation(format!(
                                "lost write: page {i} holds version {v}, thread {t} wrote {}",
                                own.version[kk as usize]
                            )),
                            Ok(_) => {}
                            Err(e) => sh.violation(e),
                        },
                        Err(e) => sh.io_error(format!("read of page {i} failed: {e}"), &e),
                    }
                }
            }
            // A burst: new versions of up to 64 consecutive own pages
            // (dirty pages pile up: the flusher and throttling hold them).
            80..=84 => {
                for step in 0..64u64.min(own_count - k) {
                    let (kk, i) = ((k + step) as usize, mine + step * sh.threads);
                    let v = own.version[kk] + 1;
                    page_image(i, v, &mut buf);
                    match sh.mapping.write(i * PAGE_SIZE as u64, &buf) {
                        Ok(_) => {
                            own.version[kk] = v;
                            own.dirty[kk] = true;
                        }
                        Err(e) => sh.io_error(format!("write of page {i} failed: {e}"), &e),
                    }
                }
            }
            // Write a new version of an own page (whole page: one locked write).
            60..=79 => {
                let v = own.version[k as usize] + 1;
                page_image(mine, v, &mut buf);
                match sh.mapping.write(mine * PAGE_SIZE as u64, &buf) {
                    Ok(_) => {
                        own.version[k as usize] = v;
                        own.dirty[k as usize] = true;
                    }
                    Err(e) => sh.io_error(format!("write of page {mine} failed: {e}"), &e),
                }
            }
            // Delete an own page fsynced since its last write (it comes back
            // from the file with that version).
            85..=94 => {
                if !own.dirty[k as usize] {
                    sh.mapping.delete(mine);
                }
            }
            // fsync the mapping: every own page is then on the file.
            _ => match sh.mapping.fsync() {
                Ok(()) => own.dirty.fill(false),
                Err(e) => sh.violation(format!("fsync failed: {e}")),
            },
        }
        n += 1;
        sh.beats[t as usize].store(n, Ordering::Relaxed);
    }
    sh.ops.fetch_add(n, Ordering::Relaxed);
}

/// The dirty ratios the pressure thread switches between at run time
/// (background, limit; percent): the kernel's defaults and a tight pair
/// under which writers are throttled often.
const DIRTY_RATIOS: [(u32, u32); 2] = [(10, 20), (1, 1)];

/// Reclaim through the shrinker and compaction, and switch the dirty ratios
/// every second, until stopped.
fn pressure(sh: &Shared, pc: &PageCache) -> (u64, u64) {
    let (mut shrunk, mut migrated) = (0, 0);
    let mut round = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        shrunk += pc.shrink(256);
        if round.is_multiple_of(4) {
            migrated += pc.allocator().compact_memory().migrated;
        }
        if round.is_multiple_of(50) {
            let (b, r) = DIRTY_RATIOS[(round / 50 % 2) as usize];
            if let Err(e) = pc.allocator().set_dirty_ratios(b, r) {
                sh.violation(format!("valid dirty ratios ({b}, {r}) refused: {e}"));
            }
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    (shrunk, migrated)
}

/// Run the page-cache soak (see the module doc).
pub fn run(args: &StressArgs) -> i32 {
    let threads = args.threads.max(1) as u64;
    let arena = (args.arena_mb.max(16)) << 20;
    let pages = 2 * arena / PAGE_SIZE as u64;
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
    let path = dir.join(format!("pagealloc-stress-pc-{}", std::process::id()));
    let setup = || -> std::io::Result<std::fs::File> {
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        let mut img = vec![0u8; PAGE_SIZE];
        for i in 0..pages {
            page_image(i, 0, &mut img);
            std::os::unix::fs::FileExt::write_all_at(&f, &img, i * PAGE_SIZE as u64)?;
        }
        Ok(f)
    };
    let file = match setup() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("stress --pagecache: cannot write {}: {e}", path.display());
            return 2;
        }
    };
    let _ = std::fs::remove_file(&path); // the descriptor keeps it
    let a = match PageAllocator::new(Config::new().arena_bytes(arena)) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("stress --pagecache: {e}");
            return 2;
        }
    };
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: true }).expect("a page cache on a fresh allocator");
    let sh = Shared {
        mapping: pc.mapping(1, Arc::new(FileSource(file))),
        pages,
        threads,
        stop: AtomicBool::new(false),
        violations: AtomicU64::new(0),
        failed_fills: AtomicU64::new(0),
        ops: AtomicU64::new(0),
        beats: (0..threads).map(|_| AtomicU64::new(0)).collect(),
    };
    println!(
        "stress --pagecache: {threads} threads, {:.0} s, arena {} MiB, file {} pages on {} (twice the arena)",
        args.duration,
        arena >> 20,
        pages,
        dir.display()
    );
    let t0 = Instant::now();
    let (shrunk, migrated) = std::thread::scope(|s| {
        for t in 0..threads {
            let sh = &sh;
            s.spawn(move || worker(sh, t, 0x2545_f491_4f6c_dd1d ^ (t + 1).wrapping_mul(0x9e37_79b9)));
        }
        let p = s.spawn(|| pressure(&sh, &pc));
        let mut last: Vec<u64> = vec![0; threads as usize];
        let mut since = Instant::now();
        while t0.elapsed().as_secs_f64() < args.duration {
            std::thread::sleep(Duration::from_millis(200));
            let now: Vec<u64> = sh.beats.iter().map(|b| b.load(Ordering::Relaxed)).collect();
            if now != last {
                since = Instant::now();
            } else if since.elapsed().as_secs_f64() > args.hang_timeout {
                eprintln!("stress --pagecache: HANG: no worker progressed for {:.0} s", args.hang_timeout);
                std::process::exit(2);
            }
            last = now;
        }
        sh.stop.store(true, Ordering::Relaxed);
        p.join().expect("pressure thread")
    });
    let secs = t0.elapsed().as_secs_f64();
    let vm = |k: &str| a.vmstat().items.iter().find(|(n, _)| *n == k).map_or(0, |&(_, v)| v);
    let (steal, mig, scans) =
        (vm("pgsteal_kswapd") + vm("pgsteal_direct"), vm("pgmigrate_success"), vm("compact_daemon_migrate_scanned"));
    let (ops, mut violations) = (sh.ops.load(Ordering::Relaxed), sh.violations.load(Ordering::Relaxed));
    let retries = pc.fill_retries();
    let failed = sh.failed_fills.load(Ordering::Relaxed);
    let reclaim: Vec<String> = [
        "pgscan_kswapd",
        "pgscan_direct",
        "pgsteal_kswapd",
        "pgsteal_direct",
        "allocstall_movable",
        "pgactivate",
        "pgdeactivate",
        "pgalloc_fail",
    ]
    .iter()
    .map(|k| format!("{k} {}", vm(k)))
    .collect();
    println!("stress --pagecache: reclaim: {}", reclaim.join(", "));
    // Dirty limits: never above the highest limit in force by more than one
    // page per writer (see `pagecache::writeback`).
    let wb = pc.writeback_stats();
    println!("stress --pagecache: writeback: {}", wb.to_string().lines().collect::<Vec<_>>().join(", "));
    if wb.max_dirty > wb.limit_range.1 + threads {
        eprintln!(
            "stress --pagecache: VIOLATION: nr_dirty + nr_writeback reached {}, over the highest dirty limit {} \
             plus one page per writer",
            wb.max_dirty, wb.limit_range.1
        );
        violations += 1;
    }
    drop(sh);
    drop(pc);
    a.lru_add_drain_all();
    a.drain_all_pages();
    if let Err(e) = a.check_invariants() {
        eprintln!("stress --pagecache: VIOLATION: invariants: {e}");
        violations += 1;
    }
    let c = a.census();
    let conserved = c.allocated == 0 && c.free + c.pcp == a.managed_pages();
    if !conserved {
        eprintln!("stress --pagecache: VIOLATION: conservation: {c:?}, managed {}", a.managed_pages());
        violations += 1;
    }
    println!(
        "stress --pagecache: {secs:.1} s, {ops} ops, reclaimed {steal} pages (shrinker calls freed {shrunk}), \
         migrated {mig} ({migrated} by compact_memory), kcompactd scanned {scans}, fill allocations retried \
         {retries}, failed fills {failed} (target 0; not a violation); violations {violations}, \
         conservation {}, hangs 0",
        if conserved { "exact" } else { "BROKEN" },
    );
    i32::from(violations > 0)
}
