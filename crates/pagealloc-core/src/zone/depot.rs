//! The depot: free order-0 pages between the per-CPU lists and the buddy,
//! one stack per pcp type in each zone (Bonwick's magazine depot, USENIX
//! 2001; tcmalloc's transfer cache). A drain that overflows one CPU's
//! lists parks a batch here, and a refill of any CPU's list takes from here
//! before the buddy: one thread's frees feed another thread's allocations
//! without a split, a merge or the zone lock.
//!
//! What a page in the depot is: exactly what it was on the per-CPU list it
//! came from (flags `PCP`, private word order 0 and its list's type), so
//! every free of it is refused as a double free, and scanners that skip
//! per-CPU pages skip it. It is free in every count the zone reports and in
//! every watermark check ([`super::Zone::free_pages_racy`]), but not on the
//! buddy lists: `NR_FREE_PAGES` of the zone's statistics counts the buddy
//! alone and the depot keeps its own count beside it.
//!
//! Invariants (the depot lock protects all of them):
//! - `pages[t] == stacks[t].len()`, plus the pages an emptying of the
//!   depot has taken and not yet put on the buddy lists (counted there
//!   already: for that moment they count twice, never nowhere); the sum is
//!   at most `cap`.
//! - Every pfn on `stacks[t]` is a page of this zone marked `PCP`, order 0,
//!   on no other list.
//! - Nothing is pushed while the zone has isolated pageblocks (read under
//!   the depot lock): isolation sets its bits and then empties the depot
//!   (`drain_all_pages`), so no page of an isolated block stays here.
//!
//! Locking: the depot lock is a leaf (nothing is taken while it is held).
//! The paths that move batches only ever try it: a busy depot sends the
//! batch to the buddy, so no drain or refill waits for another. Emptying it
//! (draining every page back to the buddy) and the invariant check wait.
//!
//! Anti-fragmentation: a stack holds pages of one zone and one migratetype,
//! as a per-CPU list does; its pages go back to the buddy, to merge, when
//! the zone's buddy falls below its low watermark, on `drain_all_pages`
//! (which compaction, isolation, the slow path and idle reporting call), and
//! at most `cap` pages (a fraction of the zone, `Config::depot_fraction`)
//! wait here at any time.

#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{FutexMutex, LockedCounter};
use crate::types::MIGRATE_PCPTYPES;
use alloc::collections::VecDeque;

/// One zone's depot (see the module doc).
pub struct Depot {
    stacks: FutexMutex<[Vec<u32>; MIGRATE_PCPTYPES]>,
    /// Pages held per pcp type, written under the lock, read racily.
    pages: [LockedCounter; MIGRATE_PCPTYPES],
    /// The most pages the depot holds, all types together (0: off). Fixed
    /// before the allocator is shared.
    cap: u64,
}

impl Default for Depot {
    fn default() -> Self {
        Self { stacks: FutexMutex::new(Default::default()), pages: Default::default(), cap: 0 }
    }
}

impl Depot {
    /// Hold at most `cap` pages (0: never any).
    pub fn set_cap(&mut self, cap: u64) {
        self.cap = cap;
    }

