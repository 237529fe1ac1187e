//! Cold sequential reads, ours against the kernel's, measured fairly (part of
//! `lru-file-readtwice`): several rounds, each round one cold pass of every
//! variant over the same file, in an order that rotates from round to round
//! (so neither side always runs first, after the other warmed the disk's
//! host cache), each pass after the same `fsync` + `posix_fadvise(DONTNEED)`
//! of the file, with a file descriptor opened for it (fresh kernel
//! readahead state). Per round the ratio of the kernel's pass time to ours
//! (ours' throughput in units of the kernel's); reported: the median ratio
//! over rounds, and its spread (min..max), so a round that a neighbour on
//! the shared machine preempted shows as noise, not as a result.
//!
//! Variants: `new` is the page cache's default readahead (128 KiB windows,
//! the next one started at a marker and read inline by the reader that
//! reaches it); `new-worker` the same windows read by one worker thread;
//! `new-ra1m` inline windows up to 1 MiB; `new-direct` 4 MiB windows over
//! `O_DIRECT` (no copy through the kernel's page cache, nothing read ahead
//! by the kernel), each cut in 8 reads of 512 KiB for 8 workers (so the
//! device has several reads in flight); `new-ref` the default readahead with
//! each page taken in place as a referenced page (8 bytes read through it),
//! as a buffer pool uses its pages: one copy of each page, the kernel page
//! cache's into ours, as the kernel's `pread` makes one into the caller's
//! buffer (the other variants copy each page twice: into ours, then out to
//! the caller); `kernel`
//! `pread` through the kernel's page cache with its own readahead (the
//! device's `read_ahead_kb`).

use super::lru_file_readtwice::drop_kernel_cache;
use crate::harness::{pin, stats};
use pagealloc::{FileSource, PageCache, PageSource, Readahead, PAGE_SIZE};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Our variants and the kernel, in the order of round 0.
pub(crate) const VARIANTS: [&str; 6] = ["kernel", "new", "new-worker", "new-ra1m", "new-direct", "new-ref"];

/// One variant's readahead and I/O mode.
fn settings(v: &str) -> (Readahead, bool) {
    match v {
        "new-worker" => (Readahead { workers: 1, ..Readahead::default() }, false),
        "new-ra1m" => (Readahead { max_pages: 256, workers: 0 }, false),
        "new-direct" => (Readahead { max_pages: 1024, workers: 8 }, true),
        _ => (Readahead::default(), false),
    }
}

/// `threads` readers each read their contiguous share of `pages` pages with
/// `read`; seconds and failed reads.
pub(crate) fn pass(pages: u64, threads: usize, read: impl Fn(u64, &mut [u8]) -> bool + Sync) -> (f64, u64) {
    let per = pages / threads as u64;
    let t = Instant::now();
    let errors = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let read = &read;
                s.spawn(move || {
                    pin(k);
                    let mut buf = vec![0u8; PAGE_SIZE];
                    (k as u64 * per..(k as u64 + 1) * per).filter(|&i| !read(i, &mut buf)).count() as u64
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("reader")).sum()
    });
    (t.elapsed().as_secs_f64(), errors)
}

/// One cold pass of variant `v`: seconds, failed reads, and the I/O mode
/// used (for `new-direct`: whether `O_DIRECT` was granted).
fn one(pc: &PageCache, id: u64, v: &str, path: &Path, pages: u64, threads: usize) -> (f64, u64, String) {
    let f = std::fs::File::open(path).expect("open the file");
    drop_kernel_cache(&f);
    if v == "kernel" {
        let read = |i: u64, buf: &mut [u8]| f.read_exact_at(buf, i * PAGE_SIZE as u64).is_ok();
        let (s, e) = pass(pages, threads, read);
        return (s, e, "buffered".into());
    }
    let (ra, direct) = settings(v);
    pc.set_readahead(ra).expect("readahead settings");
    let (src, mode): (Arc<dyn PageSource>, String) = if direct {
        drop(f);
        let d = pagealloc::DirectFileSource::open(path, false).expect("open O_DIRECT");
        let mode = format!("{:?}", d.mode()).to_lowercase();
        (Arc::new(d), mode)
    } else {
        (Arc::new(FileSource(f)), "buffered".into())
    };
    let m = pc.mapping(id, src);
    let (s, e) = if v == "new-ref" {
        pass(pages, threads, |i, _| m.get(i).map(|h| std::hint::black_box(h.read(0, &mut [0u8; 8]))).is_ok())
    } else {
        pass(pages, threads, |i, buf| m.read(i * PAGE_SIZE as u64, buf).is_ok())
    };
    drop(m);
    pc.remove_mapping(id);
    (s, e, mode)
}

/// The rounds' results.
pub(crate) struct Cold {
    /// Per variant (in [`VARIANTS`] order): seconds per round.
    pub secs: Vec<Vec<f64>>,
    /// Per variant: the kernel's time over ours, per round.
    pub ratio: Vec<Vec<f64>>,
    pub errors: u64,
    /// `new-direct`'s I/O mode.
    pub direct_mode: String,
}

/// `rounds` rounds over `path` with page cache `pc` (emptied between passes).
pub(crate) fn rounds(pc: &PageCache, path: &Path, pages: u64, threads: usize, rounds: usize) -> Cold {
    let n = VARIANTS.len();
    let mut c = Cold { secs: vec![Vec::new(); n], ratio: vec![Vec::new(); n], errors: 0, direct_mode: String::new() };
    for r in 0..rounds {
        let mut t = vec![0.0; n];
        for k in 0..n {
            let v = (k + r) % n;
            let (s, e, mode) = one(pc, 1000 + (r * n + v) as u64, VARIANTS[v], path, pages, threads);
            t[v] = s;
            c.errors += e;
            if VARIANTS[v] == "new-direct" {
                c.direct_mode = mode;
            }
        }
        for v in 0..n {
            c.secs[v].push(t[v]);
            c.ratio[v].push(t[0] / t[v]);
        }
    }
    pc.set_readahead(Readahead::default()).expect("default readahead");
    c
}

/// "median (min..max)" of `v`.
pub(crate) fn med_range(v: &[f64]) -> String {
    format!("{:.2} ({:.2}..{:.2})", stats::median(v), stats::min(v), stats::max(v))
}
