//! Migration and compaction (issue 17): data survives every move, order-9
//! blocks come back after compaction, contiguous ranges migrate their movable
//! pages out and refuse pinned ones.

use pagealloc::stats::events::VmEvent;
use pagealloc::{
    AllocError, Backing, Config, FreeError, Gfp, MovableOps, PageAllocator, PageStateError, Pfn, PAGEBLOCK_PAGES,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::common;
/// The owner of the moved pages; page `pfn` holds the words
/// `key * 0x9e37_79b9 + i`.
use common::{fill, intact, TrackingOwner as Owner};

/// Every page of every owner still holds its data: the number of violations.
fn violations(a: &PageAllocator, o: &Owner) -> usize {
    o.pages.lock().unwrap().iter().filter(|(&p, &(k, _))| !intact(a, p, k)).count()
}

fn backed(bytes: u64) -> PageAllocator {
    // Proactive compaction off: these tests compact on demand and check
    // states in between (kcompactd's own tests: tests/integration/kcompactd.rs).
    PageAllocator::new(Config::small(bytes).backing(Backing::Anonymous).compaction_proactiveness(0)).unwrap()
}

/// Fill the arena with order-0 movable pages, keep one in `keep` of them
/// (registered with `o`, data written), and leave one pinned page in each
/// pageblock listed in `pinned_blocks`. Returns the pinned pfns.
fn fragment(a: &PageAllocator, o: &Arc<Owner>, keep: u64, pinned_blocks: &[u64]) -> Vec<u64> {
    let id = a.compaction().register_movable_ops(o.clone());
    let mut all = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 0) {
        all.push(p.as_u64());
    }
    all.sort_unstable();
    let mut pinned = Vec::new();
    for &p in &all {
        let block = p / PAGEBLOCK_PAGES;
        if p % keep == 0 {
            if pinned_blocks.contains(&block) && !pinned.iter().any(|&q| q / PAGEBLOCK_PAGES == block) {
                pinned.push(p);
                continue;
            }
            fill(a, p, p);
            o.pages.lock().unwrap().insert(p, (p, false));
            a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
        } else {
            a.free_pages(Pfn::new(p), 0).unwrap();
        }
    }
    a.drain_all_pages();
    pinned
}

