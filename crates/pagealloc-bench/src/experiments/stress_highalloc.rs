//! `pagealloc bench stress-highalloc`: an mmtests stress-highalloc-like run.
//! Fill the arena with order-0 pages, most of them movable (registered
//! movable operations: a page-cache stand-in) and one in 64 unmovable
//! (pinned, scattered through the fill as real workloads scatter them);
//! free 60% of the movable pages at random (what reclaim would free); then
//! request order-9 (and, in separate runs, order-4) blocks until one fails,
//! with direct compaction off (`Gfp::NO_COMPACT`) and on, and with grouping
//! by mobility on and off (`Config::page_group_by_mobility_disabled`: the
//! unmovable pages then land anywhere). Reported: successes against the
//! theoretical maximum (aligned blocks of the order holding no pinned page,
//! as far as free memory above the min watermark allows), how far that
//! maximum falls without grouping, latency per successful allocation, pages
//! scanned per page migrated. Proactive compaction is off (kcompactd would
//! compact between the fill and the requests: `proactive-compaction` shows
//! it).

use crate::harness::rand::Lcg;
use crate::harness::{stats, Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::stats::events::VmEvent;
use pagealloc::{Config, FillFn, Gfp, MovableOps, PageAllocator, PageCache, PageCacheConfig, Pfn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The experiment.
pub struct StressHighalloc;

/// The page-cache stand-in: knows where each of its pages is.
#[derive(Default)]
struct Cache(Mutex<HashMap<u64, u64>>);

impl MovableOps for Cache {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut m = self.0.lock().unwrap();
        match m.remove(&from.as_u64()) {
            Some(k) => {
                m.insert(to.as_u64(), k);
                true
            }
            None => false,
        }
    }
    fn copies_data(&self) -> bool {
        true // abstract frames: no bytes to copy
    }
}

struct Run {
    got: u64,
    theo: u64,
    lat_us: Vec<f64>,
    scanned_per_migrated: f64,
}

fn run_once(compact: bool, grouped: bool, order: u32, arena: u64, seed: u64) -> Run {
    let cfg = Config::small(arena).compaction_proactiveness(0).page_group_by_mobility_disabled(!grouped);
    let a = PageAllocator::new(cfg).expect("arena");
    let cache = Arc::new(Cache::default());
    let id = a.compaction().register_movable_ops(cache.clone());
    let mut rng = Lcg(seed);
    let mut movable = Vec::new();
    let mut pinned = Vec::new();
    let mut i = 0u64;
    loop {
        i += 1;
        let unmovable = i.is_multiple_of(64);
        let gfp = if unmovable { Gfp::KERNEL } else { Gfp::MOVABLE } | Gfp::NO_COMPACT;
        let Ok(p) = a.alloc_pages(gfp, 0) else { break };
        if unmovable {
            pinned.push(p);
        } else {
            a.compaction().set_page_movable(p, id).expect("raw order-0 page");
            cache.0.lock().unwrap().insert(p.as_u64(), i);
            movable.push(p);
        }
    }
    // Free 60% of the movable pages at random.
    for k in (1..movable.len()).rev() {
        movable.swap(k, (rng.next() % (k as u64 + 1)) as usize);
    }
    let nfree = movable.len() * 6 / 10;
    for p in movable.drain(..nfree) {
        cache.0.lock().unwrap().remove(&p.as_u64());
        a.free_pages(p, 0).expect("free");
    }
    a.drain_all_pages();
    let size = 1u64 << order;
    let mut dirty: Vec<u64> = pinned.iter().map(|p| p.as_u64() / size).collect();
    dirty.sort_unstable();
    dirty.dedup();
    let blocks = a.nr_pages() / size;
    let clean = blocks - dirty.len() as u64;
    // Free memory bounds it too: an allocation must leave the zone above
    // its min watermark (one zone: the default arena).
    let min_wmark: u64 = a.stats().zoneinfo().zones.iter().map(|z| z.min).sum();
    let theo = clean.min(a.nr_free_pages().saturating_sub(min_wmark) / size);
    let gfp = if compact { Gfp::MOVABLE } else { Gfp::MOVABLE | Gfp::NO_COMPACT };
    let (mut lat_us, mut big) = (Vec::new(), Vec::new());
    loop {
        let t = Instant::now();
        let Ok(p) = a.alloc_pages(gfp, order) else { break };
        lat_us.push(t.elapsed().as_secs_f64() * 1e6);
        big.push(p);
    }
    let scanned =
        a.stats().event_count(VmEvent::CompactMigrateScanned) + a.stats().event_count(VmEvent::CompactFreeScanned);
    let migrated = a.stats().event_count(VmEvent::PgmigrateSuccess);
    let got = big.len() as u64;
    for p in big {
        a.free_pages(p, order).expect("free a high-order block");
    }
    for p in cache.0.lock().unwrap().drain().map(|(p, _)| p) {
        a.free_pages(Pfn::new(p), 0).expect("free cache page");
    }
    for p in pinned {
        a.free_pages(p, 0).expect("free pinned");
    }
    a.drain_all_pages();
    a.check_invariants().expect("invariants after stress-highalloc");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "conservation");
    Run { got, theo, lat_us, scanned_per_migrated: if migrated == 0 { 0.0 } else { scanned as f64 / migrated as f64 } }
}

