//! `pagealloc bench contig`: 64 MiB contiguous (`alloc_contig_pages`) from
//! an arena 80% full of movable pages (registered movable operations, every
//! fifth page free), repeated; then the same arena with one pinned page in
//! every pageblock, where every candidate range is blocked: the request must
//! fail with the first blocking pfn named and nothing moved.

use crate::harness::{stats, Ctx, Experiment, ExperimentResult, Figure};
use pagealloc::stats::events::VmEvent;
use pagealloc::{AllocError, Config, Gfp, MovableOps, PageAllocator, Pfn, PAGEBLOCK_PAGES};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The experiment.
pub struct Contig;

/// An owner of movable pages that knows where they are (abstract frames:
/// the allocator moves no bytes). Also proactive-compaction's.
#[derive(Default)]
pub(crate) struct Owner(pub(crate) Mutex<HashSet<u64>>);

impl MovableOps for Owner {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut m = self.0.lock().unwrap();
        m.remove(&from.as_u64()) && m.insert(to.as_u64())
    }
    fn copies_data(&self) -> bool {
        true // abstract frames: no bytes to copy
    }
}

fn fill80(a: &PageAllocator, o: &Arc<Owner>) {
    let id = a.compaction().register_movable_ops(o.clone());
    let mut all = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 0) {
        all.push(p);
    }
    for p in all {
        if p.as_u64().is_multiple_of(5) {
            a.free_pages(p, 0).expect("free");
        } else {
            a.compaction().set_page_movable(p, id).expect("movable");
            o.0.lock().unwrap().insert(p.as_u64());
        }
    }
    a.drain_all_pages();
}

impl Experiment for Contig {
    fn name(&self) -> &'static str {
        "contig"
    }

    fn run(&self, ctx: &Ctx) -> ExperimentResult {
        let mut r = ExperimentResult::new("contig", "64 MiB contiguous from an arena 80% full of movable pages", None);
        let arena: u64 = 512 << 20;
        let nr = (64u64 << 20) / pagealloc::PAGE_SIZE as u64;
        let rounds = if ctx.full { 20 } else { 5 };
        let a = PageAllocator::new(Config::small(arena).compaction_proactiveness(0)).expect("arena");
        let o = Arc::new(Owner::default());
        fill80(&a, &o);
        let (mut ok, mut ms) = (0u32, Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            if let Ok(s) = a.contig().alloc_contig_pages(nr, Gfp::MOVABLE) {
                ms.push(t.elapsed().as_secs_f64() * 1e3);
                ok += 1;
                a.contig().free_contig_range(s, nr).expect("free range");
            }
        }
        a.check_invariants().expect("invariants after contig");
        let migrated = a.stats().event_count(VmEvent::PgmigrateSuccess);
        r.line(ctx, format!("arena {} MiB, 80% movable; {nr} pages contiguous, {rounds} rounds", arena >> 20));
        r.line(
            ctx,
            format!("succeeded {ok}/{rounds}, median {:.2} ms, migrated {migrated} pages in all", stats::median(&ms)),
        );
        r.figures.push(Figure::new("contig-64MiB-ms", "new", "ms", ms.clone()));
        r.target(
            crate::harness::TargetKind::Count,
            "64 MiB contiguous succeeds every time",
            f64::from(ok),
            f64::from(rounds),
            ok == rounds,
        );

        let first = ms.first().copied().unwrap_or(0.0);
        r.line(ctx, format!("first round (the one that migrates): {first:.2} ms"));
        drop(a);

        // A fresh arena, 80% full, with one pinned page in every pageblock.
        let a = PageAllocator::new(Config::small(arena).compaction_proactiveness(0)).expect("arena");
        let o = Arc::new(Owner::default());
        fill80(&a, &o);
        let mut pinned = HashSet::new();
        {
            let mut m = o.0.lock().unwrap();
            let mut v: Vec<u64> = m.iter().copied().collect();
            v.sort_unstable();
            for p in v {
                if pinned.insert(p / PAGEBLOCK_PAGES) {
                    a.compaction().clear_page_movable(Pfn::new(p)).expect("pin");
                    m.remove(&p);
                }
            }
        }
        let before = a.stats().event_count(VmEvent::PgmigrateSuccess);
        let res = a.contig().alloc_contig_pages(nr, Gfp::MOVABLE);
        let moved = a.stats().event_count(VmEvent::PgmigrateSuccess) - before;
        let typed = matches!(res, Err(AllocError::Unmovable { .. }));
        r.line(ctx, format!("one pinned page per pageblock: {res:?}, pages moved {moved}"));
        r.target(
            crate::harness::TargetKind::Count,
            "pinned ranges: typed error naming the pfn, nothing moved",
            moved as f64,
            0.0,
            typed && moved == 0,
        );
        a.check_invariants().expect("invariants after the pinned case");
        r
    }
}