fn free_owner(a: &PageAllocator, o: &Owner) {
    for (p, _) in o.pages.lock().unwrap().drain() {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
}

#[test]
fn order9_fails_before_compaction_and_succeeds_after() {
    let a = backed(32 << 20);
    let o = Arc::new(Owner::default());
    let pinned = fragment(&a, &o, 4, &[1, 6, 11]);
    assert_eq!(pinned.len(), 3);
    let census = a.compaction().mobility_census();
    assert_eq!(census.pinned, 3);
    assert_eq!(census.movable, o.pages.lock().unwrap().len() as u64);
    assert!(a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 9).is_err(), "fragmented: no order-9 block yet");
    let before = a.compaction().extfrag_index().to_string();
    assert!(before.starts_with("Node 0, zone   Normal -1.000 "), "{before}");

    let out = a.compaction().compact_memory();
    assert!(out.migrated > 0);
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateSuccess), out.migrated);
    assert_eq!(violations(&a, &o), 0);
    a.check_invariants().unwrap();

    // Theoretical maximum: blocks with no pinned page, less those the
    // movable pages need.
    let blocks = a.nr_pages() / PAGEBLOCK_PAGES;
    let movable = o.pages.lock().unwrap().len() as u64;
    let theo = blocks - pinned.len() as u64 - movable.div_ceil(PAGEBLOCK_PAGES);
    let mut got = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 9) {
        got.push(p);
    }
    eprintln!("order-9 after compaction: {} of theoretical {theo}; {out:?}", got.len());
    assert!(got.len() as u64 * 100 >= theo * 95 - 100, "{} of {theo}", got.len());
    assert_eq!(violations(&a, &o), 0);
    for p in got {
        a.free_pages(p, 9).unwrap();
    }
    free_owner(&a, &o);
    for p in pinned {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

#[test]
fn direct_compaction_serves_order9_from_the_slow_path() {
    let a = backed(32 << 20);
    let o = Arc::new(Owner::default());
    let pinned = fragment(&a, &o, 4, &[0, 9]);
    assert!(a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 9).is_err());
    let p = a.alloc_pages(Gfp::MOVABLE, 9).expect("direct compaction makes an order-9 block");
    assert_eq!(a.stats().event_count(VmEvent::CompactStall), 1);
    assert_eq!(a.stats().event_count(VmEvent::CompactSuccess), 1);
    assert!(a.stats().event_count(VmEvent::CompactMigrateScanned) > 0);
    assert!(a.stats().event_count(VmEvent::CompactIsolated) > 0);
    assert_eq!(violations(&a, &o), 0);
    a.free_pages(p, 9).unwrap();
    free_owner(&a, &o);
    for p in pinned {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    a.check_invariants().unwrap();
}

#[test]
fn isolated_page_refuses_raw_free_and_owner_refusal_puts_back() {
    #[derive(Default)]
    struct Refuse {
        a: Mutex<std::sync::Weak<PageAllocator>>,
        asked: Mutex<Vec<(u64, u64)>>,
        free_in_isolate: Mutex<Vec<Result<(), FreeError>>>,
    }
    impl MovableOps for Refuse {
        fn isolate(&self, pfn: Pfn) -> bool {
            if let Some(a) = self.a.lock().unwrap().upgrade() {
                self.free_in_isolate.lock().unwrap().push(a.free_pages(pfn, 0));
            }
            true
        }
        fn migrate(&self, from: Pfn, to: Pfn) -> bool {
            self.asked.lock().unwrap().push((from.as_u64(), to.as_u64()));
            false
        }
    }
    let a = Arc::new(backed(8 << 20));
    let r = Arc::new(Refuse::default());
    *r.a.lock().unwrap() = Arc::downgrade(&a);
    let id = a.compaction().register_movable_ops(r.clone());
    let mut all = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 0) {
        all.push(p.as_u64());
    }
    all.sort_unstable();
    // The lowest page movable with data, the highest pinned (so the top
    // block is partly free: the free scanner takes targets there).
    let (p, top) = (Pfn::new(all[0]), Pfn::new(*all.last().unwrap()));
    for &q in &all[1..all.len() - 1] {
        a.free_pages(Pfn::new(q), 0).unwrap();
    }
    fill(&a, p.as_u64(), 7);
    a.compaction().set_page_movable(p, id).unwrap();
    let big = a.alloc_pages(Gfp::MOVABLE, 1).unwrap();
    assert_eq!(a.compaction().set_page_movable(big, id), Err(pagealloc::PageStateError::NotMovable { pfn: big }));
    a.compaction().compact_memory();
    assert_eq!(r.asked.lock().unwrap().len(), 1, "the owner was asked once");
    assert_eq!(*r.free_in_isolate.lock().unwrap(), vec![Err(FreeError::Migrating { pfn: p })]);
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateSuccess), 0);
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateFail), 1);
    assert!(intact(&a, p.as_u64(), 7));
    assert_eq!(a.compaction().mobility_census().movable, 1);
    a.check_invariants().unwrap();
    a.free_pages(big, 1).unwrap();
    a.free_pages(p, 0).unwrap();
    a.free_pages(top, 0).unwrap();
    assert_eq!(a.free_pages(p, 0), Err(FreeError::DoubleFree { pfn: p }));
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// A page held by a lock guard is not marked movable (the page cache holds
/// a page it is freeing that way, with no reference left): the typed error,
/// nothing marked; once the guard is gone the page can be marked.
#[test]
fn set_page_movable_refuses_a_guarded_page() {
    let a = backed(8 << 20);
    let id = a.compaction().register_movable_ops(Arc::new(Owner::default()));
    let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let g = a.page_locks().lock_page_guard(p).unwrap();
    assert_eq!(a.compaction().set_page_movable(p, id), Err(PageStateError::HeldByGuard { pfn: p }));
    assert_eq!(a.compaction().mobility_census().movable, 0, "nothing was marked");
    drop(g);
    a.compaction().set_page_movable(p, id).unwrap();
    assert_eq!(a.compaction().mobility_census().movable, 1);
    a.compaction().clear_page_movable(p).unwrap();
    a.free_pages(p, 0).unwrap();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// The tracking owner, whose `migrate` panics once while armed, before it
/// changes anything; the page it panicked on.
#[derive(Default)]
struct PanicsOnce {
    owner: Owner,
    armed: AtomicBool,
    panicked_on: Mutex<Option<u64>>,
}

impl MovableOps for PanicsOnce {
    fn isolate(&self, pfn: Pfn) -> bool {
        self.owner.isolate(pfn)
    }
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        if self.armed.swap(false, Ordering::Relaxed) {
            *self.panicked_on.lock().unwrap() = Some(from.as_u64());
            panic!("the owner's migrate panics on {from:?}");
        }
        self.owner.migrate(from, to)
    }
    fn putback(&self, pfn: Pfn) {
        self.owner.putback(pfn);
    }
}

