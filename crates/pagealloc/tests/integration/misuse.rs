//! The misuse catalogue: every way a caller can get the API wrong, each checked
//! to return its typed error naming the pfn (or range, node, order, setting) and
//! to leave the allocator exactly as it was: `check_invariants` holds and
//! NR_FREE_PAGES, the census, buddyinfo and the per-CPU counts are identical
//! before and after. Each class runs with per-CPU lists and front caches on, and
//! with every request going straight to the buddy lists.

use pagealloc::{
    AllocError, Config, ConfigError, FreeError, Gfp, PageAllocator, PageStateError, Pfn, WaitError, ZoneCensus,
    MAX_ORDER, PAGEBLOCK_PAGES,
};
use std::time::Duration;

/// Everything misuse must not change.
#[derive(Debug, PartialEq, Eq)]
struct Snap {
    nr_free: u64,
    census: ZoneCensus,
    buddyinfo: String,
    pcp: Vec<u32>,
}

fn snap(a: &PageAllocator) -> Snap {
    a.check_invariants().unwrap();
    Snap {
        nr_free: a.nr_free_pages(),
        census: a.census(),
        buddyinfo: a.stats().buddyinfo().to_string(),
        pcp: a.stats().pcp_report().iter().map(|r| r.count).collect(),
    }
}

/// Run `misuse` on an allocator set up by `setup`, for each configuration, and
/// check it changed nothing.
fn catalogue<S>(setup: impl Fn(&PageAllocator) -> S, misuse: impl Fn(&PageAllocator, &S)) {
    let configs = [Config::small(16 << 20).nr_cpus(Some(2)), Config::small(16 << 20).pcp_lists(false)];
    for cfg in configs {
        let a = PageAllocator::new(cfg).unwrap();
        let s = setup(&a);
        let before = snap(&a);
        misuse(&a, &s);
        assert_eq!(snap(&a), before, "misuse changed the allocator's state");
    }
}

fn alloc(a: &PageAllocator, order: u32) -> Pfn {
    a.alloc_pages(Gfp::KERNEL, order).unwrap()
}

#[test]
fn double_free() {
    catalogue(
        |a| {
            let (p0, p3) = (alloc(a, 0), alloc(a, 3));
            a.free_pages(p0, 0).unwrap();
            a.free_pages(p3, 3).unwrap();
            (p0, p3)
        },
        |a, &(p0, p3)| {
            assert_eq!(a.free_pages(p0, 0), Err(FreeError::DoubleFree { pfn: p0 }));
            assert_eq!(a.free_pages(p3, 3), Err(FreeError::DoubleFree { pfn: p3 }));
        },
    );
}

#[test]
fn wrong_order() {
    catalogue(
        |a| alloc(a, 2),
        |a, &p| {
            assert_eq!(a.free_pages(p, 1), Err(FreeError::WrongOrder { pfn: p, order: 1, actual: 2 }));
            assert_eq!(a.free_pages(p, 0), Err(FreeError::WrongOrder { pfn: p, order: 0, actual: 2 }));
        },
    );
}

#[test]
fn misaligned() {
    catalogue(
        |a| alloc(a, 2),
        |a, &p| {
            let q = p.add(1);
            assert_eq!(a.free_pages(q, 1), Err(FreeError::Misaligned { pfn: q, order: 1 }));
            let q = p.add(2);
            assert_eq!(a.free_pages(q, 2), Err(FreeError::Misaligned { pfn: q, order: 2 }));
        },
    );
}

#[test]
fn out_of_range_and_invalid_order_or_node() {
    catalogue(
        |a| alloc(a, 0),
        |a, &p| {
            let n = a.nr_pages();
            for q in [Pfn::new(n), Pfn::new(n + 12345), Pfn::MAX] {
                assert_eq!(a.free_pages(q, 0), Err(FreeError::OutOfRange { pfn: q, nr_pages: n }));
            }
            assert_eq!(a.free_pages(p, MAX_ORDER + 1), Err(FreeError::InvalidOrder { pfn: p, order: MAX_ORDER + 1 }));
            assert_eq!(a.free_pages(p, u32::MAX), Err(FreeError::InvalidOrder { pfn: p, order: u32::MAX }));
            assert_eq!(
                a.alloc_pages(Gfp::KERNEL, MAX_ORDER + 1),
                Err(AllocError::InvalidOrder { order: MAX_ORDER + 1 })
            );
            assert_eq!(
                a.alloc_pages_node(pagealloc::NodeId(7), Gfp::KERNEL, 0),
                Err(AllocError::InvalidNode { nid: 7 })
            );
        },
    );
}

