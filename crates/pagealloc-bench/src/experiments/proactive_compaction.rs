//! `pagealloc bench proactive-compaction` (on demand: it watches for
//! seconds): the stress-highalloc fill (1/64 of the pages unmovable, the
//! rest movable with registered operations, 60% of those freed at random),
//! then nobody calls anything: kcompactd's periodic check sees the node's
//! fragmentation score above its high watermark (`compaction_proactiveness`
//! 20: high 90, low 80) and compacts. Sampled every 100 ms: free blocks per
//! order (buddyinfo), the score and pages migrated; plotted as free blocks
//! per order over time.

use crate::harness::{Ctx, Experiment, ExperimentResult, Figure, Plot};
use pagealloc::stats::events::VmEvent;
use pagealloc::{Config, Gfp, PageAllocator, Pfn, NR_ORDERS};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The experiment.
pub struct ProactiveCompaction;

use super::contig::Owner;

const SAMPLE_MS: u64 = 100;
const ORDERS: [usize; 7] = [0, 2, 4, 6, 8, 9, 10];

fn free_blocks(a: &PageAllocator) -> [u64; NR_ORDERS] {
    let mut f = [0u64; NR_ORDERS];
    for z in a.stats().buddyinfo().zones {
        for (o, n) in z.free.iter().enumerate() {
            f[o] += n;
        }
    }
    f
}

/// The stress-highalloc fill: every page allocated, 1/64 unmovable and kept
/// (returned), the rest movable; 60% of those freed at random, then the rest
/// registered with `o` as movable.
fn fill(a: &PageAllocator, o: &Arc<Owner>) -> Vec<Pfn> {
    let (mut movable, mut pinned) = (Vec::new(), Vec::new());
    for i in 1u64.. {
        let unmovable = i.is_multiple_of(64);
        let gfp = if unmovable { Gfp::KERNEL } else { Gfp::MOVABLE } | Gfp::NO_COMPACT;
        let Ok(p) = a.alloc_pages(gfp, 0) else { break };
        if unmovable {
            pinned.push(p)
        } else {
            movable.push(p)
        }
    }
    let mut x = 0x5eedu64;
    for k in (1..movable.len()).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        movable.swap(k, ((x >> 33) % (k as u64 + 1)) as usize);
    }
    // Free 60% before anything is movable (kcompactd starts with the
    // registration below), then register the rest.
    for p in movable.drain(..movable.len() * 6 / 10) {
        a.free_pages(p, 0).expect("free");
    }
    let id = a.compaction().register_movable_ops(o.clone());
    for p in movable {
        o.0.lock().unwrap().insert(p.as_u64());
        a.compaction().set_page_movable(p, id).expect("raw order-0 page");
    }
    pinned
}

/// Where the watch starts: pages migrated, the score and the free blocks.
struct Start {
    migrated: u64,
    score: u64,
    free: [u64; NR_ORDERS],
}

