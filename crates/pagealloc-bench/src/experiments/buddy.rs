//! `pagealloc bench buddy`: the buddy path alone (no per-CPU lists): the cost of
//! an alloc+free pair per order, arena initialisation per page, and a
//! fragmentation run counting mixed pageblocks before and after.

use crate::harness::{cycles_per_call, stats, Ctx, Experiment, ExperimentResult, Figure, Plot, TargetKind};
use indicatif::ProgressBar;
use pagealloc::{Config, Gfp, PageAllocator, MAX_ORDER, PAGE_DESC_SIZE};
use std::sync::Mutex;
use std::time::Instant;

/// The experiment.
pub struct Buddy;

fn buddy_only() -> Config {
    Config::new().pcp_lists(false)
}

/// The floor under arena initialisation, ns per page: each page's 16-byte
/// descriptor written once into fresh anonymous memory (page faults
/// included), the least any memory map of that size costs.
fn init_floor(pages: usize) -> f64 {
    let t = Instant::now();
    let mut v: Vec<[u64; 2]> = Vec::with_capacity(pages);
    for i in 0..pages {
        v.push([i as u64, 0]);
    }
    std::hint::black_box(&v);
    t.elapsed().as_nanos() as f64 / pages as f64
}

/// Arena initialisation per page against its floor, alternated repeat by
/// repeat. The target compares the fastest repeat of each: a repeat only
/// gets slower when preempted or when it faults memory a previous one left
/// mapped (at a load average of 13 single repeats of either read 15 to 36
/// ns against a usual 1.6 to 3), so the minimum is the work itself.
fn init(ctx: &Ctx, r: &mut ExperimentResult) {
    let (mut init, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..ctx.repeats.max(5) {
        let t = Instant::now();
        let a = PageAllocator::new(Config::new()).expect("default arena");
        let pages = a.nr_pages();
        init.push(t.elapsed().as_nanos() as f64 / pages as f64);
        drop(a);
        floor.push(init_floor(pages as usize));
    }
    r.line(ctx, format!("descriptor: {PAGE_DESC_SIZE} bytes"));
    let (i, f) = (stats::min(&init), stats::min(&floor));
    r.line(
        ctx,
        format!(
            "init: {:.3} ns/page (1 GiB arena, median of {}; fastest {i:.3}); floor {:.3} (fastest {f:.3})",
            stats::median(&init),
            init.len(),
            stats::median(&floor)
        ),
    );
    r.target(
        TargetKind::Floor,
        "arena init at most the cost of writing each descriptor once (fastest repeats; a zeroed memmap needs no \
         more; x that floor)",
        i / f,
        1.0,
        i <= f,
    );
    r.target(TargetKind::Count, "descriptor at most 16 bytes", PAGE_DESC_SIZE as f64, 16.0, PAGE_DESC_SIZE <= 16);
    r.figures.push(Figure::new("init-per-page", "new", "ns", init));
    r.figures.push(Figure::new("init-per-page", "floor", "ns", floor));
}

/// The floor under a buddy pair: what any zone-locked free list does for
/// one allocation and one free, a lock round trip each, unlinking the head
/// of a list threaded through 16-byte descriptors and linking it back.
struct PairFloor(Mutex<(u32, Vec<[u32; 4]>)>);

impl PairFloor {
    const NIL: u32 = u32::MAX;

    fn new(n: u32) -> Self {
        let descs = (0..n).map(|i| [1, if i + 1 < n { i + 1 } else { Self::NIL }, i.wrapping_sub(1), 0]).collect();
        Self(Mutex::new((0, descs)))
    }

    /// One alloc and one free, ns.
    fn pair(&self) {
        let p = {
            let mut g = self.0.lock().expect("floor lock");
            let (head, d) = &mut *g;
            let p = *head;
            let next = d[p as usize][1];
            if next != Self::NIL {
                d[next as usize][2] = Self::NIL;
            }
            *head = next;
            d[p as usize][0] = 0;
            p
        };
        let p = crate::harness::opaque_pfn(pagealloc::Pfn::new(u64::from(p) + 1)).as_u64() as u32 - 1;
        let mut g = self.0.lock().expect("floor lock");
        let (head, d) = &mut *g;
        d[p as usize] = [1, *head, Self::NIL, 0];
        if *head != Self::NIL {
            d[*head as usize][2] = p;
        }
        *head = p;
    }
}

/// The alloc+free pair at every order, cold (split and merge) and hot.
fn pairs(ctx: &Ctx, r: &mut ExperimentResult, pb: &ProgressBar) {
    let a = PageAllocator::new(buddy_only()).expect("default arena");
    let iters = if ctx.full { 1_000_000 } else { 200_000 };
    r.line(ctx, "order   hot-cycles  hot-ns   cold-cycles  cold-ns");
    for order in 0..=MAX_ORDER {
        // Cold: nothing else allocated, every pair splits down from order 10
        // and merges back up.
        let cold = cycles_per_call(ctx, iters / 4, || {
            let p = a.alloc_pages(Gfp::MOVABLE, order).unwrap();
            a.free_pages(std::hint::black_box(p), order).unwrap();
        });
        pb.inc(1);
        // Hot: one block of the order stays allocated, so its buddy is free on
        // the order's own list and the pair neither splits nor merges.
        let pin = a.alloc_pages(Gfp::MOVABLE, order).unwrap();
        let hot = cycles_per_call(ctx, iters, || {
            let p = a.alloc_pages(Gfp::MOVABLE, order).unwrap();
            a.free_pages(std::hint::black_box(p), order).unwrap();
        });
        a.free_pages(pin, order).unwrap();
        pb.inc(1);
        let (h, c) = (stats::median(&hot), stats::median(&cold));
        r.line(ctx, format!("{order:5} {h:12.1} {:7.1} {c:13.1} {:8.1}", ctx.tsc.ns(h), ctx.tsc.ns(c)));
        let ns = |v: &Vec<f64>| v.iter().map(|c| ctx.tsc.ns(*c)).collect::<Vec<_>>();
        r.figures.push(Figure::new(format!("pair-order{order}-hot"), "new", "ns", ns(&hot)).param("order", order));
        r.figures.push(Figure::new(format!("pair-order{order}-cold"), "new", "ns", ns(&cold)).param("order", order));
    }
    let floor = PairFloor::new(1024);
    let f = cycles_per_call(ctx, iters, || floor.pair());
    let fv = ctx.tsc.ns(stats::median(&f));
    r.line(ctx, format!("floor (a lock round trip and a list unlink or link each way): {fv:.1} ns"));
    r.figures.push(Figure::new("pair-floor", "floor", "ns", f.iter().map(|c| ctx.tsc.ns(*c)).collect()));
    let h0 = r.get("pair-order0-hot", "new").unwrap().value;
    let c0 = r.get("pair-order0-cold", "new").unwrap().value;
    let c9 = r.get("pair-order9-cold", "new").unwrap().value;
    r.target(
        TargetKind::Floor,
        "order-0 buddy pair (steady state) at most 4x the floor (lock, list unlink/link; x floor)",
        h0 / fv,
        4.0,
        h0 <= 4.0 * fv,
    );
    r.notes.push(format!("order-0 pair with a full split to order 10 and merge back: {c0:.1} ns"));
    r.target(
        TargetKind::Floor,
        "order-9 pair splitting order 10 and merging back at most 2x the order-0 steady pair (x)",
        c9 / h0,
        2.0,
        c9 <= 2.0 * h0,
    );
    drop(a);
}

/// The fragmentation run: mixed pageblocks before and after, and the arena
/// whole again once everything is freed.
fn fragmentation(ctx: &Ctx, r: &mut ExperimentResult, pb: &ProgressBar) {
    let ops = if ctx.full { 8_000_000 } else { 2_000_000 };
    let a = PageAllocator::new(buddy_only()).expect("default arena");
    let before = a.stats().fragmentation();
    pb.set_message("fragment");
    let mut live = crate::workloads::fragment(&a, ops, 0x5eed, 60);
    let after = a.stats().fragmentation();
    for (p, o) in live.drain(..) {
        a.free_pages(p, o).unwrap();
    }
    let end = a.stats().fragmentation();
    let whole = end.free_blocks[MAX_ORDER as usize] << MAX_ORDER == a.managed_pages();
    let pct = after.mixed as f64 * 100.0 / after.pageblocks as f64;
    r.line(
        ctx,
        format!(
            "fragmentation: {ops} ops, mixed pageblocks before {} after {} of {} ({pct:.2}%)",
            before.mixed, after.mixed, after.pageblocks
        ),
    );
    r.line(
        ctx,
        format!(
            "after freeing everything: order-10 blocks {} of {} (whole: {whole})",
            end.free_blocks[10],
            a.managed_pages() >> 10
        ),
    );
    r.figures.push(Figure::new("mixed-pageblocks-after", "new", "%", vec![pct]));
    r.target(TargetKind::Count, "mixed pageblocks at most 5% after the run (seeded, one thread)", pct, 5.0, pct <= 5.0);
    r.target(TargetKind::Count, "arena back to order-10 blocks only", whole as u8 as f64, 1.0, whole);
    a.check_invariants().expect("invariants after the fragmentation run");
}

impl Experiment for Buddy {
    fn name(&self) -> &'static str {
        "buddy"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new("buddy", "Buddy allocator: pair cost, init cost, fragmentation", None);
        let pb = ctx.bar("buddy", (2 * (MAX_ORDER as u64 + 1)) + 2);
        init(ctx, &mut r);
        pb.inc(1);
        pairs(ctx, &mut r, &pb);
        fragmentation(ctx, &mut r, &pb);
        r.plot = Some(
            Plot::line("Buddy alloc+free pair against order", "order", "order", "ns per alloc+free pair")
                .series("steady (no split/merge)", "new", Some("pair-order*-hot"))
                .series("split from order 10 and merge back", "new", Some("pair-order*-cold")),
        );
        pb.finish_and_clear();
        r
    }
}
