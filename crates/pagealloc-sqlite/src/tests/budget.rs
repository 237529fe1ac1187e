//! The soft budget, the overdraft up to the hard cap, and `cache_size`
//! freeing pages at unpin as pcache1 does.

use super::{assert_conserved, close, open, pages, ARENA};
use crate::{page_charge, Config, Group, Overdraft};
use std::sync::Arc;

fn group(budget: u64, cap: Option<u64>) -> Arc<Group> {
    Group::new(&Config { arena_bytes: ARENA, budget_bytes: Some(budget), hard_cap_bytes: cap, ..Config::default() })
        .unwrap()
}

#[test]
fn every_effort_overdraws_when_nothing_is_left_to_evict() {
    let budget = pages(4).unwrap();
    let g = group(budget, None);
    let c = open(&g, 4096, true);
    // Four pinned pages fill the budget; a fifth and sixth with createFlag
    // 1 are refused (SQLite spills first), with 2 they are served over it.
    let mut held: Vec<_> = (0..4).map(|k| c.fetch(k, 2)).collect();
    assert!(held.iter().all(|p| !p.is_null()));
    assert_eq!(g.overdraft(), Overdraft::default());
    assert!(c.fetch(4, 1).is_null(), "createFlag 1 refuses at the budget");
    for k in 4..6 {
        let p = c.fetch(k, 2);
        assert!(!p.is_null(), "createFlag 2 overdraws");
        held.push(p);
    }
    let charge = page_charge(4096, 200);
    let o = g.overdraft();
    assert_eq!((o.current, o.peak, o.times), (2 * charge, 2 * charge, 2));
    assert!(c.fetch(6, 1).is_null(), "still refused while overdrawn");
    g.check_invariants().unwrap();
    assert!(crate::preload::group_stats_line(&g)
        .contains("overdraft_bytes 8800 overdraft_peak 8800 overdraft_times 2 open_caches 1"));
    // Unpinning takes the overdraft back first: those pages are freed.
    c.unpin(held.pop().unwrap(), false);
    assert_eq!(g.overdraft().current, charge);
    assert_eq!(c.pagecount(), 5);
    c.unpin(held.pop().unwrap(), false);
    assert_eq!(g.overdraft().current, 0);
    // Back within the budget, unpinned pages stay cached.
    c.unpin(held.pop().unwrap(), false);
    assert_eq!(c.pagecount(), 4);
    assert_eq!(g.overdraft().peak, 2 * charge, "the peak is kept");
    assert_eq!(c.stats().evictions, 2);
    close(&g, c, held);
}

#[test]
fn the_hard_cap_is_the_only_nomem() {
    let budget = pages(2).unwrap();
    let g = group(budget, Some(pages(3).unwrap()));
    let a = open(&g, 4096, true);
    let held: Vec<_> = (0..3).map(|k| a.fetch(k, 2)).collect();
    assert!(held.iter().all(|p| !p.is_null()), "two within the budget, one over it");
    assert!(a.fetch(3, 2).is_null(), "the hard cap reached: SQLITE_NOMEM");
    assert_eq!(g.overdraft().times, 1);
    assert!(g.charged_bytes() <= g.hard_cap_bytes());
    g.check_invariants().unwrap();
    for p in held {
        a.unpin(p, true);
    }
    a.destroy();
    assert_conserved(&g);
}

#[test]
fn an_overdraft_evicts_unpinned_pages_of_other_caches_first() {
    // Cache b's unpinned pages go before anyone overdraws.
    let g = group(pages(4).unwrap(), None);
    let (a, b) = (open(&g, 4096, true), open(&g, 4096, true));
    for k in 0..2 {
        b.unpin(b.fetch(k, 2), false);
    }
    let held: Vec<_> = (0..4).map(|k| a.fetch(k, 2)).collect();
    assert!(held.iter().all(|p| !p.is_null()));
    assert_eq!((b.pagecount(), g.overdraft().times), (0, 0), "b's two pages were taken, no overdraft");
    for p in held {
        a.unpin(p, false);
    }
    a.destroy();
    b.destroy();
    assert_conserved(&g);
}

/// Pages of `c` now: its `xPagecount`, what pcache1's tests read.
fn count_after_commit(max: i32) -> i32 {
    let g = group(pages(64).unwrap(), None);
    let c = open(&g, 4096, true);
    c.cachesize(max);
    // A transaction holds three pages pinned (SQLite asks with createFlag
    // 2 once cheap creation is refused), then commits and unpins them.
    let held: Vec<_> = (0..3).map(|k| c.fetch(k, 2)).collect();
    assert!(held.iter().all(|p| !p.is_null()));
    assert_eq!(c.pagecount(), 3);
    for p in held {
        c.unpin(p, false);
    }
    let n = c.pagecount();
    g.check_invariants().unwrap();
    c.destroy();
    assert_conserved(&g);
    n
}

#[test]
fn cache_size_frees_memory_at_unpin_as_pcache1_does() {
    // cache.test 2.3.6 and 2.4.6: cache_size=1 keeps one page, 0 none.
    assert_eq!(count_after_commit(1), 1);
    assert_eq!(count_after_commit(0), 0);
    assert_eq!(count_after_commit(2), 2);
    assert_eq!(count_after_commit(100), 3);
    // The frames went back to the allocator, their charge to the budget.
    let g = group(pages(64).unwrap(), None);
    let c = open(&g, 4096, true);
    c.cachesize(1);
    let held: Vec<_> = (0..3).map(|k| c.fetch(k, 2)).collect();
    for p in held {
        c.unpin(p, false);
    }
    assert_eq!((g.used_frames(), g.charged_bytes()), (1, page_charge(4096, 200)));
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn pcache1s_recycling_threshold() {
    // pcache1 recycles its oldest unpinned page once a new page would
    // reach the soft limit (nPage + 1 >= nMax): a cache of limit 3 grows
    // to 2 pages when they are unpinned before each next fetch.
    let g = group(pages(64).unwrap(), None);
    let c = open(&g, 4096, true);
    c.cachesize(3);
    for k in 0..10 {
        c.unpin(c.fetch(k, 2), false);
    }
    assert_eq!(c.pagecount(), 2);
    c.destroy();
    assert_conserved(&g);
}
