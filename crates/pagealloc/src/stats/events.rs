//! Event counters in the kernel's /proc/vmstat names (plus our own), kept where
//! their writer already has exclusive access and summed on read.
//!
//! A block of counters ([`EventCounters`]) has exactly one writer at a time: a
//! zone's block is written under that zone's lock, a thread's block only by its
//! thread. Writers do a relaxed load and store (no read-modify-write); readers sum
//! every block without locks and may see a total a moment old.

use crate::sync::LockedCounter;

macro_rules! events {
    ($($(#[$m:meta])* $v:ident = $name:literal,)*) => {
        /// A countable event.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum VmEvent { $($(#[$m])* $v,)* }
        /// Number of events.
        pub const NR_VM_EVENTS: usize = [$(VmEvent::$v,)*].len();
        impl VmEvent {
            /// Every event in order.
            pub const ALL: [VmEvent; NR_VM_EVENTS] = [$(VmEvent::$v,)*];
            /// The /proc/vmstat name.
            pub const fn name(self) -> &'static str {
                match self { $(VmEvent::$v => $name,)* }
            }
        }
    };
}

events! {
    /// Pages allocated from a Normal zone.
    PgallocNormal = "pgalloc_normal",
    /// Pages allocated from a Movable zone.
    PgallocMovable = "pgalloc_movable",
    /// Pages freed.
    Pgfree = "pgfree",
    /// Per-CPU list refills from the buddy lists (one per batch).
    PcpRefill = "pcp_refill",
    /// Per-CPU list drains to the buddy lists (one per drain).
    PcpDrain = "pcp_drain",
    /// Allocations or frees that found the per-CPU lock taken and used the buddy.
    PcpTrylockFail = "pcp_trylock_fail",
    /// Fallback allocations that claimed a pageblock.
    FallbackClaim = "pgalloc_fallback_claim",
    /// Fallback allocations that stole a block without claiming.
    FallbackSteal = "pgalloc_fallback_steal",
    /// Pageblocks reserved as HighAtomic.
    HighatomicReserve = "highatomic_reserve",
    /// Allocation failures.
    AllocFail = "pgalloc_fail",
}

/// One writer's block of counters.
#[derive(Debug, Default)]
pub(crate) struct EventCounters([LockedCounter; NR_VM_EVENTS]);

impl EventCounters {
    /// Count `n` events; the caller is this block's only writer right now.
    #[inline(always)]
    pub(crate) fn add_owner(&self, ev: VmEvent, n: u64) {
        self.0[ev as usize].add_locked(n)
    }

    /// Add this block into `sum` (lock-free, possibly a moment stale).
    pub(crate) fn sum_into(&self, sum: &mut [u64; NR_VM_EVENTS]) {
        for (s, c) in sum.iter_mut().zip(self.0.iter()) {
            *s = s.wrapping_add(c.get_racy());
        }
    }
}
