//! The promises of issue 15, each as the reproducer that used to break them:
//! safe code never gets two owners of a frame, concurrent misuse never
//! corrupts the allocator, a free never wipes a lock or loses a wakeup.
//! The races run as many-thread loops; the aliasing cases are small enough
//! for Miri (`cargo +nightly miri test -p pagealloc --test integration -- soundness::pages_`).

use pagealloc::{Config, FreeError, Gfp, PageAllocator, PageStateError, Pfn};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

fn backed(mb: u64) -> PageAllocator {
    // No reporter thread: these tests race only the threads they start.
    PageAllocator::new(
        Config::new().arena_bytes(mb << 20).nr_cpus(Some(2)).min_free_kbytes(Some(0)).page_reporting(false),
    )
    .unwrap()
}

fn whole(a: &PageAllocator) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
}

/// The raw pfn API cannot free a block a `Pages` handle owns, so the frame is
/// never handed out again while the handle's `&mut [u8]` lives.
#[test]
fn pages_handle_blocks_raw_frees_of_its_frame() {
    let a = backed(4);
    let mut p1 = a.alloc(Gfp::KERNEL, 0).unwrap();
    let pfn = p1.pfn();
    assert_eq!(a.free_pages(pfn, 0), Err(FreeError::Owned { pfn }));
    assert_eq!(a.contig().free_contig_range(pfn, 1), Err(FreeError::Owned { pfn }));
    let err = a.free_pages_bulk(&[pfn]).unwrap_err();
    assert_eq!(err.rejected, vec![(0, FreeError::Owned { pfn })]);
    let mut slots = [Some(pfn)];
    assert!(a.free_pages_bulk_slots(&mut slots).is_err());
    assert_eq!(slots[0], Some(pfn), "a refused entry stays in its slot");
    // The frame is not handed out again, zeroing or not.
    let mut p2 = a.alloc(Gfp::KERNEL | Gfp::ZERO, 0).unwrap();
    assert_ne!(p2.pfn(), pfn);
    let (x, y) = (p1.as_mut_slice().unwrap(), p2.as_mut_slice().unwrap());
    x[0] = 1;
    y[0] = 2;
    assert_eq!((x[0], y[0]), (1, 2));
    drop(p1);
    drop(p2);
    whole(&a);
}

/// An owned block's flags word is its handle's alone (which is what lets
/// the handle's free skip the claim): the pfn API refuses to lock, mark,
/// reference or free it, and says why.
#[test]
fn pages_state_is_the_handles_alone() {
    let a = backed(4);
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    let pfn = p.pfn();
    assert_eq!(a.page_locks().lock_page(pfn), Err(PageStateError::Owned { pfn }));
    assert!(!a.page_locks().trylock_page(pfn));
    assert_eq!(a.page_locks().set_page_writeback(pfn), Err(PageStateError::Owned { pfn }));
    assert!(a.get_page(pfn).is_err());
    assert!(a.page_locks().unlock_page(pfn).is_err());
    assert!(a.page_locks().page_owned_racy(pfn) && !a.page_locks().page_locked_racy(pfn));
    drop(p);
    // Freed by the handle, with no claim: the raw API now sees a free page.
    assert!(matches!(a.free_pages(pfn, 0), Err(FreeError::DoubleFree { .. })));
    whole(&a);
}

