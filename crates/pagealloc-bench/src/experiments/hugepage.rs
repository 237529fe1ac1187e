//! `pagealloc bench hugepage` (on demand: it idles for seconds).
//! Hugepage coverage and cost, 4 KiB and hugepage backing side by side.
//!
//! Part 1, the burst: burst-idle's pattern (80% of the default 1 GiB arena
//! allocated one order-0 page at a time and written, three quarters freed in
//! random order, 3 s idle with the defaults, nothing called by the user) with
//! 4 KiB backing, with hugepage backing and pinned live pages, and with
//! hugepage backing and the live pages registered movable (an owner that
//! follows its pages as they move; every page holds its key, checked at the
//! end). With hugepage backing the reporting order is the pageblock's, so
//! only whole free 2 MiB pages are released; with movable pages the reporter
//! compacts once the allocator is idle for the delay
//! (`Config::page_reporting_compact`) and releases the pageblocks that
//! emptied. Figures: `excess-ratio` ((resident after idle - resident before)
//! / live, the target 1.25 for the movable case), `arena-rss-ratio`
//! (the arena's resident memory from smaps over live), `coverage` (the
//! arena's AnonHugePages over its Rss in /proc/self/smaps: the share of its
//! resident memory, in-use pages first among it, on hugepages), and
//! `realloc-rss-growth` (after the idle time, as many pages as are live
//! allocated and written again: resident pages added per page allocated;
//! near 0 where partly used hugepages still have room, since allocation
//! takes resident blocks before released ones), with the pages it took from
//! outside the pageblocks the burst used.
//!
//! Part 2, page-fault1 per-page cost (see [`super::page_fault1`]'s loop: 32768
//! order-0 pages allocated one at a time and one byte of each written, then
//! freed in gather batches of 512 through `free_pages_bulk`; one thread),
//! with 4 KiB backing populated up front (`Backing::Resident`, what
//! page-fault1 runs on), 4 KiB anonymous backing, and hugepage backing (with
//! and without `Config::prefetch_on_alloc`), each variant in blocks of rounds;
//! beside them the touch floor (the same writes to a resident 128 MiB
//! buffer, 4 KiB and hugepage-backed). Figures `ns-per-page` per variant
//! (median of the measured rounds, after warm-up rounds), and `coverage` for
//! the hugepage case measured with the 128 MiB allocated and written. Then
//! the hugepage loop taken apart: its writes alone, replayed in the order the
//! allocator handed the pages out (`writes-in-allocation-order`), and its
//! allocations and frees alone (`alloc-free-no-write`). `pagealloc bench
//! hugepage-fault` runs part 2 alone.
//!
//! Part 2 runs the variants in blocks of 10 rounds, the first 2 after each
//! switch unrecorded, as will-it-scale runs one testcase continuously: taking
//! turns round by round left each variant the descriptors and lists the
//! others had evicted. The `huge-no-prefetch` variant is the hugepage case
//! with `Config::prefetch_on_alloc` off, in the same run. What it found, and
//! where the cost beyond the floor lies, is in docs/results/.

use crate::harness::rand::shuffle;
use crate::harness::{Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::{Backing, Config, Gfp, MovableOps, PageAllocator, Pfn, PAGE_SIZE};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The experiment.
pub struct Hugepage;

/// Seconds of idleness after the burst.
const IDLE_S: u64 = 3;

fn rss_pages() -> u64 {
    crate::harness::process_rss_pages().unwrap_or(0)
}

/// `Rss` and `AnonHugePages` (KiB) of the mappings of /proc/self/smaps that
/// overlap `[start, start + len)`.
pub fn smaps_range(start: usize, len: usize) -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let (mut rss, mut huge, mut inside) = (0, 0, false);
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let first = w.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
                inside = false;
                continue;
            };
            inside = a < start + len && b > start;
        } else if inside {
            let kb = || w.clone().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            match first {
                "Rss:" => rss += kb(),
                "AnonHugePages:" => huge += kb(),
                _ => {}
            }
        }
    }
    (rss, huge)
}

