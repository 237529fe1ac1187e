//! loom models of the page-lock protocol: lock/unlock/wait with two and three
//! threads, both designs, handoff, writeback, cancellation and a hash collision.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p pagealloc --release --lib loom`.
//!
//! Each model works on a bare flags word (`HEAD` set, as for an allocated page)
//! and a wait table of its own with one or two buckets; a lost wakeup shows up
//! as loom's deadlock report, a broken exclusion as a failed assertion.

use super::waitq::WaitTable;
use super::{CancelToken, LockPolicy, PageRef};
use crate::error::WaitError;
use crate::page::flags::{HEAD, LOCKED, WAITERS, WRITEBACK};
use crate::sync::{Arc, AtomicU32, AtomicUsize, Ordering};
use crate::types::Pfn;
use loom::thread;

/// A page and a wait table, shared by a model's threads.
struct World {
    pages: [AtomicU32; 2],
    table: WaitTable,
    policy: LockPolicy,
}

impl World {
    fn new(initial: u32, waiters_bit: bool, unfairness: u32) -> Arc<Self> {
        Arc::new(Self {
            pages: [AtomicU32::new(initial), AtomicU32::new(HEAD)],
            // One bucket: both pages collide, as hash-mates do.
            table: WaitTable::new(1),
            policy: LockPolicy { waiters_bit, unfairness },
        })
    }

    fn page(&self, i: usize) -> PageRef<'_> {
        PageRef::new(&self.pages[i], Pfn::new(i as u64), self.policy, Some(&self.table))
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// Seed 4's race: the holder unlocks while a waiter is between "saw it locked"
/// and "asleep". The waiter must wake (both designs).
#[test]
fn loom_unlock_races_a_waiter_about_to_sleep() {
    for waiters_bit in [true, false] {
        model(move || {
            let w = World::new(HEAD | LOCKED, waiters_bit, 5);
            let w2 = w.clone();
            let t = thread::spawn(move || {
                w2.page(0).lock(None, None).unwrap();
                w2.page(0).unlock().unwrap();
            });
            w.page(0).unlock().unwrap();
            t.join().unwrap();
            let f = w.pages[0].load(Ordering::Relaxed);
            assert_eq!(f & LOCKED, 0);
            if waiters_bit {
                assert_eq!(f & WAITERS, 0, "the last waiter leaves no bit behind");
            }
        });
    }
}

/// Two lockers and a plain counter: mutual exclusion and no lost wakeup.
#[test]
fn loom_two_lockers() {
    for (waiters_bit, unfairness) in [(true, 5), (true, 0), (false, 0)] {
        model(move || {
            let w = World::new(HEAD, waiters_bit, unfairness);
            let count = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let (w, count) = (w.clone(), count.clone());
                    thread::spawn(move || {
                        w.page(0).lock(None, None).unwrap();
                        let c = count.load(Ordering::Relaxed);
                        count.store(c + 1, Ordering::Relaxed);
                        w.page(0).unlock().unwrap();
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(count.load(Ordering::Relaxed), 2);
            assert_eq!(w.pages[0].load(Ordering::Relaxed) & (LOCKED | WAITERS), 0);
        });
    }
}

/// Three threads: the holder unlocks, one exclusive waiter and one shared
/// waiter; with unfairness 0 the exclusive one gets a direct handoff.
#[test]
fn loom_three_threads_exclusive_and_shared() {
    for (waiters_bit, unfairness) in [(true, 0), (true, 5), (false, 0)] {
        model(move || {
            let w = World::new(HEAD | LOCKED, waiters_bit, unfairness);
            let (w1, w2) = (w.clone(), w.clone());
            let locker = thread::spawn(move || {
                w1.page(0).lock(None, None).unwrap();
                w1.page(0).unlock().unwrap();
            });
            let reader = thread::spawn(move || {
                w2.page(0).wait_locked(None, None).unwrap();
            });
            w.page(0).unlock().unwrap();
            locker.join().unwrap();
            reader.join().unwrap();
            assert_eq!(w.pages[0].load(Ordering::Relaxed) & LOCKED, 0);
        });
    }
}

/// Three lockers contending from an unlocked start.
#[test]
fn loom_three_lockers() {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(|| {
        let w = World::new(HEAD, true, 1);
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || {
                    w.page(0).lock(None, None).unwrap();
                    w.page(0).unlock().unwrap();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(w.pages[0].load(Ordering::Relaxed) & (LOCKED | WAITERS), 0);
    });
}

/// End of writeback racing a writeback waiter about to sleep.
#[test]
fn loom_writeback_end_races_a_waiter() {
    for waiters_bit in [true, false] {
        model(move || {
            let w = World::new(HEAD | WRITEBACK, waiters_bit, 5);
            let w2 = w.clone();
            let t = thread::spawn(move || w2.page(0).wait_writeback(None, None).unwrap());
            w.page(0).end_writeback().unwrap();
            t.join().unwrap();
            assert_eq!(w.pages[0].load(Ordering::Relaxed) & (WRITEBACK | WAITERS), 0);
        });
    }
}

/// A cancellable locker and a canceller: the waiter always returns, with the
/// lock (if the holder's unlock won) or `Cancelled`.
#[test]
fn loom_cancel_wakes_the_waiter() {
    model(|| {
        let w = World::new(HEAD | LOCKED, true, 5);
        let tok = Arc::new(CancelToken::new());
        let (w2, tok2) = (w.clone(), tok.clone());
        let t = thread::spawn(move || match w2.page(0).lock(None, Some(&tok2)) {
            Ok(()) => w2.page(0).unlock().unwrap(),
            Err(e) => assert_eq!(e, WaitError::Cancelled),
        });
        tok.cancel();
        t.join().unwrap();
        // The holder still holds it; a cancelled waiter left no stale bit behind
        // it, or if it did, unlock clears it.
        w.page(0).unlock().unwrap();
        assert_eq!(w.pages[0].load(Ordering::Relaxed) & (LOCKED | WAITERS), 0);
    });
}

/// Two pages in one bucket: the unlock of one must neither wake nor strand the
/// waiter of the other, and WAITERS of each is cleared only when its own waiters
/// are gone.
#[test]
fn loom_colliding_pages() {
    model(|| {
        let w = World::new(HEAD | LOCKED, true, 5);
        w.pages[1].store(HEAD | LOCKED, Ordering::Relaxed);
        let (wa, wb) = (w.clone(), w.clone());
        let ta = thread::spawn(move || {
            wa.page(0).lock(None, None).unwrap();
            wa.page(0).unlock().unwrap();
        });
        let tb = thread::spawn(move || {
            wb.page(1).wait_locked(None, None).unwrap();
        });
        w.page(1).unlock().unwrap();
        w.page(0).unlock().unwrap();
        ta.join().unwrap();
        tb.join().unwrap();
        for p in &w.pages {
            assert_eq!(p.load(Ordering::Relaxed) & LOCKED, 0);
        }
    });
}