/// The same run with the movable fill in a page cache (kswapd off, grouping
/// on, order 9): the requests may also reclaim cache pages, so the maximum
/// is every pageblock without a pinned page (as far as memory minus the
/// pinned pages allows), and the figure that tells compaction from reclaim
/// is the cache pages evicted by the time as many blocks were had as free
/// memory alone would allow. Returns the run, that block count and those
/// pages evicted.
fn run_cache(compact: bool, arena: u64, seed: u64) -> (Run, u64, u64) {
    let cfg = Config::small(arena).backing(pagealloc::Backing::Anonymous).compaction_proactiveness(0);
    let a = Arc::new(PageAllocator::new(cfg).expect("arena"));
    let pc = PageCache::new(a.clone(), PageCacheConfig { kswapd: false }).expect("page cache");
    let m = pc.mapping(1, Arc::new(FillFn(|_: u64, _: &mut [u8]| Ok(()))));
    let zi = a.stats().zoneinfo();
    let (min_wmark, high): (u64, u64) = (zi.zones.iter().map(|z| z.min).sum(), zi.zones.iter().map(|z| z.high).sum());
    let mut rng = Lcg(seed);
    let (mut pinned, mut idx) = (Vec::new(), 0u64);
    // Fill down to the high watermark (no reclaim yet).
    for i in 1u64.. {
        if a.nr_free_pages() <= high + 64 {
            break;
        }
        if i.is_multiple_of(64) {
            pinned.push(a.alloc_pages(Gfp::KERNEL | Gfp::NO_COMPACT, 0).expect("pinned page"));
        } else {
            drop(m.get(idx).expect("cache page"));
            idx += 1;
        }
    }
    let mut order: Vec<u64> = (0..idx).collect();
    for k in (1..order.len()).rev() {
        order.swap(k, (rng.next() % (k as u64 + 1)) as usize);
    }
    for &i in &order[..order.len() * 6 / 10] {
        m.delete(i);
    }
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    let mut dirty: Vec<u64> = pinned.iter().map(|p| p.as_u64() / 512).collect();
    dirty.sort_unstable();
    dirty.dedup();
    let clean = a.nr_pages() / 512 - dirty.len() as u64;
    let theo = clean.min((a.managed_pages() - pinned.len() as u64).saturating_sub(min_wmark) / 512);
    let steal0 = a.stats().event_count(VmEvent::PgstealDirect) + a.stats().event_count(VmEvent::PgstealKswapd);
    let (s0, m0) = (
        a.stats().event_count(VmEvent::CompactMigrateScanned) + a.stats().event_count(VmEvent::CompactFreeScanned),
        a.stats().event_count(VmEvent::PgmigrateSuccess),
    );
    let by_free = theo.min(a.nr_free_pages().saturating_sub(min_wmark) / 512);
    let gfp = if compact { Gfp::MOVABLE } else { Gfp::MOVABLE | Gfp::NO_COMPACT };
    let (mut lat_us, mut big, mut evicted) = (Vec::new(), Vec::new(), 0);
    loop {
        let t = Instant::now();
        let Ok(p) = a.alloc_pages(gfp, 9) else { break };
        lat_us.push(t.elapsed().as_secs_f64() * 1e6);
        big.push(p);
        if big.len() as u64 == by_free {
            evicted =
                a.stats().event_count(VmEvent::PgstealDirect) + a.stats().event_count(VmEvent::PgstealKswapd) - steal0;
        }
    }
    let scanned =
        a.stats().event_count(VmEvent::CompactMigrateScanned) + a.stats().event_count(VmEvent::CompactFreeScanned) - s0;
    let migrated = a.stats().event_count(VmEvent::PgmigrateSuccess) - m0;
    let got = big.len() as u64;
    for p in big {
        a.free_pages(p, 9).expect("free order 9");
    }
    for p in pinned {
        a.free_pages(p, 0).expect("free pinned");
    }
    drop(m);
    drop(pc);
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().expect("invariants after stress-highalloc (page cache)");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "conservation");
    let spm = if migrated == 0 { 0.0 } else { scanned as f64 / migrated as f64 };
    (Run { got, theo, lat_us, scanned_per_migrated: spm }, by_free, evicted)
}

