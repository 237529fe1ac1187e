//! `page_group_by_mobility_disabled` (issue 17): with grouping by mobility,
//! unmovable pages allocated among movable ones gather in a few pageblocks;
//! without it they land anywhere, so far more pageblocks hold one (and can
//! never be compacted into a free block).

use pagealloc::{Config, Gfp, PageAllocator, PAGEBLOCK_PAGES};
use std::collections::HashSet;

/// Fill the arena, one page in 64 unmovable; (pageblocks holding an
/// unmovable page, pageblocks in all). Everything is freed again.
fn polluted_blocks(disabled: bool) -> (usize, u64) {
    let a = PageAllocator::new(
        Config::small(64 << 20).compaction_proactiveness(0).page_group_by_mobility_disabled(disabled),
    )
    .unwrap();
    let (mut movable, mut pinned) = (Vec::new(), Vec::new());
    for i in 1u64.. {
        let gfp = if i % 64 == 0 { Gfp::KERNEL } else { Gfp::MOVABLE } | Gfp::NO_COMPACT;
        let Ok(p) = a.alloc_pages(gfp, 0) else { break };
        if i % 64 == 0 {
            pinned.push(p)
        } else {
            movable.push(p)
        }
    }
    let blocks: HashSet<u64> = pinned.iter().map(|p| p.as_u64() / PAGEBLOCK_PAGES).collect();
    for p in movable.into_iter().chain(pinned) {
        a.free_pages(p, 0).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    let pt = a.stats().pagetypeinfo().to_string();
    if disabled {
        // One type serves everything: no pageblock changed type.
        assert!(pt.lines().last().unwrap().split_whitespace().nth(4) == Some("0"), "{pt}");
    }
    (blocks.len(), a.nr_pages() / PAGEBLOCK_PAGES)
}

#[test]
fn grouping_off_scatters_unmovable_pages_over_the_pageblocks() {
    let (on, n) = polluted_blocks(false);
    let (off, _) = polluted_blocks(true);
    assert!(on * 4 <= n as usize, "grouped: {on} of {n} pageblocks hold unmovable pages");
    assert!(off * 10 >= n as usize * 9, "ungrouped: only {off} of {n} pageblocks hold unmovable pages");
}
