//! Unit tests of the allocator as a whole (small arenas, no backing unless noted).

use crate::*;
use pagealloc_core::types::ZoneIdx;

fn small(mb: u64) -> PageAllocator {
    PageAllocator::new(Config::small(mb << 20)).unwrap()
}

#[test]
fn fresh_arena_is_all_max_order_blocks() {
    let a = small(16);
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), 4096);
    assert_eq!(a.managed_pages(), 4096);
}

#[test]
fn alloc_free_every_order_restores_the_arena() {
    let a = small(16);
    for order in 0..=MAX_ORDER {
        let p = a.alloc_pages(Gfp::KERNEL, order).unwrap();
        assert_eq!(p.as_u64() % (1 << order), 0);
        a.check_invariants().unwrap();
        a.free_pages(p, order).unwrap();
        a.check_invariants().unwrap();
    }
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), 4096);
}

#[test]
fn exhaustion_then_free_all_coalesces() {
    let a = PageAllocator::new(Config::small(8 << 20).min_free_kbytes(Some(0))).unwrap();
    let mut got = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) {
        got.push(p);
    }
    assert_eq!(got.len() as u64, a.managed_pages());
    assert!(matches!(a.alloc_pages(Gfp::MOVABLE, 0), Err(AllocError::NoMemory { order: 0 })));
    a.check_invariants().unwrap();
    for p in got {
        a.free_pages(p, 0).unwrap();
    }
    a.check_invariants().unwrap();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

#[test]
fn bad_frees_are_typed_and_harmless() {
    let a = small(8);
    let p = a.alloc_pages(Gfp::KERNEL, 2).unwrap();
    let q = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    a.drain_all_pages();
    let free_before = a.nr_free_pages();
    assert_eq!(
        a.free_pages(Pfn::new(1 << 40), 0),
        Err(FreeError::OutOfRange { pfn: Pfn::new(1 << 40), nr_pages: 2048 })
    );
    assert_eq!(a.free_pages(p, 11), Err(FreeError::InvalidOrder { pfn: p, order: 11 }));
    assert_eq!(a.free_pages(p.add(1), 1), Err(FreeError::Misaligned { pfn: p.add(1), order: 1 }));
    assert_eq!(a.free_pages(p, 1), Err(FreeError::WrongOrder { pfn: p, order: 1, actual: 2 }));
    assert_eq!(a.free_pages(p.add(2), 0), Err(FreeError::InsideBlock { pfn: p.add(2), head: p }));
    a.free_pages(q, 0).unwrap();
    assert_eq!(a.free_pages(q, 0), Err(FreeError::DoubleFree { pfn: q }));
    // A pfn in the middle of a big free block: also already free.
    assert_eq!(a.free_pages(Pfn::new(1500), 0), Err(FreeError::DoubleFree { pfn: Pfn::new(1500) }));
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), free_before + 1);
    a.check_invariants().unwrap();
    a.free_pages(p, 2).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn config_errors_explain_themselves() {
    assert!(matches!(PageAllocator::new(Config::small(1 << 20)), Err(ConfigError::ArenaTooSmall { .. })));
    assert!(matches!(PageAllocator::new(Config::small((2 << 20) + 1)), Err(ConfigError::ArenaNotPageMultiple { .. })));
    assert!(matches!(PageAllocator::new(Config::small(4 << 20).nodes(3)), Err(ConfigError::TooManyNodes { .. })));
    assert!(matches!(PageAllocator::new(Config::small(4 << 20).nodes(0)), Err(ConfigError::TooManyNodes { .. })));
    let e = PageAllocator::new(Config::small(4 << 20).movable_zone_bytes(4 << 20)).err().unwrap();
    assert!(matches!(e, ConfigError::EmptyZone { .. }));
    assert!(e.to_string().contains("Movable"), "{e}");
}

