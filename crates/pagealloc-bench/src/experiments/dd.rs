//! `pagealloc bench dd` (on demand only: it writes files). Seed 4's
//! dd test as Mel Gorman ran it: a file a tenth of memory (here of the
//! arena) written with `dd`, then read back, and deleted, over and over, the
//! elapsed time of each iteration reported in mmtests' layout, on tmpfs
//! (`/dev/shm`) and on the machine's disk file system (the temporary
//! directory).
//!
//! An iteration, ours: a mapping over a new file (`FileSource`) in a page
//! cache over a 256 MiB arena (`Backing::Resident`, as a buffer pool's
//! memory), 1 MiB writes through the cache (`Mapping::write`: every page
//! filled, locked, written and dirtied), `fsync` (`Mapping::fsync`: every
//! page's writeback and the file's `fdatasync`), 1 MiB reads back through
//! the cache (`Mapping::read`), then the mapping is removed (its pages
//! truncated) and the file unlinked. `old` and `new` are seed 4's A/B on
//! `page_lock_waiters_bit`: every page of an iteration is locked and
//! unlocked several times, which is where the waiters bit acts. The peer,
//! `kernel`, in the same run: the same 1 MiB `write`s, `fsync`, `read`s back
//! and `unlink`, through the kernel's page cache. The variants' iterations
//! are interleaved (the order rotates every iteration).
//!
//! Reported: per file system and variant, Min, Amean, Stddev, Max elapsed
//! in the seed's layout (mmtests' compare header, `%.4f` seconds and the
//! change against `old`), the noise (spread: (max - min) / median over the
//! iterations, trimmed with 5 or more), and a verdict per file system on
//! seed 4's claim (`new` faster than `old` by more than the noise:
//! reproduced; slower by more: not reproduced; else inconclusive).

use crate::harness::{Claim, Ctx, Experiment, ExperimentResult, Figure};
use crate::report::{mmtests, verdict};
use pagealloc::{Backing, Config, FileSource, PageAllocator, PageCache, PageCacheConfig};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The experiment.
pub struct Dd;

/// Arena bytes; the file is a tenth of it.
const ARENA: u64 = 256 << 20;
/// dd's block size.
const BS: usize = 1 << 20;
/// The variants, in the table's column order.
const VARIANTS: [&str; 3] = ["old", "new", "kernel"];

/// The file system a directory is on, by name (`statfs`).
fn fs_name(dir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return "unknown".into() };
    // SAFETY: a zeroed statfs is a valid out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path, `st` a valid out-parameter.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    match st.f_type as u64 {
        0x0102_1994 => "tmpfs",
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        _ => "other",
    }
    .into()
}

/// The file's content: block `b`'s bytes.
fn block(b: usize, buf: &mut [u8]) {
    buf.fill((b % 251) as u8);
}

/// One iteration through our page cache: (write, fsync, read, delete)
/// seconds, and whether every byte read back was right.
fn ours(pc: &PageCache, id: u64, path: &Path, bytes: usize) -> ([f64; 4], bool) {
    let _ = std::fs::remove_file(path);
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).expect("dd file");
    let m = pc.mapping(id, Arc::new(FileSource(f)));
    let mut buf = vec![0u8; BS];
    let mut t = [0.0; 4];
    let s = Instant::now();
    for b in 0..bytes / BS {
        block(b, &mut buf);
        m.write((b * BS) as u64, &buf).expect("write through the cache");
    }
    t[0] = s.elapsed().as_secs_f64();
    let s = Instant::now();
    m.fsync().expect("fsync");
    t[1] = s.elapsed().as_secs_f64();
    let s = Instant::now();
    let mut ok = true;
    for b in 0..bytes / BS {
        m.read((b * BS) as u64, &mut buf).expect("read through the cache");
        ok &= buf.iter().all(|&x| x == (b % 251) as u8);
    }
    t[2] = s.elapsed().as_secs_f64();
    let s = Instant::now();
    drop(m);
    pc.remove_mapping(id);
    let _ = std::fs::remove_file(path);
    t[3] = s.elapsed().as_secs_f64();
    (t, ok)
}

