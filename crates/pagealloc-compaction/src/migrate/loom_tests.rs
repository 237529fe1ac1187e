//! loom model of migration against the owner's free of the same page:
//! the real `migrate_one` on a one-pageblock, memory-backed
//! arena, against an owner that behaves as `tests/integration/compaction.rs`'s owners
//! do (it frees only a page it does not see isolated, forgets it first, and
//! retries a free refused with `FreeError::Migrating`).
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p pagealloc-compaction --release --lib loom`.

use crate::migrate::{Moved, OwnerPanic};
use crate::movable::MovableOps;
use crate::test_host::TestAlloc;
use pagealloc_core::error::{FreeError, PageStateError};
use pagealloc_core::sync::{spin_yield, Mutex};
use pagealloc_core::types::{Gfp, Pfn, PAGE_SIZE};
use pagealloc_core::Config;
use std::sync::Arc;

const KEY: u8 = 0x5A;

/// One movable page of the owner's: (pfn, isolated), or none (freed).
struct Owner {
    page: Mutex<Option<(u64, bool)>>,
}

impl MovableOps for Owner {
    fn isolate(&self, pfn: Pfn) -> bool {
        match &mut *self.page.lock() {
            Some((p, iso)) if *p == pfn.as_u64() && !*iso => {
                *iso = true;
                true
            }
            _ => false,
        }
    }
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut g = self.page.lock();
        assert_eq!(*g, Some((from.as_u64(), true)), "migrate of a page not isolated");
        *g = Some((to.as_u64(), false));
        true
    }
    fn putback(&self, pfn: Pfn) {
        let mut g = self.page.lock();
        assert_eq!(*g, Some((pfn.as_u64(), true)), "putback of a page not isolated");
        *g = Some((pfn.as_u64(), false));
    }
}

fn byte(a: &TestAlloc, pfn: u64, off: usize) -> *mut u8 {
    // SAFETY: off < PAGE_SIZE and the frame is inside the backed arena.
    unsafe { a.page_address(Pfn::new(pfn)).unwrap().as_ptr().add(off) }
}

/// Migration of a registered page (`migrate_one`, as compaction calls it)
/// against its owner freeing it. Exactly one page of the two (source,
/// target) ends with the owner and is freed by it, with the owner's bytes;
/// the other is freed by migration (moved) or given back by the caller
/// (not moved): at the end every page is free, none freed twice.
#[test]
fn loom_migrate_races_owner_free() {
    loom::model(|| {
        let a = tiny();
        let owner = Arc::new(Owner { page: Mutex::new(None) });
        let id = a.register_movable_ops(owner.clone());
        let src = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
        let target = a.alloc_target();
        for off in [0, PAGE_SIZE - 1] {
            // SAFETY: the page is ours and not yet registered.
            unsafe { byte(&a, src.as_u64(), off).write(KEY) };
        }
        *owner.page.lock() = Some((src.as_u64(), false));
        a.set_page_movable(src, id).unwrap();

        let (a2, o2) = (a.clone(), owner.clone());
        let t = loom::thread::spawn(move || {
            // The owner frees its page: take it off its own table once it is
            // not isolated, check its bytes, free it (retrying Migrating).
            let p = loop {
                let mut g = o2.page.lock();
                match *g {
                    Some((p, false)) => {
                        *g = None;
                        break p;
                    }
                    Some((_, true)) => {
                        drop(g);
                        spin_yield();
                    }
                    None => unreachable!("the owner's page vanished"),
                }
            };
            for off in [0, PAGE_SIZE - 1] {
                // SAFETY: the page is the owner's and not isolated.
                assert_eq!(unsafe { byte(&a2, p, off).read() }, KEY, "the owner's bytes were lost");
            }
            loop {
                match a2.free_pages(Pfn::new(p), 0) {
                    Ok(()) => break,
                    Err(FreeError::Migrating { .. }) => spin_yield(),
                    Err(e) => panic!("the owner's free of {p} failed: {e}"),
                }
            }
            // Reuse: a plain page allocated now (often the frame just freed)
            // is nobody's movable page.
            (p, a2.alloc_pages(Gfp::MOVABLE, 0).unwrap())
        });
        // The owner's assertions panic: they fail the model.
        let moved = OwnerPanic::resuming(|caught| a.compaction().migrate_one(src.as_u64(), target.as_u64(), caught));
        let (freed, reused) = t.join().unwrap();
        assert!(!a.compaction().is_migratable_racy(reused.as_u64()), "a fresh page came out movable");
        a.free_pages(reused, 0).unwrap();
        match moved {
            Moved::Yes => {
                assert_eq!(freed, target.as_u64(), "moved, but the owner freed the source");
                assert_eq!(a.free_pages(src, 0), Err(FreeError::DoubleFree { pfn: src }));
            }
            Moved::Busy | Moved::Failed => {
                assert_eq!(freed, src.as_u64(), "not moved, but the owner freed the target");
                a.free_target(target);
            }
        }
        assert!(owner.page.lock().is_none());
        a.drain_all_pages();
        a.check_invariants().unwrap();
        assert_eq!(a.nr_free_pages(), a.managed_pages());
        assert_eq!(a.mobility_census().movable + a.mobility_census().isolated, 0);
    });
}

/// An owner that keeps no isolation state of its own (the default
/// `isolate`): it frees whenever it likes, under its own lock, and relies on
/// the allocator refusing a free of a page being migrated.
struct Trusting {
    page: Mutex<u64>,
}

impl MovableOps for Trusting {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut g = self.page.lock();
        assert_eq!(*g, from.as_u64(), "migrate of a page the owner does not hold");
        *g = to.as_u64();
        true
    }
}

/// The models' allocator: one pageblock, one CPU slot, no reserve.
fn tiny() -> Arc<TestAlloc> {
    Arc::new(TestAlloc::new(Config::default().arena_bytes(2 << 20).nr_cpus(Some(1)).min_free_kbytes(Some(0))))
}

/// A tiny allocator, a movable page `src` of a [`Trusting`] owner, and a
/// migration `target` page (as compaction takes one).
fn trusting_setup() -> (Arc<TestAlloc>, Pfn, Pfn, Arc<Trusting>) {
    let a = tiny();
    let src = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let target = a.alloc_target();
    let owner = Arc::new(Trusting { page: Mutex::new(src.as_u64()) });
    let id = a.register_movable_ops(owner.clone());
    a.set_page_movable(src, id).unwrap();
    (a, src, target, owner)
}

/// As [`loom_migrate_races_owner_free`], with an owner that does not track
/// isolation: its free, at any point of the migration, either succeeds
/// (before isolation, or after the hand-over, of the page it then holds) or
/// is refused with `FreeError::Migrating`, never anything else; exactly one
/// page of the two is the owner's and freed by it.
#[test]
fn loom_migrate_races_trusting_owner_free() {
    loom::model(|| {
        let (a, src, target, owner) = trusting_setup();
        let (a2, o2) = (a.clone(), owner.clone());
        let t = loom::thread::spawn(move || {
            let freed = loop {
                let g = o2.page.lock();
                match a2.free_pages(Pfn::new(*g), 0) {
                    Ok(()) => break *g,
                    Err(FreeError::Migrating { .. }) => {
                        drop(g);
                        spin_yield();
                    }
                    Err(e) => panic!("the owner's free of {} failed: {e}", *g),
                }
            };
            // Reuse: a plain page allocated now (often the frame just freed)
            // is nobody's movable page.
            (freed, a2.alloc_pages(Gfp::MOVABLE, 0).unwrap())
        });
        // The owner's assertions panic: they fail the model.
        let moved = OwnerPanic::resuming(|caught| a.compaction().migrate_one(src.as_u64(), target.as_u64(), caught));
        let (freed, reused) = t.join().unwrap();
        assert!(!a.compaction().is_migratable_racy(reused.as_u64()), "a fresh page came out movable");
        a.free_pages(reused, 0).unwrap();
        match moved {
            Moved::Yes => assert_eq!(freed, target.as_u64(), "moved, but the owner freed the source"),
            Moved::Busy | Moved::Failed => {
                assert_eq!(freed, src.as_u64(), "not moved, but the owner freed the target");
                a.free_target(target);
            }
        }
        a.drain_all_pages();
        a.check_invariants().unwrap();
        assert_eq!(a.nr_free_pages(), a.managed_pages());
    });
}

/// Migration against the owner locking its page (`lock_page`, the page
/// lock's real protocol). A lock taken while the page is isolated makes the
/// freeze fail (the move is abandoned, the page put back untouched); during
/// the hand-over the lock is refused (the word has no `HEAD`) and the owner
/// retries with the pfn it holds after `migrate`. The owner ends up with
/// exactly one locked page, its current one, and every page comes back.
#[test]
fn loom_migrate_races_owner_lock() {
    loom::model(|| {
        let (a, src, target, owner) = trusting_setup();
        let (a2, o2) = (a.clone(), owner.clone());
        let t = loom::thread::spawn(move || loop {
            let g = o2.page.lock();
            match a2.page_locks().lock_page(Pfn::new(*g)) {
                Ok(()) => {
                    let p = *g;
                    drop(g);
                    // Locked: the page stays put (a migration that isolated
                    // it before our lock fails to freeze it) until we unlock.
                    a2.page_locks().unlock_page(Pfn::new(p)).unwrap();
                    break p;
                }
                Err(PageStateError::NotAllocated { .. }) => {
                    // The hand-over: wait for `migrate` to tell us where it went.
                    drop(g);
                    spin_yield();
                }
                Err(e) => panic!("the owner's lock of {} failed: {e}", *g),
            }
        });
        // The owner's assertions panic: they fail the model.
        let moved = OwnerPanic::resuming(|caught| a.compaction().migrate_one(src.as_u64(), target.as_u64(), caught));
        let locked = t.join().unwrap();
        let now = *owner.page.lock();
        match moved {
            Moved::Yes => assert_eq!(now, target.as_u64()),
            Moved::Busy | Moved::Failed => {
                assert_eq!(now, src.as_u64());
                assert_eq!(locked, src.as_u64(), "locked a page the owner never had");
                a.free_target(target);
            }
        }
        assert!(locked == src.as_u64() || locked == target.as_u64());
        a.free_pages(Pfn::new(now), 0).unwrap();
        a.drain_all_pages();
        a.check_invariants().unwrap();
        assert_eq!(a.nr_free_pages(), a.managed_pages());
    });
}
