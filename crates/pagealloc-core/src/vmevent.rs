//! Event counters, kept per CPU (or where their writer already has exclusive
//! access) and summed on read. Those the kernel has carry its /proc/vmstat
//! names and go to `PageAllocator::vmstat`; the others are
//! this allocator's own and go to `PageAllocator::pcpstat`
//! only ([`VmEvent::in_vmstat`]).
//!
//! Two kinds of storage, both summed by readers:
//! - [`PerCpuEvents`]: one cache-line-padded block per CPU slot, for paths that
//!   hold no lock. Callers that know their CPU pass it (`count_on`); others use
//!   the CPU their thread first counted on (`count`). A thread may migrate, so
//!   two threads can share a slot: the add is a relaxed read-modify-write on a
//!   line that is almost always local and uncontended, never a global atomic.
//!   This is the kernel's `count_vm_events`.
//! - [`EventCounters`]: a block with exactly one writer at a time (a zone's block
//!   written under that zone's lock, as the buddy paths count `pgalloc_*`,
//!   `pgfree`, fallbacks and reserves). Writers do a relaxed load and store,
//!   which costs about a nanosecond where the per-CPU add costs tens.
//!
//! Readers sum every block without locks and may see a total a moment old; each
//! counter only grows, so a sum never goes backwards by more than the adds in
//! flight, and never reads torn.

#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{AtomicU64, LockedCounter, Ordering};
use crossbeam_utils::CachePadded;