/// One iteration through the kernel's page cache.
fn kernel(path: &Path, bytes: usize) -> ([f64; 4], bool) {
    let _ = std::fs::remove_file(path);
    let mut f =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).expect("dd file");
    let mut buf = vec![0u8; BS];
    let mut t = [0.0; 4];
    let s = Instant::now();
    for b in 0..bytes / BS {
        block(b, &mut buf);
        f.write_all(&buf).expect("write");
    }
    t[0] = s.elapsed().as_secs_f64();
    let s = Instant::now();
    f.sync_all().expect("fsync");
    t[1] = s.elapsed().as_secs_f64();
    let s = Instant::now();
    let mut f = std::fs::File::open(path).expect("reopen");
    let mut ok = true;
    for b in 0..bytes / BS {
        f.read_exact(&mut buf).expect("read");
        ok &= buf.iter().all(|&x| x == (b % 251) as u8);
    }
    t[2] = s.elapsed().as_secs_f64();
    let s = Instant::now();
    drop(f);
    let _ = std::fs::remove_file(path);
    t[3] = s.elapsed().as_secs_f64();
    (t, ok)
}

/// The seed's table for `rows` (file system, per variant samples): Min,
/// Amean, Stddev and Max elapsed per file system, each column against the
/// first.
fn table(rows: &[(String, Vec<Vec<f64>>)]) -> String {
    let fs_w = rows.iter().map(|(fs, _)| fs.len()).max().unwrap_or(0);
    let label_w = fs_w + " Amean  elapsed".len();
    let names: Vec<String> = VARIANTS.iter().map(|v| format!("dd-{v}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut s = mmtests::header_rows(&names, label_w + 1, 12 + 7 + 4);
    for (stat, f) in [
        ("Min", crate::harness::stats::min as fn(&[f64]) -> f64),
        ("Amean", crate::harness::stats::mean),
        ("Stddev", crate::harness::stats::stddev),
        ("Max", crate::harness::stats::max),
    ] {
        for (fs, cols) in rows {
            let label = format!("{fs:<fs_w$} {stat:<6} elapsed");
            s.push_str(&format!("{label:<label_w$} "));
            let base = f(&cols[0]);
            for (i, c) in cols.iter().enumerate() {
                let v = f(c);
                let sig = i > 0 && stat == "Amean" && mmtests::significant(&cols[0], c);
                s.push_str(&format!("{v:12.4}{}", mmtests::pct_cell(mmtests::pndiff(v, base), sig)));
            }
            s.push('\n');
        }
    }
    s
}

/// One directory's iterations, the variants interleaved (the order rotating
/// each iteration): a line each, and the elapsed figures. Returns the
/// elapsed times per variant and how many iterations read back wrong bytes.
fn dir_runs(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    caches: &[PageCache],
    dir: &Path,
    bytes: usize,
    iters: usize,
) -> (Vec<Vec<f64>>, u64) {
    let fs = fs_name(dir);
    let path = dir.join(format!("pagealloc-dd-{}", std::process::id()));
    let mut el: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    let mut bad = 0;
    for it in 0..iters {
        for k in 0..VARIANTS.len() {
            let v = (k + it) % VARIANTS.len();
            let (t, ok) = match VARIANTS[v] {
                "kernel" => kernel(&path, bytes),
                _ => ours(&caches[v], 1 + it as u64, &path, bytes),
            };
            bad += u64::from(!ok);
            let total: f64 = t.iter().sum();
            el[v].push(total);
            r.line(
                ctx,
                format!("{fs} {}#{it} {total:.4} {:.4} {:.4} {:.4} {:.4}", VARIANTS[v], t[0], t[1], t[2], t[3]),
            );
        }
    }
    for (k, v) in VARIANTS.iter().enumerate() {
        r.figures.push(
            Figure::new(format!("dd-elapsed-{fs}"), *v, "s", el[k].clone())
                .param("file_mib", (bytes >> 20) as u64)
                .param("dir", dir.display().to_string()),
        );
    }
    (el, bad)
}

/// Seed 4's verdict and claim for each file system.
fn verdicts(ctx: &Ctx, r: &mut ExperimentResult, rows: &[(String, Vec<Vec<f64>>)]) {
    for (fs, _) in rows {
        let metric = format!("dd-elapsed-{fs}");
        let (Some(o), Some(n), Some(k)) = (r.get(&metric, "old"), r.get(&metric, "new"), r.get(&metric, "kernel"))
        else {
            continue;
        };
        let (change, noise, v) = verdict::judge(o, n);
        let line = format!(
            "verdict {fs}: old {:.4} s (noise {:.1}%), new {:.4} s (noise {:.1}%), change {:+.1}% vs noise {:.1}%: {}; \
             the kernel's dd {:.4} s (noise {:.1}%), ours new / kernel {:.2}x the time",
            o.value,
            100.0 * o.spread(),
            n.value,
            100.0 * n.spread(),
            100.0 * change,
            100.0 * noise,
            v.words(),
            k.value,
            100.0 * k.spread(),
            n.value / k.value
        );
        r.line(ctx, &line);
        r.notes.push(line);
        r.claims.push(Claim {
            seed: 4,
            text: format!(
                "seed 4: dd of a file 1/10th of memory, written, read and deleted each iteration: \
                 tmpfs Max elapsed 0.49 -> 0.48 s (2.04%), ext4 13.34 -> 13.43 s (-0.67%); here on {fs}"
            ),
            metric,
            old: "old".into(),
            new: "new".into(),
        });
    }
}

impl Experiment for Dd {
    fn name(&self) -> &'static str {
        "dd"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r =
            ExperimentResult::new(self.name(), "dd: a file 1/10th of the arena written, read, deleted", Some(4));
        let bytes = (ARENA as usize / 10) / BS * BS;
        let iters = if ctx.full { 30 } else { 15 };
        let mut dirs: Vec<PathBuf> = Vec::new();
        if Path::new("/dev/shm").is_dir() {
            dirs.push("/dev/shm".into());
        }
        dirs.push(std::env::temp_dir());
        let caches: Vec<PageCache> = [false, true]
            .iter()
            .map(|&bit| {
                let cfg = Config::new().arena_bytes(ARENA).backing(Backing::Resident).page_lock_waiters_bit(bit);
                let a = Arc::new(PageAllocator::new(cfg).expect("dd arena"));
                PageCache::new(a, PageCacheConfig { kswapd: true }).expect("page cache")
            })
            .collect();
        r.line(
            ctx,
            format!(
                "# arena {} MiB, file {} MiB, bs {} KiB, {iters} iterations per variant, interleaved",
                ARENA >> 20,
                bytes >> 20,
                BS >> 10
            ),
        );
        r.line(ctx, "fs variant#iter elapsed_s write_s fsync_s read_s delete_s");
        let mut rows = Vec::new();
        let mut bad = 0;
        for dir in &dirs {
            let (el, b) = dir_runs(ctx, &mut r, &caches, dir, bytes, iters);
            bad += b;
            rows.push((fs_name(dir), el));
        }
        for c in &caches {
            if c.nr_pages() != 0 {
                r.notes.push(format!("{} pages left in a page cache after the runs", c.nr_pages()));
            }
        }
        r.line(ctx, "");
        for l in table(&rows).lines() {
            r.line(ctx, l);
        }
        if bad > 0 {
            r.notes.push(format!("{bad} iterations read back wrong bytes"));
        }
        r.target(crate::harness::TargetKind::Count, "iterations that read back wrong bytes", bad as f64, 0.0, bad == 0);
        verdicts(ctx, &mut r, &rows);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's table stars a significant Amean change against `old`, as
    /// compare-mmtests.pl does, and leaves overlapping ones in parentheses.
    #[test]
    fn table_stars_significant_amean_changes_only() {
        let rows = vec![(
            "tmpfs".to_string(),
            vec![vec![100.0, 101.0, 99.0], vec![70.0, 71.0, 69.0], vec![80.0, 120.0, 100.0]],
        )];
        let t = table(&rows);
        let amean = t.lines().find(|l| l.contains("Amean")).expect("Amean row");
        // new: 30% faster, intervals apart; kernel: 0% to the mean's noise.
        assert!(amean.contains("*  30.00%*"), "{t}");
        assert!(amean.contains("(   0.00%)"), "{t}");
        assert_eq!(amean.matches('*').count(), 2, "only new is significant: {t}");
        assert!(t.lines().filter(|l| !l.contains("Amean")).all(|l| !l.contains('*')), "{t}");
    }
}