fn arena_smaps(a: &PageAllocator) -> (u64, u64) {
    let base = a.page_address(Pfn::new(0)).map_or(0, |p| p.as_ptr() as usize);
    smaps_range(base, a.nr_pages() as usize * PAGE_SIZE)
}

/// An owner that follows its movable pages: pfn -> key (the page's first word).
#[derive(Default)]
struct Owner {
    pages: Mutex<HashMap<u64, u64>>,
}

impl MovableOps for Owner {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut m = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let Some(k) = m.remove(&from.as_u64()) else { return false };
        m.insert(to.as_u64(), k);
        true
    }
}

fn word(a: &PageAllocator, p: u64) -> *mut u64 {
    a.page_address(Pfn::new(p)).expect("a backed arena").as_ptr().cast()
}

/// One burst case's outcome.
struct Burst {
    live: u64,
    excess: f64,
    arena_ratio: f64,
    coverage: f64,
    within_ms: Option<u64>,
    compactions: u64,
    moved: u64,
    bad: usize,
    growth: f64,
    outside: u64,
}

/// The idle time after the frees: a line every half second, the resident
/// set against `rss0 + 1.25 x live`. Returns the last resident set and when
/// it first came within that, in ms after the frees.
fn idle(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    name: &str,
    a: &PageAllocator,
    rss0: u64,
    live: u64,
    t_free: Instant,
) -> (u64, Option<u64>) {
    let limit = rss0 as f64 + 1.25 * live as f64;
    let mut within = None;
    let mut last = 0;
    r.line(ctx, format!("# {name}: live {live} pages, rss before {rss0}"));
    r.line(ctx, format!("{name} t_ms rss_pages arena_rss_kb arena_anonhuge_kb free_below_pageblock"));
    for k in 0..=(IDLE_S * 10) {
        let t = t_free.elapsed().as_millis() as u64;
        last = rss_pages();
        let (rss_kb, huge_kb) = arena_smaps(a);
        if k % 5 == 0 {
            r.line(ctx, format!("{name} {t} {last} {rss_kb} {huge_kb} {}", a.reporting().free_pages_below_pageblock()));
        }
        if within.is_none() && last as f64 <= limit {
            within = Some(t);
        }
        if let Some(d) = Duration::from_millis((k + 1) * 100).checked_sub(t_free.elapsed()) {
            if k < IDLE_S * 10 {
                std::thread::sleep(d);
            }
        }
    }
    (last, within)
}

/// The allocation side: as many pages again as are live, allocated and
/// written after the idle time, then freed. Resident free blocks are taken
/// before released ones (released blocks sit at their lists' tails), so
/// where partly used hugepages still hold free memory (pinned pages) the
/// resident set should not grow. Returns the growth per page allocated and
/// how many came from outside the pageblocks the burst used.
fn again(a: &PageAllocator, live: u64, pages: &[u64]) -> (f64, u64) {
    let rss_idle = rss_pages();
    let again: Vec<Pfn> = (0..live).map_while(|_| a.alloc_pages(Gfp::MOVABLE, 0).ok()).collect();
    for &p in &again {
        // SAFETY: allocated to this experiment just now.
        unsafe { word(a, p.as_u64()).write_volatile(u64::MAX) };
    }
    let growth = (rss_pages() as f64 - rss_idle as f64) / again.len().max(1) as f64;
    // Where they came from: pages outside the pageblocks the burst used.
    let burst_blocks: std::collections::HashSet<u64> = pages.iter().map(|p| p >> 9).collect();
    let outside = again.iter().filter(|p| !burst_blocks.contains(&(p.as_u64() >> 9))).count() as u64;
    a.free_pages_bulk(&again).expect("free");
    (growth, outside)
}

