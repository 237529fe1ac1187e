//! The replay itself: every allocation of the trace asked of the seeded
//! arenas (the highest zone its gfp flags allow first, then the lower ones,
//! as the kernel's zonelist falls back), every free mapped from the kernel's
//! pfn to the block pagealloc returned for it.

use super::seed::{self, Seeded};
use super::trace::{GfpZone, Op, OpKind, Trace};
use pagealloc::stats::events::VmEvent;
use pagealloc::{Gfp, Pfn};
use std::collections::HashMap;
use std::time::Instant;

/// Kernel pfn -> the block pagealloc returned for it: a table indexed by
/// pfn over the zones' spans (one word a pfn: zone, our pfn, order), and a
/// map for pfns outside them (only bad input has those).
struct Held {
    table: Vec<u64>,
    rest: HashMap<u64, u64>,
}

/// Largest pfn span the table covers (a bigger span is bad input: its pfns
/// go to the map).
const TABLE_MAX: u64 = 1 << 27;

impl Held {
    fn new(spans: &[(u64, u64)]) -> Self {
        let end = spans.iter().map(|&(s, n)| s + n).max().unwrap_or(0).min(TABLE_MAX);
        Self { table: vec![0; end as usize], rest: HashMap::new() }
    }

    /// (zone, our pfn, order) packed: order in bits 0..4, zone in 4..8, pfn
    /// above; 0 is empty (a pfn is never 0).
    fn pack((zi, p, o): (usize, Pfn, u32)) -> u64 {
        p.as_u64() << 8 | (zi as u64 & 0xf) << 4 | u64::from(o)
    }

    fn unpack(w: u64) -> (usize, Pfn, u32) {
        (((w >> 4) & 0xf) as usize, Pfn::new(w >> 8), (w & 0xf) as u32)
    }

    /// Record `pfn`'s block; whether one was held already.
    fn insert(&mut self, pfn: u64, v: (usize, Pfn, u32)) -> bool {
        let w = Self::pack(v);
        match self.table.get_mut(pfn as usize) {
            Some(slot) => std::mem::replace(slot, w) != 0,
            None => self.rest.insert(pfn, w).is_some(),
        }
    }

    fn remove(&mut self, pfn: u64) -> Option<(usize, Pfn, u32)> {
        let w = match self.table.get_mut(pfn as usize) {
            Some(slot) => std::mem::take(slot),
            None => self.rest.remove(&pfn).unwrap_or(0),
        };
        (w != 0).then(|| Self::unpack(w))
    }
}

/// Points of the free-pages timeline a replay records.
const TIMELINE_POINTS: usize = 60;

/// What one replay did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Allocations replayed and how many pagealloc refused.
    pub allocs: u64,
    /// Allocations no zone could serve.
    pub alloc_failures: u64,
    /// Frees of blocks allocated in the trace.
    pub frees: u64,
    /// Frees of pfns never allocated in the trace, given back from the
    /// seeded in-use blocks of that order.
    pub frees_seeded: u64,
    /// Frees of pfns never allocated in the trace with no seeded block of
    /// that order left (bad input for the replay: counted, skipped).
    pub frees_unknown: u64,
    /// Allocations of a pfn the trace had not freed (its free was lost).
    pub realloc_held: u64,
    /// Frees whose order differed from the allocation's (freed at the
    /// allocation's order).
    pub order_mismatch: u64,
    /// Fallbacks from a block below pageblock order (fragmenting).
    pub fragmenting: u64,
    /// Zone-lock acquisitions.
    pub lock_acquisitions: u64,
    /// Per-CPU list refills and drains (each takes the zone lock once) and
    /// allocations refused (each may have taken it).
    pub pcp: (u64, u64, u64),
    /// Wall time of the replay loop, seconds.
    pub seconds: f64,
    /// CPU time of the replay loop (this thread's), seconds: on a shared
    /// host the wall time also holds the time other processes had the CPU.
    pub cpu_seconds: f64,
    /// Free pages per order after seeding, and at the end.
    pub seeded_free: [u64; 11],
    /// Free pages per order at the end.
    pub end_free: [u64; 11],
    /// (trace seconds, free pages per order) along the replay.
    pub timeline: Vec<(f64, [u64; 11])>,
}

/// Zones to try for a request, by index into `zones`: its own and lower.
fn zonelist(zones: &[Seeded], want: GfpZone) -> Vec<usize> {
    let rank = |name: &str| match name {
        "DMA" => GfpZone::Dma,
        "DMA32" => GfpZone::Dma32,
        _ => GfpZone::Normal,
    };
    let mut v: Vec<usize> = (0..zones.len()).filter(|&i| rank(&zones[i].name) <= want).collect();
    v.sort_by_key(|&i| std::cmp::Reverse(rank(&zones[i].name)));
    v
}