/// Sample every `SAMPLE_MS` for `watch`: a line when something changed (and
/// every fifth sample), figures for each. Returns when the score first
/// reached `low`, in ms.
fn watch_samples(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    a: &PageAllocator,
    st: &Start,
    low: u64,
    watch: Duration,
) -> Option<u64> {
    let t0 = Instant::now();
    let mut last = (st.score, 0u64);
    let mut reached = None;
    for step in 0.. {
        let t = step * SAMPLE_MS;
        let f = if step == 0 { st.free } else { free_blocks(a) };
        let score = a.compaction().fragmentation_score(0).unwrap_or(0);
        let moved = a.stats().event_count(VmEvent::PgmigrateSuccess) - st.migrated;
        if score <= low && reached.is_none() {
            reached = Some(t);
        }
        if step % 5 == 0 || (score, moved) != last {
            let v: Vec<String> = f.iter().map(u64::to_string).collect();
            r.line(ctx, format!("{t:5} {score:6} {moved:9}  {}", v.join(" ")));
        }
        last = (score, moved);
        for &ord in &ORDERS {
            r.figures.push(
                Figure::new(format!("free-blocks-t{t}"), format!("order{ord}"), "blocks", vec![f[ord] as f64])
                    .param("t_ms", t),
            );
        }
        r.figures.push(Figure::new(format!("score-t{t}"), "score", "%", vec![score as f64]).param("t_ms", t));
        let next = t0 + Duration::from_millis((step + 1) * SAMPLE_MS);
        if next > t0 + watch {
            break;
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    reached
}

/// The summary line, the before/after figures and the target.
fn summary(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    a: &PageAllocator,
    st: &Start,
    reached: Option<u64>,
    (low, high): (u64, u64),
) {
    let (s0, f0) = (st.score, st.free);
    let s1 = a.compaction().fragmentation_score(0).unwrap_or(0);
    let f1 = free_blocks(a);
    let moved = a.stats().event_count(VmEvent::PgmigrateSuccess) - st.migrated;
    r.line(
        ctx,
        format!(
            "score {s0} -> {s1}; order>=9 free blocks {} -> {}; {moved} pages migrated; compact_daemon_migrate_scanned {}, compact_daemon_free_scanned {}",
            f0[9] + 2 * f0[10],
            f1[9] + 2 * f1[10],
            a.stats().event_count(VmEvent::CompactDaemonMigrateScanned),
            a.stats().event_count(VmEvent::CompactDaemonFreeScanned),
        ),
    );
    r.figures.push(Figure::new("score-before", "kcompactd", "%", vec![s0 as f64]));
    r.figures.push(Figure::new("score-after", "kcompactd", "%", vec![s1 as f64]));
    r.figures.push(
        Figure::new("order9-blocks-after", "kcompactd", "blocks", vec![(f1[9] + 2 * f1[10]) as f64]).higher_better(),
    );
    r.figures.push(Figure::new("ms-to-low-watermark", "kcompactd", "ms", vec![reached.map_or(f64::NAN, |t| t as f64)]));
    let ok = s1 <= low;
    r.target(
        crate::harness::TargetKind::Count,
        format!("kcompactd alone brings the score from above {high} to at most {low}"),
        s1 as f64,
        low as f64,
        ok && s0 > high,
    );
}

/// Free every page and check the allocator is whole. The owner's map lock
/// is held while a page is unmarked: a move in flight finishes first (its
/// `migrate` takes that lock), so every pfn taken from the map is the
/// page's current one.
fn tear_down(a: &PageAllocator, o: &Owner, pinned: Vec<Pfn>) {
    loop {
        let mut m = o.0.lock().unwrap();
        let Some(&p) = m.iter().next() else { break };
        if a.compaction().clear_page_movable(Pfn::new(p)).is_err() {
            drop(m);
            std::thread::yield_now();
            continue;
        }
        m.remove(&p);
        drop(m);
        a.free_pages(Pfn::new(p), 0).expect("free movable");
    }
    for p in pinned {
        a.free_pages(p, 0).expect("free pinned");
    }
    a.drain_all_pages();
    a.check_invariants().expect("invariants after proactive compaction");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "conservation");
}

impl Experiment for ProactiveCompaction {
    fn name(&self) -> &'static str {
        "proactive-compaction"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(
            "proactive-compaction",
            "proactive-compaction: free blocks per order over time, kcompactd alone",
            None,
        );
        let arena = if ctx.full { 1 << 30 } else { 128 << 20 };
        let watch = Duration::from_secs(if ctx.full { 10 } else { 4 });
        let a = PageAllocator::new(Config::small(arena)).expect("arena");
        let (low, high) = a.compaction().fragmentation_score_wmarks();
        let o = Arc::new(Owner::default());
        let pinned = fill(&a, &o);
        a.drain_all_pages();
        let st = Start {
            migrated: a.stats().event_count(VmEvent::PgmigrateSuccess),
            score: a.compaction().fragmentation_score(0).unwrap_or(0),
            free: free_blocks(&a),
        };
        r.line(ctx, format!("arena {} MiB, proactiveness 20 (score watermarks low {low}, high {high})", arena >> 20));
        r.line(ctx, "t-ms  score  migrated  free blocks at orders 0 1 2 ... 10");
        let reached = watch_samples(ctx, &mut r, &a, &st, low, watch);
        summary(ctx, &mut r, &a, &st, reached, (low, high));
        let mut plot = Plot::line(
            "Free blocks per order during proactive compaction",
            "t_ms",
            "ms after the frees",
            "free blocks",
        )
        .log_y();
        for &ord in &ORDERS {
            plot = plot.series(&format!("order {ord}"), &format!("order{ord}"), Some("free-blocks-*"));
        }
        r.plot = Some(plot);
        tear_down(&a, &o, pinned);
        r
    }
}