fn burst(ctx: &Ctx, r: &mut ExperimentResult, name: &str, backing: Backing, movable: bool) -> Burst {
    let a = PageAllocator::new(Config::new().backing(backing)).expect("hugepage arena");
    let rss0 = rss_pages();
    let n = (a.managed_pages() * 8 / 10) as usize;
    let mut pages: Vec<u64> = Vec::with_capacity(n);
    for k in 0..n {
        let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) else { break };
        // SAFETY: the page is allocated to this experiment.
        unsafe { word(&a, p.as_u64()).write_volatile(k as u64) };
        pages.push(p.as_u64());
    }
    let mut order: Vec<usize> = (0..pages.len()).collect();
    shuffle(&mut order);
    let keep = pages.len() / 4;
    let owner = Arc::new(Owner::default());
    let id = a.compaction().register_movable_ops(owner.clone());
    {
        let mut m = owner.pages.lock().unwrap_or_else(|e| e.into_inner());
        for &k in &order[..keep] {
            m.insert(pages[k], k as u64);
        }
    }
    if movable {
        for &k in &order[..keep] {
            a.compaction().set_page_movable(Pfn::new(pages[k]), id).expect("movable");
        }
    }
    let t_free = Instant::now();
    for &k in &order[keep..] {
        a.free_pages(Pfn::new(pages[k]), 0).expect("free");
    }
    let live = keep as u64;
    let (last, within) = idle(ctx, r, name, &a, rss0, live, t_free);
    let (rss_kb, huge_kb) = arena_smaps(&a);
    let st = a.reporting().page_reporting_stats();
    let (growth, outside) = again(&a, live, &pages);
    let m = owner.pages.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: every page in the owner's map is allocated to it, and the
    // allocator is idle (no migration running: the experiment is its only user).
    let bad = m.iter().filter(|(&p, &k)| unsafe { word(&a, p).read_volatile() } != k).count();
    let live_pfns: Vec<u64> = m.keys().copied().collect();
    drop(m);
    for p in live_pfns {
        a.free_pages(Pfn::new(p), 0).expect("free");
    }
    Burst {
        live,
        excess: (last as f64 - rss0 as f64) / live as f64,
        arena_ratio: rss_kb as f64 / (live as f64 * 4.0),
        coverage: if rss_kb == 0 { 0.0 } else { huge_kb as f64 / rss_kb as f64 },
        within_ms: within,
        compactions: st.compactions,
        moved: st.compacted_pages,
        bad,
        growth,
        outside,
    }
}

impl Experiment for Hugepage {
    fn name(&self) -> &'static str {
        "hugepage"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "Hugepage coverage and page-fault1 cost", None);
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        r.line(ctx, format!("# transparent_hugepage/enabled: {}", thp.trim()));
        r.line(
            ctx,
            "# case live_pages excess_ratio arena_rss_ratio coverage within_1.25x_ms compactions pages_moved \
             data_errors realloc_rss_growth realloc_outside_burst_pageblocks",
        );
        for (name, backing, movable) in [
            ("4k", Backing::Anonymous, false),
            ("huge-pinned", Backing::HugePages, false),
            ("huge-movable", Backing::HugePages, true),
        ] {
            let b = burst(ctx, &mut r, name, backing, movable);
            r.line(
                ctx,
                format!(
                    "{name} {} {:.3} {:.3} {:.3} {} {} {} {} {:.3} {}",
                    b.live,
                    b.excess,
                    b.arena_ratio,
                    b.coverage,
                    b.within_ms.map_or("-".into(), |t| t.to_string()),
                    b.compactions,
                    b.moved,
                    b.bad,
                    b.growth,
                    b.outside
                ),
            );
            r.figures.push(Figure::new("excess-ratio", name, "x live", vec![b.excess]));
            r.figures.push(Figure::new("arena-rss-ratio", name, "x live", vec![b.arena_ratio]));
            r.figures.push(Figure::new("coverage", name, "share", vec![b.coverage]).higher_better());
            r.figures.push(Figure::new("realloc-rss-growth", name, "pages per page", vec![b.growth]));
            assert_eq!(b.bad, 0, "{name}: live data lost");
            if movable {
                r.target(
                    crate::harness::TargetKind::Floor,
                    format!("{name}: resident after {IDLE_S} s idle over before, in live memory"),
                    b.excess,
                    1.25,
                    b.excess <= 1.25,
                );
            }
        }
        super::hugepage_fault::run(ctx, &mut r);
        r
    }
}