    /// Whether the depot takes pages at all.
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.cap != 0
    }

    /// The most pages it holds.
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Pages held, all types (lock-free; may be stale).
    #[inline(always)]
    pub fn pages_racy(&self) -> u64 {
        self.pages.iter().map(LockedCounter::get_racy).sum()
    }

    /// Pages held of pcp type index `t` (lock-free; may be stale).
    #[inline(always)]
    pub fn pages_of_racy(&self, t: usize) -> u64 {
        self.pages[t].get_racy()
    }

    /// Move up to `n` pages from the cold end (front) of `list`, a per-CPU
    /// list of type index `t`, onto the depot's stack of that type, as many
    /// as fit. `isolating`: the zone has isolated pageblocks now (read by
    /// the caller's closure under the depot lock; then nothing moves).
    /// Returns the pages moved; 0 also when the depot was busy.
    pub fn try_push(&self, t: usize, list: &mut VecDeque<u32>, n: usize, isolating: impl Fn() -> bool) -> usize {
        self.try_push_with(t, n.min(list.len()), isolating, |s, k| s.extend(list.drain(..k)))
    }

    /// [`Depot::try_push`] of claimed pages (flags `PCP`, private word order
    /// 0 and type `t`) that are on no list: a batch of frees whose per-CPU
    /// list was busy. Returns how many of the first pages it took.
    pub fn try_push_slice(&self, t: usize, pages: &[u32], isolating: impl Fn() -> bool) -> usize {
        self.try_push_with(t, pages.len(), isolating, |s, k| s.extend_from_slice(&pages[..k]))
    }

    /// A push of up to `n` pages of type index `t`: `put(stack, k)` moves
    /// `k` of them onto the stack, the lock held.
    #[inline]
    fn try_push_with(
        &self,
        t: usize,
        n: usize,
        isolating: impl Fn() -> bool,
        put: impl FnOnce(&mut Vec<u32>, usize),
    ) -> usize {
        if !self.on() || n == 0 {
            return 0;
        }
        let Some(mut stacks) = self.stacks.try_lock() else {
            return 0;
        };
        if isolating() {
            return 0;
        }
        let held: u64 = self.pages.iter().map(LockedCounter::get_racy).sum();
        let k = n.min(self.cap.saturating_sub(held) as usize);
        if k == 0 {
            return 0;
        }
        put(&mut stacks[t], k);
        self.pages[t].add_locked(k as u64);
        k
    }

    /// Move up to `n` pages of type index `t` from the top of the stack (the
    /// most recently parked, the most likely cached) onto `list`, an empty
    /// per-CPU list being refilled, the top last (allocated first). Returns
    /// the pages moved; 0 also when the depot was busy.
    pub fn try_pop(&self, t: usize, list: &mut VecDeque<u32>, n: usize) -> usize {
        if self.pages[t].get_racy() == 0 {
            return 0;
        }
        let Some(mut stacks) = self.stacks.try_lock() else {
            return 0;
        };
        let s = &mut stacks[t];
        let k = n.min(s.len());
        list.extend(s.drain(s.len() - k..));
        self.pages[t].sub_locked(k as u64);
        k
    }

    /// One page of type index `t` from the top, if the lock is free and
    /// the stack is not empty: no waiting and no heap allocation, so the
    /// no-lock allocation may call it from a signal handler.
    pub fn try_take_one(&self, t: usize) -> Option<u32> {
        if self.pages[t].get_racy() == 0 {
            return None;
        }
        let mut stacks = self.stacks.try_lock()?;
        let p = stacks[t].pop()?;
        self.pages[t].sub_locked(1);
        Some(p)
    }

    /// Take every page out (waiting for the lock), for the buddy: the pfns
    /// are appended to `out`, and the stacks are empty after. The pages
    /// stay counted until the caller has put them on the buddy lists and
    /// calls [`Depot::settle`] with what this returned (per type): counted
    /// twice for that moment rather than nowhere, so no allocation sees
    /// free memory dip and fails while they move.
    pub fn take_all(&self, out: &mut Vec<u32>) -> [u64; MIGRATE_PCPTYPES] {
        if self.pages_racy() == 0 {
            return [0; MIGRATE_PCPTYPES];
        }
        let mut stacks = self.stacks.lock();
        core::array::from_fn(|t| {
            let n = stacks[t].len() as u64;
            out.append(&mut stacks[t]);
            n
        })
    }

    /// The pages [`Depot::take_all`] took are on the buddy lists now: stop
    /// counting them.
    pub fn settle(&self, taken: [u64; MIGRATE_PCPTYPES]) {
        if taken.iter().all(|&n| n == 0) {
            return;
        }
        let _stacks = self.stacks.lock();
        for (c, n) in self.pages.iter().zip(taken) {
            c.sub_locked(n);
        }
    }

    /// Run `f` with the depot held still (its lock waited for): the pages
    /// it holds throughout, and `f`'s result. The census walks a zone this
    /// way, so that the pages it finds marked for the per-CPU lists and
    /// the depot's count are of one moment.
    pub fn held_still<R>(&self, f: impl FnOnce() -> R) -> (u64, R) {
        let stacks = self.stacks.lock();
        let n = stacks.iter().map(|s| s.len() as u64).sum();
        let r = f();
        drop(stacks);
        (n, r)
    }

    /// Call `f` with every page held and its type index, the lock held
    /// (waited for) throughout: the invariant check. Returns what the
    /// counters say, per type.
    pub fn for_each(&self, mut f: impl FnMut(usize, u32)) -> [u64; MIGRATE_PCPTYPES] {
        let stacks = self.stacks.lock();
        for (t, s) in stacks.iter().enumerate() {
            for &p in s {
                f(t, p);
            }
        }
        core::array::from_fn(|t| self.pages[t].get_racy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_stop_at_the_cap_and_pops_take_the_top() {
        let mut d = Depot::default();
        let mut l: VecDeque<u32> = (0..10).collect();
        assert_eq!(d.try_push(0, &mut l, 5, || false), 0, "off: takes nothing");
        d.set_cap(6);
        assert_eq!(d.try_push(1, &mut l, 4, || false), 4);
        assert_eq!(l.front(), Some(&4), "the cold end went");
        assert_eq!(d.try_push(1, &mut l, 4, || true), 0, "nothing while isolating");
        assert_eq!(d.try_push(2, &mut l, 4, || false), 2, "the cap counts every type");
        assert_eq!((d.pages_of_racy(1), d.pages_of_racy(2), d.pages_racy()), (4, 2, 6));
        let mut m = VecDeque::new();
        assert_eq!(d.try_pop(1, &mut m, 3), 3);
        assert_eq!(m, [1, 2, 3], "the top three, the top last");
        assert_eq!(d.try_pop(0, &mut m, 3), 0);
        assert_eq!((d.try_take_one(1), d.try_take_one(0)), (Some(0), None));
        let mut all = Vec::new();
        let taken = d.take_all(&mut all);
        assert_eq!((all.len(), d.pages_racy()), (2, 2), "counted until settled");
        d.settle(taken);
        assert_eq!(d.pages_racy(), 0);
        assert_eq!(d.for_each(|_, _| panic!("empty")), [0; MIGRATE_PCPTYPES]);
    }
}
