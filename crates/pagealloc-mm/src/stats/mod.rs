//! Statistics: lock-free free-page counters (written under the zone lock, read
//! without it), per-CPU event counters, consistent snapshots, and the /proc
//! reports in the kernel's formats.

/// Event counters in the kernel's /proc/vmstat names (plus our own, reported
/// by `pcpstat`).
pub mod events {
    pub use pagealloc_core::vmevent::{VmEvent, NR_VM_EVENTS};
}
pub mod report;
pub mod snapshot;

pub use report::{
    BuddyInfo, BuddyInfoZone, PageTypeInfo, PageTypeInfoZone, PcpReport, PcpStat, VmStat, ZoneInfo, ZoneInfoZone,
    PAGETYPEINFO_CAP,
};
pub use snapshot::{Snapshot, ZoneCounters};

#[cfg(test)]
mod tests;
