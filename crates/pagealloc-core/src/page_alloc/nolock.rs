//! Allocation and free from any context (the kernel's `alloc_pages_nolock`
//! and `free_pages_nolock`): a signal handler, a real-time thread that must
//! never wait.
//!
//! What these paths do and never do (async-signal safety):
//! - no heap allocation, no thread-local access (so never the thread front
//!   cache: a handler may have interrupted its own thread's front-cache
//!   operation, and registering a thread's cache allocates), never the slow
//!   path (no drain, no reclaim), no waiting: the per-CPU list and the zone
//!   lock are taken with `try_lock` only;
//! - allocation: this CPU's per-CPU list (a pop, no refill: a refill would
//!   take the zone lock), then one page of the zone's depot (order 0, its
//!   lock tried), then the buddy under a zone `try_lock`, each zone
//!   of the zonelist against its min watermark. Nothing that can be had
//!   without waiting: [`AllocError::WouldBlock`] (a lock was busy) or
//!   [`AllocError::NoMemory`] (nothing was busy, nothing was free);
//! - free: the one claim CAS of every free ([`Core::claim`], same checks and
//!   typed errors), then this CPU's list if its lock is free and the push
//!   needs no drain (a drain takes the zone lock), else the buddy under a
//!   zone `try_lock`, else the block is parked on the lock-free deferred
//!   list ([`super::deferred`]). A block whose free must wake page-lock
//!   waiters is always parked (the wake takes the wait table's locks).
//!   A no-lock free always succeeds once its claim has.
//! - counters: `nolock_alloc`, `nolock_alloc_fail`, `nolock_trylock_fail`,
//!   `nolock_free`, `nolock_deferred_free` (ours, pcpstat), counted with a
//!   relaxed atomic add on the slot of the CPU the call ran on.
//!
//! The deferred list is emptied by the next locked free (the end of
//! `Core::free_slow`, off the inline fast paths) and by every drain
//! (`drain_all`, `drain_local`), through [`Core::drain_deferred`].
//!
//! The two locks these paths try-lock, the per-CPU list locks and the zone
//! locks, are [`crate::sync::FutexMutex`]es: releasing one that other
//! threads sleep on is a swap and one `futex` wake system call, which takes
//! no other lock, so a handler's release cannot wait on anything its own
//! interrupted thread holds (parking_lot's unpark locks a bucket of a
//! process-wide table, which the interrupted thread may hold).
//!
//! With the `debug-checks` feature each zone-lock release runs the zone
//! check, whose sampled full walk allocates: these paths are then not
//! async-signal-safe (the default build is).

use super::deferred::{DeferredList, DEFER_WAKE};
use super::Core;
use crate::error::{AllocError, FreeError};
use crate::page::flags;
use crate::pcp;
use crate::types::{Gfp, MigrateType, Order, Pfn};
use crate::vmevent::VmEvent;
use crate::zone::{self, AllocFlags, Wmark};

/// The no-lock paths' state in [`Core`]: the deferred-free list.
#[derive(Debug, Default)]
pub struct NoLock {
    pub deferred: DeferredList,
}

/// The no-lock allocation's watermark (the kernel's `ALLOC_TRYLOCK` runs at
/// the min watermark: there is no slow path behind it to do better).
const NOLOCK_AF: AllocFlags = AllocFlags { wmark: Wmark::Min, high: false };

impl Core {
    /// Allocate `order.pages()` pages without waiting (see the module doc).
    pub fn alloc_nolock(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        // init_on_alloc, as every other allocation path: `prep_new_page`
        // zeroes the block unless it knows it reads zero already (released,
        // or init_on_free). Zeroing is plain stores, async-signal-safe.
        let gfp = gfp | self.zeroing.alloc_extra;
        let Some(order) = Order::new(order) else {
            return Err(AllocError::InvalidOrder { order });
        };
        let cpu = crate::cpu::current_cpu() as usize;
        let nid = cpu as u32 % self.nodes.len() as u32;
        let zl = self.nodes[nid as usize].zonelist(gfp);
        let mt = self.alloc_mt(gfp);
        let pi = pcp::pindex(order, mt).filter(|_| self.pcp_on && !(order > Order::ZERO && gfp.contains(Gfp::HIGH)));
        let mut busy = 0u64;
        for &zi in zl {
            let z = &self.zones[zi];
            if let Some(pi) = pi {
                let pcp = self.pcp.get(zi, cpu % self.pcp.nr_cpus());
                match self.pcp.try_lock(pcp) {
                    Some(mut l) => {
                        if let Some(p) = l.lists[pi].pop_back() {
                            l.count -= order.pages_u32();
                            l.note_alloc();
                            pcp.events.add_owner(z.alloc_event(), 1 << order.get());
                            l.publish(pcp);
                            drop(l);
                            return Ok(self.nolock_done(cpu, p as u64, order, gfp));
                        }
                        // The depot's pages are free in the watermark check
                        // below, so take one if its lock is free (a pop: no
                        // waiting, no allocation).
                        if order == Order::ZERO {
                            if let Some(p) = z.depot.try_take_one(mt.index()) {
                                pcp.events.add_owner(VmEvent::DepotTake, 1);
                                pcp.events.add_owner(z.alloc_event(), 1);
                                drop(l);
                                return Ok(self.nolock_done(cpu, p as u64, order, gfp));
                            }
                        }
                    }
                    None => busy += 1,
                }
            }
            if !z.watermark_ok(order, NOLOCK_AF, gfp) {
                continue;
            }
            match z.try_lock(&self.mm) {
                Some(g) => {
                    if let Some(p) = z.rmqueue_in(g, order, gfp, NOLOCK_AF, false) {
                        return Ok(self.nolock_done(cpu, p, order, gfp));
                    }
                }
                None => busy += 1,
            }
        }
        if busy > 0 {
            self.events.count_on(cpu, VmEvent::NolockTrylockFail, busy);
        }
        self.events.count_on(cpu, VmEvent::NolockAllocFail, 1);
        Err(if busy > 0 {
            AllocError::WouldBlock { order: order.get() }
        } else {
            AllocError::NoMemory { order: order.get() }
        })
    }

