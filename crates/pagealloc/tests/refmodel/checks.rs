//! What must hold after every step, and at the end of a run.

use super::model::Model;
use pagealloc::{PageAllocator, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};
use std::collections::BTreeMap;

/// Pages handed out and pages freed, as the event counters have them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    pub alloc: u64,
    pub free: u64,
}

pub fn events(a: &PageAllocator) -> Events {
    let v = a.stats().vmstat();
    Events {
        alloc: v.get("pgalloc_normal").unwrap() + v.get("pgalloc_movable").unwrap(),
        free: v.get("pgfree").unwrap(),
    }
}

impl Model {
    /// Pageblocks holding allocated blocks of more than one type, by the model.
    /// `fragmentation().mixed` reads the same off the descriptors' private
    /// words, so the two agree only if every allocated head carries the type
    /// it was allocated for.
    fn mixed_blocks(&self) -> u64 {
        let mut per_block: BTreeMap<u64, u32> = BTreeMap::new();
        for (&p, b) in &self.blocks {
            *per_block.entry(p / PAGEBLOCK_PAGES).or_default() |= 1 << b.mt.index();
        }
        per_block.values().filter(|m| m.count_ones() > 1).count() as u64
    }

    /// The checks after every step (`what` names the step in failures):
    /// `check_invariants`; allocated pages, mixed pageblocks and the pgalloc
    /// and pgfree counts as the model has them; pages conserved; NR_FREE_PAGES
    /// the census's free pages outside isolated blocks.
    pub fn check(&self, what: &str) {
        if let Err(e) = self.a.check_invariants() {
            panic!("after {what} (step {}): {e}", self.steps);
        }
        let c = self.a.census();
        assert_eq!(c.allocated, self.allocated_pages(), "census disagrees with the model after {what}");
        assert_eq!(c.free + c.pcp + c.allocated, self.a.managed_pages(), "pages not conserved after {what}: {c:?}");
        assert!(c.isolated_free <= self.isolated.len() as u64 * PAGEBLOCK_PAGES, "{c:?}");
        assert_eq!(self.a.nr_free_pages(), c.free - c.isolated_free, "NR_FREE_PAGES disagrees with the census");
        assert_eq!(
            self.a.stats().fragmentation().mixed,
            self.mixed_blocks(),
            "after {what}: an allocated head has the wrong type in private"
        );
        assert_eq!(events(&self.a), self.events, "pgalloc, pgfree after {what}");
    }

    /// Give back every block the model holds: order-0 pages in bulk frees of
    /// 100 (each checked), the rest singly; locks and writeback ended first.
    pub fn free_all(&mut self) {
        let held: Vec<u64> = self.blocks.iter().filter(|(_, b)| b.locked || b.writeback).map(|(&h, _)| h).collect();
        for h in held {
            let bl = self.blocks[&h];
            if bl.writeback {
                self.writeback(h, false);
            }
            if bl.locked {
                self.unlock(h, false).unwrap();
            }
        }
        let zeros = self.order0_pages();
        for chunk in zeros.chunks(100) {
            let rejected = self.bulk_free(chunk);
            assert!(rejected.is_empty(), "final bulk free: {rejected:?}");
        }
        let rest: Vec<(u64, u32)> = self.blocks.iter().map(|(&h, b)| (h, b.order)).collect();
        for (h, o) in rest {
            self.free(h, o).unwrap_or_else(|e| panic!("final free of {h:#x}: {e}"));
        }
        assert!(self.blocks.is_empty());
    }

    /// Give everything back (blocks, isolated pageblocks), drain, and check the
    /// arena is whole: every page free, nothing parked, free blocks merged up
    /// to pageblock order at least (two halves of a larger block may stay
    /// apart only across a type boundary, which `check_invariants` verified),
    /// and as many free pages as a fresh allocator of the same configuration.
    pub fn finish(mut self) {
        self.free_all();
        let iso: Vec<u64> = self.isolated.iter().copied().collect();
        for bl in iso {
            self.undo_isolate(bl, PAGEBLOCK_PAGES).unwrap();
        }
        self.check("the final frees");
        self.a.drain_all_pages();
        assert!(
            self.a.stats().pcp_report().iter().all(|r| r.count == 0),
            "drain_all_pages left pages on per-CPU lists"
        );
        self.check("the final drain");
        let c = self.a.census();
        assert_eq!((c.allocated, c.pcp, c.isolated_free), (0, 0, 0), "after freeing everything and draining: {c:?}");
        assert_eq!(self.a.nr_free_pages(), self.a.managed_pages(), "pages leaked");
        let fresh = PageAllocator::new(self.a.config().clone()).unwrap();
        assert_eq!(self.a.nr_free_pages(), fresh.nr_free_pages(), "pages leaked");
        let fr = self.a.stats().fragmentation();
        for (order, n) in fr.free_blocks.iter().enumerate().take(PAGEBLOCK_ORDER as usize) {
            assert_eq!(*n, 0, "order-{order} blocks left after freeing everything: not fully coalesced");
        }
    }
}
