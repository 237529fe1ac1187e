//! `pagealloc bench burst-idle` (issue 18; on demand only, not in the default
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
//! Peers (glibc with `malloc_trim`, jemalloc's decay, tcmalloc's release) are
//! not run yet: left for the next session.

use crate::harness::{Ctx, Experiment, ExperimentResult};
use pagealloc::{Config, Gfp, PageAllocator, Pfn, PAGE_SIZE};
use std::time::{Duration, Instant};

/// The experiment.
pub struct BurstIdle;

/// Seconds of idleness sampled.
const IDLE_S: u64 = 3;

fn rss_pages() -> u64 {
    crate::show::process_rss_pages().unwrap_or(0)
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

fn touch(a: &PageAllocator, p: Pfn) {
    let addr = a.page_address(p).expect("anonymous backing");
    // SAFETY: the page is allocated to this experiment.
    unsafe { addr.as_ptr().write_volatile(1) };
}

impl Experiment for BurstIdle {
    fn name(&self) -> &'static str {
        "burst-idle"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "Burst then idle: resident memory given back", None);
        // The default arena (1 GiB) in both modes: the target is
        // stated for it, and a smaller arena (256 MiB used to be the quick
        // mode's) has smaller per-CPU lists and meets it more easily.
        let cfg = Config::new();
        let bytes = cfg.arena_bytes;
        let a = PageAllocator::new(cfg).expect("burst-idle arena");
        let rss0 = rss_pages();
        let n = (a.managed_pages() * 8 / 10) as usize;
        let mut pages = Vec::with_capacity(n);
        for _ in 0..n {
            match a.alloc_pages(Gfp::MOVABLE, 0) {
                Ok(p) => {
                    touch(&a, p);
                    pages.push(p);
                }
                Err(_) => break,
            }
        }
        // Free three quarters in random order (xorshift Fisher-Yates).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in (1..pages.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pages.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let keep = pages.len() / 4;
        let t_free = Instant::now();
        for p in pages.drain(keep..) {
            a.free_pages(p, 0).expect("burst-idle free");
        }
        let live = keep as u64;
        let peak = rss_pages();
        r.line(
            ctx,
            format!(
                "# arena {} MiB, allocated {n} pages, live {live}, rss before {rss0} after the burst {peak} (pages)",
                bytes >> 20
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
        let limit = rss0 as f64 + 1.1 * live as f64;
        let mut within: Option<u64> = None;
        let mut last = peak;
        for k in 0..=(IDLE_S * 10) {
            let t = t_free.elapsed().as_millis() as u64;
            last = rss_pages();
            let res = a.residency();
            let reported: u64 = res.iter().map(|z| z.reported).sum();
            let buddy_free: u64 = res.iter().map(|z| z.free).sum();
            let free_resident: u64 = res.iter().map(|z| z.free_resident).sum();
            let pcp: u64 = a.pcp_report().iter().map(|c| u64::from(c.count)).sum();
            let front = a.managed_pages().saturating_sub(live + buddy_free + pcp);
            let arena = arena_resident_pages(&a);
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
        let ratio = (last as f64 - rss0 as f64) / live as f64;
        r.target(
            format!("resident after {IDLE_S} s idle, over the resident set before the burst, in live memory"),
            ratio,
            1.1,
            ratio <= 1.1,
        );
        r.notes.push(match within {
            Some(t) => format!("within rss0 + 1.1x live {t} ms after the frees ended"),
            None => format!("not within rss0 + 1.1x live after {IDLE_S} s"),
        });
        // The cost of taking it all back: allocate and touch the freed pages.
        let again = n - keep;
        let t0 = Instant::now();
        let mut back = Vec::with_capacity(again);
        for _ in 0..again {
            if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) {
                touch(&a, p);
                back.push(p);
            }
        }
        let ns = t0.elapsed().as_nanos() as f64 / back.len().max(1) as f64;
        r.line(
            ctx,
            format!("# reallocating and touching {} pages: {ns:.0} ns per page ({} bytes each)", back.len(), PAGE_SIZE),
        );
        r.notes.push(format!("reallocation after the release: {ns:.0} ns per page, faults included"));
        let st = a.page_reporting_stats();
        r.notes.push(format!(
            "reporting: {} passes, {} pages in {} blocks released by {} calls, {} errors",
            st.passes, st.released_pages, st.released_blocks, st.release_calls, st.errors
        ));
        r.notes.push("peers (glibc malloc_trim, jemalloc, tcmalloc) not run yet".into());
        for p in back.into_iter().chain(pages) {
            a.free_pages(p, 0).expect("burst-idle free");
        }
        r
    }
}