macro_rules! events {
    ($($(#[$m:meta])* $v:ident = $name:literal,)*) => {
        /// A countable event.
        ///
        /// # Examples
        ///
        /// ```
        /// use pagealloc::{stats::events::VmEvent, Config, Gfp, PageAllocator};
        /// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
        /// a.free_pages(a.alloc_pages(Gfp::KERNEL, 5).unwrap(), 5).unwrap();
        /// assert_eq!(a.stats().event_count(VmEvent::PgallocNormal), 32); // pages, as /proc/vmstat counts
        /// assert_eq!(a.stats().event_count(VmEvent::Pgfree), 32);
        /// assert!(VmEvent::Pgfree.in_vmstat() && VmEvent::Pgfree.name() == "pgfree");
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum VmEvent { $($(#[$m])* $v,)* }
        /// Number of events.
        pub const NR_VM_EVENTS: usize = [$(VmEvent::$v,)*].len();
        impl VmEvent {
            /// Every event in order.
            pub const ALL: [VmEvent; NR_VM_EVENTS] = [$(VmEvent::$v,)*];
            /// The name: /proc/vmstat's for the kernel's counters
            /// ([`VmEvent::in_vmstat`]), pcpstat's for our own.
            pub const fn name(self) -> &'static str {
                match self { $(VmEvent::$v => $name,)* }
            }
        }
    };
}

events! {
    /// `pgalloc_normal` (/proc/vmstat): pages allocated from a Normal zone.
    PgallocNormal = "pgalloc_normal",
    /// `pgalloc_movable` (/proc/vmstat): pages allocated from a Movable zone.
    PgallocMovable = "pgalloc_movable",
    /// `pgfree` (/proc/vmstat): pages freed.
    Pgfree = "pgfree",
    /// `pcp_refill` (ours, pcpstat): per-CPU list refills from the buddy lists
    /// (one per batch).
    PcpRefill = "pcp_refill",
    /// `pcp_drain` (ours, pcpstat): drains of per-CPU pages to the buddy
    /// lists, one per zone-lock hold: a list's, the depot's, or a batch of
    /// frees whose list was busy.
    PcpDrain = "pcp_drain",
    /// `pcp_trylock_fail` (ours, pcpstat): allocations or frees that found the
    /// per-CPU lock taken and used the buddy.
    PcpTrylockFail = "pcp_trylock_fail",
    /// `pcp_depot_park` (ours, pcpstat): pages per-CPU drains parked in the
    /// depot instead of the buddy lists.
    DepotPark = "pcp_depot_park",
    /// `pcp_depot_take` (ours, pcpstat): pages per-CPU refills took from the
    /// depot instead of the buddy lists.
    DepotTake = "pcp_depot_take",
    /// `pgalloc_fallback_claim` (ours, pcpstat): fallback allocations that
    /// claimed a pageblock.
    FallbackClaim = "pgalloc_fallback_claim",
    /// `pgalloc_fallback_steal` (ours, pcpstat): fallback allocations that
    /// stole a block without claiming.
    FallbackSteal = "pgalloc_fallback_steal",
    /// `pgalloc_fallback_fragmenting` (ours, pcpstat): fallback allocations,
    /// claims and steals alike, from a block smaller than a pageblock: the
    /// kernel's `fragmenting=1` in its `mm_page_alloc_extfrag` event.
    FallbackFragmenting = "pgalloc_fallback_fragmenting",
    /// `highatomic_reserve` (ours, pcpstat): pageblocks reserved as HighAtomic.
    HighatomicReserve = "highatomic_reserve",
    /// `pgalloc_fail` (ours, pcpstat): allocation failures.
    AllocFail = "pgalloc_fail",
    // Page cache, LRU and reclaim: the kernel's /proc/vmstat names.
    /// `pgscan_kswapd`: LRU pages scanned by kswapd.
    PgscanKswapd = "pgscan_kswapd",
    /// `pgscan_direct`: LRU pages scanned by direct reclaim.
    PgscanDirect = "pgscan_direct",
    /// `pgsteal_kswapd`: pages reclaimed by kswapd.
    PgstealKswapd = "pgsteal_kswapd",
    /// `pgsteal_direct`: pages reclaimed by direct reclaim.
    PgstealDirect = "pgsteal_direct",
    /// `pgactivate`: pages moved to an active list.
    Pgactivate = "pgactivate",
    /// `pgdeactivate`: pages moved from an active list to an inactive one.
    Pgdeactivate = "pgdeactivate",
    /// `allocstall_normal`: direct reclaims for requests whose highest zone is Normal.
    AllocstallNormal = "allocstall_normal",
    /// `allocstall_movable`: direct reclaims for requests that may use Movable.
    AllocstallMovable = "allocstall_movable",
    /// `pageoutrun`: kswapd reclaim runs.
    Pageoutrun = "pageoutrun",
    // No-lock allocation and free (page_alloc/nolock.rs).
    /// `nolock_alloc` (ours, pcpstat): no-lock allocations that succeeded.
    NolockAlloc = "nolock_alloc",
    /// `nolock_alloc_fail` (ours, pcpstat): no-lock allocations that failed
    /// (a lock was busy, or nothing was free).
    NolockAllocFail = "nolock_alloc_fail",
    /// `nolock_trylock_fail` (ours, pcpstat): per-CPU or zone locks the no-lock
    /// paths found taken.
    NolockTrylockFail = "nolock_trylock_fail",
    /// `nolock_free` (ours, pcpstat): no-lock frees (deferred ones included).
    NolockFree = "nolock_free",
    /// `nolock_deferred_free` (ours, pcpstat): no-lock frees parked on the
    /// deferred list because no lock could be had without waiting.
    NolockDeferred = "nolock_deferred_free",
    // Migration and compaction.
    /// `pgmigrate_success` (/proc/vmstat): pages migrated.
    PgmigrateSuccess = "pgmigrate_success",
    /// `pgmigrate_fail` (/proc/vmstat): pages whose migration was tried and
    /// failed (put back untouched).
    PgmigrateFail = "pgmigrate_fail",
    /// `compact_migrate_scanned` (/proc/vmstat): pages the migrate scanner looked at.
    CompactMigrateScanned = "compact_migrate_scanned",
    /// `compact_free_scanned` (/proc/vmstat): pages the free scanner looked at.
    CompactFreeScanned = "compact_free_scanned",
    /// `compact_isolated` (/proc/vmstat): pages isolated by either scanner.
    CompactIsolated = "compact_isolated",
    /// `compact_stall` (/proc/vmstat): direct compactions entered by allocations.
    CompactStall = "compact_stall",
    /// `compact_fail` (/proc/vmstat): direct compactions after which the allocation still failed.
    CompactFail = "compact_fail",
    /// `compact_success` (/proc/vmstat): direct compactions after which the allocation succeeded.
    CompactSuccess = "compact_success",
    // kcompactd and proactive compaction (compaction/kcompactd.rs).
    /// `compact_daemon_wake` (/proc/vmstat): kcompactd runs woken by kswapd
    /// for a high-order request.
    CompactDaemonWake = "compact_daemon_wake",
    /// `compact_daemon_migrate_scanned` (/proc/vmstat): pages kcompactd's
    /// migrate scanner looked at (also in `compact_migrate_scanned`).
    CompactDaemonMigrateScanned = "compact_daemon_migrate_scanned",
    /// `compact_daemon_free_scanned` (/proc/vmstat): pages kcompactd's free
    /// scanner looked at (also in `compact_free_scanned`).
    CompactDaemonFreeScanned = "compact_daemon_free_scanned",
}

impl VmEvent {
    /// Whether Linux (6.18) has this counter in /proc/vmstat under this name;
    /// the others are this allocator's own and only in `pcpstat`.
    pub const fn in_vmstat(self) -> bool {
        matches!(
            self,
            VmEvent::PgallocNormal
                | VmEvent::PgallocMovable
                | VmEvent::Pgfree
                | VmEvent::PgscanKswapd
                | VmEvent::PgscanDirect
                | VmEvent::PgstealKswapd
                | VmEvent::PgstealDirect
                | VmEvent::Pgactivate
                | VmEvent::Pgdeactivate
                | VmEvent::AllocstallNormal
                | VmEvent::AllocstallMovable
                | VmEvent::Pageoutrun
                | VmEvent::PgmigrateSuccess
                | VmEvent::PgmigrateFail
                | VmEvent::CompactMigrateScanned
                | VmEvent::CompactFreeScanned
                | VmEvent::CompactIsolated
                | VmEvent::CompactStall
                | VmEvent::CompactFail
                | VmEvent::CompactSuccess
                | VmEvent::CompactDaemonWake
                | VmEvent::CompactDaemonMigrateScanned
                | VmEvent::CompactDaemonFreeScanned
        )
    }
}

/// The events in /proc/vmstat, in the kernel's order (the list above keeps
/// the order subsystems were added in).
pub const VMSTAT_ORDER: [VmEvent; 23] = [
    VmEvent::PgallocNormal,
    VmEvent::PgallocMovable,
    VmEvent::AllocstallNormal,
    VmEvent::AllocstallMovable,
    VmEvent::Pgfree,
    VmEvent::Pgactivate,
    VmEvent::Pgdeactivate,
    VmEvent::PgstealKswapd,
    VmEvent::PgstealDirect,
    VmEvent::PgscanKswapd,
    VmEvent::PgscanDirect,
    VmEvent::Pageoutrun,
    VmEvent::PgmigrateSuccess,
    VmEvent::PgmigrateFail,
    VmEvent::CompactMigrateScanned,
    VmEvent::CompactFreeScanned,
    VmEvent::CompactIsolated,
    VmEvent::CompactStall,
    VmEvent::CompactFail,
    VmEvent::CompactSuccess,
    VmEvent::CompactDaemonWake,
    VmEvent::CompactDaemonMigrateScanned,
    VmEvent::CompactDaemonFreeScanned,
];

#[cfg(test)]
#[test]
fn vmstat_order_lists_every_vmstat_event() {
    let n = VmEvent::ALL.iter().filter(|e| e.in_vmstat()).count();
    assert_eq!(n, VMSTAT_ORDER.len());
    assert!(VMSTAT_ORDER.iter().all(|e| e.in_vmstat()));
}

/// One writer's block of counters (`u64`s in a row: the C fast path adds
/// to a front-cache slot's, see `front::raw`).
#[derive(Debug)]
#[repr(transparent)]
pub struct EventCounters([LockedCounter; NR_VM_EVENTS]);

impl Default for EventCounters {
    fn default() -> Self {
        Self(core::array::from_fn(|_| LockedCounter::default()))
    }
}

impl EventCounters {
    /// Zeroed counters, in a constant (statics outside loom).
    #[cfg(not(loom))]
    pub(crate) const fn new_const() -> Self {
        #[allow(clippy::declare_interior_mutable_const)] // copied into the array, never shared
        const ZERO: LockedCounter = LockedCounter::new(0);
        Self([ZERO; NR_VM_EVENTS])
    }

    /// Count `n` events; the caller is this block's only writer right now.
    #[inline(always)]
    pub fn add_owner(&self, ev: VmEvent, n: u64) {
        self.0[ev as usize].add_locked(n)
    }

    /// Add this block into `sum` (lock-free, possibly a moment stale).
    pub fn sum_into(&self, sum: &mut [u64; NR_VM_EVENTS]) {
        for (s, c) in sum.iter_mut().zip(self.0.iter()) {
            *s = s.wrapping_add(c.get_racy());
        }
    }
}

/// Event counters sharded per CPU slot (see the module docs).
#[derive(Debug)]
pub struct PerCpuEvents {
    slots: Box<[CachePadded<[AtomicU64; NR_VM_EVENTS]>]>,
}

impl PerCpuEvents {
    /// Counters for `nr_cpus` CPU slots (at least one).
    pub(crate) fn new(nr_cpus: usize) -> Self {
        let slots =
            (0..nr_cpus.max(1)).map(|_| CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0)))).collect();
        Self { slots }
    }

    /// Count `n` events on the calling thread's slot: the CPU it was on when it
    /// first counted, cached in a thread-local (asking for the CPU on every event,
    /// a `sched_getcpu` call, would cost more than the event).
    #[inline(always)]
    pub fn count(&self, ev: VmEvent, n: u64) {
        #[cfg(feature = "std")]
        {
            std::thread_local! {
                static SLOT: usize = crate::cpu::current_cpu() as usize;
            }
            self.count_on(SLOT.with(|s| *s), ev, n)
        }
        // Without threads to cache it in, the platform's CPU id.
        #[cfg(not(feature = "std"))]
        self.count_on(crate::cpu::current_cpu() as usize, ev, n)
    }

    /// Count `n` events on `cpu`'s slot (for callers that already know their CPU).
    #[inline(always)]
    pub fn count_on(&self, cpu: usize, ev: VmEvent, n: u64) {
        let slot = &self.slots[cpu % self.slots.len()];
        slot[ev as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Add every CPU's counters into `sum` (lock-free, possibly a moment stale).
    pub fn sum_into(&self, sum: &mut [u64; NR_VM_EVENTS]) {
        for slot in self.slots.iter() {
            for (s, c) in sum.iter_mut().zip(slot.iter()) {
                *s = s.wrapping_add(c.load(Ordering::Relaxed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cpu_counts_sum_over_slots() {
        let e = PerCpuEvents::new(3);
        e.count_on(0, VmEvent::Pgfree, 2);
        e.count_on(4, VmEvent::Pgfree, 3); // wraps onto slot 1
        e.count(VmEvent::PgallocNormal, 1);
        let mut sum = [0; NR_VM_EVENTS];
        e.sum_into(&mut sum);
        assert_eq!(sum[VmEvent::Pgfree as usize], 5);
        assert_eq!(sum[VmEvent::PgallocNormal as usize], 1);
        assert_eq!(sum.iter().sum::<u64>(), 6);
    }
}