#[test]
fn never_allocated() {
    // A page nobody ever allocated is free, so it is refused as free (the
    // allocator cannot tell "freed before" from "never handed out").
    catalogue(
        |a| Pfn::new(a.nr_pages() - 100),
        |a, &p| {
            let e = a.free_pages(p, 0).unwrap_err();
            assert!(matches!(e, FreeError::DoubleFree { pfn } | FreeError::NotAllocated { pfn } if pfn == p), "{e:?}");
            assert_eq!(e.pfn(), p);
        },
    );
}

#[test]
fn inside_another_block() {
    catalogue(
        |a| alloc(a, 3),
        |a, &p| {
            for (off, order) in [(1, 0), (4, 2), (6, 1), (7, 0)] {
                let q = p.add(off);
                assert_eq!(a.free_pages(q, order), Err(FreeError::InsideBlock { pfn: q, head: p }));
            }
        },
    );
}

#[test]
fn free_while_locked() {
    catalogue(
        |a| {
            let p = alloc(a, 1);
            a.page_locks().lock_page(p).unwrap();
            p
        },
        |a, &p| {
            assert_eq!(a.free_pages(p, 1), Err(FreeError::Locked { pfn: p }));
            assert!(a.page_locks().page_locked_racy(p));
        },
    );
}

#[test]
fn free_under_writeback() {
    catalogue(
        |a| {
            let p = alloc(a, 0);
            assert_eq!(a.page_locks().set_page_writeback(p), Ok(true));
            p
        },
        |a, &p| {
            assert_eq!(a.free_pages(p, 0), Err(FreeError::Writeback { pfn: p }));
            let e = a.free_pages_bulk(&[p]).unwrap_err();
            assert_eq!(e.rejected, vec![(0, FreeError::Writeback { pfn: p })]);
            assert_eq!(a.page_locks().set_page_writeback(p), Ok(false), "already under writeback");
        },
    );
}

#[test]
fn unlock_an_unlocked_page() {
    catalogue(
        |a| {
            let p = alloc(a, 0);
            let free = alloc(a, 0);
            a.free_pages(free, 0).unwrap();
            (p, free)
        },
        |a, &(p, free)| {
            assert_eq!(a.page_locks().unlock_page(p), Err(PageStateError::NotLocked { pfn: p }));
            assert_eq!(a.page_locks().unlock_page_uptodate(p), Err(PageStateError::NotLocked { pfn: p }));
            assert_eq!(a.page_locks().unlock_page(free), Err(PageStateError::NotAllocated { pfn: free }));
            let oor = Pfn::new(a.nr_pages());
            assert_eq!(a.page_locks().unlock_page(oor), Err(PageStateError::OutOfRange { pfn: oor }));
            assert!(!a.page_locks().page_uptodate(p), "a refused unlock_page_uptodate must not set uptodate");
        },
    );
}

#[test]
fn end_writeback_without_writeback() {
    catalogue(
        |a| alloc(a, 1),
        |a, &p| {
            assert_eq!(a.page_locks().end_page_writeback(p), Err(PageStateError::NotWriteback { pfn: p }));
            let tail = p.add(1);
            assert_eq!(a.page_locks().end_page_writeback(tail), Err(PageStateError::NotAllocated { pfn: tail }));
        },
    );
}

#[test]
fn bulk_free_with_bad_entries_changes_nothing() {
    catalogue(
        |a| {
            let head = alloc(a, 2);
            let locked = alloc(a, 0);
            a.page_locks().lock_page(locked).unwrap();
            let freed = alloc(a, 0);
            a.free_pages(freed, 0).unwrap();
            (head, locked, freed)
        },
        |a, &(head, locked, freed)| {
            let n = a.nr_pages();
            let list = [Pfn::new(n), head.add(1), freed, head, locked, Pfn::MAX];
            let e = a.free_pages_bulk(&list).unwrap_err();
            assert_eq!(
                e.rejected,
                vec![
                    (0, FreeError::OutOfRange { pfn: Pfn::new(n), nr_pages: n }),
                    (1, FreeError::InsideBlock { pfn: head.add(1), head }),
                    (2, FreeError::DoubleFree { pfn: freed }),
                    (3, FreeError::WrongOrder { pfn: head, order: 0, actual: 2 }),
                    (4, FreeError::Locked { pfn: locked }),
                    (5, FreeError::OutOfRange { pfn: Pfn::MAX, nr_pages: n }),
                ]
            );
            // Populated slots of a bulk allocation are never read or freed, even
            // when they hold nonsense; a full slice allocates nothing.
            let mut slots = [Some(Pfn::MAX), Some(Pfn::new(n)), Some(head)];
            assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut slots), 3);
            assert_eq!(slots, [Some(Pfn::MAX), Some(Pfn::new(n)), Some(head)]);
            assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut []), 0);
        },
    );
}

