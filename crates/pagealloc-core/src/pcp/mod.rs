//! Per-CPU page lists (the kernel's `per_cpu_pages`): one set per zone per CPU,
//! each behind its own lock taken with `try_lock` only.
//!
//! Lists are indexed by [`pindex`]: `3 * order + mt` for orders 0..=3 and the
//! three pcp types, then one list per pcp type for the pageblock order. A list
//! is a ring of pfns: allocation and free work at the back (the most recently
//! freed, cache-hot page goes out first), refills and drains use the front (the
//! coldest end; the kernel's list tail). Each entry is the head of a block of the list's order.
//!
//! Invariants (the pcp lock protects all of them):
//! - Every pfn on a list has `PCP` set in its descriptor and `private` holding
//!   the list's order and type; no other page has `PCP` set except those in
//!   thread front caches (see `front`).
//! - `count` is the number of pages (not entries) on all lists of the set and
//!   equals `count_racy`, which readers see without the lock.
//! - Pages here are not counted in the zone's NR_FREE_PAGES: they leave it on
//!   refill and come back on drain.
//! - After any free returns, `count <= high` (the free drains down first).
//! - `high_min <= high <= high_max`.
//!
//! Lock order: a pcp lock, then its zone's lock. Nobody takes a pcp lock while
//! holding a zone lock.
//!
//! High auto-tuning (the kernel's 6.7 behaviour): a refill while the zone is above
//! its high watermark grows `high` by the (scaled) batch; a drain after a run of
//! frees with no allocation in between shrinks it by one batch; and at most
//! about once a second a drain decays it by an eighth toward `high_min`.
//!
//! Batch scaling (the kernel's `alloc_factor` and `free_count`): during a run of
//! order-0 allocations each refill takes twice the last (up to
//! `batch << BATCH_SCALE_MAX`, leaving a batch of room below `high`), and a
//! drain frees about as many pages as were freed lately (between one batch and
//! `high` less a batch), so streams of allocations and frees cross the zone
//! lock in large, well-aligned batches.

mod drain;
mod guard;
#[cfg(all(test, loom))]
mod loom_tests;
mod set;
mod take;

pub use drain::flush_depot;
pub(crate) use drain::free_blocks_to_buddy;
pub use guard::PcpGuard;
pub use set::PcpSet;

use crate::platform::Instant;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{FutexMutex, LockedCounter};
use crate::types::{MigrateType, Order, MIGRATE_PCPTYPES};
use alloc::collections::VecDeque;
use core::time::Duration;

/// Orders 0..PCP_ORDERS get their own lists; the pageblock order gets more.
pub const PCP_ORDERS: u32 = 4;
/// Number of lists in one set.
pub(crate) const NR_PCP_LISTS: usize = MIGRATE_PCPTYPES * (PCP_ORDERS as usize + 1);

/// Entries a list and the scratch buffer reserve up front (they grow with use).
const PCP_INITIAL_CAP: usize = 256;

/// The kernel's CONFIG_PCP_BATCH_SCALE_MAX: refills and drains scale up to
/// `batch << BATCH_SCALE_MAX` pages.
pub const BATCH_SCALE_MAX: u32 = 5;

/// The list for a block of `order` and pcp type `mt`, if such blocks are cached.
#[inline(always)]
pub fn pindex(order: Order, mt: MigrateType) -> Option<usize> {
    debug_assert!(mt.is_pcptype());
    if order.get() < PCP_ORDERS {
        Some(order.idx() * MIGRATE_PCPTYPES + mt.index())
    } else if order == Order::PAGEBLOCK {
        Some(PCP_ORDERS as usize * MIGRATE_PCPTYPES + mt.index())
    } else {
        None
    }
}

/// [`pindex`] for an order below `PCP_ORDERS` and a pcp type given by its index.
#[inline(always)]
pub(crate) const fn pindex_raw(order: Order, mt_index: usize) -> usize {
    debug_assert!(order.get() < PCP_ORDERS && mt_index < MIGRATE_PCPTYPES);
    order.idx() * MIGRATE_PCPTYPES + mt_index
}

/// The order of the blocks on list `pi`.
#[inline(always)]
pub(crate) fn pindex_order(pi: usize) -> Order {
    let o = (pi / MIGRATE_PCPTYPES) as u32;
    if o < PCP_ORDERS {
        Order::ALL[o as usize]
    } else {
        Order::PAGEBLOCK
    }
}

