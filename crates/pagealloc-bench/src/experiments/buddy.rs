//! `pagealloc bench buddy`: the buddy path alone (no per-CPU lists): the cost of
//! an alloc+free pair per order, arena initialisation per page, and a
//! fragmentation run counting mixed pageblocks before and after.

use crate::harness::{cycles_per_call, stats, Ctx, Experiment, ExperimentResult, Figure, Plot};
use indicatif::ProgressBar;
use pagealloc::{Config, Gfp, PageAllocator, MAX_ORDER, PAGE_DESC_SIZE};
use std::time::Instant;

/// The experiment.
pub struct Buddy;

fn buddy_only() -> Config {
    Config::new().pcp_lists(false)
}

/// Arena initialisation per page, and the descriptor's size.
fn init(ctx: &Ctx, r: &mut ExperimentResult) {
    let init: Vec<f64> = (0..ctx.repeats)
        .map(|_| {
            let t = Instant::now();
            let a = PageAllocator::new(Config::new()).expect("default arena");
            let ns = t.elapsed().as_nanos() as f64 / a.nr_pages() as f64;
            drop(a);
            ns
        })
        .collect();
    r.line(ctx, format!("descriptor: {PAGE_DESC_SIZE} bytes"));
    r.line(ctx, format!("init: {:.3} ns/page (1 GiB arena, median of {})", stats::median(&init), init.len()));
    let init_fig = Figure::new("init-per-page", "new", "ns", init);
    r.target("arena init under 10 ns per page", init_fig.value, 10.0, init_fig.value < 10.0);
    r.target("descriptor at most 16 bytes", PAGE_DESC_SIZE as f64, 16.0, PAGE_DESC_SIZE <= 16);
    r.figures.push(init_fig);
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
    let h0 = r.get("pair-order0-hot", "new").unwrap().value;
    let c0 = r.get("pair-order0-cold", "new").unwrap().value;
    let h9 = r.get("pair-order9-hot", "new").unwrap().value;
    let c9 = r.get("pair-order9-cold", "new").unwrap().value;
    r.target("order-0 buddy pair at most 60 ns (steady state)", h0, 60.0, h0 <= 60.0);
    r.notes.push(format!("order-0 pair with a full split to order 10 and merge back: {c0:.1} ns"));
    r.target("order-9 buddy pair at most 150 ns (with split/merge)", c9.max(h9), 150.0, c9.max(h9) <= 150.0);
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
    r.target("mixed pageblocks at most 5% after the run", pct, 5.0, pct <= 5.0);
    r.target("arena back to order-10 blocks only", whole as u8 as f64, 1.0, whole);
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