/// The latency quantile `f` of the sorted `lat` (0 when empty).
fn quantile(lat: &[f64], f: f64) -> f64 {
    if lat.is_empty() {
        0.0
    } else {
        lat[((lat.len() - 1) as f64 * f) as usize]
    }
}

/// One case of the plain fill (grouping, order, compaction), repeated: its
/// table row and figures. Returns the theoretical maximum (median).
fn case(
    ctx: &Ctx,
    r: &mut ExperimentResult,
    (grouped, g): (bool, &str),
    order: u32,
    (compact, c): (bool, &str),
    arena: u64,
) -> f64 {
    let variant = format!("{g}-{c}");
    let runs: Vec<Run> =
        (0..ctx.repeats.max(1)).map(|k| run_once(compact, grouped, order, arena, 0x5eed + k as u64)).collect();
    let pct: Vec<f64> = runs.iter().map(|x| x.got as f64 * 100.0 / x.theo.max(1) as f64).collect();
    let mut lat: Vec<f64> = runs.iter().flat_map(|x| x.lat_us.iter().copied()).collect();
    lat.sort_by(f64::total_cmp);
    let q = |f: f64| quantile(&lat, f);
    let spm = stats::median(&runs.iter().map(|x| x.scanned_per_migrated).collect::<Vec<_>>());
    let theo = stats::median(&runs.iter().map(|x| x.theo as f64).collect::<Vec<_>>());
    r.line(
        ctx,
        format!(
            "{g:>9} {order:5} {c:>10} {:5} {:12} {:9.1} {:7.1} {:7.1} {:7.1} {spm:17.1}",
            runs[0].got,
            runs[0].theo,
            stats::median(&pct),
            q(0.5),
            q(0.99),
            q(1.0)
        ),
    );
    let got = runs.iter().map(|x| x.got as f64).collect();
    r.figures.push(Figure::new(format!("order{order}-success-of-max"), &variant, "%", pct).higher_better());
    r.figures.push(Figure::new(format!("order{order}-got"), &variant, "blocks", got).higher_better());
    r.figures.push(Figure::new(format!("order{order}-latency-p50"), &variant, "us", vec![q(0.5)]));
    r.figures.push(Figure::new(format!("order{order}-latency-p99"), &variant, "us", vec![q(0.99)]));
    r.figures.push(Figure::new(format!("order{order}-scanned-per-migrated"), &variant, "pages", vec![spm]));
    theo
}

