//! The deferred-free list of the no-lock frees (the kernel's
//! `free_pages_nolock` parks a page it cannot free without waiting on
//! `zone->trylock_free_pages`; this is ours): a lock-free stack (Treiber)
//! threaded through the page descriptors' `next` link.
//!
//! Protocol:
//! - **push** ([`DeferredList::push`]): only by the thread that claimed the
//!   block (the one CAS of `Core::claim`, which leaves the head word `PCP`),
//!   so a block is on the list at most once. The pusher writes the block's
//!   `next` link (and its private word) first, then publishes it with a
//!   compare-and-swap of the list head (Release), retrying on a changed head.
//!   Lock-free and allocation-free: safe in a signal handler, including one
//!   that interrupted a push or a drain on the same thread.
//! - **drain** ([`DeferredList::take_all`]): one swap of the head to `NIL`
//!   (Acquire), which takes the whole chain at once; the drainer then owns
//!   every block on it and walks it by `next` (read before the block is
//!   freed: freeing rewrites the links).
//!
//! No ABA: the classic Treiber ABA needs a *pop of one node* by CAS, which
//! reads `head.next` and can install a stale successor. Here nothing pops one
//! node: a push's CAS from `h` to `p` installs `p.next = h`, which is right
//! whatever happened in between, as long as `h` is the head at the CAS (if
//! `h` was drained, freed, reallocated and pushed again, it is the head of
//! the current chain and its `next` was written by its current push); and a
//! drain takes the whole chain with a swap, which compares nothing.
//!
//! Invariants (checked by `check_invariants`):
//! - every block on the list has `PCP` set on its head and its order in
//!   `private` (it is counted with the per-CPU pages);
//! - the list is acyclic and holds each block once (a block needs a new
//!   claim, hence a new allocation, to be pushed again).
//!
//! The private word of a deferred block may carry [`DEFER_WAKE`]: the block
//! was freed while someone might wait on it, and the drainer wakes them (the
//! wake takes the wait table's locks, which a no-lock free may not).

use crate::page::{PageDesc, NIL};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{AtomicU32, Ordering};

/// A bit of a deferred block's private word: wake the page's waiters when
/// the block is finally freed.
pub const DEFER_WAKE: u32 = 1 << 15;

/// The list head: the pfn of the last block pushed, or `NIL`.
#[derive(Debug)]
pub struct DeferredList {
    head: AtomicU32,
}

impl Default for DeferredList {
    fn default() -> Self {
        Self { head: AtomicU32::new(NIL) }
    }
}

impl DeferredList {
    /// Push block `p` (its head descriptor is `descs[p]`, claimed by the
    /// caller and not on any list). Lock-free: a bounded number of retries
    /// per concurrent push that wins.
    pub fn push(&self, descs: &[PageDesc], p: u32) {
        let d = &descs[p as usize];
        let mut h = self.head.load(Ordering::Relaxed);
        loop {
            d.next.set(h);
            // Release: the link and the private word written above are
            // visible to the drainer whose Acquire swap takes this head.
            match self.head.compare_exchange_weak(h, p, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(cur) => h = cur,
            }
        }
    }

    /// Take the whole chain (its first pfn, or `NIL`); the caller now owns
    /// every block on it and walks it with [`DeferredList::next`].
    pub fn take_all(&self) -> u32 {
        // Acquire: pairs with each push's Release CAS (the chain is a release
        // sequence of CASes on `head`), so every link on it is visible.
        self.head.swap(NIL, Ordering::Acquire)
    }

    /// Whether anything is parked (a relaxed load: the cheap test the locked
    /// paths make before draining).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed) == NIL
    }

    /// The block after `p` on a chain the caller owns (or `NIL`).
    #[inline]
    pub fn next(descs: &[PageDesc], p: u32) -> u32 {
        descs[p as usize].next.get()
    }

    /// The blocks on the list now, for the invariant check: calls `f` with
    /// each pfn, at most `limit` times; false if the chain was longer (a
    /// cycle, or a concurrent push). Exact only while nobody pushes or drains.
    pub fn for_each(&self, descs: &[PageDesc], limit: u64, mut f: impl FnMut(u32)) -> bool {
        let mut p = self.head.load(Ordering::Acquire);
        let mut n = 0u64;
        while p != NIL {
            if n == limit || p as usize >= descs.len() {
                return false;
            }
            f(p);
            n += 1;
            p = Self::next(descs, p);
        }
        true
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Two threads push two blocks each while a third drains once; a final
    //! drain takes the rest. Every block is taken exactly once, and each
    //! block's payload, written before its push, is seen by its drainer.
    use super::*;
    use crate::sync::{Arc, UnsafeCell};
    use loom::thread;

    struct World {
        list: DeferredList,
        descs: Vec<PageDesc>,
        payload: Vec<UnsafeCell<u32>>,
    }

    fn drain(w: &World, seen: &mut Vec<u32>) {
        let mut p = w.list.take_all();
        while p != NIL {
            // SAFETY: the drainer owns every block on the chain it took.
            let v = unsafe { *w.payload[p as usize].borrow_mut().get() };
            assert_eq!(v, p + 100, "block {p}'s payload not visible to its drainer");
            seen.push(p);
            p = DeferredList::next(&w.descs, p);
        }
    }

    #[test]
    fn loom_deferred_push_push_drain() {
        loom::model(|| {
            let w = Arc::new(World {
                list: DeferredList::default(),
                descs: (0..4).map(|_| PageDesc::new()).collect(),
                payload: (0..4).map(|_| UnsafeCell::new(0)).collect(),
            });
            let pushers: Vec<_> = [[0u32, 1], [2, 3]]
                .into_iter()
                .map(|ps| {
                    let w = w.clone();
                    thread::spawn(move || {
                        for p in ps {
                            // SAFETY: the pusher owns block p until it pushes it.
                            unsafe { *w.payload[p as usize].borrow_mut().get() = p + 100 };
                            w.list.push(&w.descs, p);
                        }
                    })
                })
                .collect();
            let d = {
                let w = w.clone();
                thread::spawn(move || {
                    let mut seen = Vec::new();
                    drain(&w, &mut seen);
                    seen
                })
            };
            for t in pushers {
                t.join().unwrap();
            }
            let mut seen = d.join().unwrap();
            drain(&w, &mut seen);
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1, 2, 3], "every block drained exactly once");
            assert!(w.list.is_empty());
        });
    }
}