#[test]
fn movable_zone_serves_only_movable_requests() {
    let a = PageAllocator::new(Config::small(16 << 20).movable_zone_bytes(4 << 20).min_free_kbytes(Some(0))).unwrap();
    let movable_start = 3 * 1024;
    let mut kernel = Vec::new();
    while let Ok(p) = a.alloc_pages(Gfp::KERNEL, 0) {
        assert!(p.as_u64() < movable_start, "unmovable page {p:?} in the Movable zone");
        kernel.push(p);
    }
    let m = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    assert!(m.as_u64() >= movable_start);
    a.check_invariants().unwrap();
}

#[test]
fn nodes_split_the_arena_and_thisnode_stays_home() {
    let a = PageAllocator::new(Config::small(16 << 20).nodes(2).min_free_kbytes(Some(0))).unwrap();
    assert_eq!(a.nr_nodes(), 2);
    let p = a.alloc_pages_node(NodeId(1), Gfp::KERNEL, 0).unwrap();
    assert_eq!(a.pfn_to_nid(p), Some(NodeId(1)));
    let mut n0 = Vec::new();
    while let Ok(p) = a.alloc_pages_node(NodeId(0), Gfp::KERNEL | Gfp::THISNODE, 0) {
        assert_eq!(a.pfn_to_nid(p), Some(NodeId(0)));
        n0.push(p);
    }
    // Without THISNODE the request spills to node 1.
    let spill = a.alloc_pages_node(NodeId(0), Gfp::KERNEL, 0).unwrap();
    assert_eq!(a.pfn_to_nid(spill), Some(NodeId(1)));
    assert!(matches!(a.alloc_pages_node(NodeId(7), Gfp::KERNEL, 0), Err(AllocError::InvalidNode { nid: 7 })));
    a.check_invariants().unwrap();
}

#[test]
fn fallback_claims_whole_blocks_for_unmovable() {
    let a = small(8);
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    // The first unmovable request claims a whole movable block (all blocks start movable).
    let z = &a.core.zones[ZoneIdx::FIRST];
    assert_eq!(z.pageblock_mt_racy(p.as_u64()), MigrateType::Unmovable);
    let m = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    assert_ne!(m.as_u64() / PAGEBLOCK_PAGES, p.as_u64() / PAGEBLOCK_PAGES);
    a.check_invariants().unwrap();
    a.free_pages(p, 0).unwrap();
    a.free_pages(m, 0).unwrap();
    a.check_invariants().unwrap();
}

#[test]
fn zeroed_allocation_is_zero() {
    let a = PageAllocator::new(Config::default().arena_bytes(8 << 20)).unwrap();
    let p = a.alloc_pages(Gfp::KERNEL, 1).unwrap();
    let ptr = a.page_address(p).unwrap();
    // SAFETY: we own the two frames at ptr.
    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0xAB, 2 * PAGE_SIZE) };
    a.free_pages(p, 1).unwrap();
    let q = a.alloc_pages(Gfp::KERNEL | Gfp::ZERO, 1).unwrap();
    let ptr = a.page_address(q).unwrap();
    // SAFETY: we own the two frames at ptr.
    let s = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), 2 * PAGE_SIZE) };
    assert!(s.iter().all(|&b| b == 0));
}

#[test]
fn no_backing_has_no_addresses() {
    let a = small(4);
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    assert!(a.page_address(p).is_none());
}

#[test]
fn highatomic_reserve_is_made_under_pressure_and_given_back() {
    let a = PageAllocator::new(Config::small(32 << 20).min_free_kbytes(Some(4096))).unwrap();
    let z = &a.core.zones[ZoneIdx::FIRST];
    let mut v = Vec::new();
    // Ordinary requests stop at the min watermark...
    while let Ok(q) = a.alloc_pages(Gfp::KERNEL, 0) {
        v.push(q);
    }
    assert!(a.nr_free_pages() <= z.wmark[0] + 1);
    // ...a high-priority order-2 request dips below it and reserves its pageblock.
    let p = a.alloc_pages(Gfp::ATOMIC, 2).unwrap();
    assert_eq!(z.pageblock_mt_racy(p.as_u64()), MigrateType::HighAtomic);
    assert!(z.stats.nr_reserved_highatomic.get_racy() >= PAGEBLOCK_PAGES);
    a.check_invariants().unwrap();
    // Exhausting high-priority order-0 requests gives the reserve back before failing.
    while let Ok(q) = a.alloc_pages(Gfp::ATOMIC, 0) {
        v.push(q);
    }
    a.check_invariants().unwrap();
    let ha_free: u64 = z.stats.free_blocks.iter().map(|o| o[MigrateType::HighAtomic.index()].get_racy()).sum();
    assert_eq!(ha_free, 0);
    for q in v {
        a.free_pages(q, 0).unwrap();
    }
    a.free_pages(p, 2).unwrap();
    a.check_invariants().unwrap();
}