/// An arena of `mib` MiB (no background compaction or reporting) whose
/// every third page a `PanicsOnce`, armed, keeps with data; the rest free.
fn panicky(mib: u64) -> (PageAllocator, Arc<PanicsOnce>) {
    let a = PageAllocator::new(
        Config::small(mib << 20).backing(Backing::Anonymous).compaction_proactiveness(0).page_reporting(false),
    )
    .unwrap();
    let o = Arc::new(PanicsOnce { armed: AtomicBool::new(true), ..Default::default() });
    let id = a.compaction().register_movable_ops(o.clone());
    let mut all = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 0) {
        all.push(p.as_u64());
    }
    for p in all {
        if p % 3 == 0 {
            fill(&a, p, p);
            o.owner.pages.lock().unwrap().insert(p, (p, false));
            a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
        } else {
            a.free_pages(Pfn::new(p), 0).unwrap();
        }
    }
    a.drain_all_pages();
    (a, o)
}

/// Right after the owner's panic reached the caller: one failed migration
/// counted, nothing left isolated, the owner's pages intact, and the page
/// it panicked on its own again (put back), which it frees.
fn recovered(a: &PageAllocator, o: &PanicsOnce, fail0: u64) {
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateFail) - fail0, 1, "one failed migration");
    assert_eq!(a.compaction().mobility_census().isolated, 0, "a page stayed isolated for migration");
    assert_eq!(violations(a, &o.owner), 0);
    a.check_invariants().unwrap();
    let p = o.panicked_on.lock().unwrap().expect("the owner panicked");
    let e = o.owner.pages.lock().unwrap().remove(&p);
    assert_eq!(e, Some((p, false)), "the owner keeps the page, put back");
    assert_eq!(a.free_pages(Pfn::new(p), 0), Ok(()), "the owner frees the page it panicked on");
}

/// The owner frees the rest: every page is free again (no target leaked).
fn all_free(a: &PageAllocator, o: &PanicsOnce) {
    free_owner(a, &o.owner);
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages lost");
}

#[test]
fn a_panicking_migrate_fails_one_move_and_reaches_compact_memorys_caller() {
    let (a, o) = panicky(8);
    let fail0 = a.stats().event_count(VmEvent::PgmigrateFail);
    let r = catch_unwind(AssertUnwindSafe(|| a.compaction().compact_memory()));
    assert!(r.is_err(), "the owner's panic goes on in compact_memory's caller");
    recovered(&a, &o, fail0);
    // The owner panics once: the next compaction moves pages.
    assert!(a.compaction().compact_memory().migrated > 0);
    all_free(&a, &o);
}

#[test]
fn a_panicking_migrate_undoes_alloc_contig_ranges_isolation() {
    let (a, o) = panicky(8);
    let first = *o.owner.pages.lock().unwrap().keys().min().unwrap();
    let block = Pfn::new(first / PAGEBLOCK_PAGES * PAGEBLOCK_PAGES);
    let fail0 = a.stats().event_count(VmEvent::PgmigrateFail);
    let r = catch_unwind(AssertUnwindSafe(|| a.contig().alloc_contig_range(block, PAGEBLOCK_PAGES, Gfp::MOVABLE)));
    assert!(r.is_err(), "the owner's panic goes on in alloc_contig_range's caller");
    a.contig().isolate_range(block, PAGEBLOCK_PAGES).expect("the range's isolation was undone");
    a.contig().undo_isolate_range(block, PAGEBLOCK_PAGES).unwrap();
    recovered(&a, &o, fail0);
    // The owner panics once: the range can be had now.
    a.contig().alloc_contig_range(block, PAGEBLOCK_PAGES, Gfp::MOVABLE).unwrap();
    a.contig().free_contig_range(block, PAGEBLOCK_PAGES).unwrap();
    all_free(&a, &o);
}

