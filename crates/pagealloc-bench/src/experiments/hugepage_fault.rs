//! Part 2 of `pagealloc bench hugepage`: page-fault1's per-page cost with
//! 4 KiB and hugepage backing, and the touch floor, round by round in the
//! same run (see the module doc of [`super::hugepage`]).

use super::hugepage::smaps_range;
use super::page_fault1::{GATHER_BATCH, MEMSIZE, NR_PAGES};
use crate::harness::{stats, Ctx, ExperimentResult, Figure};
use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn, PAGE_SIZE};
use std::time::Instant;

/// Part 2 alone, on demand as `pagealloc bench hugepage-fault`.
pub struct HugepageFault;

impl crate::harness::Experiment for HugepageFault {
    fn name(&self) -> &'static str {
        "hugepage-fault"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(self.name(), "page-fault1 with 4 KiB and hugepage backing", None);
        run(ctx, &mut r);
        r
    }
}

const HUGE: usize = 2 << 20;

/// Rounds a variant runs in a row before the next variant's turn, as
/// will-it-scale runs one testcase continuously: switching variant every
/// round left each one's descriptors and lists cold, and slowed the hugepage
/// case by half (the floor's writes miss the cache either way).
const BLOCK: usize = 10;
/// Rounds run after each switch of variant and not recorded: the caches
/// the previous variant left behind are not this one's.
const BLOCK_WARM: usize = 2;

/// A resident 128 MiB buffer for the floor, 2 MiB-aligned and advised
/// MADV_HUGEPAGE when `huge`.
struct Buffer {
    raw: *mut u8,
    base: *mut u8,
    len: usize,
}

impl Buffer {
    fn new(huge: bool) -> Self {
        let len = MEMSIZE + HUGE;
        // SAFETY: a fresh private anonymous mapping; checked below.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(raw, libc::MAP_FAILED, "hugepage: mmap failed");
        let raw = raw.cast::<u8>();
        // SAFETY: the offset is below HUGE and the mapping is MEMSIZE + HUGE long.
        let base = unsafe { raw.add(raw.align_offset(HUGE)) };
        // SAFETY: a range inside the mapping made above.
        unsafe {
            libc::madvise(base.cast(), MEMSIZE, if huge { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE });
            std::ptr::write_bytes(base, 1, MEMSIZE);
        }
        Self { raw, base, len }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made.
        unsafe { libc::munmap(self.raw.cast(), self.len) };
    }
}

/// One round of the floor: one byte of each 4 KiB page written; ns a page.
fn floor_round(b: &Buffer) -> f64 {
    let t = Instant::now();
    for i in (0..MEMSIZE).step_by(PAGE_SIZE) {
        // SAFETY: i < MEMSIZE, inside the buffer.
        unsafe { b.base.add(i).write_volatile(0) };
    }
    t.elapsed().as_nanos() as f64 / NR_PAGES as f64
}

/// One round of page-fault1 on `a`: ns a page, and the arena's smaps (Rss,
/// AnonHugePages, KiB) while the pages are allocated and written.
///
/// Also the alloc + write half's ns a page (the rest is the bulk free).
fn fault_round(a: &PageAllocator, pfns: &mut Vec<Pfn>, smaps: bool) -> (f64, f64, (u64, u64)) {
    let t = Instant::now();
    for _ in 0..NR_PAGES {
        let p = a.alloc_pages(Gfp::USER, 0).expect("hugepage: arena exhausted");
        // SAFETY: the page is allocated to this loop.
        unsafe { a.page_address(p).expect("backed").as_ptr().write_volatile(0) };
        pfns.push(p);
    }
    let mid = t.elapsed();
    let base = a.page_address(Pfn::new(0)).map_or(0, |p| p.as_ptr() as usize);
    // Reading smaps walks the arena's page tables: only when asked (it
    // evicts the caches the next round would find warm).
    let sm = if smaps { smaps_range(base, a.nr_pages() as usize * PAGE_SIZE) } else { (0, 0) };
    let t2 = Instant::now();
    for b in pfns.chunks(GATHER_BATCH) {
        a.free_pages_bulk(b).expect("hugepage: bulk free");
    }
    pfns.clear();
    let ns = (mid + t2.elapsed()).as_nanos() as f64 / NR_PAGES as f64;
    (ns, mid.as_nanos() as f64 / NR_PAGES as f64, sm)
}

/// Replay: the same writes in the order `addrs` gives.
fn replay_round(addrs: &[usize]) -> f64 {
    let t = Instant::now();
    for &a in addrs {
        // SAFETY: the addresses are pages of the arena, free now (the
        // allocator keeps nothing in a free page's memory) and only this
        // thread uses the allocator.
        unsafe { (a as *mut u8).write_volatile(0) };
    }
    t.elapsed().as_nanos() as f64 / addrs.len() as f64
}

