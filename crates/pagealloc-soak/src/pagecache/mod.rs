//! `pagealloc-soak stress --pagecache`: the page-cache soak. A page cache
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
//! (the target is 0), not a violation.
//!
//! Beside the file mapping, unless `--no-churn`: churn mappings that
//! churn threads (a quarter as many as the file workers, at least two,
//! besides them) open, use and hold handles of while a remover kills them,
//! some over sources that panic or fail on a schedule (`--no-source-faults`
//! turns those off); see `churn`. At the end the cache is dropped
//! while churn threads still hold mappings and handles
//! (`cache_drop`), and the file mapping's handle must then refuse
//! calls with `MappingRemoved` too.
//!
//! Exit status: 0 clean, 1 violations, 2 setup failure or a hang (a thread
//! made no progress for `--hang-timeout` seconds).

mod cache_drop;
mod churn;
mod churn_check;
mod sources;

use crate::args::StressArgs;
use churn::{Churn, Rng, Worker};
use pagealloc::{Config, FileSource, Mapping, PageAllocator, PageCache, PageCacheConfig, PageCacheError, PAGE_SIZE};
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

/// A progress slot of a thread that has finished (the watchdog skips it).
const DONE: u64 = u64::MAX;

pub(crate) struct Shared {
    mapping: Mapping,
    pages: u64,
    threads: u64,
    pub(crate) stop: AtomicBool,
    violations: AtomicU64,
    /// Reads and writes refused for want of a page (`OutOfMemory`): not a
    /// violation (nothing is lost or corrupted), but the target is 0.
    pub(crate) failed_fills: AtomicU64,
    ops: AtomicU64,
    /// Per thread (file workers, churn threads, the remover, the pressure
    /// thread, the main thread): a count bumped at every step, or `DONE`
    /// (the watchdog's progress signal).
    beats: Vec<AtomicU64>,
    /// Set when every thread is joined: the watchdog's stop.
    watched: AtomicBool,
}

impl Shared {
    pub(crate) fn beat(&self, slot: usize) {
        self.beats[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// An I/O error of a read or write: a failed fill is counted, anything
    /// else is a violation.
    fn io_error(&self, msg: String, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::OutOfMemory {
            self.failed_fills.fetch_add(1, Ordering::Relaxed);
        } else {
            self.violation(msg);
        }
    }

    pub(crate) fn violation(&self, msg: String) {
        if self.violations.fetch_add(1, Ordering::Relaxed) < 20 {
            eprintln!("stress --pagecache: VIOLATION: {msg}");
        }
    }
}

/// One worker's knowledge of its own pages.
struct Own {
    /// The worker (its own pages are `t + k * threads`).
    t: u64,
    /// Version last written, per own page (`index / threads`).
    version: Vec<u64>,
    /// Written since this thread's last fsync.
    dirty: Vec<bool>,
}

impl Own {
    /// Write a new version of own page `k` (whole page: one locked write).
    fn write(&mut self, sh: &Shared, k: u64, buf: &mut [u8]) {
        let (i, v) = (self.t + k * sh.threads, self.version[k as usize] + 1);
        page_image(i, v, buf);
        match sh.mapping.write(i * PAGE_SIZE as u64, buf) {
            Ok(_) => {
                self.version[k as usize] = v;
                self.dirty[k as usize] = true;
            }
            Err(e) => sh.io_error(format!("write of page {i} failed: {e}"), &e),
        }
    }

    /// Read own page `k`: it holds exactly the version this thread last
    /// wrote.
    fn check(&self, sh: &Shared, k: u64, buf: &mut [u8], scratch: &mut [u8]) {
        let i = self.t + k * sh.threads;
        match sh.mapping.read(i * PAGE_SIZE as u64, buf) {
            Ok(_) => match check_image(i, buf, scratch) {
                Ok(v) if v != self.version[k as usize] => sh.violation(format!(
                    "lost write: page {i} holds version {v}, thread {} wrote {}",
                    self.t, self.version[k as usize]
                )),
                Ok(_) => {}
                Err(e) => sh.violation(e),
            },
            Err(e) => sh.io_error(format!("read of page {i} failed: {e}"), &e),
        }
    }
}

fn worker(sh: &Shared, t: u64, mut rng: u64) {
    let slot = t as usize;
    let own_count = (sh.pages - t).div_ceil(sh.threads);
    let mut own = Own { t, version: vec![0; own_count as usize], dirty: vec![false; own_count as usize] };
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut scratch = vec![0u8; PAGE_SIZE];
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let k = (rng >> 8) % own_count;
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
            // Read a run of own pages sequentially (readahead).
            40..=59 => {
                for kk in k..(k + 8).min(own_count) {
                    sh.beat(slot);
                    own.check(sh, kk, &mut buf, &mut scratch);
                }
            }
            // A burst: new versions of up to 64 consecutive own pages
            // (dirty pages pile up: the flusher and throttling hold them).
            80..=84 => {
                for kk in k..(k + 64).min(own_count) {
                    sh.beat(slot);
                    own.write(sh, kk, &mut buf);
                }
            }
            60..=79 => own.write(sh, k, &mut buf),
            // Delete an own page fsynced since its last write (it comes back
            // from the file with that version).
            85..=94 => {
                if !own.dirty[k as usize] {
                    sh.mapping.delete(t + k * sh.threads);
                }
            }
            // fsync the mapping: every own page is then on the file.
            _ => match sh.mapping.fsync() {
                Ok(()) => own.dirty.fill(false),
                Err(e) => sh.violation(format!("fsync failed: {e}")),
            },
        }
        n += 1;
        sh.beat(slot);
    }
    sh.ops.fetch_add(n, Ordering::Relaxed);
}