/// How much lower the theoretical maximum is without grouping by mobility.
fn grouping_falls(ctx: &Ctx, r: &mut ExperimentResult, theo_of: &HashMap<(bool, u32), f64>) {
    for order in [9u32, 4] {
        let (on, off) = (theo_of[&(true, order)], theo_of[&(false, order)]);
        let fall = if on > 0.0 { (on - off) * 100.0 / on } else { 0.0 };
        r.line(
            ctx,
            format!("order-{order} theoretical maximum: {on:.0} blocks grouped, {off:.0} ungrouped ({fall:.1}% lower without grouping)"),
        );
        r.figures.push(Figure::new(
            format!("order{order}-max-fall-without-grouping"),
            "grouped-vs-ungrouped",
            "%",
            vec![fall],
        ));
    }
}

/// The page-cache fill (kswapd off), order 9, compaction off and on.
fn pagecache_fill(ctx: &Ctx, r: &mut ExperimentResult, arena: u64) {
    r.line(ctx, "page-cache fill (kswapd off), order 9: the requests may reclaim as well as compact");
    r.line(
        ctx,
        "compaction  got  theoretical  success%  p50-us  p99-us  max-us  scanned/migrated  evicted by the free-memory bound (blocks)",
    );
    for (compact, c) in [(false, "off"), (true, "on")] {
        let variant = format!("pagecache-{c}");
        let runs: Vec<(Run, u64, u64)> =
            (0..ctx.repeats.max(1)).map(|k| run_cache(compact, arena, 0x5eed + k as u64)).collect();
        let pct: Vec<f64> = runs.iter().map(|(x, _, _)| x.got as f64 * 100.0 / x.theo.max(1) as f64).collect();
        let mut lat: Vec<f64> = runs.iter().flat_map(|(x, _, _)| x.lat_us.iter().copied()).collect();
        lat.sort_by(f64::total_cmp);
        let q = |f: f64| quantile(&lat, f);
        let ev = stats::median(&runs.iter().map(|(_, _, e)| *e as f64).collect::<Vec<_>>());
        let (x, by_free, _) = &runs[0];
        r.line(
            ctx,
            format!(
                "{c:>10} {:4} {:12} {:9.1} {:7.1} {:7.1} {:7.1} {:17.1} {ev:8.0} ({by_free})",
                x.got,
                x.theo,
                stats::median(&pct),
                q(0.5),
                q(0.99),
                q(1.0),
                x.scanned_per_migrated
            ),
        );
        r.figures.push(Figure::new("order9-success-of-max", &variant, "%", pct).higher_better());
        r.figures.push(Figure::new("order9-latency-p50", &variant, "us", vec![q(0.5)]));
        r.figures.push(Figure::new("order9-evicted-by-free-bound", &variant, "pages", vec![ev]));
    }
}

impl Experiment for StressHighalloc {
    fn name(&self) -> &'static str {
        "stress-highalloc"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new(
            "stress-highalloc",
            "stress-highalloc: order-9 and order-4 success rates, compaction off and on, grouping by mobility on and off",
            None,
        );
        let arena = if ctx.full { 1 << 30 } else { 128 << 20 };
        r.line(ctx, format!("arena {} MiB, 1/64 of the fill unmovable, 60% of the movable pages freed", arena >> 20));
        r.line(ctx, "grouping order compaction  got  theoretical  success%  p50-us  p99-us  max-us  scanned/migrated");
        let mut theo_of = HashMap::new();
        for (grouped, g) in [(true, "grouped"), (false, "ungrouped")] {
            for order in [9u32, 4] {
                for compact in [(false, "off"), (true, "on")] {
                    let theo = case(ctx, &mut r, (grouped, g), order, compact, arena);
                    theo_of.insert((grouped, order), theo);
                }
                let t = theo_of[&(grouped, order)];
                r.figures
                    .push(Figure::new(format!("order{order}-theoretical-max"), g, "blocks", vec![t]).higher_better());
            }
        }
        grouping_falls(ctx, &mut r, &theo_of);
        pagecache_fill(ctx, &mut r, arena);
        let on = r.get("order9-success-of-max", "grouped-on").map_or(0.0, |f| f.value);
        r.target(
            crate::harness::TargetKind::Count,
            "order-9 with compaction on: at least 95% of the theoretical maximum",
            on,
            95.0,
            on >= 95.0,
        );
        r
    }
}