#[test]
fn bulk_free_mixed_frees_exactly_the_valid_entries() {
    let a = PageAllocator::new(Config::small(16 << 20)).unwrap();
    let good: Vec<Pfn> = (0..8).map(|_| alloc(&a, 0)).collect();
    let before = a.census().allocated;
    let mut list = good.clone();
    list.insert(3, Pfn::new(a.nr_pages() + 1));
    list.push(good[0]); // a duplicate: the second copy is a double free
    let e = a.free_pages_bulk(&list).unwrap_err();
    assert_eq!(e.rejected.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3, 9]);
    assert_eq!(e.rejected[1].1, FreeError::DoubleFree { pfn: good[0] });
    assert_eq!(a.census().allocated, before - 8);
    a.check_invariants().unwrap();
}

#[test]
fn isolate_a_range_twice() {
    catalogue(
        |a| a.contig().isolate_range(Pfn::new(PAGEBLOCK_PAGES), PAGEBLOCK_PAGES).unwrap(),
        |a, ()| {
            let b = Pfn::new(PAGEBLOCK_PAGES);
            assert_eq!(a.contig().isolate_range(b, PAGEBLOCK_PAGES), Err(PageStateError::AlreadyIsolated { pfn: b }));
            // A wider range that includes the block: refused as a whole, the
            // block before it stays unisolated.
            assert_eq!(
                a.contig().isolate_range(Pfn::new(10), 3 * PAGEBLOCK_PAGES),
                Err(PageStateError::AlreadyIsolated { pfn: b })
            );
            assert!(!a.contig().test_pages_isolated(Pfn::new(0), PAGEBLOCK_PAGES));
        },
    );
}

#[test]
fn undo_an_isolation_not_made() {
    catalogue(
        |a| a.contig().isolate_range(Pfn::new(2 * PAGEBLOCK_PAGES), PAGEBLOCK_PAGES).unwrap(),
        |a, ()| {
            assert_eq!(
                a.contig().undo_isolate_range(Pfn::new(0), 10),
                Err(PageStateError::NotIsolated { pfn: Pfn::new(0) })
            );
            // Partly isolated: refused as a whole, the isolated block stays so.
            let b = Pfn::new(PAGEBLOCK_PAGES);
            assert_eq!(
                a.contig().undo_isolate_range(b, 2 * PAGEBLOCK_PAGES),
                Err(PageStateError::NotIsolated { pfn: b })
            );
            assert!(a.contig().test_pages_isolated(Pfn::new(2 * PAGEBLOCK_PAGES), PAGEBLOCK_PAGES));
        },
    );
}

#[test]
fn bad_ranges() {
    catalogue(
        |_| (),
        |a, ()| {
            let n = a.nr_pages();
            for (s, nr) in [(0, 0), (n - 1, 2), (n, 1), (5, u64::MAX)] {
                let s = Pfn::new(s);
                assert_eq!(a.contig().isolate_range(s, nr), Err(PageStateError::BadRange { pfn: s }));
                assert_eq!(a.contig().undo_isolate_range(s, nr), Err(PageStateError::BadRange { pfn: s }));
                assert!(!a.contig().test_pages_isolated(s, nr));
            }
            assert!(a.contig().alloc_contig_pages(0, Gfp::KERNEL).is_err());
            assert!(a.contig().alloc_contig_pages(n + 1, Gfp::KERNEL).is_err());
        },
    );
    // A range crossing from the Normal into the Movable zone.
    let a = PageAllocator::new(Config::small(16 << 20).movable_zone_bytes(4 << 20)).unwrap();
    let s = Pfn::new(a.nr_pages() - 4 * 256 - 10);
    let before = snap(&a);
    assert_eq!(a.contig().isolate_range(s, 20), Err(PageStateError::BadRange { pfn: s }));
    assert_eq!(snap(&a), before);
}

