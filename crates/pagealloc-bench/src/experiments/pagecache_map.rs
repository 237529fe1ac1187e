//! `pagealloc bench pagecache-map` (on demand only: it writes a
//! file). Seed 4's page-range mapping test, scaled to a small arena: the
//! seed timed mapping a range of a cached file (xfs, sizes 107M..2147M in
//! 20 steps, "Procs" rows), the work of the kernel's `filemap_map_pages`:
//! look up each page of the range in the page cache, lock it, check it is up
//! to date, unlock it. Here: a 128 MiB arena (`Backing::Resident`) with a
//! page cache, a file of three quarters of it in the temporary directory,
//! read once into the cache (warm), then for 20 sizes up to the whole file
//! (4.8 MiB steps), one thread per CPU, all mapping the same range (as
//! processes mapping one file do: they meet on the same page locks), each
//! page looked up with a reference (`Mapping::find_get`), locked
//! (`lock_page`), checked (`page_uptodate`), unlocked and put. The time of a
//! size is the wall time from the first thread's start to the last one's
//! end, each thread having mapped the range once.
//!
//! Variants, in the same run: `old` and `new` are seed 4's A/B on
//! `page_lock_waiters_bit` (off: every unlock looks up the hashed wait
//! queue; on: only when the waiters bit is set). `kernel` is the peer:
//! the same threads `mmap` the same range of the same file with
//! `MAP_POPULATE` (read-only, shared), warm in the kernel's page cache, which
//! runs the kernel's own lookup, trylock, up-to-date check and unlock per
//! page (`filemap_map_pages`) and also builds page tables; the `munmap`
//! after it is not timed. It is the closest fair peer there is, not an equal
//! one: the kernel also writes page-table entries and takes the mmap lock.
//!
//! The claim is judged on the sum of the 20 sizes' times (`map-all`), per
//! size in the raw table (mmtests' layout: value and change against `old`).

use super::lru_file_readonce::file_for;
use crate::harness::{pin, Claim, Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::{Backing, Config, FileSource, PageAllocator, PageCache, PageCacheConfig, PAGE_SIZE};
use std::os::unix::io::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

/// The experiment.
pub struct PagecacheMap;

/// Arena bytes; the file is three quarters of it.
const ARENA: u64 = 128 << 20;
/// Range sizes, as the seed's 20 steps.
const STEPS: u64 = 20;
/// Mappings of each size per repeat (the median is kept).
const ROUNDS: usize = 5;

/// The range of step `k` (1..=STEPS) in pages.
fn step_pages(file_pages: u64, k: u64) -> u64 {
    file_pages * k / STEPS
}

/// `threads` threads each run `map(k)` once, together; seconds from the
/// first one's start to the last one's end (each thread reads its own
/// clock: the spawning thread may be descheduled on a machine with as many
/// CPUs as mappers), and the pages not mapped (errors).
fn together(threads: usize, map: impl Fn(usize) -> u64 + Sync) -> (f64, u64) {
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let (map, barrier) = (&map, &barrier);
                s.spawn(move || {
                    pin(k);
                    barrier.wait();
                    let t0 = Instant::now();
                    let e = map(k);
                    (t0, Instant::now(), e)
                })
            })
            .collect();
        let ends: Vec<_> = hs.into_iter().map(|h| h.join().expect("mapper")).collect();
        let start = ends.iter().map(|e| e.0).min().expect("a mapper");
        let end = ends.iter().map(|e| e.1).max().expect("a mapper");
        ((end - start).as_secs_f64(), ends.iter().map(|e| e.2).sum())
    })
}

/// Per step: the median over `ROUNDS` of the time to map the step's range
/// (microseconds), and the errors.
fn per_step(file_pages: u64, threads: usize, map: impl Fn(u64) -> u64 + Sync) -> (Vec<f64>, u64) {
    let mut errors = 0;
    let times = (1..=STEPS)
        .map(|k| {
            let n = step_pages(file_pages, k);
            let mut v: Vec<f64> = (0..ROUNDS)
                .map(|_| {
                    let (s, e) = together(threads, |_| map(n));
                    errors += e;
                    s * 1e6
                })
                .collect();
            v.sort_by(f64::total_cmp);
            v[ROUNDS / 2]
        })
        .collect();
    (times, errors)
}

/// Our page cache, warm, mapped with the waiters bit on or off.
fn ours(path: &std::path::Path, file_pages: u64, threads: usize, waiters_bit: bool) -> (Vec<f64>, u64) {
    let cfg = Config::new().arena_bytes(ARENA).backing(Backing::Resident).page_lock_waiters_bit(waiters_bit);
    let a = Arc::new(PageAllocator::new(cfg).expect("pagecache-map arena"));
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: true }).expect("page cache");
    let m = pc.mapping(1, Arc::new(FileSource(std::fs::File::open(path).expect("open the file"))));
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut errors = (0..file_pages).filter(|&i| m.read(i * PAGE_SIZE as u64, &mut buf).is_err()).count() as u64;
    let map = |n: u64| -> u64 {
        let mut bad = 0;
        for i in 0..n {
            let Some(h) = m.find_get(i).unwrap() else {
                bad += 1;
                continue;
            };
            let p = h.pfn();
            if a.page_locks().lock_page(p).is_err() {
                bad += 1;
                continue;
            }
            if !a.page_locks().page_uptodate(p) {
                bad += 1;
            }
            let _ = a.page_locks().unlock_page(p);
        }
        bad
    };
    let (t, e) = per_step(file_pages, threads, map);
    errors += e;
    (t, errors)
}