/// The kernel's `zone_batchsize`: about a quarter of a megabyte's worth of pages
/// per 1/1024 of the zone, rounded to one less than a power of two (63 for 1 GiB).
pub(crate) fn default_batch(managed: u64) -> u32 {
    let mut b = (managed / 1024).min(256);
    b /= 4;
    b = b.max(1);
    let b = b + b / 2;
    let pow = 1u64 << (63 - b.leading_zeros());
    (pow.max(2) - 1) as u32
}

/// `(high_min, high_max)` per CPU: the kernel's `zone_highsize` with automatic
/// tuning (low watermark split over CPUs .. an eighth of the zone over CPUs), or
/// both pinned by `percpu_pagelist_high_fraction`.
pub(crate) fn high_bounds(managed: u64, low_wmark: u64, cpus: usize, batch: u32, fraction: u32) -> (u32, u32) {
    let cpus = cpus.max(1) as u64;
    let floor = 4 * batch as u64;
    let clamp = |v: u64| v.max(floor).min(u32::MAX as u64 / 2) as u32;
    if fraction > 0 {
        let h = clamp(managed / fraction as u64 / cpus);
        (h, h)
    } else {
        let lo = clamp(low_wmark / cpus);
        let hi = clamp(managed / 8 / cpus).max(lo);
        (lo, hi)
    }
}

/// `high` decays by time (once a second at most); the clock is read every
/// this many drains.
const DECAY_CHECK: u32 = 16;

/// One CPU's lists for one zone.
pub struct Pcp {
    pub lists: FutexMutex<PcpLists>,
    /// `count`, readable without the lock (reports).
    pub count_racy: LockedCounter,
    /// `high`, readable without the lock (reports).
    pub high_racy: LockedCounter,
    /// The batch size (fixed).
    pub batch: u32,
    /// Bounds of `high` (fixed).
    pub high_min: u32,
    pub high_max: u32,
    /// Event counters of this CPU, written under the pcp lock.
    pub events: crate::vmevent::EventCounters,
}

/// The lists and their bookkeeping (behind the pcp lock).
pub struct PcpLists {
    pub lists: [VecDeque<u32>; NR_PCP_LISTS],
    /// Pages on all lists.
    pub count: u32,
    pub high: u32,
    pub high_min: u32,
    pub high_max: u32,
    pub batch: u32,
    /// Frees since the last allocation (for shrinking `high`).
    pub(crate) free_run: u32,
    /// The kernel's `free_count`: pages freed lately (grows with each free up
    /// to `batch << BATCH_SCALE_MAX`, halves with each allocation); a drain
    /// frees about this many, so long runs of frees drain in large batches.
    free_count: u32,
    /// The kernel's `alloc_factor`: each refill during a run of allocations
    /// takes twice as many pages as the last (up to `batch << BATCH_SCALE_MAX`);
    /// each free halves it.
    alloc_factor: u32,
    /// Where the next drain starts its round-robin.
    next_list: usize,
    last_decay: Instant,
    /// Drains since the clock was last read (see `tune_on_drain`).
    drains_unchecked: u32,
    /// Scratch for drains and refills (block keys; kept to avoid allocating
    /// on those paths). Empty between uses.
    pub scratch: Vec<u64>,
    /// Hold and wait times of this lock (`crate::lockstat`).
    pub lockstat: crate::lockstat::PcpLockStat,
    /// Refills fill partly used pageblocks first (`Config::hugepage_filler`
    /// with hugepage backing; see `take::filler_run`).
    pub filler: bool,
}

impl Pcp {
    pub(crate) fn new(batch: u32, high_min: u32, high_max: u32, filler: bool) -> Self {
        // Each list can hold every page the set may hold plus one refill.
        // Room for a refill and a batch per list up front; lists grow with
        // use up to what `high` lets them hold. Reserving for `high_max` on
        // every list of every CPU and zone would make memory grow as zones x
        // CPUs x high, before a single page was used.
        let cap = (2 * batch as usize + 1).min(PCP_INITIAL_CAP);
        let lists = core::array::from_fn(|pi| VecDeque::with_capacity(cap >> pindex_order(pi).get().min(4)));
        let high = high_min;
        Self {
            lists: FutexMutex::new(PcpLists {
                lists,
                count: 0,
                high,
                high_min,
                high_max,
                batch,
                free_run: 0,
                free_count: 0,
                alloc_factor: 0,
                next_list: 0,
                last_decay: Instant::now(),
                drains_unchecked: 0,
                scratch: Vec::with_capacity(cap),
                lockstat: crate::lockstat::PcpLockStat::new(false, 1),
                filler,
            }),
            count_racy: LockedCounter::new(0),
            high_racy: LockedCounter::new(high as u64),
            batch,
            high_min,
            high_max,
            events: Default::default(),
        }
    }
}