#[test]
fn lock_or_mark_a_page_that_is_not_allocated() {
    catalogue(
        |a| {
            let head = alloc(a, 2);
            let free = alloc(a, 0);
            a.free_pages(free, 0).unwrap();
            (head, free)
        },
        |a, &(head, free)| {
            let tail = head.add(1);
            let oor = Pfn::new(a.nr_pages() + 3);
            for (p, want) in [
                (free, PageStateError::NotAllocated { pfn: free }),
                (tail, PageStateError::NotAllocated { pfn: tail }),
                (oor, PageStateError::OutOfRange { pfn: oor }),
            ] {
                assert_eq!(a.page_locks().lock_page(p), Err(want));
                assert!(!a.page_locks().trylock_page(p));
                assert_eq!(a.page_locks().lock_page_timeout(p, Duration::from_millis(1)), Err(WaitError::State(want)));
                assert_eq!(a.page_locks().wait_on_page_locked(p), Err(want));
                assert_eq!(a.page_locks().wait_on_page_writeback(p), Err(want));
                assert_eq!(a.page_locks().set_page_writeback(p), Err(want));
                assert_eq!(a.page_locks().set_page_uptodate(p), Err(want));
                assert_eq!(a.page_locks().clear_page_uptodate(p), Err(want));
                assert!(a.page_locks().lock_page_guard(p).is_err());
                assert!(!a.page_locks().page_locked_racy(p) && !a.page_locks().page_uptodate(p));
            }
        },
    );
}

#[test]
fn configs_that_cannot_work() {
    let base = || Config::small(8 << 20);
    let cases: Vec<(Config, ConfigError)> = vec![
        (base().arena_bytes((8 << 20) + 1), ConfigError::ArenaNotPageMultiple { bytes: (8 << 20) + 1 }),
        (base().arena_bytes(1 << 20), ConfigError::ArenaTooSmall { bytes: 1 << 20, min: 2 << 20 }),
        (base().arena_bytes(1 << 46), ConfigError::ArenaTooLarge { bytes: 1 << 46 }),
        (base().nodes(0), ConfigError::TooManyNodes { nodes: 0, pageblocks: 4 }),
        (base().nodes(5), ConfigError::TooManyNodes { nodes: 5, pageblocks: 4 }),
        (base().arena_bytes((8 << 20) + 4096), ConfigError::ArenaNotPageblockMultiple { bytes: (8 << 20) + 4096 }),
        (base().nodes(u32::MAX), ConfigError::TooManyNodes { nodes: u32::MAX, pageblocks: 4 }),
    ];
    // ConfigError has no PartialEq (its Mmap variant carries an io::Error): compare
    // what Debug prints, which shows every field.
    for (cfg, want) in cases {
        let got = PageAllocator::new(cfg).err();
        assert_eq!(format!("{got:?}"), format!("{:?}", Some(want)));
    }
    let invalid = [
        (base().watermark_scale_factor(0), "watermark_scale_factor"),
        (base().watermark_scale_factor(3001), "watermark_scale_factor"),
        (base().lowmem_reserve_ratio(0), "lowmem_reserve_ratio"),
        (base().percpu_pagelist_high_fraction(7), "percpu_pagelist_high_fraction"),
        (base().nr_cpus(Some(0)), "nr_cpus"),
        (base().pcp_batch(Some(0)), "pcp_batch"),
        // Values that used to panic or abort while building the allocator.
        (base().nr_cpus(Some(usize::MAX)), "nr_cpus"),
        (base().nr_cpus(Some(1 << 40)), "nr_cpus"),
        (base().pcp_batch(Some(u32::MAX)), "pcp_batch"),
        (base().min_free_kbytes(Some(u64::MAX)), "min_free_kbytes"),
        (base().min_free_kbytes(Some((8 << 10) + 1)), "min_free_kbytes"),
        (Config::small(256 << 20).nodes(128), "nodes"),
    ];
    for (cfg, field) in invalid {
        match PageAllocator::new(cfg) {
            Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected Invalid, got {:?}", other.err()),
        }
    }
    match PageAllocator::new(base().movable_zone_bytes(8 << 20)) {
        Err(ConfigError::EmptyZone { nid: 0, zone: "Normal", .. }) => {}
        other => panic!("a Movable zone taking the whole node: {:?}", other.err()),
    }
}