/// The dirty ratios the pressure thread switches between at run time
/// (background, limit; percent): the kernel's defaults and a tight pair
/// under which writers are throttled often.
const DIRTY_RATIOS: [(u32, u32); 2] = [(10, 20), (1, 1)];

/// Reclaim through the shrinker and compaction, and switch the dirty ratios
/// every second, until stopped.
fn pressure(sh: &Shared, pc: &PageCache, slot: usize) -> (u64, u64) {
    let (mut shrunk, mut migrated) = (0, 0);
    let mut round = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        shrunk += pc.shrink(256);
        if round.is_multiple_of(4) {
            migrated += pc.allocator().compaction().compact_memory().migrated;
        }
        if round.is_multiple_of(50) {
            let (b, r) = DIRTY_RATIOS[(round / 50 % 2) as usize];
            if let Err(e) = pc.allocator().reclaim().set_dirty_ratios(b, r) {
                sh.violation(format!("valid dirty ratios ({b}, {r}) refused: {e}"));
            }
        }
        round += 1;
        sh.beat(slot);
        std::thread::sleep(Duration::from_millis(20));
    }
    (shrunk, migrated)
}

/// Marks a thread's progress slot `DONE` when it ends, by return or by a
/// panic (its join then reports the panic, the watchdog no hang).
struct Finish<'a>(&'a Shared, usize);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.beats[self.1].store(DONE, Ordering::Relaxed);
    }
}

/// Exit with status 2 if a thread's progress slot stays unchanged (and not
/// `DONE`) for `limit` seconds.
fn watchdog(sh: &Shared, names: &[String], limit: f64) {
    let mut last: Vec<u64> = sh.beats.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    let mut since = vec![Instant::now(); last.len()];
    while !sh.watched.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        for (k, b) in sh.beats.iter().enumerate() {
            let now = b.load(Ordering::Relaxed);
            if now == DONE || now != last[k] {
                (last[k], since[k]) = (now, Instant::now());
            } else if since[k].elapsed().as_secs_f64() > limit {
                eprintln!("stress --pagecache: HANG: {} made no progress for {limit:.0} s", names[k]);
                std::process::exit(2);
            }
        }
    }
}

/// The file: `pages` page images at version 0 on tmpfs (or the temporary
/// directory), unlinked once open.
fn setup_file(pages: u64) -> Result<(std::fs::File, std::path::PathBuf), String> {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
    let path = dir.join(format!("pagealloc-stress-pc-{}", std::process::id()));
    let write = || -> std::io::Result<std::fs::File> {
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        let mut img = vec![0u8; PAGE_SIZE];
        for i in 0..pages {
            page_image(i, 0, &mut img);
            std::os::unix::fs::FileExt::write_all_at(&f, &img, i * PAGE_SIZE as u64)?;
        }
        Ok(f)
    };
    let r = write().map_err(|e| format!("cannot write {}: {e}", path.display()));
    let _ = std::fs::remove_file(&path); // the descriptor keeps it
    r.map(|f| (f, dir))
}

/// What the soak leaves for the report, read before the cache is dropped.
struct Ended {
    shrunk: u64,
    migrated: u64,
    retries: u64,
    /// The writeback report, and its high-water mark of dirty and
    /// writeback pages and highest dirty limit.
    wb: String,
    max_dirty: u64,
    limit: u64,
}

