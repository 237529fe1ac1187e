//! One will-it-scale run of one kind on N pinned threads: the arena, the
//! threads, the once-a-second sampling of their counters (and, for the
//! allocator, of the drains' zone-lock hold time), and main.c's lines.

use super::wis::wis_lines;
use super::worker::{worker, Counter};
use super::{Kind, MEMSIZE};
use crate::harness::pin;
use pagealloc::{Backing, Config, PageAllocator};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// `cpu` and total jiffies from /proc/stat, for runtest.py's idle columns.
fn proc_stat() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((idle, v.iter().sum()))
}

/// One will-it-scale run.
pub(super) struct Run {
    /// Totals of the measured seconds.
    pub(super) totals: Vec<f64>,
    /// The `average:` line's value: the measured totals' sum divided by their
    /// count, in integers, as main.c computes it.
    pub(super) average: u64,
    /// Idle percent over the measured seconds (runtest.py's `*_idle`).
    pub(super) idle: f64,
    /// Per measured second (our allocator only): the per-CPU drains' zone-lock
    /// hold ticks per drain and per drained page.
    pub(super) holds: (Vec<f64>, Vec<f64>),
}

/// Zone-lock hold ticks, drains and drained pages of every zone so far.
fn drain_holds(a: &PageAllocator) -> [u64; 3] {
    a.stats()
        .lockstat()
        .zones
        .iter()
        .fold([0; 3], |[t, d, p], z| [t + z.drain_hold_ticks, d + z.drains, p + z.drain_pages])
}

/// Drain-hold samples per second (each over a tenth of a second): 20 a
/// variant at 2 measured seconds, enough for the verdict's interval.
const HOLD_TICKS: usize = 10;

/// What the sampling loop saw while the threads ran.
struct Samples {
    /// Each second's per-thread iteration deltas.
    seconds: Vec<Vec<u64>>,
    /// Drain hold ticks per drain and per drained page, measured seconds only.
    holds: (Vec<f64>, Vec<f64>),
    /// /proc/stat at the start of the measured seconds and at their end.
    stat0: Option<(u64, u64)>,
    stat1: Option<(u64, u64)>,
}

/// The arena for our allocator's run (`None` for the peers): room for every
/// thread's 128 MiB plus the per-CPU lists, at least 1 GiB, resident before
/// the run like the kernel's memory and the floor's buffer.
fn arena(kind: Kind, threads: usize) -> Option<Arc<PageAllocator>> {
    let Kind::Ours(mode) = kind else {
        return None;
    };
    let bytes = ((threads as u64 * 2 * MEMSIZE as u64).max(1 << 30) + (1 << 30) - 1) & !((1 << 30) - 1);
    Some(Arc::new(
        PageAllocator::new(Config::new().arena_bytes(bytes).backing(Backing::Resident).drain_mode(mode))
            .expect("page_fault1 arena"),
    ))
}

/// Sample `warmup + measure` seconds of the running threads.
fn sample(counters: &[Counter], alloc: Option<&PageAllocator>, warmup: usize, measure: usize) -> Samples {
    let mut prev: Vec<u64> = vec![0; counters.len()];
    let mut seconds = Vec::new();
    let mut stat0 = if warmup == 0 { proc_stat() } else { None };
    let t0 = Instant::now();
    let mut holds = (Vec::new(), Vec::new());
    let mut h_prev = alloc.map(drain_holds);
    for sec in 1..=warmup + measure {
        // The drain holds are sampled HOLD_TICKS times a second (more
        // samples for their noise than the seconds give), the iterations
        // once, at the whole second since the start (no drift).
        for tick in 1..=HOLD_TICKS {
            let due = Duration::from_millis(((sec - 1) * HOLD_TICKS + tick) as u64 * 1000 / HOLD_TICKS as u64);
            if let Some(d) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(d);
            }
            if tick == HOLD_TICKS {
                let now: Vec<u64> = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).collect();
                seconds.push(now.iter().zip(&prev).map(|(a, b)| a - b).collect::<Vec<u64>>());
                prev = now;
            }
            if let (Some(a), Some(h0)) = (alloc, h_prev) {
                let h1 = drain_holds(a);
                let (dt, dd, dp) = (h1[0] - h0[0], h1[1] - h0[1], h1[2] - h0[2]);
                if sec > warmup && dd > 0 && dp > 0 {
                    holds.0.push(dt as f64 / dd as f64);
                    holds.1.push(dt as f64 / dp as f64);
                }
                h_prev = Some(h1);
            }
        }
        if sec == warmup {
            stat0 = proc_stat();
        }
    }
    Samples { seconds, holds, stat0, stat1: proc_stat() }
}

/// Idle percent between two /proc/stat readings, as runtest.py computes it.
fn idle_percent(stat0: Option<(u64, u64)>, stat1: Option<(u64, u64)>) -> f64 {
    match (stat0, stat1) {
        (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => (i1 - i0) as f64 * 100.0 / (t1 - t0) as f64,
        // runtest.py: no jiffies elapsed reads as 0.
        (Some(_), Some(_)) => 0.0,
        _ => f64::NAN,
    }
}

/// Run `kind` on `threads` threads: `warmup` reported seconds, then `measure`
/// measured ones, printing will-it-scale's lines into `out`.
pub(super) fn run_case(kind: Kind, threads: usize, zero: bool, warmup: usize, measure: usize, out: &mut String) -> Run {
    let alloc = arena(kind, threads);
    let counters: Arc<Vec<Counter>> = Arc::new((0..threads).map(|_| Counter::default()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (alloc, counters, stop, start) = (alloc.clone(), counters.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                pin(t);
                start.wait();
                worker(kind, alloc.as_deref(), zero, &counters[t].0, &stop);
            })
        })
        .collect();
    start.wait();
    let s = sample(&counters, alloc.as_deref(), warmup, measure);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("page_fault1 worker");
    }
    let (totals, average) = wis_lines(kind, &s.seconds, warmup, out);
    if let Some(a) = &alloc {
        a.drain_all_pages();
        a.check_invariants().expect("page_fault1: invariants after the run");
    }
    Run { totals, average, idle: idle_percent(s.stat0, s.stat1), holds: s.holds }
}
