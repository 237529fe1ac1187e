//! `pagealloc bench burst-idle` (on demand only, not in the default
//! run: it idles for seconds). A burst, then idleness: allocate 80% of the
//! default arena (1 GiB, in quick and full mode) one order-0 page at a time,
//! touch every page, free three quarters of them in random order, then idle
//! with the defaults (reporting on, order 0, 2 s delay) and nothing called by
//! the user. The process's
//! resident set (/proc/self/statm) is sampled every 100 ms; the target is
//! resident at most the resident set before the burst plus 1.1x live memory
//! after 3 s of idleness. Then the cost of allocating and touching the freed
//! memory again (the faults the release costs).
//!
//! Peers, in the same run, each in a process of its own
//! ([`crate::burst_peer`], the hidden `pagealloc burst-peer` subcommand): glibc
//! (`aligned_alloc`/`free`, default settings, no `malloc_trim`: nothing is
//! called by the user), tcmalloc (`tc_memalign`/`tc_free`) and jemalloc
//! (`aligned_alloc`/`free`, default decay), loaded with `dlopen` where
//! installed and reported as not run where not. Each does the same burst: as
//! many 4 KiB blocks as pagealloc's pages, one byte of each touched, three
//! quarters freed in the same random order ([`shuffle`]), then the same idle
//! sampling. Figures per allocator (variant): `rss-before`, `live`,
//! `rss-after-idle` (pages), `excess-ratio` ((after - before) / live), and
//! `idle-rss-<t>ms` (the same ratio every 500 ms, the plot).

use crate::burst_peer::{self, Outcome, Peer, PeerRun};
use crate::harness::rand::shuffle;
use crate::harness::{Ctx, Experiment, ExperimentResult, Figure, Plot};
use pagealloc::{Config, Gfp, PageAllocator, Pfn, PAGE_SIZE};
use std::time::{Duration, Instant};

/// The experiment.
pub struct BurstIdle;

/// Seconds of idleness sampled.
const IDLE_S: u64 = 3;

fn rss_pages() -> u64 {
    crate::harness::process_rss_pages().unwrap_or(0)
}

