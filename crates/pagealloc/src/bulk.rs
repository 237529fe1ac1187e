//! The bulk allocator (seed 3) and bulk free, order 0 only.
//!
//! `alloc_pages_bulk` fills only the empty slots of a caller's slice, under one
//! hold of this CPU's per-CPU lock, and returns the number of leading populated
//! slots. It can only write through the `&mut [Option<Pfn>]` it was given, so the
//! kernel reviewer's worry in seed 3 (writing past the array) cannot happen. With
//! one slot to fill, or when the per-CPU lock is busy, it uses the single-page path.

use crate::allocator::{AllocFlags, PageAllocator};
use crate::error::{BulkFreeError, FreeError};
use crate::page::flags;
use crate::pcp;
use crate::types::{Gfp, Pfn, MIGRATE_PCPTYPES};

/// Pages buffered per type before joining a per-CPU list in bulk free.
const BUF: usize = 64;
use crate::zone::Wmark;

impl PageAllocator {
    /// Fill the `None` slots of `slots` with order-0 pages (populated slots are
    /// left alone, holes are skipped) and return how many leading slots are now
    /// populated. A full slice returns its length without allocating; an empty
    /// one returns 0. On memory shortage it stops early: the return value tells
    /// where the first hole is.
    pub fn alloc_pages_bulk(&self, gfp: Gfp, slots: &mut [Option<Pfn>]) -> usize {
        let lead = slots.iter().take_while(|s| s.is_some()).count();
        if lead == slots.len() {
            return lead;
        }
        // With one hole left, the single-page path does it.
        let holes = slots[lead..].iter().filter(|s| s.is_none()).count();
        if holes > 1 {
            let mut cursor = lead;
            let got = self.bulk_fast(gfp, holes, |p| {
                while slots[cursor].is_some() {
                    cursor += 1;
                }
                slots[cursor] = Some(p);
                cursor += 1;
            });
            if got == holes {
                return slots.len();
            }
        }
        // Whatever the fast path could not fill goes one page at a time (this is
        // also the path that may dip into reserves and drain other CPUs).
        for s in slots[lead..].iter_mut() {
            if s.is_none() {
                match self.alloc_pages(gfp, 0) {
                    Ok(p) => *s = Some(p),
                    Err(_) => break,
                }
            }
        }
        slots.iter().take_while(|s| s.is_some()).count()
    }

    /// Allocate up to `nr` order-0 pages onto the end of `out` (the list form of
    /// the bulk allocator). Returns how many were added.
    pub fn alloc_pages_bulk_list(&self, gfp: Gfp, nr: usize, out: &mut Vec<Pfn>) -> usize {
        let before = out.len();
        out.reserve(nr);
        if nr > 1 {
            self.bulk_fast(gfp, nr, |p| out.push(p));
        }
        while out.len() - before < nr {
            match self.alloc_pages(gfp, 0) {
                Ok(p) => out.push(p),
                Err(_) => break,
            }
        }
        out.len() - before
    }

    /// The fast path of both forms: up to `nr` pages from this CPU's list for the
    /// first zone with room, under one pcp lock hold, each handed to `sink`.
    /// Returns how many it handed over (0 when lists are off or busy, or no zone
    /// is above its watermark).
    fn bulk_fast(&self, gfp: Gfp, nr: usize, mut sink: impl FnMut(Pfn)) -> usize {
        let inner = &*self.inner;
        let mt = gfp.migratetype();
        let (Some(pi), true) = (pcp::pindex(0, mt), inner.pcp_on) else {
            return 0;
        };
        let af = AllocFlags { wmark: Wmark::Low, high: false };
        let Some(node) = inner.nodes.get(self.numa_node_id() as usize) else {
            return 0;
        };
        for &zi in node.zonelist(gfp) {
            let z = &inner.zones[zi];
            if !inner.watermark_ok(z, 0, af, gfp) {
                continue;
            }
            return inner
                .pcp_take(z, 0, mt, pi, af, gfp, nr, true, |p| sink(inner.prep_new_page(p, 0, gfp)))
                .unwrap_or(0);
        }
        0
    }

    /// Free order-0 pages in one pass. Invalid entries (the same classes as
    /// [`PageAllocator::free_pages`]) are skipped and reported with their indexes;
    /// every valid one is freed.
    pub fn free_pages_bulk(&self, pfns: &[Pfn]) -> Result<(), BulkFreeError> {
        let rejected = self.free_bulk_core(pfns.len(), |i| Some(pfns[i]));
        if rejected.is_empty() {
            Ok(())
        } else {
            Err(BulkFreeError { rejected })
        }
    }