/// Handles dropped while strangers hammer their frames through every pfn
/// call that writes a flags word: no call succeeds on an owned block, no
/// bit it could set survives into the next owner, every frame comes back.
#[test]
fn owned_frees_racing_strangers_on_the_same_frames() {
    let a = Arc::new(backed(8));
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new((0..64).map(|_| Default::default()).collect());
    let strangers: Vec<_> = (0..3)
        .map(|t| {
            let (a, stop, seen) = (Arc::clone(&a), Arc::clone(&stop), Arc::clone(&seen));
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 1) % seen.len();
                    let pfn = Pfn::new(seen[i].load(Ordering::Relaxed));
                    if a.page_locks().trylock_page(pfn) {
                        // Only a raw page (the frame was freed and handed
                        // out raw meanwhile), and it stays raw while locked
                        // (a locked page is never freed).
                        assert!(!a.page_locks().page_owned_racy(pfn), "locked an owned block");
                        // Another stranger's raw unlock may beat ours.
                        let _ = a.page_locks().unlock_page(pfn);
                    }
                    let _ = a.page_locks().unlock_page(pfn);
                    let _ = a.free_pages(pfn, 0);
                    let _ = a.get_page(pfn);
                }
            })
        })
        .collect();
    let mut raw = Vec::new();
    for round in 0..20_000u64 {
        let p = a.alloc(Gfp::KERNEL, 0).unwrap();
        seen[(round % 64) as usize].store(p.pfn().as_u64(), Ordering::Relaxed);
        if round % 7 == 0 {
            // Some raw pages too, which strangers may free or lock.
            if let Ok(q) = a.alloc_pages(Gfp::KERNEL, 0) {
                raw.push(q);
            }
        }
        drop(p);
    }
    stop.store(true, Ordering::Relaxed);
    for s in strangers {
        s.join().unwrap();
    }
    for q in raw {
        // A stranger may have freed it already.
        let _ = a.free_pages(q, 0);
    }
    whole(&a);
}

/// Giving ownership up hands the block to the raw API, once.
#[test]
fn pages_into_pfn_hands_the_block_to_the_raw_api() {
    let a = backed(4);
    let p = a.alloc(Gfp::MOVABLE, 2).unwrap();
    let pfn = p.into_pfn();
    a.free_pages(pfn, 2).unwrap();
    assert!(matches!(a.free_pages(pfn, 2), Err(FreeError::DoubleFree { .. })));
    whole(&a);
}

/// A `PageArray`'s pages are refused to every raw free while it holds them,
/// so a frame it gives out as `&mut [u8]` is never handed out again; each
/// page taken out as a `Pages` handle stays owned; the release gives every
/// page back once.
#[test]
fn pages_array_blocks_raw_frees_of_its_frames() {
    let a = backed(4);
    let mut arr = a.page_array(3).unwrap();
    assert_eq!(arr.fill(Gfp::KERNEL), 3);
    let pfns: Vec<Pfn> = arr.slots().iter().map(|s| s.unwrap()).collect();
    for &pfn in &pfns {
        assert_eq!(a.free_pages(pfn, 0), Err(FreeError::Owned { pfn }));
        assert_eq!(a.contig().free_contig_range(pfn, 1), Err(FreeError::Owned { pfn }));
        assert_eq!(a.page_locks().lock_page(pfn), Err(PageStateError::NotAllocated { pfn }));
    }
    let mut slots: Vec<Option<Pfn>> = pfns.iter().map(|&p| Some(p)).collect();
    assert!(a.free_pages_bulk_slots(&mut slots).is_err());
    // None of its frames is handed out again while it holds them.
    let mut other = a.alloc(Gfp::KERNEL | Gfp::ZERO, 0).unwrap();
    assert!(!pfns.contains(&other.pfn()));
    let mut h = arr.take(1).unwrap();
    assert_eq!(a.free_pages(h.pfn(), 0), Err(FreeError::Owned { pfn: h.pfn() }));
    arr.frame_mut(0).unwrap()[0] = 1;
    h.as_mut_slice().unwrap()[0] = 2;
    other.as_mut_slice().unwrap()[0] = 3;
    assert_eq!((arr.frame(0).unwrap()[0], h.as_slice().unwrap()[0], other.as_slice().unwrap()[0]), (1, 2, 3));
    drop(arr);
    drop(h);
    drop(other);
    whole(&a);
}