/// The kernel: `mmap(MAP_POPULATE)` of the range of the warm file.
fn kernel(path: &std::path::Path, file_pages: u64, threads: usize) -> (Vec<f64>, u64) {
    let f = std::fs::File::open(path).expect("open the file");
    // Warm the kernel's cache.
    let mut buf = vec![0u8; PAGE_SIZE];
    for i in 0..file_pages {
        let _ = std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, i * PAGE_SIZE as u64);
    }
    let fd = f.as_raw_fd();
    let map = |n: u64| -> u64 {
        let len = (n * PAGE_SIZE as u64) as usize;
        // SAFETY: a fresh read-only shared mapping of an open file, unmapped
        // below; nothing else refers to it.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED | libc::MAP_POPULATE, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return n;
        }
        // SAFETY: the mapping made just above, of `len` bytes.
        unsafe { libc::munmap(p, len) };
        0
    };
    per_step(file_pages, threads, map)
}

impl Experiment for PagecacheMap {
    fn name(&self) -> &'static str {
        "pagecache-map"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(
            self.name(),
            "pagecache-map: look up, lock and check a range of cached pages",
            Some(4),
        );
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let file_pages = ARENA / PAGE_SIZE as u64 * 3 / 4;
        let Some(path) = file_for(ctx, &mut r, "map", file_pages, ARENA, threads) else {
            return r;
        };
        let variants = ["old", "new", "kernel"];
        let mut runs: Vec<Vec<Vec<f64>>> = vec![Vec::new(); variants.len()];
        for rep in 0..ctx.repeats {
            for (vi, v) in variants.iter().enumerate() {
                let (t, errors) = match *v {
                    "kernel" => kernel(&path, file_pages, threads),
                    v => ours(&path, file_pages, threads, v == "new"),
                };
                if errors > 0 {
                    r.notes.push(format!("{v} run {rep}: {errors} pages not mapped"));
                }
                runs[vi].push(t);
            }
        }
        let _ = std::fs::remove_file(&path);
        table(ctx, &mut r, &variants, &runs, file_pages);
        for (vi, v) in variants.iter().enumerate() {
            let total: Vec<f64> = runs[vi].iter().map(|t| t.iter().sum()).collect();
            r.figures.push(Figure::new("map-all", *v, "us", total).param("threads", threads as u64));
            for k in 1..=STEPS {
                let s: Vec<f64> = runs[vi].iter().map(|t| t[(k - 1) as usize]).collect();
                let mib = (step_pages(file_pages, k) * PAGE_SIZE as u64) >> 20;
                r.figures.push(Figure::new(format!("map-{mib}M"), *v, "us", s).param("threads", threads as u64));
            }
        }
        verdict_lines(ctx, &mut r);
        r.claims.push(Claim {
            seed: 4,
            text: "seed 4: time to mmap a range of cached pages (xfs), 107M..2147M: 2.3% to 20.7% less with the \
                   waiters bit (e.g. 322M 1918 -> 1522, 2147M 8617 -> 8205)"
                .into(),
            metric: "map-all".into(),
            old: "old".into(),
            new: "new".into(),
        });
        r.notes.push(format!(
            "{threads} threads map the same range of a warm {} MiB file; kernel = mmap(MAP_POPULATE) of the same \
             range, warm in its own page cache (it also builds page tables; munmap not timed)",
            (file_pages * PAGE_SIZE as u64) >> 20
        ));
        r
    }
}

/// The raw table in mmtests' compare layout: per size, each variant's
/// median time and its change against `old` (`100 - new * 100 / old`,
/// positive = faster).
fn table(ctx: &Ctx, r: &mut ExperimentResult, variants: &[&str], runs: &[Vec<Vec<f64>>], file_pages: u64) {
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut head = format!("{:<14}", "");
    for v in variants {
        head += &format!(" {v:>21}");
    }
    r.line(ctx, head);
    for k in 0..=STEPS as usize {
        let label = if k == STEPS as usize {
            "Procs all".to_string()
        } else {
            format!("Procs {}M", (step_pages(file_pages, k as u64 + 1) * PAGE_SIZE as u64) >> 20)
        };
        let vals: Vec<f64> = runs
            .iter()
            .map(|rs| med(&mut rs.iter().map(|t| if k == STEPS as usize { t.iter().sum() } else { t[k] }).collect()))
            .collect();
        let mut line = format!("{label:<14}");
        for v in &vals {
            line += &format!(" {v:>12.1} ({:6.2}%)", 100.0 - v * 100.0 / vals[0]);
        }
        r.line(ctx, line);
    }
}

/// Seed 4's verdict per size and on the sum, against the noise.
fn verdict_lines(ctx: &Ctx, r: &mut ExperimentResult) {
    let metrics: Vec<String> =
        r.figures.iter().filter(|f| f.variant == "old").map(|f| f.metric.clone()).collect::<Vec<_>>();
    let (mut better, mut worse, mut noise) = (0, 0, 0);
    for m in &metrics {
        let (Some(a), Some(b)) = (r.get(m, "old").cloned(), r.get(m, "new").cloned()) else { continue };
        let (change, n, v) = crate::report::verdict::judge(&a, &b);
        match v {
            crate::report::verdict::Verdict::Reproduced => better += 1,
            crate::report::verdict::Verdict::NotReproduced => worse += 1,
            _ => noise += 1,
        }
        if m == "map-all" {
            r.line(
                ctx,
                format!(
                    "seed 4 map-all: old {:.0} us (spread {:.1}%) new {:.0} us (spread {:.1}%): change {:+.1}% \
                     against noise {:.1}%: {}",
                    a.value,
                    a.spread() * 100.0,
                    b.value,
                    b.spread() * 100.0,
                    change * 100.0,
                    n * 100.0,
                    v.words()
                ),
            );
        }
    }
    r.line(ctx, format!("seed 4 per size: new faster beyond noise {better}, slower {worse}, within noise {noise}"));
}