/// The hugepage case's loop taken apart: (the writes alone, replayed in the
/// order the allocator hands the pages out; the allocator alone, no write),
/// medians of `rounds` rounds, ns a page.
fn decompose(a: &PageAllocator, rounds: usize) -> (f64, f64, f64, f64, f64) {
    let mut v = Vec::with_capacity(NR_PAGES);
    for _ in 0..NR_PAGES {
        v.push(a.alloc_pages(Gfp::USER, 0).expect("hugepage: arena exhausted"));
    }
    let addrs: Vec<usize> = v.iter().map(|p| a.page_address(*p).expect("backed").as_ptr() as usize).collect();
    for b in v.chunks(GATHER_BATCH) {
        a.free_pages_bulk(b).expect("hugepage: bulk free");
    }
    v.clear();
    let writes: Vec<f64> = (0..rounds).map(|_| replay_round(&addrs)).collect();
    let (mut alone, mut alone_alloc) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..NR_PAGES {
            v.push(a.alloc_pages(Gfp::USER, 0).expect("hugepage: arena exhausted"));
        }
        let mid = t.elapsed();
        for b in v.chunks(GATHER_BATCH) {
            a.free_pages_bulk(b).expect("hugepage: bulk free");
        }
        v.clear();
        alone.push(t.elapsed().as_nanos() as f64 / NR_PAGES as f64);
        alone_alloc.push(mid.as_nanos() as f64 / NR_PAGES as f64);
    }
    let (mut whole, mut half) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (x, h, _) = fault_round(a, &mut v, false);
        whole.push(x);
        half.push(h);
    }
    let med = |x: &[f64]| stats::median(x);
    (med(&writes), med(&alone), med(&alone_alloc), med(&whole), med(&half))
}

/// The allocator cases: resident and anonymous 4 KiB backing, hugepage
/// backing, and the hugepage case without `Config::prefetch_on_alloc`, to
/// show what the prefetch does.
fn cases() -> Vec<(&'static str, PageAllocator)> {
    [
        ("4k-resident", Backing::Resident, true),
        ("4k-anon", Backing::Anonymous, true),
        ("huge", Backing::HugePages, true),
        ("huge-no-prefetch", Backing::HugePages, false),
    ]
    .into_iter()
    .map(|(n, b, pf)| {
        (n, PageAllocator::new(Config::new().backing(b).prefetch_on_alloc(pf)).expect("page-fault1 arena"))
    })
    .collect()
}

/// What the blocks recorded.
struct Recorded {
    /// ns a page, per case then per floor.
    ns: Vec<Vec<f64>>,
    /// Per case: the arena's Rss and AnonHugePages, KiB.
    cover: Vec<(u64, u64)>,
    /// The hugepage case's alloc + write half.
    halves: Vec<f64>,
}

/// The variants in turn, a block of rounds each, `warm` rounds unrecorded
/// and `rounds` recorded; a line of block medians now and then.
fn run_blocks(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    cases: &[(&str, PageAllocator)],
    floors: &[(&str, Buffer)],
    (warm, rounds): (usize, usize),
) -> Recorded {
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); cases.len() + floors.len()];
    let mut cover: Vec<(u64, u64)> = vec![(0, 0); cases.len()];
    let mut pfns = Vec::with_capacity(NR_PAGES);
    let mut halves: Vec<f64> = Vec::new();
    let blocks = (warm + rounds).div_ceil(BLOCK);
    let warm_blocks = warm.div_ceil(BLOCK);
    for block in 0..blocks {
        let (last, record) = (block + 1 == blocks, block >= warm_blocks);
        let mut row = format!("block {block}");
        for (i, (_, a)) in cases.iter().enumerate() {
            let mut xs = Vec::with_capacity(BLOCK);
            for k in 0..BLOCK_WARM + BLOCK {
                let (x, h, sm) = fault_round(a, &mut pfns, last && k + 1 == BLOCK_WARM + BLOCK);
                if k < BLOCK_WARM {
                    continue;
                }
                xs.push(x);
                if record {
                    if i == 2 {
                        halves.push(h);
                    }
                    if sm.0 != 0 {
                        cover[i] = sm;
                    }
                }
            }
            row += &format!(" {:.1}", stats::median(&xs));
            if record {
                ns[i].extend(xs);
            }
        }
        for (j, (_, b)) in floors.iter().enumerate() {
            let xs: Vec<f64> = (0..BLOCK_WARM + BLOCK).map(|_| floor_round(b)).skip(BLOCK_WARM).collect();
            row += &format!(" {:.1}", stats::median(&xs));
            if record {
                ns[cases.len() + j].extend(xs);
            }
        }
        if block < 5 || block % 10 == 0 {
            r.line(ctx, row);
        }
    }
    Recorded { ns, cover, halves }
}

