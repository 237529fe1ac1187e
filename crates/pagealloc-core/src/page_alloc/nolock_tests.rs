//! Deterministic tests of the no-lock paths: with the locks held by the
//! calling thread (as when a signal handler interrupts its own thread inside
//! the allocator), allocation reports `WouldBlock` and frees are parked on
//! the deferred list, counted by the census and checked by the invariants,
//! until the next locked free empties it.

use crate::page::flags;
use crate::types::MAX_ORDER;
use crate::vmevent::VmEvent;
use crate::*;

fn small() -> FrameAllocator {
    FrameAllocator::new(Config::small(16 << 20).nr_cpus(Some(1))).unwrap()
}

#[test]
fn nolock_alloc_free_roundtrip_every_order() {
    let a = small();
    for order in 0..=MAX_ORDER {
        let p = a.alloc_nolock(Gfp::KERNEL, order).unwrap();
        assert_eq!(p.as_u64() % (1u64 << order), 0);
        a.check_invariants().unwrap();
        assert_eq!(a.core.census().allocated, 1 << order);
        a.free_nolock(p, order).unwrap();
        // Misuse is a locked free's: typed, nothing changed.
        assert!(matches!(a.free_nolock(p, order), Err(FreeError::DoubleFree { .. })));
        a.check_invariants().unwrap();
    }
    assert_eq!(a.core.census().allocated, 0);
    assert_eq!(a.core.event_totals()[VmEvent::NolockAlloc as usize], u64::from(MAX_ORDER) + 1);
    assert_eq!(a.core.event_totals()[VmEvent::NolockFree as usize], u64::from(MAX_ORDER) + 1);
    assert_eq!(a.core.event_totals()[VmEvent::NolockDeferred as usize], 0);
    assert!(matches!(a.alloc_nolock(Gfp::KERNEL, MAX_ORDER + 1), Err(AllocError::InvalidOrder { .. })));
}

#[test]
fn nolock_with_every_lock_held_would_block_and_defers() {
    let a = small();
    let c = &a.core;
    // Pages to free later, from the locked API (one order-0, one order-3).
    let p0 = a.alloc(Gfp::KERNEL, 0).unwrap();
    let p3 = a.alloc(Gfp::KERNEL, 3).unwrap();
    let managed = a.managed_pages();
    {
        // This thread holds every per-CPU lock and every zone lock: what a
        // handler that interrupted a drain would find.
        let pcps: Vec<_> = c.pcp.iter().map(|p| p.lists.lock()).collect();
        let zones: Vec<_> = c.zones.iter().map(|z| z.lock(&c.mm)).collect();
        assert!(matches!(a.alloc_nolock(Gfp::KERNEL, 0), Err(AllocError::WouldBlock { order: 0 })));
        a.free_nolock(p0, 0).unwrap();
        a.free_nolock(p3, 3).unwrap();
        assert!(matches!(a.free_nolock(p3, 3), Err(FreeError::DoubleFree { .. })));
        assert_eq!(c.mm.page(p3.as_u64()).flags(), flags::PCP);
        drop(zones);
        drop(pcps);
    }
    assert!(!c.nolock.deferred.is_empty());
    assert_eq!(a.core.event_totals()[VmEvent::NolockDeferred as usize], 2);
    assert!(a.core.event_totals()[VmEvent::NolockTrylockFail as usize] >= 3);
    assert_eq!(a.core.event_totals()[VmEvent::NolockAllocFail as usize], 1);
    // Parked blocks are counted with the per-CPU pages and checked.
    a.check_invariants().unwrap();
    let cs = a.core.census();
    assert_eq!(cs.allocated, 0);
    assert!(cs.pcp >= 9);
    assert_eq!(cs.free + cs.pcp, managed);
    // The next locked free empties the list.
    let q = a.alloc(Gfp::KERNEL, 1).unwrap();
    a.free(q, 1).unwrap();
    assert!(c.nolock.deferred.is_empty());
    a.check_invariants().unwrap();
    a.drain();
    assert_eq!(a.nr_free_pages(), managed);
    a.check_invariants().unwrap();
}

#[test]
fn invariants_catch_a_corrupt_deferred_list() {
    let a = small();
    let c = &a.core;
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    {
        let _z: Vec<_> = c.zones.iter().map(|z| z.lock(&c.mm)).collect();
        let _l: Vec<_> = c.pcp.iter().map(|p| p.lists.lock()).collect();
        a.free_nolock(p, 0).unwrap();
    }
    // A parked block that lost its PCP mark is reported with its pfn.
    c.mm.page(p.as_u64()).set_flags(flags::HEAD);
    let e = a.check_invariants().unwrap_err();
    assert_eq!(e.pfn, p, "{e}");
    c.mm.page(p.as_u64()).set_flags(flags::PCP);
    // A cycle is reported too.
    c.mm.page(p.as_u64()).next.set(p.as_u64() as u32);
    assert!(a.check_invariants().is_err());
    c.mm.page(p.as_u64()).next.set(crate::page::NIL);
    a.check_invariants().unwrap();
    a.core.drain_deferred();
    a.check_invariants().unwrap();
    assert_eq!(a.core.census().allocated, 0);
}

#[cfg(feature = "seed-variants")]
#[test]
fn nolock_free_wakes_waiters_only_after_the_drain() {
    // The old design (no waiters bit) wakes on every free: a no-lock free
    // parks the block so the drain can wake, and nothing is lost.
    let a = FrameAllocator::new(Config::small(16 << 20).nr_cpus(Some(1)).page_lock_waiters_bit(false)).unwrap();
    let p = a.alloc(Gfp::KERNEL, 2).unwrap();
    a.free_nolock(p, 2).unwrap();
    assert_eq!(a.core.event_totals()[VmEvent::NolockDeferred as usize], 1);
    a.check_invariants().unwrap();
    a.core.drain_deferred();
    a.check_invariants().unwrap();
    assert_eq!(a.core.census().allocated, 0);
}

#[test]
fn nolock_paths_never_touch_the_thread_front_cache() {
    // Registering a thread's front cache allocates (and a handler may have
    // interrupted a front-cache operation): a thread that only makes no-lock
    // calls must never register one.
    let a = small();
    assert_eq!(a.core.fronts.nr_slots(), 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut got = Vec::new();
            for i in 0..200u32 {
                got.push((a.alloc_nolock(Gfp::KERNEL, i % 4).unwrap(), i % 4));
            }
            for (p, o) in got {
                a.free_nolock(p, o).unwrap();
            }
            assert!(a.free_nolock(Pfn::new(1 << 40), 0).is_err());
        });
    });
    assert_eq!(a.core.fronts.nr_slots(), 0, "a no-lock call registered a front cache");
    a.check_invariants().unwrap();
    assert_eq!(a.core.census().allocated, 0);
    // The normal API does register one (the check above can fail).
    std::thread::scope(|s| {
        s.spawn(|| {
            let p = a.alloc(Gfp::KERNEL, 0).unwrap();
            a.free(p, 0).unwrap();
        });
    });
    assert_eq!(a.core.fronts.nr_slots(), 1);
}