    /// Free every populated slot of an array filled by
    /// [`PageAllocator::alloc_pages_bulk`] (order-0 pages) and empty it: the
    /// array form's partner, with no copy into a separate list. Empty slots are
    /// skipped; invalid entries stay in their slots and are reported with their
    /// indexes, every valid one is freed.
    pub fn free_pages_bulk_slots(&self, slots: &mut [Option<Pfn>]) -> Result<(), BulkFreeError> {
        let rejected = self.free_bulk_core(slots.len(), |i| slots[i]);
        if rejected.is_empty() {
            slots.fill(None);
            return Ok(());
        }
        let mut r = rejected.iter().map(|&(i, _)| i).peekable();
        for (i, s) in slots.iter_mut().enumerate() {
            if r.peek() == Some(&i) {
                r.next();
            } else {
                *s = None;
            }
        }
        Err(BulkFreeError { rejected })
    }

    /// The bulk free: entries `0..len`, entry `i` given by `get(i)` (None: skip).
    /// Returns the rejected entries in index order.
    fn free_bulk_core(&self, len: usize, get: impl Fn(usize) -> Option<Pfn>) -> Vec<(usize, FreeError)> {
        let inner = &*self.inner;
        let mut rejected: Vec<(usize, FreeError)> = Vec::new();
        let mut woken: Vec<Pfn> = Vec::new();
        let wake_all = !inner.cfg.page_lock_waiters_bit;
        let mut i = 0;
        while i < len {
            // Open a run on the zone of the next valid entry.
            let Some(pfn) = get(i) else {
                i += 1;
                continue;
            };
            let old = match inner.claim_for_free_fast(pfn, 0) {
                Ok(old) => old,
                Err(e) => {
                    rejected.push((i, e));
                    i += 1;
                    continue;
                }
            };
            if old & flags::WAITERS != 0 || wake_all {
                woken.push(pfn);
            }
            i += 1;
            let z = inner.zone_of(pfn.as_u64());
            let pcp = inner.pcp_here(z.idx);
            let locked = if inner.pcp_on { inner.pcp_try_lock(pcp) } else { None };
            let Some(mut l) = locked else {
                // Busy or lists off: this page and the rest go one by one.
                inner.give_claimed(std::iter::once(pfn.as_u64()), true);
                continue;
            };
            let mut n = 0u32;
            // Pages collect per type in small buffers and join their lists in
            // one copy per buffer.
            let mut buf = [[0u32; BUF]; MIGRATE_PCPTYPES];
            let mut fill = [0usize; MIGRATE_PCPTYPES];
            let mut next = Some(pfn.as_u64());
            while let Some(p) = next.take() {
                let mt = z.pageblock_mt_racy(p);
                if mt.is_pcptype() {
                    inner.mm.page(p).set_private(0, mt);
                    let t = mt.index();
                    buf[t][fill[t]] = p as u32;
                    fill[t] += 1;
                    if fill[t] == BUF {
                        l.lists[t].extend(&buf[t]);
                        fill[t] = 0;
                    }
                    n += 1;
                } else {
                    // Isolated (or reserved) pageblock: straight to the buddy.
                    inner.free_to_buddy(z, p, 0, false);
                }
                // The next entry joins the run if it is valid and in this zone.
                while i < len {
                    let Some(q) = get(i) else {
                        i += 1;
                        continue;
                    };
                    if !z.contains(q.as_u64()) {
                        break;
                    }
                    i += 1;
                    match inner.claim_for_free_fast(q, 0) {
                        Ok(old) => {
                            if old & flags::WAITERS != 0 || wake_all {
                                woken.push(q);
                            }
                            next = Some(q.as_u64());
                            break;
                        }
                        Err(e) => rejected.push((i - 1, e)),
                    }
                }
            }
            for t in 0..MIGRATE_PCPTYPES {
                l.lists[t].extend(&buf[t][..fill[t]]);
            }
            l.count += n;
            l.free_run = l.free_run.saturating_add(n);
            pcp.events.add_owner(crate::stats::events::VmEvent::Pgfree, n as u64);
            if l.over_high() {
                let nr = l.drain_target();
                let first = l.next_list();
                l.drain(z, &inner.mm, nr, inner.cfg.drain_mode, inner.cfg.pcp_migratetype_cache, first);
            }
            l.publish(pcp);
        }
        for p in woken {
            inner.wake_freed(p);
        }
        rejected
    }
}
