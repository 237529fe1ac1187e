//! The façade's /proc files: lock-free counter snapshots and the reports
//! in the kernel's formats (built by `stats` from the zones and per-CPU
//! lists). Not free page reporting, which is `reporting`.

use super::handles::Stats;
use crate::stats::report::{BuddyInfo, PageTypeInfo, PcpStat, VmStat, ZoneInfo, ZoneInfoZone};
use crate::stats::snapshot::{read_zone, Snapshot};
use pagealloc_core::vmevent::VmEvent;

impl<'a> Stats<'a> {
    /// Read every zone's counters once, without locks. Counters may come from
    /// slightly different instants, as the kernel's own reports do.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot { zones: self.a.core.zones.iter().map(read_zone).collect(), consistent: false, retries: 0 }
    }

    /// Read every zone's counters as they all were at one instant, without locks
    /// and without ever making a writer wait (see the module docs). Retries while
    /// writers are active; under a constant stream of writers it may take a while,
    /// but writers are never slowed by it.
    pub fn snapshot_consistent(&self) -> Snapshot {
        self.a.core.snapshot_consistent()
    }

    /// /proc/buddyinfo, read without locks. `to_string()` gives the kernel's text.
    pub fn buddyinfo(&self) -> BuddyInfo {
        self.snapshot().buddyinfo()
    }

    /// /proc/pagetypeinfo, lock-free from the counters. `render()` gives the
    /// kernel's text.
    pub fn pagetypeinfo(&self) -> PageTypeInfo {
        // The old design, walking the lists under the zone lock, when the
        // seed-variants build asks for it.
        #[cfg(feature = "seed-variants")]
        if self.a.core.cfg.pagetypeinfo_walk_lists {
            return self.a.core.pagetypeinfo_walk_lists();
        }
        self.snapshot().pagetypeinfo()
    }

    /// /proc/zoneinfo, read without locks.
    pub fn zoneinfo(&self) -> ZoneInfo {
        let inner = &*self.a.core;
        let mut seen = Vec::new();
        ZoneInfo {
            zones: inner
                .zones
                .iter()
                .map(|z| {
                    let c = read_zone(z);
                    // The node's section on its first zone, as the kernel does.
                    let node_stats = if seen.contains(&z.nid) {
                        Vec::new()
                    } else {
                        seen.push(z.nid);
                        let (inactive, active) = inner.vmscan.lru_sizes(z.nid as usize);
                        let (dirty, writeback) = inner
                            .zones
                            .iter()
                            .filter(|y| y.nid == z.nid)
                            .map(|y| inner.vmscan.gauges.zone(y.idx.get()))
                            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
                        vec![
                            ("nr_inactive_file", inactive),
                            ("nr_active_file", active),
                            ("nr_dirty", dirty),
                            ("nr_writeback", writeback),
                        ]
                    };
                    // Per zone, in Linux's order (its anon and unevictable
                    // lists we do not have).
                    let (zi, za) = inner.vmscan.zone_lru_sizes(z.nid as usize, z.idx.get());
                    let (zd, zw) = inner.vmscan.gauges.zone(z.idx.get());
                    let [min, low, high] = z.wmark;
                    ZoneInfoZone {
                        nid: z.nid,
                        zone: z.ztype.name(),
                        free: c.nr_free_pages,
                        boost: 0,
                        min,
                        low,
                        high,
                        promo: high + (high - low),
                        spanned: z.spanned(),
                        present: inner.managed_now(z),
                        managed: inner.managed_now(z),
                        cma: 0,
                        protection: z.lowmem_reserve.to_vec(),
                        node_stats,
                        stats: vec![
                            ("nr_free_pages", c.nr_free_pages),
                            ("nr_free_pages_blocks", c.free_pages_blocks()),
                            ("nr_zone_inactive_file", zi),
                            ("nr_zone_active_file", za),
                            ("nr_zone_write_pending", zd + zw),
                        ],
                        pagesets: inner.pcp_report(z),
                        start_pfn: z.start,
                    }
                })
                .collect(),
        }
    }

    /// /proc/vmstat: free-page totals, then the event counters the kernel has
    /// ([`VmEvent::in_vmstat`]) summed over CPUs, in the kernel's order.
    pub fn vmstat(&self) -> VmStat {
        let snap = self.snapshot();
        let mut items = vec![
            ("nr_free_pages", snap.zones.iter().map(|z| z.nr_free_pages).sum()),
            ("nr_free_pages_blocks", snap.zones.iter().map(|z| z.free_pages_blocks()).sum()),
        ];
        // Page cache gauges, in the kernel's node-stat order.
        let (inactive, active) = (0..self.a.core.nodes.len())
            .map(|n| self.a.core.vmscan.lru_sizes(n))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let g = &self.a.core.vmscan.gauges;
        items.extend([
            ("nr_inactive_file", inactive),
            ("nr_active_file", active),
            ("nr_dirty", g.nr_dirty.load(std::sync::atomic::Ordering::Relaxed)),
            ("nr_writeback", g.nr_writeback.load(std::sync::atomic::Ordering::Relaxed)),
        ]);
        // Pages dirtied and written (Linux's node stats after `nr_dirty`),
        // then the dirty thresholds, where Linux prints them (after the node
        // stats, before the events).
        let t = self.a.reclaim().dirty_thresholds();
        items.extend([
            ("nr_dirtied", self.a.core.vmscan.dirty.dirtied.load(std::sync::atomic::Ordering::Relaxed)),
            ("nr_written", g.nr_written.load(std::sync::atomic::Ordering::Relaxed)),
            ("nr_dirty_threshold", t.limit),
            ("nr_dirty_background_threshold", t.background),
        ]);
        let ev = self.a.core.event_totals();
        items.extend(pagealloc_core::vmevent::VMSTAT_ORDER.iter().map(|&e| (e.name(), ev[e as usize])));
        VmStat { items }
    }

    /// `pcpstat`: this allocator's own counters (no kernel file has them),
    /// read without locks. `to_string()` gives `name value` lines.
    pub fn pcpstat(&self) -> PcpStat {
        let ev = self.a.core.event_totals();
        let e = |v: VmEvent| ev[v as usize];
        let (rs, res) = (self.a.reporting().page_reporting_stats(), self.a.reporting().residency());
        PcpStat {
            pcp_refill: e(VmEvent::PcpRefill),
            pcp_drain: e(VmEvent::PcpDrain),
            pcp_trylock_fail: e(VmEvent::PcpTrylockFail),
            pcp_depot_park: e(VmEvent::DepotPark),
            pcp_depot_take: e(VmEvent::DepotTake),
            nr_depot: self.a.core.zones.iter().map(|z| z.depot.pages_racy()).sum(),
            pgalloc_fallback_claim: e(VmEvent::FallbackClaim),
            pgalloc_fallback_steal: e(VmEvent::FallbackSteal),
            pgalloc_fallback_fragmenting: e(VmEvent::FallbackFragmenting),
            highatomic_reserve: e(VmEvent::HighatomicReserve),
            pgalloc_fail: e(VmEvent::AllocFail),
            nr_reserved_highatomic: self.snapshot().zones.iter().map(|z| z.nr_reserved_highatomic).sum(),
            page_reporting_passes: rs.passes,
            page_reporting_released: rs.released_pages,
            page_reporting_errors: rs.errors,
            page_reporting_zero_skipped: rs.zeroing_skipped,
            nr_free_reported: res.iter().map(|z| z.reported).sum(),
            nr_free_resident: res.iter().map(|z| z.free_resident).sum(),
            nr_resident_estimate: res.iter().map(|z| z.resident).sum(),
            nolock_alloc: e(VmEvent::NolockAlloc),
            nolock_alloc_fail: e(VmEvent::NolockAllocFail),
            nolock_trylock_fail: e(VmEvent::NolockTrylockFail),
            nolock_free: e(VmEvent::NolockFree),
            nolock_deferred_free: e(VmEvent::NolockDeferred),
        }
    }

    /// Lock statistics, read without locks: per zone, the zone lock's wait
    /// and hold histograms and the per-CPU drains' hold time and pages; per
    /// zone and CPU, the per-CPU list lock's wait and hold histograms.
    /// Counted only with `Config::lock_stats` on (the default). `to_string()`
    /// gives the text.
    pub fn lockstat(&self) -> pagealloc_core::lockstat::LockStatReport {
        let zones: Vec<_> =
            self.a.core.zones.iter().map(|z| z.lockstat.read(z.idx.get(), z.nid, z.ztype.name())).collect();
        let pcp = self.a.core.pcp.lockstat(&zones);
        pagealloc_core::lockstat::LockStatReport { zones, pcp }
    }

    /// Switch lock statistics (zone locks and per-CPU list locks) on or off
    /// at run time (a hold in progress counts as it started). What was
    /// counted stays.
    pub fn set_lock_stats(&self, on: bool) {
        for z in &self.a.core.zones {
            z.lockstat.on.set(on);
        }
        self.a.core.pcp.set_lock_stats(on);
    }

    /// One event counter, summed over CPUs (lock-free).
    pub fn event_count(&self, ev: VmEvent) -> u64 {
        self.a.core.event_totals()[ev as usize]
    }
}