/// Two threads freeing the same pfn: exactly one succeeds, every time, and
/// the counters stay right (the claim is one CAS).
#[test]
fn racing_double_frees_succeed_exactly_once() {
    let a = Arc::new(backed(8));
    let threads = 4;
    let rounds = 3000;
    let barrier = Arc::new(Barrier::new(threads));
    let target = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let wins = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (a, barrier, target, wins) = (a.clone(), barrier.clone(), target.clone(), wins.clone());
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    if t == 0 {
                        target.store(a.alloc_pages(Gfp::KERNEL, 0).unwrap().as_u64(), Ordering::SeqCst);
                    }
                    barrier.wait();
                    let p = Pfn::new(target.load(Ordering::SeqCst));
                    match a.free_pages(p, 0) {
                        Ok(()) => {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(FreeError::DoubleFree { .. } | FreeError::NotAllocated { .. }) => {}
                        Err(e) => panic!("unexpected {e}"),
                    }
                    barrier.wait();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(wins.load(Ordering::Relaxed), rounds, "each page freed exactly once");
    whole(&a);
}

/// Two concurrent bulk frees of the same slice: every page freed exactly once.
#[test]
fn racing_bulk_frees_of_one_slice_free_each_page_once() {
    let a = Arc::new(backed(8));
    for round in 0..200 {
        let mut pages = Vec::new();
        assert_eq!(a.alloc_pages_bulk_list(Gfp::MOVABLE, 40 + round % 50, &mut pages), 40 + round % 50);
        let pages = Arc::new(pages);
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (a, pages) = (a.clone(), pages.clone());
                std::thread::spawn(move || match a.free_pages_bulk(&pages) {
                    Ok(()) => 0,
                    Err(e) => e.rejected.len(),
                })
            })
            .collect();
        let rejected: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(rejected, pages.len(), "round {round}: every page rejected exactly once");
    }
    whole(&a);
}

/// A free racing `trylock_page` on the same page: never both; a lock that
/// won is never wiped, and unlocking it works.
#[test]
fn free_racing_trylock_never_both_succeed() {
    let a = Arc::new(backed(8));
    for _ in 0..2000 {
        let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let (a2, b2) = (a.clone(), barrier.clone());
        let locker = std::thread::spawn(move || {
            b2.wait();
            a2.page_locks().trylock_page(p)
        });
        barrier.wait();
        let freed = a.free_pages(p, 0);
        let locked = locker.join().unwrap();
        match (freed, locked) {
            (Ok(()), false) => {}
            (Err(FreeError::Locked { .. }), true) => {
                a.page_locks().unlock_page(p).unwrap();
                a.free_pages(p, 0).unwrap();
            }
            other => panic!("free and lock both went through or both failed: {other:?}"),
        }
    }
    whole(&a);
}

/// A queued `lock_page` waiter is never left asleep by a racing free: the
/// free is refused while the page is locked, the unlock wakes the waiter.
#[test]
fn free_racing_a_queued_waiter_keeps_the_lock_and_the_wakeup() {
    let a = Arc::new(backed(4));
    for _ in 0..200 {
        let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
        assert!(a.page_locks().trylock_page(p));
        let a2 = a.clone();
        let waiter = std::thread::spawn(move || {
            a2.page_locks().lock_page(p).unwrap();
            a2.page_locks().unlock_page(p).unwrap();
        });
        while !a.page_locks().page_locked_racy(p) {}
        std::thread::sleep(Duration::from_micros(50));
        assert_eq!(a.free_pages(p, 0), Err(FreeError::Locked { pfn: p }));
        a.page_locks().unlock_page(p).unwrap();
        waiter.join().unwrap();
        a.free_pages(p, 0).unwrap();
    }
    whole(&a);
}

/// Only a guard releases the lock it holds: a raw unlock is refused and
/// changes nothing, and the guard's drop never panics.
#[test]
fn guard_lock_cannot_be_released_by_a_raw_unlock() {
    let a = backed(4);
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    let g = a.page_locks().lock_page_guard(p).unwrap();
    assert_eq!(a.page_locks().unlock_page(p), Err(PageStateError::HeldByGuard { pfn: p }));
    assert_eq!(a.page_locks().unlock_page_uptodate(p), Err(PageStateError::HeldByGuard { pfn: p }));
    assert!(a.page_locks().page_locked_racy(p));
    assert!(!a.page_locks().trylock_page(p));
    assert_eq!(a.free_pages(p, 0), Err(FreeError::Locked { pfn: p }));
    drop(g);
    assert!(!a.page_locks().page_locked_racy(p));
    a.free_pages(p, 0).unwrap();
    whole(&a);
}