/// Direct compaction runs in the allocating thread: the owner's panic goes
/// on in `alloc_pages`'s caller, the compaction's state restored.
#[test]
fn a_panicking_migrate_reaches_a_direct_compactions_allocator() {
    let (a, o) = panicky(16);
    let fail0 = a.stats().event_count(VmEvent::PgmigrateFail);
    let r = catch_unwind(AssertUnwindSafe(|| a.alloc_pages(Gfp::MOVABLE, 9)));
    assert!(r.is_err(), "the owner's panic goes on in alloc_pages's caller");
    assert_eq!(
        a.stats().event_count(VmEvent::CompactStall),
        a.stats().event_count(VmEvent::CompactFail),
        "the stall failed"
    );
    recovered(&a, &o, fail0);
    // The owner panics once: compaction now serves the request.
    let big = a.alloc_pages(Gfp::MOVABLE, 9).expect("direct compaction made an order-9 block");
    a.free_pages(big, 9).unwrap();
    all_free(&a, &o);
}

/// Fill the arena 80% with registered movable pages (every fifth page free).
fn fill80(a: &PageAllocator, o: &Arc<Owner>) {
    let id = a.compaction().register_movable_ops(o.clone());
    let mut all = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE | Gfp::NO_COMPACT, 0) {
        all.push(p.as_u64());
    }
    for &p in &all {
        if p % 5 == 0 {
            a.free_pages(Pfn::new(p), 0).unwrap();
        } else {
            fill(a, p, p ^ 0x55);
            o.pages.lock().unwrap().insert(p, (p ^ 0x55, false));
            a.compaction().set_page_movable(Pfn::new(p), id).unwrap();
        }
    }
    a.drain_all_pages();
}

