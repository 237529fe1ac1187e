//! The table of every CPU's lists for every zone (the kernel's per-zone
//! `per_cpu_pages`), sized at construction, and the locking of one set.

use super::{Pcp, PcpGuard};
use crate::config::Config;
use crate::lockstat::{ticks, PcpLockStatReport};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::RelaxedFlag;
use crate::types::ZoneIdx;
use crate::zone::{Wmark, Zone};
use crossbeam_utils::CachePadded;

/// Every CPU's lists for every zone, `zone * nr_cpus + cpu`.
pub struct PcpSet {
    pcps: Box<[CachePadded<Pcp>]>,
    nr_cpus: usize,
    /// The allocator's id, for failure injection's per-allocator targeting.
    alloc_id: u64,
    /// Lock statistics on (`Config::lock_stats`, `set_lock_stats`): read by
    /// blocking acquisitions (try-locks go by their set's own switch).
    stats_on: RelaxedFlag,
}

impl PcpSet {
    /// Lists for every zone, `nr_cpus` sets each, sized by the kernel's
    /// formulas (or `cfg`'s overrides).
    pub(crate) fn new(zones: &[Zone], nr_cpus: usize, cfg: &Config, alloc_id: u64) -> Self {
        let mut pcps = Vec::with_capacity(zones.len() * nr_cpus);
        let filler = cfg.hugepage_filler && cfg.backing == crate::config::Backing::HugePages;
        for z in zones {
            let batch = cfg.pcp_batch.unwrap_or_else(|| super::default_batch(z.managed)).max(1);
            let (lo, hi) = super::high_bounds(
                z.managed,
                z.wmark[Wmark::Low as usize],
                nr_cpus,
                batch,
                cfg.percpu_pagelist_high_fraction,
            );
            for _ in 0..nr_cpus {
                pcps.push(CachePadded::new(Pcp::new(batch, lo, hi, filler)));
            }
        }
        for (i, p) in pcps.iter().enumerate() {
            // Each set its own sampling gaps.
            p.lists.lock().lockstat = crate::lockstat::PcpLockStat::new(cfg.lock_stats, i as u32 + 1);
        }
        Self { pcps: pcps.into_boxed_slice(), nr_cpus, alloc_id, stats_on: RelaxedFlag::new(cfg.lock_stats) }
    }

    /// CPU slots per zone.
    #[inline(always)]
    pub fn nr_cpus(&self) -> usize {
        self.nr_cpus
    }

    /// The calling CPU's lists for zone `zi`.
    #[inline(always)]
    pub fn here(&self, zi: ZoneIdx) -> &Pcp {
        self.get(zi, crate::cpu::current_cpu() as usize % self.nr_cpus)
    }

    /// CPU `cpu`'s lists for zone `zi`.
    #[inline(always)]
    pub fn get(&self, zi: ZoneIdx, cpu: usize) -> &Pcp {
        &self.pcps[zi.get() * self.nr_cpus + cpu]
    }

    /// Every set, zone-major.
    pub fn iter(&self) -> impl Iterator<Item = &Pcp> {
        self.pcps.iter().map(|p| &**p)
    }

    /// Try to take a set's lock (fault injection may say no). Never waits.
    /// The hold is timed when lock statistics are on.
    #[inline(always)]
    pub fn try_lock<'a>(&self, pcp: &'a Pcp) -> Option<PcpGuard<'a>> {
        let l = pcp.lists.try_lock().filter(|_| crate::failinject::trylock_ok(self.alloc_id))?;
        Some(PcpGuard::new(l))
    }

    /// Take a set's lock, waiting for it (remote drains only: never on a
    /// path a signal handler may run). Wait and hold are timed when lock
    /// statistics are on.
    pub fn lock<'a>(&self, pcp: &'a Pcp) -> PcpGuard<'a> {
        let t0 = if self.stats_on.get() { ticks() | 1 } else { 0 };
        PcpGuard::waited(pcp.lists.lock(), t0)
    }

    /// Switch the per-CPU locks' statistics (a hold in progress counts as it
    /// started): each set's switch under its lock (waited for, not counted).
    pub fn set_lock_stats(&self, on: bool) {
        self.stats_on.set(on);
        for p in self.pcps.iter() {
            p.lists.lock().lockstat.set_enabled(on);
        }
    }

    /// Every set's lock statistics, zone-major, each read under its lock
    /// (waited for, not counted); `zones` gives each zone's identity and
    /// switch.
    pub fn lockstat(&self, zones: &[crate::lockstat::ZoneLockStat]) -> Vec<PcpLockStatReport> {
        let n = self.nr_cpus;
        self.pcps.iter().enumerate().map(|(i, p)| p.lists.lock().lockstat.read(&zones[i / n], i % n)).collect()
    }
}
