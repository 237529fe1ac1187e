//! Snapshots of the free-page counters, read without the zone lock.
//!
//! Every zone keeps, in `ZoneStats` (zone module), a free-block count per
//! (order, migratetype), NR_FREE_PAGES, pageblocks per type and the HighAtomic
//! reserve. Writers change them only while holding the zone lock, with a relaxed
//! load and store; readers here never take the lock.
//!
//! Two kinds of snapshot:
//! - [`crate::Stats::snapshot`] reads each counter once. Counters may come from
//!   slightly different instants, exactly as the kernel's /proc files do (they
//!   collect their data within a short time window, not at one instant).
//! - [`crate::Stats::snapshot_consistent`] returns counters that all held at one
//!   instant. It uses the per-zone seqcount `ZoneStats::seq`, which a writer makes
//!   odd when it takes the zone lock and even again when it drops it: the reader
//!   records every zone's sequence, reads every counter, and accepts the result only
//!   if no sequence was odd and none moved in between; otherwise it retries. No
//!   zone was inside a critical section while the counters were read, so they all
//!   held together at any instant of the read. The reader never writes shared
//!   memory and never takes a lock, so it can never block a writer; a writer never
//!   waits for readers either (a busy writer only makes readers retry).
//!
//! Ordering, edge by edge: the writer stores the odd value, then a Release fence,
//! then its counter stores; the reader's counter loads are followed by an Acquire
//! fence, then the second load of `seq`. If the reader saw any store made after
//! the fence, the fences synchronise and the second load sees the odd value (or
//! later), so the retry happens. The writer's even store is Release and the
//! reader's first load is Acquire, so a reader that starts at an even value sees
//! every counter store of the section that ended there.

use crate::mm::Mm;
use pagealloc_core::sync::{fence, Ordering};
use pagealloc_core::types::{MigrateType, ZoneType, MIGRATE_PCPTYPES, MIGRATE_TYPES, NR_ORDERS, PAGEBLOCK_ORDER};
use pagealloc_core::zone::Zone;

/// The counters of one zone.
///
/// Identity (when read consistently): `nr_free_pages == sum over order o and
/// type t != Isolate of free_blocks[o][t] << o`.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, MigrateType, PageAllocator, ZoneType};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let snap = a.stats().snapshot_consistent();
/// let z = &snap.zones[0];
/// assert_eq!((z.nid, z.zone), (0, ZoneType::Normal));
/// let typed = MigrateType::ALL.iter().filter(|&&t| t != MigrateType::Isolate);
/// assert_eq!(typed.map(|&t| z.free_pages_of_type(t)).sum::<u64>(), z.nr_free_pages); // the identity
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneCounters {
    /// Node of the zone.
    pub nid: u32,
    /// Which zone.
    pub zone: ZoneType,
    /// Free blocks per order (outer index) and migratetype (inner index).
    pub free_blocks: [[u64; MIGRATE_TYPES]; NR_ORDERS],
    /// Free pages outside isolated pageblocks (NR_FREE_PAGES): the buddy's,
    /// and the depot's order-0 pages (counted in `free_blocks[0]` too).
    /// Pages on per-CPU lists are not free pages here, as in the kernel.
    pub nr_free_pages: u64,
    /// Of those, the pages parked in the zone's depot between the per-CPU
    /// lists and the buddy.
    pub depot_pages: u64,
    /// Pageblocks per effective type (Isolate while isolated).
    pub block_count: [u64; MIGRATE_TYPES],
    /// Pages in HighAtomic-reserved pageblocks.
    pub nr_reserved_highatomic: u64,
}

impl ZoneCounters {
    /// Free blocks of one order over all types (the kernel's `nr_free`).
    pub fn free_blocks_of_order(&self, order: usize) -> u64 {
        self.free_blocks[order].iter().sum()
    }

    /// Free pages per migratetype (blocks times their size).
    pub fn free_pages_of_type(&self, mt: MigrateType) -> u64 {
        self.free_blocks.iter().enumerate().map(|(o, b)| b[mt.index()] << o).sum()
    }

    /// Free pages in non-isolated blocks of at least pageblock order (the
    /// kernel's NR_FREE_PAGES_BLOCKS).
    pub fn free_pages_blocks(&self) -> u64 {
        (PAGEBLOCK_ORDER as usize..NR_ORDERS)
            .map(|o| {
                let b = &self.free_blocks[o];
                (b.iter().sum::<u64>() - b[MigrateType::Isolate.index()]) << o
            })
            .sum()
    }
}

/// Every zone's counters, in zone order (node by node, Normal before Movable).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(8 << 20).nodes(2)).unwrap();
/// let s = a.stats().snapshot_consistent(); // every zone's counters at one instant
/// assert!(s.consistent && s.zones.len() == 2); // a Normal zone per node
/// assert_eq!(s.zones.iter().map(|z| z.nr_free_pages).sum::<u64>(), a.nr_free_pages());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// One entry per zone.
    pub zones: Vec<ZoneCounters>,
    /// True when every zone's counters held together at one instant.
    pub consistent: bool,
    /// Times a consistent read had to start again because a writer was active.
    pub retries: u64,
}

impl Mm {
    pub fn snapshot_consistent(&self) -> Snapshot {
        let zones = &self.zones;
        let mut seqs = vec![0u64; zones.len()];
        let mut retries = 0u64;
        loop {
            let mut busy = false;
            for (s, z) in seqs.iter_mut().zip(zones.iter()) {
                *s = z.stats.seq.load(Ordering::Acquire);
                busy |= *s & 1 == 1;
            }
            if !busy {
                let counters: Vec<ZoneCounters> = zones.iter().map(read_zone).collect();
                fence(Ordering::Acquire);
                if seqs.iter().zip(zones.iter()).all(|(s, z)| z.stats.seq.load(Ordering::Relaxed) == *s) {
                    return Snapshot { zones: counters, consistent: true, retries };
                }
            }
            retries += 1;
            backoff(retries);
        }
    }
}

/// Spin a little, then give the CPU away: a writer preempted inside its critical
/// section (more threads than cores) needs the CPU to finish it.
#[inline]
fn backoff(retries: u64) {
    if retries < 16 {
        for _ in 0..(1 << retries.min(6)) {
            std::hint::spin_loop();
        }
    } else {
        pagealloc_core::sync::spin_yield();
    }
}

/// One zone's counters, each read once with a relaxed load; the depot's
/// pages are free order-0 pages of their type.
pub(crate) fn read_zone(z: &Zone) -> ZoneCounters {
    let s = &z.stats;
    let depot: [u64; MIGRATE_PCPTYPES] = std::array::from_fn(|t| z.depot.pages_of_racy(t));
    let depot_pages = depot.iter().sum();
    let mut free_blocks: [[u64; MIGRATE_TYPES]; NR_ORDERS] =
        std::array::from_fn(|o| std::array::from_fn(|t| s.free_blocks[o][t].get_racy()));
    for (t, n) in depot.iter().enumerate() {
        free_blocks[0][t] += n;
    }
    ZoneCounters {
        nid: z.nid,
        zone: z.ztype,
        free_blocks,
        nr_free_pages: s.nr_free_pages.get_racy() + depot_pages,
        depot_pages,
        block_count: std::array::from_fn(|t| s.block_count[t].get_racy()),
        nr_reserved_highatomic: s.nr_reserved_highatomic.get_racy(),
    }
}
