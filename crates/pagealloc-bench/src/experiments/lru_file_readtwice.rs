//! `pagealloc bench lru-file-readtwice` (on demand only: it writes
//! a file and reads it many times). vm-scalability's lru-file-readtwice on our
//! page cache: a 128 MiB arena with a page cache and kswapd, a real file of
//! half the arena on the machine's disk file system (the temporary
//! directory), and one reader per CPU reading its own contiguous share of the
//! file twice, page by page, through the cache (`Mapping::read`). The second
//! pass should find its pages cached: the target is at least 95% hits (a hit
//! is a page the second pass read without the cache asking the file for it).
//!
//! Variants, in the same run: `old` and `new` are seed 4's A/B on
//! `page_lock_waiters_bit` (off: every unlock of a filled page looks up the
//! hashed wait queue; on: only when the waiters bit is set), both with
//! readahead; `new-no-readahead` is `new` reading one page per miss; `kernel` is the
//! same readers with `pread` through the kernel's own page cache. After the
//! two passes, warm random 4 KiB reads of every page in a scattered order:
//! ours through a lookup that hands back a referenced page (8 bytes read
//! through it) and with a 4 KiB copy into the reader's buffer, the kernel's
//! `pread` of the same pages; targets 3x and 1.5x the kernel's. Every
//! variant's first pass starts after `posix_fadvise(DONTNEED)` (cold: the
//! file's pages come from the disk, for our cache too). Our arena is
//! populated up front (`Backing::Resident`), as a buffer pool's memory is:
//! with lazily faulted anonymous memory the first touch of each frame, not
//! the cache, dominates a cold pass.
//!
//! Then cold sequential reads measured fairly (`cold_seq`): a file of 256
//! MiB (passes of 100 ms and more) in an arena of twice that, 11 rounds (21
//! with `--full`) of one cold pass per variant in a rotating order, the
//! median of the per-round ratios to the kernel with its min..max; target:
//! at least 0.9x the kernel's throughput for the default
//! readahead (`new`).

use super::cold_seq::{self, pass};
use super::lru_file_readonce::file_for;
use crate::harness::{Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::{Backing, Config, FileSource, PageAllocator, PageCache, PageCacheConfig, PageSource, PAGE_SIZE};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The experiment.
pub struct LruFileReadtwice;

/// Arena bytes: the file is half of it.
const ARENA: u64 = 128 << 20;
/// The cold sequential rounds' file (`cold_seq`).
const COLD_FILE: u64 = 256 << 20;

/// A file source that counts the pages the cache asked it for, reading
/// ahead or not.
struct Counted(FileSource, AtomicU64, bool);

impl PageSource for Counted {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.read_page(index, buf)
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        self.1.fetch_add(bufs.len() as u64, Ordering::Relaxed);
        self.0.read_pages(index, bufs)
    }
    fn nr_pages(&self) -> Option<u64> {
        self.0.nr_pages()
    }
    fn readahead(&self) -> bool {
        self.2
    }
}

/// One variant's two passes: seconds each, and the pages the second pass
/// had to read from the file (None for the kernel, which does not say).
struct Passes {
    secs: [f64; 2],
    fills2: Option<u64>,
    errors: u64,
    /// Warm random 4 KiB reads, seconds for the whole file: through a
    /// lookup that hands back a referenced page (ours; NaN for the kernel),
    /// and with a copy into the reader's buffer (ours: `Mapping::read`; the
    /// kernel: `pread`).
    random: [f64; 2],
}

/// Read `i` of a pass in random order: an odd multiplier permutes the
/// indexes of a power-of-two file.
fn scatter(i: u64, pages: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b1) % pages
}

/// Both passes through our page cache over a fresh arena.
fn ours(path: &std::path::Path, pages: u64, threads: usize, waiters_bit: bool, readahead: bool) -> Passes {
    let cfg = Config::new().arena_bytes(ARENA).backing(Backing::Resident).page_lock_waiters_bit(waiters_bit);
    let a = Arc::new(PageAllocator::new(cfg).expect("readtwice arena"));
    let pc = PageCache::new(a, PageCacheConfig { kswapd: true }).expect("page cache");
    let f = std::fs::File::open(path).expect("open the file");
    drop_kernel_cache(&f);
    let src = Arc::new(Counted(FileSource(f), AtomicU64::new(0), readahead));
    let m = pc.mapping(1, src.clone());
    let read = |i: u64, buf: &mut [u8]| m.read(i * PAGE_SIZE as u64, buf).is_ok();
    let (s1, e1) = pass(pages, threads, read);
    let before = src.1.load(Ordering::Relaxed);
    let (s2, e2) = pass(pages, threads, read);
    let fills2 = src.1.load(Ordering::Relaxed) - before;
    // Warm random reads: a referenced page handed back (8 bytes read through
    // it, under its lock), then a 4 KiB copy out of the cache.
    let look =
        |i: u64, _: &mut [u8]| m.get(scatter(i, pages)).map(|h| std::hint::black_box(h.read(0, &mut [0u8; 8]))).is_ok();
    let (r0, e3) = pass(pages, threads, look);
    let (r1, e4) = pass(pages, threads, |i, buf| read(scatter(i, pages), buf));
    Passes { secs: [s1, s2], fills2: Some(fills2), errors: e1 + e2 + e3 + e4, random: [r0, r1] }
}

