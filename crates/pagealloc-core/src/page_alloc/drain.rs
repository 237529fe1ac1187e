//! Draining (the kernel's `drain_local_pages`, `drain_all_pages`): per-CPU
//! lists, front caches, the zones' depots (`drain_all` only) and the no-lock
//! frees' deferred list back to the buddy. Drains of every CPU are
//! serialised by the front caches' drain lock, which [`crate::front::Paused`]
//! holds while it holds every thread's cache.

use super::Core;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{Order, ZoneIdx};
use crate::vmevent::{VmEvent, NR_VM_EVENTS};

impl Core {
    /// Every page on per-CPU lists and in front caches back to the buddy.
    pub fn drain_all(&self) {
        self.drain_deferred();
        if self.front_on {
            let mut pages = Vec::new();
            let mut kept = [0u64; NR_VM_EVENTS];
            let mut paused = self.fronts.pause_all();
            paused.take_all(&mut pages, &mut kept);
            self.keep_events(&kept);
            self.free_pages_to_buddy(&mut pages);
            self.drain_every_pcp();
            drop(paused);
        } else {
            let _d = self.fronts.drain_lock();
            self.drain_every_pcp();
        }
    }

    /// Every CPU's lists of every zone, then every zone's depot (whose
    /// pages then merge in the buddy too).
    fn drain_every_pcp(&self) {
        for z in self.zones.iter() {
            for cpu in 0..self.pcp.nr_cpus() {
                self.drain_pcp(z.idx, cpu);
            }
            crate::pcp::flush_depot(z, &self.mm);
        }
    }

    /// This CPU's per-CPU pages and this thread's front cache to the buddy.
    pub fn drain_local(&self) {
        self.drain_deferred();
        if self.front_on {
            let mut pages = Vec::new();
            if let Some(o) = self.fronts.current() {
                crate::front::take_own(o, &mut pages);
            }
            self.free_pages_to_buddy(&mut pages);
        }
        let cpu = crate::cpu::current_cpu() as usize % self.pcp.nr_cpus();
        for zi in self.zones.iter().map(|z| z.idx) {
            self.drain_pcp(zi, cpu);
        }
    }

    /// Event counts of forgotten front caches, kept in the allocator's own.
    fn keep_events(&self, kept: &[u64; NR_VM_EVENTS]) {
        for (ev, &n) in VmEvent::ALL.iter().zip(kept) {
            if n != 0 {
                self.events.count_on(0, *ev, n);
            }
        }
    }

    /// Return claimed order-0 pages to the buddy, one zone-lock hold per zone.
    fn free_pages_to_buddy(&self, pages: &mut [u64]) {
        pages.sort_unstable();
        let mut i = 0;
        while i < pages.len() {
            let z = self.zone_of(pages[i]);
            let mut g = z.lock(&self.mm);
            while i < pages.len() && z.contains(pages[i]) {
                let p = pages[i];
                self.mm.page(p).clear();
                let mt = z.pageblock_mt_racy(p);
                g.free_one_locked(p, Order::ZERO, mt);
                i += 1;
            }
        }
    }

    /// Empty one CPU's lists for one zone (blocking on its lock: remote drains
    /// wait, as the kernel's do).
    pub(crate) fn drain_pcp(&self, zi: ZoneIdx, cpu: usize) {
        let pcp = self.pcp.get(zi, cpu);
        let mut l = self.pcp.lock(pcp);
        l.drain_all(&self.zones[zi], &self.mm, &self.cfg);
        l.publish(pcp);
    }
}