/// Why the hugepage figure is above the floor: the same loop's two halves
/// apart, on the hugepage arena. The writes alone in the order the
/// allocator handed the pages out, and the allocator alone (no write).
fn apart(ctx: &Ctx, r: &mut ExperimentResult, huge: &PageAllocator, rounds: usize) {
    let (writes, alone, alone_alloc, whole, half) = decompose(huge, rounds);
    r.line(
        ctx,
        format!(
            "# huge, apart: the writes alone in allocation order {writes:.1} ns/page; alloc + bulk free without \
             writing {alone:.1} ns/page"
        ),
    );
    r.line(
        ctx,
        format!(
            "# huge, halves: without writing, alloc {alone_alloc:.1} + bulk free {:.1} ns/page; with the writes, \
             alloc + write {half:.1} + bulk free {:.1} ns/page",
            alone - alone_alloc,
            whole - half
        ),
    );
    r.figures.push(Figure::new("writes-in-allocation-order", "huge", "ns", vec![writes]));
    r.figures.push(Figure::new("alloc-free-no-write", "huge", "ns", vec![alone]));
}

/// Each variant's figures and coverage, then the targets.
fn summary(ctx: &Ctx, r: &mut ExperimentResult, cases: &[(&str, PageAllocator)], names: &[&str], rec: &Recorded) {
    let (ns, cover) = (&rec.ns, &rec.cover);
    let med: Vec<f64> = ns.iter().map(|v| stats::median(v)).collect();
    for (k, name) in names.iter().enumerate() {
        r.figures.push(Figure::new("ns-per-page", *name, "ns", ns[k].clone()));
    }
    for (i, (name, _)) in cases.iter().enumerate() {
        let (rss, huge) = cover[i];
        let c = if rss == 0 { 0.0 } else { huge as f64 / rss as f64 };
        r.line(
            ctx,
            format!(
                "# {name}: median {:.1} ns/page; arena Rss {rss} KiB, AnonHugePages {huge} KiB with 128 MiB in use",
                med[i]
            ),
        );
        r.figures.push(Figure::new("fault-coverage", *name, "share", vec![c]).higher_better());
    }
    let (k4, kh, floor) = (med[0].min(med[1]), med[2], med[cases.len()]);
    r.line(ctx, format!("# floor (4 KiB buffer) {floor:.1} ns/page, hugepage buffer {:.1}", med[cases.len() + 1]));
    r.target(
        crate::harness::TargetKind::Floor,
        "page-fault1 with hugepage backing over the 4 KiB-backed figure (best of resident, anonymous)",
        kh / k4,
        1.0,
        kh <= k4,
    );
    r.target(
        crate::harness::TargetKind::Floor,
        "page-fault1 with hugepage backing over the touch floor (4 KiB buffer)",
        kh / floor,
        2.0,
        kh <= 2.0 * floor,
    );
    let (rss, huge) = cover[2];
    let in_use_kb = (NR_PAGES * PAGE_SIZE / 1024) as u64;
    let c = (huge.min(in_use_kb)) as f64 / in_use_kb as f64;
    r.target(crate::harness::TargetKind::Count, "page-fault1 with hugepage backing: in-use memory on hugepages (AnonHugePages, at most the in-use 128 MiB, over 128 MiB)", c, 0.9, c >= 0.9);
    r.notes.push(format!("hugepage case: arena Rss {rss} KiB, AnonHugePages {huge} KiB with 128 MiB in use"));
}

/// Run part 2 into `r`.
pub fn run(ctx: &Ctx, r: &mut ExperimentResult) {
    // A round is about a millisecond: many of them, so that the median is
    // not a preempted one's on a shared machine.
    let (warm, rounds): (usize, usize) = (20, if ctx.full { 1000 } else { 200 });
    crate::harness::pin(0);
    let cases = cases();
    let floors = [("floor-4k", Buffer::new(false)), ("floor-huge", Buffer::new(true))];
    r.line(
        ctx,
        format!(
            "# page-fault1, one thread, ns per page (alloc + write one byte + bulk free): blocks of {BLOCK} rounds \
             per variant after {BLOCK_WARM} unrecorded, the variants in turn; block medians"
        ),
    );
    let rec = run_blocks(ctx, r, &cases, &floors, (warm, rounds));
    r.line(ctx, format!("# huge, this loop: alloc + write half {:.1} ns/page (median)", stats::median(&rec.halves)));
    let names: Vec<&str> = cases.iter().map(|c| c.0).chain(floors.iter().map(|f| f.0)).collect();
    r.line(ctx, format!("# columns: {}", names.join(" ")));
    apart(ctx, r, &cases[2].1, rounds);
    summary(ctx, r, &cases, &names, &rec);
}