impl PcpLists {
    /// Blocks to take from the buddy in one refill of a list of `order`: a
    /// batch's worth (at least two blocks), scaled up for order 0 by
    /// `alloc_factor` (which this refill raises while the scaled batch still
    /// fits), but never so many that the set would hold more than `high` pages
    /// once the caller has taken its one block.
    #[inline]
    pub(crate) fn refill_blocks(&mut self, order: Order) -> u32 {
        let room = 1 + (self.high.saturating_sub(self.count) >> order.get());
        if order > Order::ZERO {
            return (self.batch >> order.get()).max(2).min(room);
        }
        // The kernel's nr_pcp_alloc: leave a batch of room below high.
        let max_nr = self.high.saturating_sub(self.count + self.batch).max(self.batch);
        let want = self.batch << self.alloc_factor;
        if want <= max_nr && self.alloc_factor < BATCH_SCALE_MAX {
            self.alloc_factor += 1;
        }
        want.min(max_nr).max(2).min(room)
    }

    /// Book an allocation from the lists.
    #[inline(always)]
    pub(crate) fn note_alloc(&mut self) {
        self.free_run = 0;
        self.free_count >>= 1;
    }

    /// Book `n` pages freed onto the lists.
    #[inline(always)]
    pub(crate) fn note_free(&mut self, n: u32) {
        self.free_run = self.free_run.saturating_add(n);
        self.free_count = (self.free_count + n).min(self.batch << BATCH_SCALE_MAX);
        self.alloc_factor >>= 1;
    }

    /// Publish `count` and `high` for lock-free readers.
    #[inline(always)]
    pub fn publish(&self, pcp: &Pcp) {
        pcp.count_racy.set_locked(self.count as u64);
        pcp.high_racy.set_locked(self.high as u64);
    }

    /// Grow `high` by the (scaled) batch after a refill while the zone has
    /// plenty free.
    #[inline]
    pub(crate) fn tune_on_refill(&mut self, zone_above_high: bool) {
        self.free_run = 0;
        if zone_above_high && self.high < self.high_max {
            self.high = (self.high + (self.batch << self.alloc_factor)).min(self.high_max);
        }
    }

    /// Shrink `high` under a sustained run of frees, and decay it over time.
    #[inline]
    pub(super) fn tune_on_drain(&mut self) {
        if self.free_run > self.high && self.high > self.high_min {
            self.high = (self.high - self.batch.min(self.high - self.high_min)).max(self.high_min);
        }
        // The clock is read every DECAY_CHECK drains only: a read costs
        // tens of nanoseconds on some hosts, a drain's share of a page less.
        self.drains_unchecked += 1;
        if self.drains_unchecked < DECAY_CHECK {
            return;
        }
        self.drains_unchecked = 0;
        let now = Instant::now();
        if now.duration_since(self.last_decay) >= Duration::from_secs(1) {
            self.last_decay = now;
            self.high = (self.high - (self.high - self.high_min) / 8).max(self.high_min);
        }
    }

    /// Drain down to `high - batch` after a free pushed `count` to `high`.
    #[inline]
    pub(crate) fn over_high(&self) -> bool {
        self.count >= self.high
    }

    /// How many pages a drain for being over `high` frees: the kernel's
    /// nr_pcp_free, the pages freed lately kept between a batch and `high`
    /// less a batch, and at least down to about `high - batch`.
    #[inline]
    pub(crate) fn drain_target(&self) -> u32 {
        let lately = self.free_count.clamp(self.batch, self.high.saturating_sub(self.batch).max(self.batch));
        lately.max((self.count + self.batch).saturating_sub(self.high))
    }

    /// Where the next over-high drain starts.
    #[inline]
    pub(crate) fn next_list(&self) -> usize {
        self.next_list
    }

    #[inline]
    fn next_nonempty(&self, mut pi: usize) -> usize {
        for _ in 0..NR_PCP_LISTS {
            if !self.lists[pi].is_empty() {
                return pi;
            }
            pi = (pi + 1) % NR_PCP_LISTS;
        }
        unreachable!("drain of {} pages found every list empty", self.count)
    }
}

/// A block as one sortable word: pfn above, order below.
#[inline(always)]
pub fn block_key(pfn: u64, order: Order) -> u64 {
    (pfn << 5) | order.get() as u64
}

/// The block of a [`block_key`] word.
#[inline(always)]
pub(crate) fn unkey(k: u64) -> (u64, Order) {
    let o = (k & 31) as u32;
    debug_assert!(o <= crate::types::MAX_ORDER, "block key with order {o}");
    (k >> 5, Order::new(o).unwrap_or(Order::MAX))
}