#[cfg(loom)]
mod loom_models {
    //! Whole-allocator models on a one-pageblock arena: the per-CPU lock's
    //! try-lock fallback, remote drains and bulk operations racing frees. Each
    //! ends with the invariants and conservation.
    use crate::*;

    fn tiny() -> PageAllocator {
        PageAllocator::new(Config::small(2 << 20).nr_cpus(Some(1)).min_free_kbytes(Some(0))).unwrap()
    }

    fn whole(a: &PageAllocator) {
        a.check_invariants().unwrap();
        a.drain_all_pages();
        a.check_invariants().unwrap();
        assert_eq!(a.nr_free_pages(), a.managed_pages());
    }

    #[test]
    fn pcp_alloc_free_race_remote_drain() {
        loom::model(|| {
            let a = tiny();
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                let p = b.alloc_pages(Gfp::KERNEL, 0).unwrap();
                b.free_pages(p, 0).unwrap();
            });
            a.drain_all_pages();
            t.join().unwrap();
            whole(&a);
        });
    }

    #[test]
    fn two_cpus_share_one_pcp_and_fall_back() {
        loom::model(|| {
            let a = tiny();
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                let p = b.alloc_pages(Gfp::MOVABLE, 0).unwrap();
                b.free_pages(p, 0).unwrap();
            });
            let q = a.alloc_pages(Gfp::MOVABLE, 1).unwrap();
            a.free_pages(q, 1).unwrap();
            t.join().unwrap();
            whole(&a);
        });
    }

    /// Memory given at run time racing an allocation and a raw free of a
    /// pfn in the hole: the raw free is refused whichever runs first (a
    /// hole page has no mark; an added one is free), and conservation is
    /// exact with the hole's pages counted once.
    #[test]
    fn add_free_memory_races_alloc_and_a_raw_free() {
        // The addition's merges and the whole-arena checks take more
        // branches than loom's default allows.
        let mut b = loom::model::Builder::new();
        b.max_branches = 20_000;
        b.check(|| {
            let cfg = Config::small(2 << 20).nr_cpus(Some(1)).min_free_kbytes(Some(0));
            let a = PageAllocator::new(cfg.holes(vec![(Pfn::new(256), 256)])).unwrap();
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                assert!(b.free_pages(Pfn::new(300), 0).is_err());
                let p = b.alloc_pages(Gfp::KERNEL, 0).unwrap();
                b.free_pages(p, 0).unwrap();
            });
            a.add_free_memory(Pfn::new(256), 256).unwrap();
            t.join().unwrap();
            whole(&a);
            assert_eq!(a.managed_pages(), 512);
        });
    }

    /// A `PageArray`'s release (a plain store of `PCP` a page, no claim)
    /// racing a raw free, a lock and a reference of one of its pfns: none of
    /// them may act on the page, whichever order they run in, and the page
    /// is back exactly once.
    #[test]
    fn page_array_release_races_pfn_calls() {
        loom::model(|| {
            let a = tiny();
            let mut arr = a.page_array(2).unwrap();
            assert_eq!(arr.fill(Gfp::KERNEL), 2);
            let pfn = arr.get(1).unwrap();
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                // Before the release these are refused outright; after it
                // the page is free (PCP), refused as well.
                assert!(b.free_pages(pfn, 0).is_err());
                assert!(!b.page_locks().trylock_page(pfn));
                assert!(b.get_page(pfn).is_err());
            });
            arr.release();
            t.join().unwrap();
            drop(arr);
            whole(&a);
        });
    }

    /// A `Pages` handle's drop (a plain store of `PCP`, no claim) racing a
    /// stranger's raw free, lock, unlock and reference of its pfn: each is
    /// refused (`Owned` before the drop, a free page after it) whichever
    /// order they run in, no lock bit outlives the drop, and the page is
    /// back exactly once.
    #[test]
    fn owned_drop_races_pfn_calls() {
        loom::model(|| {
            let a = tiny();
            let p = a.alloc(Gfp::KERNEL, 0).unwrap();
            let pfn = p.pfn();
            let b = a.clone();
            let t = loom::thread::spawn(move || {
                assert!(b.free_pages(pfn, 0).is_err());
                assert!(!b.page_locks().trylock_page(pfn));
                assert!(b.page_locks().unlock_page(pfn).is_err());
                assert!(b.get_page(pfn).is_err());
            });
            drop(p);
            t.join().unwrap();
            assert!(!a.page_locks().page_locked_racy(pfn));
            whole(&a);
        });
    }

    #[test]
    fn bulk_alloc_races_bulk_free() {
        loom::model(|| {
            let a = tiny();
            let mut mine = [None; 2];
            assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut mine), 2);
            let b = a.clone();
            let pfns: Vec<Pfn> = mine.iter().map(|p| p.unwrap()).collect();
            let t = loom::thread::spawn(move || b.free_pages_bulk(&pfns).unwrap());
            let mut more = [None; 2];
            assert_eq!(a.alloc_pages_bulk(Gfp::KERNEL, &mut more), 2);
            t.join().unwrap();
            a.free_pages_bulk(&more.map(|p| p.unwrap())).unwrap();
            whole(&a);
        });
    }

    /// A stale free of an order-1 block racing its owner's free and two
    /// order-0 allocations at the same pfns: the stale free may only free
    /// the block as it is when its claim lands (never at the order it read
    /// before), so the page after it, which the owner holds, is never handed
    /// out again. (Before the claim read the private word again, the stale
    /// free freed pfn 0 as order 1, pfn 1 with it.)
    #[test]
    fn stale_free_races_reallocation_at_another_order() {
        loom::model(|| {
            let a =
                PageAllocator::new(Config::small(2 << 20).nr_cpus(Some(1)).min_free_kbytes(Some(0)).pcp_lists(false))
                    .unwrap();
            let p = a.alloc_pages(Gfp::MOVABLE, 1).unwrap();
            let b = a.clone();
            let t = loom::thread::spawn(move || b.free_pages(p, 1).is_ok());
            let mine = a.free_pages(p, 1).is_ok();
            let x = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            let y = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            let theirs = t.join().unwrap();
            assert!(mine || theirs, "one of the two frees of the block took it");
            let z = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            let w = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            // Both frees succeeded only if the stale one landed on x, the
            // reallocated pfn, and freed it as it was (order 0): x may be
            // handed out again then, never y.
            let x_freed = mine && theirs;
            for q in [z, w] {
                assert!(q != y && (x_freed || q != x), "a held page was handed out again: {q:?} (held {x:?} {y:?})");
            }
            a.check_invariants().unwrap();
            for q in [y, z, w] {
                a.free_pages(q, 0).unwrap();
            }
            assert_eq!(a.free_pages(x, 0).is_ok(), !x_freed, "x is ours unless the stale free took it");
            assert_eq!(a.nr_free_pages(), a.managed_pages());
        });
    }

    #[test]
    fn isolation_races_frees() {
        loom::model(|| {
            let a = tiny();
            let p = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
            let b = a.clone();
            let t = loom::thread::spawn(move || b.free_pages(p, 0).unwrap());
            a.contig().isolate_range(Pfn::new(0), PAGEBLOCK_PAGES).unwrap();
            t.join().unwrap();
            // After the free and the isolation's drain, every page is free and isolated.
            a.drain_all_pages();
            assert!(a.contig().test_pages_isolated(Pfn::new(0), PAGEBLOCK_PAGES));
            a.contig().undo_isolate_range(Pfn::new(0), PAGEBLOCK_PAGES).unwrap();
            whole(&a);
        });
    }
}