/// Run the page-cache soak (see the module doc).
pub fn run(args: &StressArgs) -> i32 {
    let threads = args.threads.max(1) as u64;
    let arena = (args.arena_mb.max(16)) << 20;
    let pages = 2 * arena / PAGE_SIZE as u64;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let (file, dir) = match setup_file(pages) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("stress --pagecache: {e}");
            return 2;
        }
    };
    let a = match PageAllocator::new(Config::new().arena_bytes(arena)) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("stress --pagecache: {e}");
            return 2;
        }
    };
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: true }).expect("a page cache on a fresh allocator");
    let nchurn = if args.no_churn { 0 } else { (threads / 4).max(2) };
    let faults = nchurn > 0 && !args.no_source_faults;
    if faults {
        sources::silence_injected_panics();
    }
    let churn = Churn::new(nchurn.max(1), faults, seed);
    let mut names: Vec<String> = (0..threads).map(|t| format!("file worker {t}")).collect();
    names.extend((0..nchurn).map(|j| format!("churn thread {j}")));
    names.extend(["the remover", "the pressure thread", "the main thread"].map(String::from));
    let sh = Shared {
        mapping: pc.mapping(1, Arc::new(FileSource(file))),
        pages,
        threads,
        stop: AtomicBool::new(false),
        violations: AtomicU64::new(0),
        failed_fills: AtomicU64::new(0),
        ops: AtomicU64::new(0),
        beats: names.iter().map(|_| AtomicU64::new(0)).collect(),
        watched: AtomicBool::new(false),
    };
    let churn_line = match (nchurn, faults) {
        (0, _) => "off".to_string(),
        (n, f) => format!("{n} threads and a remover, source faults {}", if f { "on" } else { "off" }),
    };
    println!(
        "stress --pagecache: {threads} threads, {:.0} s, seed {seed}, arena {} MiB, file {} pages on {} (twice \
         the arena); churn: {churn_line}",
        args.duration,
        arena >> 20,
        pages,
        dir.display(),
    );
    let t0 = Instant::now();
    let (sh, ch, names) = (&sh, &churn, &names);
    let pc = Arc::new(pc);
    let end = std::thread::scope(move |s| {
        s.spawn(move || watchdog(sh, names, args.hang_timeout));
        let r = soak(s, sh, ch, pc, args, seed, nchurn);
        sh.watched.store(true, Ordering::Relaxed);
        r
    });
    report(&a, sh, ch, &end, nchurn, t0.elapsed().as_secs_f64())
}