#[test]
fn contig_migrates_movable_pages_out() {
    let a = backed(32 << 20);
    let o = Arc::new(Owner::default());
    fill80(&a, &o);
    // 4 MiB contiguous from an arena 80% full of movable pages, twice.
    let nr = 1024;
    for round in 0..2 {
        let s = a.contig().alloc_contig_pages(nr, Gfp::MOVABLE).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(a.stats().event_count(VmEvent::PgmigrateSuccess) > 0);
        assert_eq!(violations(&a, &o), 0);
        for q in s.as_u64()..s.as_u64() + nr {
            assert!(!o.pages.lock().unwrap().contains_key(&q), "owner page {q} still inside the taken range");
        }
        a.contig().free_contig_range(s, nr).unwrap();
        a.check_invariants().unwrap();
    }
    free_owner(&a, &o);
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

#[test]
fn contig_refuses_ranges_with_pinned_pages_and_moves_nothing() {
    let a = backed(32 << 20);
    let o = Arc::new(Owner::default());
    fill80(&a, &o);
    // Pin one page in every pageblock: every candidate range is blocked,
    // the error names a pinned pfn, and nothing moves.
    let mut pinned = Vec::new();
    {
        let mut m = o.pages.lock().unwrap();
        let mut keys: Vec<u64> = m.keys().copied().collect();
        keys.sort_unstable();
        for p in keys {
            if pinned.last().is_none_or(|&q: &u64| q / PAGEBLOCK_PAGES != p / PAGEBLOCK_PAGES) {
                a.compaction().clear_page_movable(Pfn::new(p)).unwrap();
                m.remove(&p);
                pinned.push(p);
            }
        }
    }
    assert_eq!(pinned.len() as u64, a.nr_pages() / PAGEBLOCK_PAGES);
    assert_eq!(a.compaction().mobility_census().pinned, pinned.len() as u64);
    match a.contig().alloc_contig_pages(PAGEBLOCK_PAGES, Gfp::MOVABLE) {
        Err(AllocError::Unmovable { pfn }) => assert_eq!(pfn.as_u64(), pinned[0]),
        other => panic!("expected Unmovable, got {other:?}"),
    }
    let first = pinned[3];
    assert_eq!(
        a.contig().alloc_contig_range(Pfn::new(first - first % PAGEBLOCK_PAGES), PAGEBLOCK_PAGES, Gfp::MOVABLE),
        Err(AllocError::Unmovable { pfn: Pfn::new(first) })
    );
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateSuccess), 0, "nothing moved");
    assert_eq!(a.stats().event_count(VmEvent::PgmigrateFail), 0);
    assert_eq!(violations(&a, &o), 0);
    free_owner(&a, &o);
    for p in pinned {
        a.free_pages(Pfn::new(p), 0).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

#[test]
fn unusable_index_format() {
    let a = PageAllocator::new(Config::small(8 << 20)).unwrap();
    let u = a.compaction().unusable_index().to_string();
    assert!(u.starts_with("Node 0, zone   Normal 0.000 0.000 "), "{u}");
    assert_eq!(u.lines().count(), 1);
}

/// Owners allocating, filling, registering and freeing pages race a thread
/// that compacts, allocates order-9 blocks (direct compaction) and
/// contiguous ranges. No page's data is ever lost; at the end the
/// invariants hold and every page is back.
#[test]
fn owners_race_compaction_without_losing_data() {
    let a = Arc::new(backed(16 << 20));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let owners: Vec<Arc<Owner>> = (0..3).map(|_| Arc::new(Owner::default())).collect();
    let mut hs = Vec::new();
    for (t, o) in owners.iter().enumerate() {
        let (a, o, stop) = (a.clone(), o.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let id = a.compaction().register_movable_ops(o.clone());
            let mut rng = 0x1234_5678_u64 + t as u64;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut bad = 0;
            let mut key = (t as u64) << 40;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = next();
                let len = o.pages.lock().unwrap().len();
                if r % 3 != 0 || len < 64 {
                    if len < 1200 {
                        if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) {
                            key += 1;
                            fill(&a, p.as_u64(), key);
                            o.pages.lock().unwrap().insert(p.as_u64(), (key, false));
                            a.compaction().set_page_movable(p, id).unwrap();
                        }
                    }
                } else {
                    // Free one page not isolated right now (and check it first).
                    let victim = {
                        let mut m = o.pages.lock().unwrap();
                        let pick = m.iter().find(|(_, &(_, iso))| !iso).map(|(&p, &(k, _))| (p, k));
                        if let Some((p, k)) = pick {
                            if !intact(&a, p, k) {
                                bad += 1;
                            }
                            m.remove(&p);
                        }
                        pick
                    };
                    if let Some((p, _)) = victim {
                        loop {
                            match a.free_pages(Pfn::new(p), 0) {
                                Ok(()) => break,
                                Err(FreeError::Migrating { .. }) => std::thread::yield_now(),
                                Err(e) => panic!("free of an owned page: {e}"),
                            }
                        }
                    }
                }
            }
            bad
        }));
    }
    let compactor = {
        let (a, stop, owners) = (a.clone(), stop.clone(), owners.clone());
        std::thread::spawn(move || {
            // Start once the owners hold pages to migrate (on a loaded machine
            // the compactor could otherwise finish before they allocate).
            let held = || owners.iter().map(|o| o.pages.lock().unwrap().len()).sum::<usize>();
            let t0 = std::time::Instant::now();
            while held() < 3 * 64 && t0.elapsed() < std::time::Duration::from_secs(30) {
                std::thread::yield_now();
            }
            let mut big = 0;
            let mut i = 0;
            // 80 rounds, and on until something has migrated (bounded: the
            // assertion below still fails if nothing ever does).
            while i < 80 || (a.stats().event_count(VmEvent::PgmigrateSuccess) == 0 && i < 2000) {
                i += 1;
                a.compaction().compact_memory();
                if let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 9) {
                    big += 1;
                    a.free_pages(p, 9).unwrap();
                }
                if i % 4 == 0 {
                    if let Ok(s) = a.contig().alloc_contig_pages(256, Gfp::MOVABLE) {
                        a.contig().free_contig_range(s, 256).unwrap();
                    }
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (big, i)
        })
    };
    let (big, rounds) = compactor.join().unwrap();
    let bad: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let total: usize = owners.iter().map(|o| violations(&a, o)).sum();
    eprintln!(
        "order-9 successes {big}/{rounds}, migrated {}, failed {}",
        a.stats().event_count(VmEvent::PgmigrateSuccess),
        a.stats().event_count(VmEvent::PgmigrateFail)
    );
    assert_eq!(bad + total, 0, "data lost or corrupted");
    assert!(a.stats().event_count(VmEvent::PgmigrateSuccess) > 0);
    a.check_invariants().unwrap();
    let census = a.compaction().mobility_census();
    assert_eq!(census.isolated, 0);
    assert_eq!(census.movable, owners.iter().map(|o| o.pages.lock().unwrap().len() as u64).sum::<u64>());
    for o in &owners {
        free_owner(&a, o);
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}