/// Every layer on the smallest arena (one pageblock), small enough for Miri:
/// buddy, per-CPU lists, bulk, isolation, drains, page lock, invariants.
#[test]
fn miri_small_arena_exercises_every_path() {
    let a = PageAllocator::new(Config::small(2 << 20).nr_cpus(Some(2)).min_free_kbytes(Some(0))).unwrap();
    let big = a.alloc_pages(Gfp::KERNEL, 3).unwrap();
    let one = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let mut slots = [None, Some(one), None, None];
    assert_eq!(a.alloc_pages_bulk(Gfp::MOVABLE, &mut slots), 4);
    a.page_locks().lock_page(big).unwrap();
    assert_eq!(a.free_pages(big, 3), Err(FreeError::Locked { pfn: big }));
    a.page_locks().unlock_page(big).unwrap();
    a.free_pages(big, 3).unwrap();
    let fresh = [slots[0].unwrap(), slots[2].unwrap(), slots[3].unwrap()];
    a.free_pages_bulk(&fresh).unwrap();
    assert!(a.free_pages_bulk(&fresh).is_err());
    a.check_invariants().unwrap();
    a.contig().isolate_range(Pfn::new(0), PAGEBLOCK_PAGES).unwrap();
    a.free_pages(one, 0).unwrap();
    assert!(a.contig().test_pages_isolated(Pfn::new(0), PAGEBLOCK_PAGES));
    a.contig().undo_isolate_range(Pfn::new(0), PAGEBLOCK_PAGES).unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// The front cache's unsafe code under Miri (which runs it with symmetric
/// SeqCst fences in place of membarrier): two threads allocating and freeing
/// through their front caches race a drainer pausing every slot, and every
/// page comes back.
#[test]
fn miri_threads_front_cache_owners_race_a_drainer() {
    let a = PageAllocator::new(Config::small(2 << 20).nr_cpus(Some(2)).min_free_kbytes(Some(0))).unwrap();
    assert!(a.core.front_on, "the front cache runs under the checkers too");
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..3 {
                    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
                    let q = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
                    a.free_pages(p, 0).unwrap();
                    a.free_pages(q, 0).unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..2 {
                a.drain_all_pages();
            }
        });
    });
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// `pgalloc_fallback_fragmenting` counts fallbacks from a block below
/// pageblock order, as the kernel's extfrag event marks `fragmenting=1`:
/// not the first unmovable request's claim of a whole order-10 block, but
/// a movable request that must take part of the unmovable pageblock once
/// the movable blocks are gone.
#[test]
fn fragmenting_fallbacks_are_those_below_pageblock_order() {
    use crate::stats::events::VmEvent;
    let a = PageAllocator::new(Config::small(8 << 20).pcp_lists(false).front_cache(false).min_free_kbytes(Some(0)))
        .unwrap();
    let frag = |a: &PageAllocator| a.stats().event_count(VmEvent::FallbackFragmenting);
    let u = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    assert_eq!(a.stats().event_count(VmEvent::FallbackClaim), 1, "a whole block claimed");
    assert_eq!(frag(&a), 0, "from order 10: not fragmenting");
    let mut live = Vec::new();
    while frag(&a) == 0 {
        match a.alloc_pages(Gfp::MOVABLE, 0) {
            Ok(p) => live.push(p),
            Err(e) => panic!("arena full before any fragmenting fallback: {e:?}"),
        }
    }
    assert_eq!(frag(&a), 1);
    let fallbacks = a.stats().event_count(VmEvent::FallbackClaim) + a.stats().event_count(VmEvent::FallbackSteal);
    assert!(fallbacks >= 2, "the fragmenting one is a fallback too: {fallbacks}");
    // Every movable order-9 block was taken first, and the unmovable
    // pageblock's remainder above pageblock order (its order-9 half) was
    // claimed whole before a smaller block was touched.
    assert!(live.len() as u64 >= 3 * PAGEBLOCK_PAGES - 1, "{}", live.len());
    for p in live {
        a.free_pages(p, 0).unwrap();
    }
    a.free_pages(u, 0).unwrap();
    a.check_invariants().unwrap();
}