/// Start every thread, stop them after the duration, drop the cache while
/// the churn threads hold mappings (`cache_drop`), join them.
fn soak<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    sh: &'s Shared,
    ch: &'s Churn,
    pc: Arc<PageCache>,
    args: &StressArgs,
    seed: u64,
    nchurn: u64,
) -> Ended {
    let threads = sh.threads;
    let first = (threads + nchurn) as usize;
    let (remover_slot, pressure_slot, main) = (first, first + 1, first + 2);
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let rng = (seed ^ 0x2545_f491_4f6c_dd1d ^ (t + 1).wrapping_mul(0x9e37_79b9)) | 1;
            s.spawn(move || {
                let _f = Finish(sh, t as usize);
                worker(sh, t, rng);
            })
        })
        .collect();
    let churners: Vec<_> = (0..nchurn)
        .map(|j| {
            let (pc, slot) = (pc.clone(), (threads + j) as usize);
            let rng = Rng((seed ^ 0x6a09_e667_f3bc_c909 ^ (j + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
            s.spawn(move || {
                let _f = Finish(sh, slot);
                Worker::new(sh, ch, j, slot, rng).run(pc);
            })
        })
        .collect();
    let remover = (nchurn > 0).then(|| {
        let pc = pc.clone();
        s.spawn(move || {
            let _f = Finish(sh, remover_slot);
            churn::remover(sh, ch, &pc, remover_slot, Rng(seed | 1));
        })
    });
    if remover.is_none() {
        sh.beats[remover_slot].store(DONE, Ordering::Relaxed);
    }
    let p = {
        let pc = pc.clone();
        s.spawn(move || {
            let _f = Finish(sh, pressure_slot);
            pressure(sh, &pc, pressure_slot)
        })
    };
    while t0.elapsed().as_secs_f64() < args.duration {
        std::thread::sleep(Duration::from_millis(200));
        sh.beat(main);
    }
    sh.stop.store(true, Ordering::Relaxed);
    for (t, w) in workers.into_iter().enumerate() {
        if w.join().is_err() {
            sh.violation(format!("file worker {t} panicked"));
        }
        sh.beat(main);
    }
    if remover.is_some_and(|r| r.join().is_err()) {
        sh.violation("the remover panicked".into());
    }
    let (shrunk, migrated) = p.join().unwrap_or_else(|_| {
        sh.violation("the pressure thread panicked".into());
        (0, 0)
    });
    drop_cache(sh, ch, pc, churners, (shrunk, migrated), main)
}

/// The churn threads' handshake (`cache_drop`): once each holds its
/// mappings and handles and no cache reference, drop the cache; then the
/// file mapping refuses calls too; join the churn threads.
fn drop_cache(
    sh: &Shared,
    ch: &Churn,
    pc: Arc<PageCache>,
    churners: Vec<std::thread::ScopedJoinHandle<'_, ()>>,
    (shrunk, migrated): (u64, u64),
    main: usize,
) -> Ended {
    // A churn thread that ended early panicked: its join says so.
    while ch.ready.load(Ordering::SeqCst) < churners.len() as u64 && !churners.iter().any(|c| c.is_finished()) {
        std::thread::sleep(Duration::from_millis(1));
        sh.beat(main);
    }
    let wb = pc.writeback_stats();
    let ended = Ended {
        shrunk,
        migrated,
        retries: pc.fill_retries(),
        wb: wb.to_string().lines().collect::<Vec<_>>().join(", "),
        max_dirty: wb.max_dirty,
        limit: wb.limit_range.1,
    };
    if Arc::strong_count(&pc) != 1 {
        sh.violation("the cache is still shared at its drop (a churn thread ended early)".into());
    }
    drop(pc);
    // Release: pairs with the churn threads' Acquire load.
    ch.dropped.store(true, Ordering::Release);
    let mut buf = vec![0u8; PAGE_SIZE];
    match sh.mapping.read(0, &mut buf).as_ref().map_err(PageCacheError::of) {
        Err(Some(PageCacheError::MappingRemoved { id: 1 })) => {}
        r => sh.violation(format!("a read of the file mapping after the cache drop: {r:?}")),
    }
    for (j, c) in churners.into_iter().enumerate() {
        if c.join().is_err() {
            sh.violation(format!("churn thread {j} panicked"));
        }
    }
    sh.beats[main].store(DONE, Ordering::Relaxed);
    ended
}

/// Print the counts and check the end: the dirty limit, the stores' writes,
/// the invariants and exact conservation once everything is dropped.
fn report(a: &PageAllocator, sh: &Shared, ch: &Churn, end: &Ended, nchurn: u64, secs: f64) -> i32 {
    let vm = |k: &str| a.stats().vmstat().items.iter().find(|(n, _)| *n == k).map_or(0, |&(_, v)| v);
    let (steal, mig, scans) =
        (vm("pgsteal_kswapd") + vm("pgsteal_direct"), vm("pgmigrate_success"), vm("compact_daemon_migrate_scanned"));
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
    println!("stress --pagecache: writeback: {}", end.wb);
    if end.max_dirty > end.limit + sh.threads + nchurn {
        sh.violation(format!(
            "nr_dirty + nr_writeback reached {}, over the highest dirty limit {} plus one page per writer",
            end.max_dirty, end.limit
        ));
    }
    if nchurn > 0 {
        ch.report(sh);
    }
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    if let Err(e) = a.check_invariants() {
        sh.violation(format!("invariants: {e}"));
    }
    let c = a.census();
    let conserved = c.allocated == 0 && c.free + c.pcp == a.managed_pages();
    if !conserved {
        sh.violation(format!("conservation: {c:?}, managed {}", a.managed_pages()));
    }
    let (ops, violations) = (sh.ops.load(Ordering::Relaxed), sh.violations.load(Ordering::Relaxed));
    println!(
        "stress --pagecache: {secs:.1} s, {ops} ops, reclaimed {steal} pages (shrinker calls freed {}), \
         migrated {mig} ({} by compact_memory), kcompactd scanned {scans}, fill allocations retried \
         {}, failed fills {} (target 0; not a violation); violations {violations}, \
         conservation {}, hangs 0",
        end.shrunk,
        end.migrated,
        end.retries,
        sh.failed_fills.load(Ordering::Relaxed),
        if conserved { "exact" } else { "BROKEN" },
    );
    i32::from(violations > 0)
}
