//! The lock statistics as text (`LockStatReport`'s `Display`).

use super::{tick_unit, PcpLockStatReport, ZoneLockStat, LOCKSTAT_BUCKETS};
#[allow(unused_imports)]
use crate::prelude::*;

/// Every zone's lock statistics; `to_string()` gives one block per zone.
///
/// # Examples
/// ```
/// let r = pagealloc::PageAllocator::new(pagealloc::Config::small(4 << 20)).unwrap().lockstat();
/// assert!(r.to_string().starts_with("Node 0, zone   Normal lock")); // one block per zone
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatReport {
    /// Per zone.
    pub zones: Vec<ZoneLockStat>,
    /// Per zone and CPU: the per-CPU list locks, zone-major.
    pub pcp: Vec<PcpLockStatReport>,
}

/// Write one histogram table: wait and hold per bucket, up to the last
/// non-empty bucket.
fn write_hists(f: &mut core::fmt::Formatter<'_>, wait: &[u64], hold: &[u64]) -> core::fmt::Result {
    writeln!(f, "  {:>16} {:>14} {:>14}", "ticks <", "wait", "hold")?;
    let last = (0..LOCKSTAT_BUCKETS).rev().find(|&i| wait[i] != 0 || hold[i] != 0);
    for i in 0..=last.unwrap_or(0) {
        let bound = if i == LOCKSTAT_BUCKETS - 1 { "inf".to_string() } else { (1u64 << i).to_string() };
        writeln!(f, "  {:>16} {:>14} {:>14}", bound, wait[i], hold[i])?;
    }
    Ok(())
}

impl core::fmt::Display for LockStatReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let unit = tick_unit();
        for z in &self.zones {
            let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            writeln!(
                f,
                "Node {}, zone {:>8} lock ({unit}; counting {})",
                z.nid,
                z.name,
                if z.enabled { "on" } else { "off" }
            )?;
            writeln!(f, "  acquisitions      {}", z.acquisitions)?;
            writeln!(f, "  wait_total        {}", z.wait_ticks)?;
            writeln!(f, "  wait_avg          {:.1}", per(z.wait_ticks, z.acquisitions))?;
            writeln!(f, "  hold_samples      {}", z.hold_samples)?;
            writeln!(f, "  hold_total        {}", z.hold_ticks)?;
            writeln!(f, "  hold_avg          {:.1}", per(z.hold_ticks, z.hold_samples))?;
            writeln!(f, "  drains            {}", z.drains)?;
            writeln!(f, "  drain_pages       {}", z.drain_pages)?;
            writeln!(f, "  drain_hold_avg    {:.1}", per(z.drain_hold_ticks, z.drains))?;
            writeln!(f, "  drain_hold_page   {:.2}", per(z.drain_hold_ticks, z.drain_pages))?;
            writeln!(f, "  refills           {}", z.refills)?;
            writeln!(f, "  refill_pages      {}", z.refill_pages)?;
            writeln!(f, "  refill_hold_avg   {:.1}", per(z.refill_hold_ticks, z.refills))?;
            writeln!(f, "  refill_hold_page  {:.2}", per(z.refill_hold_ticks, z.refill_pages))?;
            writeln!(f, "  list_ops_timed    {}", z.list_ops)?;
            write_hists(f, &z.wait_hist, &z.hold_hist)?;
        }
        let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        for p in self.pcp.iter().filter(|p| p.acquisitions != 0) {
            writeln!(
                f,
                "Node {}, zone {:>8} cpu {} pcp lock ({unit}; counting {})",
                p.nid,
                p.name,
                p.cpu,
                if p.enabled { "on" } else { "off" }
            )?;
            writeln!(f, "  acquisitions      {}", p.acquisitions)?;
            writeln!(f, "  blocking          {}", p.blocking)?;
            writeln!(f, "  wait_total        {}", p.wait_ticks)?;
            writeln!(f, "  wait_avg          {:.1}", per(p.wait_ticks, p.acquisitions))?;
            writeln!(f, "  holds_timed       {}", p.timed)?;
            writeln!(f, "  hold_timed_total  {}", p.hold_ticks)?;
            writeln!(f, "  hold_avg          {:.1}", per(p.hold_ticks, p.timed))?;
            write_hists(f, &p.wait_hist, &p.hold_hist)?;
        }
        let idle = self.pcp.iter().filter(|p| p.acquisitions == 0).count();
        if idle != 0 {
            writeln!(f, "pcp locks never taken while counting: {idle} (zone, cpu) sets, not shown")?;
        }
        Ok(())
    }
}