    /// A block the no-lock allocation took: mark it allocated, count it.
    fn nolock_done(&self, cpu: usize, p: u64, order: Order, gfp: Gfp) -> Pfn {
        self.events.count_on(cpu, VmEvent::NolockAlloc, 1);
        self.prep_new_page(p, order, gfp, flags::HEAD)
    }

    /// Free `pfn` of `order` without waiting (see the module doc): the
    /// errors are exactly those of a locked free.
    pub fn free_nolock(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        let order = super::claim::checked_order(pfn, order)?;
        let super::claim::Claim { old, order } = self.claim(pfn, order, false)?;
        let p = pfn.as_u64();
        self.init_on_free(p, order);
        let cpu = crate::cpu::current_cpu() as usize;
        let d = self.mm.page(p);
        if old & flags::WAITERS != 0 || !self.cfg.waiters_bit() {
            d.set_private_raw(crate::page::private_word_raw(order, 0) | DEFER_WAKE);
            self.defer(cpu, p);
            return Ok(());
        }
        let w = self.pageblock_word_racy(p);
        let z = &self.zones[zone::pb_zone(w)];
        let t = zone::pb_pcp_index(w).filter(|_| self.pcp_on && order <= Order::PAGEBLOCK);
        let mut busy = 0u64;
        if let Some(t) = t {
            let mt = MigrateType::from_index(t);
            if let Some(pi) = pcp::pindex(order, mt) {
                d.set_private(order, mt);
                let pcp = self.pcp.get(z.idx, cpu % self.pcp.nr_cpus());
                match self.pcp.try_lock(pcp) {
                    // Room below `high`: the push needs no drain (which would
                    // take the zone lock); and room in the ring as it is now
                    // (lists grow with use, and growing allocates, which no
                    // no-lock path may): otherwise the buddy or the deferred
                    // list takes the block.
                    Some(mut l)
                        if l.count + order.pages_u32() < l.high && l.lists[pi].len() < l.lists[pi].capacity() =>
                    {
                        l.lists[pi].push_back(p as u32);
                        l.count += order.pages_u32();
                        l.note_free(order.pages_u32());
                        pcp.events.add_owner(VmEvent::Pgfree, 1 << order.get());
                        l.publish(pcp);
                        drop(l);
                        self.events.count_on(cpu, VmEvent::NolockFree, 1);
                        return Ok(());
                    }
                    Some(_) => {}
                    None => busy += 1,
                }
            }
        }
        match z.try_lock(&self.mm) {
            Some(mut g) => {
                d.clear();
                g.free_block_locked(p, order);
                z.stats.events.add_owner(VmEvent::Pgfree, 1 << order.get());
                drop(g);
                if busy > 0 {
                    self.events.count_on(cpu, VmEvent::NolockTrylockFail, busy);
                }
                self.events.count_on(cpu, VmEvent::NolockFree, 1);
                Ok(())
            }
            None => {
                self.events.count_on(cpu, VmEvent::NolockTrylockFail, busy + 1);
                d.set_private_raw(crate::page::private_word_raw(order, 0));
                self.defer(cpu, p);
                Ok(())
            }
        }
    }

    /// Park claimed block `p` (private word set: order, maybe `DEFER_WAKE`).
    fn defer(&self, cpu: usize, p: u64) {
        self.nolock.deferred.push(self.mm.descs(), p as u32);
        self.events.count_on(cpu, VmEvent::NolockDeferred, 1);
        self.events.count_on(cpu, VmEvent::NolockFree, 1);
    }

    /// Free every parked block, if any (a relaxed load when there are none).
    /// Called where waiting on locks is allowed: the end of a locked free
    /// and every drain.
    #[inline]
    pub fn drain_deferred(&self) {
        if !self.nolock.deferred.is_empty() {
            self.drain_deferred_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn drain_deferred_slow(&self) {
        let descs = self.mm.descs();
        let mut p = self.nolock.deferred.take_all();
        while p != crate::page::NIL {
            // Read the link first: the free below rewrites it.
            let next = DeferredList::next(descs, p);
            let d = &descs[p as usize];
            let w = d.private_raw();
            // The deferring free stored a checked order in the word.
            let order = Order::new(crate::page::private_order(w)).unwrap_or(Order::MAX);
            self.zone_of(p as u64).free_to_buddy(&self.mm, p as u64, order, true, false);
            if w & DEFER_WAKE != 0 {
                self.wake_freed(Pfn::new(p as u64));
            }
            p = next;
        }
    }
}