fn free_now(zones: &[Seeded]) -> [u64; 11] {
    let mut v = [0; 11];
    for z in zones {
        for (o, n) in seed::free_pages(&z.a).iter().enumerate() {
            v[o] += n;
        }
    }
    v
}

/// Replay `trace` on `zones` (seeded for this run; `spans` holds each
/// kernel zone's first pfn and pages spanned, in the same order, for frees
/// of unknown pfns).
pub fn replay(trace: &Trace, zones: &mut [Seeded], spans: &[(u64, u64)]) -> Outcome {
    let mut out = Outcome::default();
    for z in zones.iter() {
        for (o, n) in z.free.iter().enumerate() {
            out.seeded_free[o] += n;
        }
    }
    let lists: Vec<Vec<usize>> =
        [GfpZone::Dma, GfpZone::Dma32, GfpZone::Normal].iter().map(|&g| zonelist(zones, g)).collect();
    let mut held = Held::new(spans);
    let step = (trace.ops.len() / TIMELINE_POINTS).max(1);
    out.timeline.push((0.0, free_now(zones)));
    // The loop's own time, without the timeline's reads.
    let (mut busy, mut since) = (0.0, Instant::now());
    let (mut cpu, mut cpu_since) = (0.0, thread_cpu_seconds());
    for (i, op) in trace.ops.iter().enumerate() {
        match op.kind {
            OpKind::Alloc { mt, zone, high } => alloc(&mut out, zones, &lists[zone as usize], &mut held, op, mt, high),
            OpKind::Free => free(&mut out, zones, spans, &mut held, op),
        }
        if (i + 1) % step == 0 {
            busy += since.elapsed().as_secs_f64();
            cpu += thread_cpu_seconds() - cpu_since;
            out.timeline.push((f64::from(op.t_us) / 1e6, free_now(zones)));
            (since, cpu_since) = (Instant::now(), thread_cpu_seconds());
        }
    }
    out.seconds = busy + since.elapsed().as_secs_f64();
    out.cpu_seconds = cpu + thread_cpu_seconds() - cpu_since;
    // The kernel's snapshot leaves out its per-CPU lists (a few thousand
    // pages); ours may hold many more (high auto-tunes up), so they are
    // drained before the comparison.
    for z in zones.iter() {
        z.a.drain_all_pages();
    }
    out.end_free = free_now(zones);
    for z in zones.iter() {
        out.fragmenting += z.a.stats().event_count(VmEvent::FallbackFragmenting) - z.base.0;
        out.lock_acquisitions += seed::lock_acquisitions(&z.a) - z.base.1;
        let e = |ev: VmEvent| z.a.stats().event_count(ev);
        out.pcp.0 += e(VmEvent::PcpRefill) - z.base.2 .0;
        out.pcp.1 += e(VmEvent::PcpDrain) - z.base.2 .1;
        out.pcp.2 += e(VmEvent::AllocFail) - z.base.2 .2;
    }
    out
}

fn alloc(out: &mut Outcome, zones: &[Seeded], list: &[usize], held: &mut Held, op: &Op, mt: u8, high: bool) {
    out.allocs += 1;
    let gfp = seed::gfp_of(usize::from(mt)) | if high { Gfp::HIGH } else { Gfp::empty() };
    let order = u32::from(op.order);
    let got = list.iter().find_map(|&zi| zones[zi].a.alloc_pages(gfp, order).ok().map(|p| (zi, p)));
    match got {
        Some((zi, p)) => {
            if held.insert(op.pfn, (zi, p, order)) {
                out.realloc_held += 1;
            }
        }
        None => out.alloc_failures += 1,
    }
}

fn free(out: &mut Outcome, zones: &mut [Seeded], spans: &[(u64, u64)], held: &mut Held, op: &Op) {
    let order = u32::from(op.order);
    if let Some((zi, p, o)) = held.remove(op.pfn) {
        out.order_mismatch += u64::from(o != order);
        if zones[zi].a.free_pages(p, o).is_ok() {
            out.frees += 1;
        }
        return;
    }
    // Memory the kernel had before the capture: give back a seeded block of
    // the order, from the pfn's own zone if it has one.
    let own = spans.iter().position(|&(s, n)| op.pfn >= s && op.pfn < s + n);
    let from = own
        .filter(|&zi| !zones[zi].in_use[order as usize].is_empty())
        .or_else(|| (0..zones.len()).find(|&zi| !zones[zi].in_use[order as usize].is_empty()));
    match from.and_then(|zi| zones[zi].in_use[order as usize].pop().map(|p| (zi, p))) {
        Some((zi, p)) => {
            let _ = zones[zi].a.free_pages(p, order);
            out.frees_seeded += 1;
        }
        None => out.frees_unknown += 1,
    }
}

/// This thread's CPU time, seconds.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a valid out pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
