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
use crate::types::{Gfp, Pfn};
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
        let empty = slots[lead..].iter().filter(|s| s.is_none()).count();
        if empty > 1 {
            let mut holes = slots[lead..].iter_mut().filter(|s| s.is_none());
            self.bulk_fast(gfp, empty, |p| {
                if let Some(h) = holes.next() {
                    *h = Some(p);
                }
            });
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

    /// The shared fast path: up to `nr` pages from this CPU's list for the first
    /// zone with room, under one pcp lock hold, each handed to `sink`. Returns
    /// false when it could not run (lists off, busy, or no zone above its watermark).
    fn bulk_fast(&self, gfp: Gfp, nr: usize, mut sink: impl FnMut(Pfn)) -> bool {
        let inner = &*self.inner;
        let mt = gfp.migratetype();
        let Some(pi) = pcp::pindex(0, mt) else {
            return false;
        };
        if !inner.pcp_on {
            return false;
        }
        let af = AllocFlags { wmark: Wmark::Low, high: false };
        let Some(node) = inner.nodes.get(self.numa_node_id() as usize) else {
            return false;
        };
        for &zi in node.zonelist(gfp) {
            let z = &inner.zones[zi];
            if !inner.watermark_ok(z, 0, af, gfp) {
                continue;
            }
            return inner
                .pcp_take(z, 0, mt, pi, af, gfp, nr, true, |p| sink(inner.prep_new_page(p, 0, gfp)))
                .is_some_and(|n| n > 0);
        }
        false
    }

    /// Free order-0 pages in one pass. Invalid entries (the same classes as
    /// [`PageAllocator::free_pages`]) are skipped and reported with their indexes;
    /// every valid one is freed.
    pub fn free_pages_bulk(&self, pfns: &[Pfn]) -> Result<(), BulkFreeError> {
        let inner = &*self.inner;
        let mut rejected: Vec<(usize, FreeError)> = Vec::new();
        let mut woken: Vec<Pfn> = Vec::new();
        let claimed = pfns.iter().enumerate().filter_map(|(i, &pfn)| match inner.claim_for_free_fast(pfn, 0) {
            Ok(old) => {
                if old & flags::WAITERS != 0 || !inner.cfg.page_lock_waiters_bit {
                    woken.push(pfn);
                }
                Some(pfn.as_u64())
            }
            Err(e) => {
                rejected.push((i, e));
                None
            }
        });
        inner.give_claimed(claimed, true);
        for p in woken {
            inner.wake_freed(p);
        }
        if rejected.is_empty() {
            Ok(())
        } else {
            Err(BulkFreeError { rejected })
        }
    }
}