/// Raw unlocks hammering a guarded lock from other threads never release
/// it: while a guard lives, no other locker gets in.
#[test]
fn raw_unlocks_racing_a_guard_never_let_a_second_locker_in() {
    let a = Arc::new(backed(4));
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..3)
        .map(|t| {
            let (a, stop, inside) = (a.clone(), stop.clone(), inside.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if t == 0 {
                        let _ = a.page_locks().unlock_page(p);
                    } else if let Ok(Some(g)) = a.page_locks().trylock_page_guard(p) {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two guards inside");
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(g);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    assert!(!a.page_locks().page_locked_racy(p));
    a.free_pages(p, 0).unwrap();
    whole(&a);
}

/// `free_contig_range` over a range whose tail is already free frees
/// nothing and reports the first bad page; over a live handle likewise.
#[test]
fn free_contig_range_is_all_or_nothing() {
    let a = backed(8);
    let s = a.contig().alloc_contig_pages(16, Gfp::KERNEL).unwrap();
    a.free_pages(s.add(12), 0).unwrap();
    let before = a.census();
    let err = a.contig().free_contig_range(s, 16).unwrap_err();
    assert_eq!(err.pfn(), s.add(12));
    assert_eq!(a.census(), before, "a refused range free changed state");
    for i in 0..16 {
        if i != 12 {
            a.free_pages(s.add(i), 0).unwrap();
        }
    }
    let h = a.alloc(Gfp::KERNEL, 0).unwrap();
    assert_eq!(a.contig().free_contig_range(h.pfn(), 1), Err(FreeError::Owned { pfn: h.pfn() }));
    drop(h);
    assert!(a.contig().free_contig_range(Pfn::new(u64::MAX - 5), 10).is_err());
    whole(&a);
}

/// A migration target is born unreachable by pfn (`MIGRATE_TARGET`, no
/// `HEAD`): a stranger freeing every pfn while a page is being moved (here,
/// from the owner's own `isolate` callback, the widest window) frees none of
/// them, so the target cannot reach a second owner (a `PageArray`, a
/// `Pages` handle) while migration writes its bytes and its flags word.
/// Before, targets were plain allocated heads: the stranger freed the
/// target, an array took it, and the move wrote into the array's frame.
#[test]
fn a_migration_target_cannot_be_freed_by_a_stranger() {
    use pagealloc::{Backing, MovableOps, PAGEBLOCK_PAGES};
    use std::sync::Mutex;
    static STRANGER: Mutex<Option<PageAllocator>> = Mutex::new(None);
    struct Owner {
        page: Mutex<u64>,
        freed: AtomicUsize,
    }
    impl MovableOps for Owner {
        fn isolate(&self, from: Pfn) -> bool {
            if let Some(a) = STRANGER.lock().unwrap().as_ref() {
                for q in (0..a.nr_pages()).filter(|&q| q != from.as_u64()) {
                    if a.free_pages(Pfn::new(q), 0).is_ok() {
                        self.freed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            true
        }
        fn migrate(&self, _from: Pfn, to: Pfn) -> bool {
            *self.page.lock().unwrap() = to.as_u64();
            true
        }
    }
    let a = PageAllocator::new(
        Config::small(16 << 20).backing(Backing::Anonymous).page_reporting(false).compaction_proactiveness(0),
    )
    .unwrap();
    let owner = Arc::new(Owner { page: Mutex::new(0), freed: AtomicUsize::new(0) });
    let id = a.compaction().register_movable_ops(owner.clone());
    let m = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    a.compaction().set_page_movable(m, id).unwrap();
    *owner.page.lock().unwrap() = m.as_u64();
    *STRANGER.lock().unwrap() = Some(a.clone());
    let bs = m.as_u64() & !(PAGEBLOCK_PAGES - 1);
    let r = a.contig().alloc_contig_range(Pfn::new(bs), PAGEBLOCK_PAGES, Gfp::MOVABLE);
    *STRANGER.lock().unwrap() = None;
    assert_eq!(owner.freed.load(Ordering::Relaxed), 0, "a stranger freed a page in mid-migration");
    r.unwrap();
    let t = Pfn::new(*owner.page.lock().unwrap());
    assert_ne!(t, m, "the page did not move");
    // The moved page is the owner's alone: a full array cannot hold it.
    let mut arr = a.page_array(a.nr_pages() as usize).unwrap();
    arr.fill(Gfp::MOVABLE);
    assert!(!arr.slots().contains(&Some(t)), "the owner's page is in an array");
    drop(arr);
    a.check_invariants().unwrap();
    a.compaction().clear_page_movable(t).unwrap();
    a.free_pages(t, 0).unwrap();
    a.contig().free_contig_range(Pfn::new(bs), PAGEBLOCK_PAGES).unwrap();
    whole(&a);
}