/// Pages of the arena's mapping that are resident (mincore): the part of the
/// process's resident set the allocator's memory accounts for.
fn arena_resident_pages(a: &PageAllocator) -> u64 {
    let Some(base) = a.page_address(Pfn::new(0)) else { return 0 };
    let n = a.nr_pages() as usize;
    let mut vec = vec![0u8; n];
    // SAFETY: [base, base + n pages) is the arena's own mapping (page-aligned),
    // and `vec` has one byte per page of it.
    let rc = unsafe { libc::mincore(base.as_ptr().cast(), n * PAGE_SIZE, vec.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    vec.iter().filter(|&&b| b & 1 != 0).count() as u64
}

/// One allocator's figures: the sizes, the ratio, and the ratio every 500 ms.
fn push_figures(r: &mut ExperimentResult, variant: &str, run: &PeerRun) {
    let ratio = |rss: u64| (rss as f64 - run.before as f64) / run.live as f64;
    r.figures.push(Figure::new("rss-before", variant, "pages", vec![run.before as f64]));
    r.figures.push(Figure::new("live", variant, "pages", vec![run.live as f64]));
    r.figures.push(Figure::new("rss-after-idle", variant, "pages", vec![run.after as f64]));
    r.figures.push(Figure::new("excess-ratio", variant, "x live", vec![run.ratio()]));
    for (k, &(_, rss)) in run.samples.iter().enumerate().filter(|(k, _)| k % 5 == 0) {
        let t = k as u64 * 100;
        r.figures.push(Figure::new(format!("idle-rss-{t}ms"), variant, "x live", vec![ratio(rss)]).param("t_ms", t));
    }
}

/// What the figures say about an allocator's burst, frees and idle time, for
/// the notes: resident pages per block at the end of the burst, and the
/// resident pages given back by the frees and during the idle time.
fn behaviour(run: &PeerRun) -> String {
    let per_block = (run.burst as f64 - run.before as f64) / run.allocated.max(1) as f64;
    let by_frees = run.burst as i64 - run.peak as i64;
    let idle = run.peak as i64 - run.after as i64;
    format!(
        "resident {} pages at the end of the burst ({per_block:.2} per block allocated), {} after the frees \
         ({by_frees} given back by them, for {} blocks freed), {} after the idle time ({idle} given back while idle)",
        run.burst,
        run.peak,
        run.allocated - run.live,
        run.after
    )
}

/// One allocator's note: its figures and [`behaviour`].
fn summary(name: &str, run: &PeerRun) -> String {
    format!(
        "{name}: before {} pages, live {}, after {IDLE_S} s idle {}, ratio {:.3}; {}",
        run.before,
        run.live,
        run.after,
        run.ratio(),
        behaviour(run)
    )
}

fn touch(a: &PageAllocator, p: Pfn) {
    let addr = a.page_address(p).expect("anonymous backing");
    // SAFETY: the page is allocated to this experiment.
    unsafe { addr.as_ptr().write_volatile(1) };
}

/// The burst and the frees: 80% of the arena allocated and touched, three
/// quarters of it freed in random order. What comes back: the pages kept,
/// and the burst's half of our [`PeerRun`] (no samples, `after` not yet
/// known).
fn burst_and_free(a: &PageAllocator) -> (Vec<Pfn>, PeerRun, Instant) {
    let rss0 = rss_pages();
    let n = (a.managed_pages() * 8 / 10) as usize;
    let mut pages = Vec::with_capacity(n);
    for _ in 0..n {
        match a.alloc_pages(Gfp::MOVABLE, 0) {
            Ok(p) => {
                touch(a, p);
                pages.push(p);
            }
            Err(_) => break,
        }
    }
    // Free three quarters in random order (xorshift Fisher-Yates).
    shuffle(&mut pages);
    let allocated = pages.len() as u64;
    let keep = pages.len() / 4;
    let burst = rss_pages();
    let t_free = Instant::now();
    for p in pages.drain(keep..) {
        a.free_pages(p, 0).expect("burst-idle free");
    }
    let live = keep as u64;
    let peak = rss_pages();
    let run = PeerRun { before: rss0, allocated, live, burst, peak, after: peak, samples: Vec::new() };
    (pages, run, t_free)
}

/// Idle for `IDLE_S` seconds, a line every 100 ms attributing the excess
/// over the live pages; fills in `run`'s samples and `after`. Returns when
/// the resident set first came within the target, in ms after the frees.
fn idle(ctx: &Ctx, r: &mut ExperimentResult, a: &PageAllocator, run: &mut PeerRun, t_free: Instant) -> Option<u64> {
    let (rss0, live) = (run.before, run.live);
    let limit = rss0 as f64 + 1.1 * live as f64;
    let mut within: Option<u64> = None;
    for k in 0..=(IDLE_S * 10) {
        let t = t_free.elapsed().as_millis() as u64;
        let last = rss_pages();
        run.after = last;
        run.samples.push((t, last));
        let res = a.reporting().residency();
        let reported: u64 = res.iter().map(|z| z.reported).sum();
        let buddy_free: u64 = res.iter().map(|z| z.free).sum();
        let free_resident: u64 = res.iter().map(|z| z.free_resident).sum();
        let pcp: u64 = a.stats().pcp_report().iter().map(|c| u64::from(c.count)).sum();
        let front = a.managed_pages().saturating_sub(live + buddy_free + pcp);
        let arena = arena_resident_pages(a);
        let excess = last as i64 - rss0 as i64 - live as i64;
        r.line(ctx, format!("{t} {last} {excess} {reported} {free_resident} {pcp} {front} {arena}"));
        if within.is_none() && last as f64 <= limit {
            within = Some(t);
        }
        if let Some(d) = Duration::from_millis((k + 1) * 100).checked_sub(t_free.elapsed()) {
            if k < IDLE_S * 10 {
                std::thread::sleep(d);
            }
        }
    }
    within
}

/// The cost of taking it all back: allocate and touch `again` pages.
/// Returns them, to be freed with the rest.
fn reallocate(ctx: &Ctx, r: &mut ExperimentResult, a: &PageAllocator, again: usize) -> Vec<Pfn> {
    let t0 = Instant::now();
    let mut back = Vec::with_capacity(again);
    for _ in 0..again {
        if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) {
            touch(a, p);
            back.push(p);
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / back.len().max(1) as f64;
    r.line(
        ctx,
        format!("# reallocating and touching {} pages: {ns:.0} ns per page ({} bytes each)", back.len(), PAGE_SIZE),
    );
    r.notes.push(format!("reallocation after the release: {ns:.0} ns per page, faults included"));
    back
}

impl Experiment for BurstIdle {
    fn name(&self) -> &'static str {
        "burst-idle"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "Burst then idle: resident memory given back", None);
        // The default arena (1 GiB) in both modes: the target is stated for
        // it, and a smaller arena has smaller per-CPU lists and meets it more
        // easily.
        let cfg = Config::new();
        let bytes = cfg.arena_bytes;
        let a = PageAllocator::new(cfg).expect("burst-idle arena");
        let n = (a.managed_pages() * 8 / 10) as usize;
        let (pages, mut ours, t_free) = burst_and_free(&a);
        r.line(
            ctx,
            format!(
                "# arena {} MiB, allocated {n} pages, live {}, rss before {} after the burst {} (pages)",
                bytes >> 20,
                ours.live,
                ours.before,
                ours.peak
            ),
        );
        // Attribution of the excess: free pages still resident on the buddy
        // lists (not yet reported), pages on per-CPU lists, and the rest of
        // the free pages (front caches, deferred frees).
        // `arena_resident` (mincore) less live is the allocator's share of the
        // excess; the rest is the process's own (descriptors, this vector).
        r.line(
            ctx,
            "t_ms rss_pages excess_over_live reported_pages buddy_free_resident pcp_pages front_pages arena_resident",
        );
        let within = idle(ctx, &mut r, &a, &mut ours, t_free);
        let ratio = (ours.after as f64 - ours.before as f64) / ours.live as f64;
        r.target(
            crate::harness::TargetKind::Floor,
            format!("resident after {IDLE_S} s idle, over the resident set before the burst, in live memory"),
            ratio,
            1.1,
            ratio <= 1.1,
        );
        r.notes.push(match within {
            Some(t) => format!("within rss0 + 1.1x live {t} ms after the frees ended"),
            None => format!("not within rss0 + 1.1x live after {IDLE_S} s"),
        });
        let back = reallocate(ctx, &mut r, &a, n - pages.len());
        let st = a.reporting().page_reporting_stats();
        r.notes.push(format!(
            "reporting: {} passes, {} pages in {} blocks released by {} calls, {} errors",
            st.passes, st.released_pages, st.released_blocks, st.release_calls, st.errors
        ));
        for p in back.into_iter().chain(pages) {
            a.free_pages(p, 0).expect("burst-idle free");
        }
        drop(a);
        push_figures(&mut r, "pagealloc", &ours);
        peers(ctx, &mut r, &ours);
        r
    }
}

/// Run every peer in its own process with pagealloc's burst, and report.
fn peers(ctx: &Ctx, r: &mut ExperimentResult, ours: &PeerRun) {
    r.line(
        ctx,
        "# allocator rss_before live rss_end_of_burst rss_after_frees rss_after_idle ratio (pages; ratio = (after \
         idle - before) / live)",
    );
    let row = |name: &str, x: &PeerRun| {
        format!("{name} {} {} {} {} {} {:.3}", x.before, x.live, x.burst, x.peak, x.after, x.ratio())
    };
    r.line(ctx, row("pagealloc", ours));
    r.notes.push(summary("pagealloc", ours));
    let mut ran = Vec::new();
    for peer in Peer::ALL {
        match burst_peer::spawn(peer, ours.allocated as usize, IDLE_S * 1000) {
            Ok(Outcome::Ran(run)) => {
                r.line(ctx, row(peer.name(), &run));
                if run.allocated != ours.allocated {
                    r.notes.push(format!(
                        "{}: allocated {} blocks, not pagealloc's {} (allocation failed)",
                        peer.name(),
                        run.allocated,
                        ours.allocated
                    ));
                }
                push_figures(r, peer.name(), &run);
                ran.push((peer, run));
            }
            Ok(Outcome::NotRun(why)) => {
                r.line(ctx, format!("{} not run: {why}", peer.name()));
                r.notes.push(format!("{} not run: {why}", peer.name()));
            }
            Err(e) => {
                r.line(ctx, format!("{} failed: {e}", peer.name()));
                r.notes.push(format!("{} failed: {e}", peer.name()));
            }
        }
    }
    for (peer, run) in &ran {
        r.notes.push(summary(peer.name(), run));
    }
    let best = ran.iter().min_by(|a, b| a.1.ratio().total_cmp(&b.1.ratio()));
    if let Some((peer, run)) = best {
        let (p, q) = (ours.ratio(), run.ratio());
        r.target(
            crate::harness::TargetKind::Peer,
            "excess ratio against the best peer's in the same run (at most 1: no peer does better)",
            p / q,
            1.0,
            p <= q,
        );
        r.notes.push(if p <= q {
            format!("no peer does better: pagealloc {p:.3}x live, best peer {} {q:.3}x", peer.name())
        } else {
            format!("{} does better than pagealloc: {q:.3}x live against {p:.3}x; {}", peer.name(), behaviour(run))
        });
    }
    let mut plot = Plot::line(
        "Resident memory over live memory while idle",
        "t_ms",
        "ms after the frees",
        "(resident - resident before) / live",
    )
    .series("pagealloc", "pagealloc", Some("idle-rss-*"));
    for (peer, _) in &ran {
        plot = plot.series(peer.name(), peer.name(), Some("idle-rss-*"));
    }
    r.plot = Some(plot);
}
