//! Statistics: lock-free free-page counters (written under the zone lock, read
//! without it), per-CPU event counters, consistent snapshots, and the /proc
//! reports in the kernel's formats.

pub mod events;
pub mod report;
pub mod snapshot;

pub use report::{
    BuddyInfo, BuddyInfoZone, PageTypeInfo, PageTypeInfoZone, PcpReport, PcpStat, VmStat, ZoneInfo, ZoneInfoZone,
    PAGETYPEINFO_CAP,
};
pub use snapshot::{Snapshot, ZoneCounters};

#[cfg(test)]
mod tests;