/// Drop the file's pages from the kernel's page cache, so that a first pass
/// reads from the disk: ours (through `preadv`) as the kernel's own.
pub(crate) fn drop_kernel_cache(f: &std::fs::File) {
    // Dirty pages are not dropped: write them first.
    let _ = f.sync_all();
    // SAFETY: a valid descriptor; the call only advises the kernel.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Both passes with `pread` through the kernel's page cache, the first cold.
fn kernel(path: &std::path::Path, pages: u64, threads: usize) -> Passes {
    let f = std::fs::File::open(path).expect("open the file");
    drop_kernel_cache(&f);
    let read = |i: u64, buf: &mut [u8]| f.read_exact_at(buf, i * PAGE_SIZE as u64).is_ok();
    let (s1, e1) = pass(pages, threads, read);
    let (s2, e2) = pass(pages, threads, read);
    let (r1, e3) = pass(pages, threads, |i, buf| read(scatter(i, pages), buf));
    Passes { secs: [s1, s2], fills2: None, errors: e1 + e2 + e3, random: [f64::NAN, r1] }
}

/// Each variant's figures from the rounds, keyed (variant, measure).
type Fig = std::collections::BTreeMap<(&'static str, &'static str), Vec<f64>>;

/// The read-twice rounds: every variant once a round, a line for each.
fn readtwice_rounds(ctx: &Ctx, r: &mut ExperimentResult, path: &std::path::Path, pages: u64, threads: usize) -> Fig {
    let mut fig: Fig = Default::default();
    for rep in 0..ctx.repeats {
        for variant in ["old", "new", "new-no-readahead", "kernel"] {
            let p = match variant {
                "kernel" => kernel(path, pages, threads),
                v => ours(path, pages, threads, v != "old", v != "new-no-readahead"),
            };
            let read = pages / threads as u64 * threads as u64;
            let hit = p.fills2.map(|f| 100.0 * read.saturating_sub(f) as f64 / read as f64);
            let hit_s = hit.map_or("-".to_string(), |h| format!("{h:.2}"));
            r.line(
                ctx,
                format!(
                    "{variant}#{rep} {read} {:.4} {:.4} {hit_s} {:.4} {:.4} {}",
                    p.secs[0], p.secs[1], p.random[0], p.random[1], p.errors
                ),
            );
            fig.entry((variant, "pass1")).or_default().push(p.secs[0]);
            fig.entry((variant, "pass2")).or_default().push(p.secs[1]);
            for (k, name) in [(0, "random-lookup"), (1, "random-copy")] {
                if p.random[k].is_finite() {
                    fig.entry((variant, name)).or_default().push(p.random[k] * 1e9 / read as f64);
                }
            }
            if let Some(h) = hit {
                fig.entry((variant, "hit")).or_default().push(h);
            }
            if p.errors > 0 {
                r.notes.push(format!("{variant} run {rep}: {} reads failed", p.errors));
            }
        }
    }
    fig
}

/// Cold sequential reads, interleaved rounds (`cold_seq`). False when the
/// file could not be made (the reason is in the report).
fn cold_sequential(ctx: &Ctx, r: &mut ExperimentResult, threads: usize) -> bool {
    let rounds = if ctx.full { 21 } else { 11 };
    // A file of COLD_FILE (passes of 100 ms and more, so one lost time
    // slice on the shared CPUs weighs less) in an arena twice its size.
    let cold_pages = COLD_FILE / PAGE_SIZE as u64;
    let Some(cold_path) = file_for(ctx, r, "cold", cold_pages, 2 * COLD_FILE, threads) else {
        return false;
    };
    let cold = {
        let cfg = Config::new().arena_bytes(2 * COLD_FILE).backing(Backing::Resident);
        let a = Arc::new(PageAllocator::new(cfg).expect("cold arena"));
        let pc = PageCache::new(a, PageCacheConfig { kswapd: true }).expect("page cache");
        cold_seq::rounds(&pc, &cold_path, cold_pages, threads, rounds)
    };
    let _ = std::fs::remove_file(&cold_path);
    let pages = cold_pages;
    r.line(ctx, format!("# cold sequential: {rounds} rounds, order rotating; per variant seconds by round"));
    for (k, v) in cold_seq::VARIANTS.iter().enumerate() {
        let s: Vec<String> = cold.secs[k].iter().map(|x| format!("{x:.4}")).collect();
        r.line(ctx, format!("cold-{v} {}", s.join(" ")));
        let mbps: Vec<f64> = cold.secs[k].iter().map(|s| (pages * PAGE_SIZE as u64) as f64 / s / 1e6).collect();
        r.figures.push(Figure::new("cold-seq-read", *v, "MB/s", mbps).higher_better().param("threads", threads as u64));
        if k > 0 {
            r.figures.push(
                Figure::new("cold-seq-vs-kernel", *v, "x", cold.ratio[k].clone())
                    .higher_better()
                    .param("threads", threads as u64),
            );
            r.notes.push(format!(
                "cold sequential {v}: {}x the kernel's throughput, median (min..max) of {rounds} interleaved rounds",
                cold_seq::med_range(&cold.ratio[k])
            ));
        }
    }
    r.notes.push(format!("new-direct's I/O mode on {}: {}", std::env::temp_dir().display(), cold.direct_mode));
    if cold.errors > 0 {
        r.notes.push(format!("cold rounds: {} reads failed", cold.errors));
    }
    true
}

/// The rounds' figures, one per variant and measure.
fn push_figures(r: &mut ExperimentResult, fig: Fig, threads: usize) {
    for ((variant, m), v) in fig {
        let f = match m {
            "hit" => Figure::new("second-pass-hits", variant, "%", v).higher_better(),
            q @ ("random-lookup" | "random-copy") => Figure::new(format!("warm-{q}-4k"), variant, "ns/read", v),
            p => Figure::new(format!("elapsed-{p}"), variant, "s", v),
        };
        r.figures.push(f.param("threads", threads as u64));
    }
}

/// The targets and the closing note.
fn targets(r: &mut ExperimentResult) {
    let val = |m: &str, v: &str| r.get(m, v).map_or(f64::NAN, |f| f.value);
    let hit = val("second-pass-hits", "new");
    let cold_new = val("cold-seq-vs-kernel", "new");
    let (ours2, kernel2) = (val("elapsed-pass2", "new"), val("elapsed-pass2", "kernel"));
    let (ours1, kernel1) = (val("elapsed-pass1", "new"), val("elapsed-pass1", "kernel"));
    let no_ra1 = val("elapsed-pass1", "new-no-readahead");
    // Warm random 4 KiB reads against the kernel's pread of the same
    // pages from its own cache (the same readers, the same order).
    let pread = val("warm-random-copy-4k", "kernel");
    let (look, copy) = (val("warm-random-lookup-4k", "new"), val("warm-random-copy-4k", "new"));
    r.target(
        crate::harness::TargetKind::Count,
        "second pass served from the cache, % of pages (median of runs)",
        hit,
        95.0,
        hit >= 95.0,
    );
    r.target(
        crate::harness::TargetKind::Peer,
        "cold sequential read vs the kernel's, x its throughput (median of interleaved rounds)",
        cold_new,
        0.9,
        cold_new >= 0.9,
    );
    r.target(
        crate::harness::TargetKind::Peer,
        "warm random 4 KiB: referenced-page lookup vs the kernel's pread, x faster",
        pread / look,
        3.0,
        pread >= 3.0 * look,
    );
    r.target(
        crate::harness::TargetKind::Peer,
        "warm random 4 KiB: copy out of the cache vs the kernel's pread, x faster",
        pread / copy,
        1.5,
        pread >= 1.5 * copy,
    );
    r.notes.push(format!(
        "warm second pass: ours {:.1} ms, the kernel's pread {:.1} ms ({:.2}x); cold first pass: ours {:.1} ms \
         ({:.1} ms without readahead), the kernel's {:.1} ms ({:.2}x its throughput) (medians)",
        ours2 * 1e3,
        kernel2 * 1e3,
        kernel2 / ours2,
        ours1 * 1e3,
        no_ra1 * 1e3,
        kernel1 * 1e3,
        kernel1 / ours1
    ));
}

impl Experiment for LruFileReadtwice {
    fn name(&self) -> &'static str {
        "lru-file-readtwice"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "lru-file-readtwice: a file of half the arena read twice", None);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pages = ARENA / PAGE_SIZE as u64 / 2;
        let Some(path) = file_for(ctx, &mut r, "readtwice", pages, ARENA, threads) else {
            return r;
        };
        r.line(ctx, "variant#repeat pages pass1_s pass2_s pass2_hit_pct random_lookup_s random_copy_s errors");
        let fig = readtwice_rounds(ctx, &mut r, &path, pages, threads);
        let _ = std::fs::remove_file(&path);
        if !cold_sequential(ctx, &mut r, threads) {
            return r;
        }
        push_figures(&mut r, fig, threads);
        targets(&mut r);
        r
    }
}
