//! The bulk allocator, order 0 only.
//!
//! `alloc_pages_bulk` fills only the empty slots of a caller's slice, from this
//! thread's front cache first (what it holds) and then under one hold of this
//! CPU's per-CPU lock, and returns the number of leading populated slots. It can only write through the `&mut [Option<Pfn>]` it was given, so the
//! kernel reviewers' worry about the array form (writing past the array) cannot happen. With
//! one slot to fill, or when the per-CPU lock is busy, it uses the single-page path.

use super::Core;
use crate::front::FRONT_BATCH;
use crate::page::flags;
use crate::pcp;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{Gfp, Order, Pfn};
use crate::zone::AllocFlags;

/// Slot arrays this short are filled one slot at a time: a wide check and
/// copy costs more than it saves on so few slots.
const SMALL_SLOTS: usize = 4;

impl Core {
    /// Fill the `None` slots of `slots` with order-0 pages (populated slots are
    /// left alone, holes are skipped) and return how many leading slots are now
    /// populated. A full slice returns its length without allocating; an empty
    /// one returns 0. On memory shortage it stops early: the return value tells
    /// where the first hole is.
    ///
    /// A small request that this thread's front cache can fill is handled inline
    /// in the caller; the rest is a call.
    #[inline(always)]
    pub fn alloc_pages_bulk(&self, gfp: Gfp, slots: &mut [Option<Pfn>]) -> usize {
        self.alloc_pages_bulk_as(gfp, slots, flags::HEAD)
    }

    /// [`Core::alloc_pages_bulk`] with each new page's flags word `mark`:
    /// `HEAD` (an ordinary allocated page, the pfn API's) or `ARRAY_HELD`
    /// (a `PageArray`'s).
    #[inline(always)]
    pub fn alloc_pages_bulk_as(&self, gfp: Gfp, slots: &mut [Option<Pfn>], mark: u32) -> usize {
        let len = slots.len();
        if len <= FRONT_BATCH {
            // The holes from the front cache in one pass (populated slots
            // are stepped over, so no separate pass looks for the leading
            // ones; see `front_fill_slots` for the order).
            if self.front_fill_slots(gfp, slots, mark) == len {
                return len;
            }
        }
        self.alloc_pages_bulk_slow(gfp, slots, mark)
    }

    #[inline(never)]
    fn alloc_pages_bulk_slow(&self, gfp: Gfp, slots: &mut [Option<Pfn>], mark: u32) -> usize {
        // Slots known to be populated (none looked at yet, or those before
        // the first hole the front cache left).
        let mut known = 0;
        if slots.len() > FRONT_BATCH {
            // What this thread's front cache holds first, as the smaller
            // requests and the single pages take it (the linked list form
            // does the same); the per-CPU lists give the rest.
            known = self.front_fill_slots(gfp, slots, mark);
            if known == slots.len() {
                return known;
            }
        }
        let gfp = gfp | self.zeroing.alloc_extra; // init_on_alloc
        let lead = known + slots[known..].iter().take_while(|s| s.is_some()).count();
        if lead == slots.len() {
            return lead;
        }
        // Ask the fast path for exactly the holes: a refill made for slots
        // that turn out to be populated would leave its pages on the per-CPU
        // list, over `high`. The usual case, nothing but holes after the
        // leading populated slots, is found by one check without an early
        // exit (it vectorises) and then filled by straight copies.
        let rest = &slots[lead..];
        let all_holes = rest.iter().fold(true, |a, s| a & s.is_none());
        let holes = if all_holes { rest.len() } else { rest.iter().filter(|s| s.is_none()).count() };
        // With one hole left, the single-page path does it.
        if holes > 1 {
            let (mut from, len) = (lead, slots.len());
            self.bulk_fast(gfp, holes, (false, mark), |pages| {
                let dst = &mut slots[from..];
                if all_holes {
                    let k = copy_hottest_first(dst, pages);
                    from += k;
                    return k;
                }
                let (used, hole) = fill_holes(dst, pages);
                from += hole;
                used
            });
            if from == len {
                return len;
            }
        }
        // Whatever the fast path could not fill goes one page at a time (this is
        // also the path that may dip into reserves and drain other CPUs).
        for s in slots[lead..].iter_mut() {
            if s.is_none() {
                match self.alloc_pages(gfp, 0, mark) {
                    Ok(p) => *s = Some(p),
                    Err(_) => break,
                }
            }
        }
        slots.iter().take_while(|s| s.is_some()).count()
    }

    /// Allocate up to `nr` order-0 pages onto the end of `out` (the list form of
    /// the bulk allocator). Returns how many were added.
    ///
    /// A small request that this thread's front cache can fill is handled inline
    /// in the caller; the rest is a call.
    #[inline(always)]
    pub fn alloc_pages_bulk_list(&self, gfp: Gfp, nr: usize, out: &mut Vec<Pfn>) -> usize {
        if nr <= FRONT_BATCH {
            let got = self.front_take_fast(gfp, nr, |pages| {
                out.extend(pages.iter().rev().map(|&p| Pfn::from_u32(p)));
                pages.len()
            });
            if got == nr {
                return nr;
            }
            return got + self.alloc_pages_bulk_list_slow(gfp, nr - got, out);
        }
        self.alloc_pages_bulk_list_slow(gfp, nr, out)
    }

    #[inline(never)]
    fn alloc_pages_bulk_list_slow(&self, gfp: Gfp, nr: usize, out: &mut Vec<Pfn>) -> usize {
        let gfp = gfp | self.zeroing.alloc_extra; // init_on_alloc
        let before = out.len();
        // Room for what the arena could give, not for `nr`: a huge `nr` must not
        // reserve (and abort on) memory that could never be filled. Only a hint:
        // if even that cannot be had, the list grows as pages come.
        let _ = out.try_reserve(nr.min(self.mm.nr_pages() as usize));
        if nr > 1 {
            self.bulk_fast(gfp, nr, (false, flags::HEAD), |pages| {
                out.extend(pages.iter().rev().map(|&p| Pfn::from_u32(p)));
                pages.len()
            });
        }
        while out.len() - before < nr {
            match self.alloc_pages(gfp, 0, flags::HEAD) {
                Ok(p) => out.push(p),
                Err(_) => break,
            }
        }
        out.len() - before
    }

    /// The fast path of both forms: up to `nr` pages from this CPU's list for the
    /// first zone with room, under one pcp lock hold (or from this thread's
    /// front cache, for small requests). `take` gets them a slice at a time,
    /// hottest last, and returns how many it used, counting from the end
    /// (fewer than offered: it wants no more); those are marked allocated.
    /// `nr` must be no more than `take` will accept in all: the lists are
    /// refilled while fewer than `nr` have been taken, and a refill nobody
    /// takes from can leave a list over its `high`.
    /// Returns how many were used (0 when lists are off or busy, or no zone is
    /// above its watermark). `take_marks`: without `Gfp::ZERO`, `take` marks
    /// each page it uses allocated itself (flags exactly `HEAD`, in the pass
    /// that places it), so no second pass does; otherwise each page's flags
    /// become `head`.
    #[inline(always)]
    pub fn bulk_fast(
        &self,
        gfp: Gfp,
        nr: usize,
        (take_marks, head): (bool, u32),
        mut take: impl FnMut(&[u32]) -> usize,
    ) -> usize {
        let inner = self;
        let mt = inner.alloc_mt(gfp);
        let (Some(pi), true) = (pcp::pindex(Order::ZERO, mt), inner.pcp_on) else {
            return 0;
        };
        let af = AllocFlags::FAST;
        let Some(node) = inner.node(self.numa_node_id()) else {
            return 0;
        };
        let zl = node.zonelist(gfp);
        let descs = inner.mm.descs();
        // The pages used out of each slice become allocated: prep_new_page,
        // with the descriptors in registers and one store each unless zeroing
        // (a page on stack or list `mt` already has private (0, mt)).
        let mut mark = |pages: &[u32]| {
            let used = take(pages).min(pages.len());
            if gfp.contains(Gfp::ZERO) {
                for &p in &pages[pages.len() - used..] {
                    inner.prep_new_page(p as u64, Order::ZERO, gfp, head);
                }
            } else if !take_marks {
                for &p in &pages[pages.len() - used..] {
                    debug_assert!((p as usize) < descs.len());
                    // SAFETY: every pfn on a per-CPU list or a front-cache
                    // stack is one of this allocator's pages (their
                    // invariants), so below nr_pages.
                    unsafe { descs.get_unchecked(p as usize) }.set_flags(head);
                }
            }
            used
        };
        if nr <= FRONT_BATCH && inner.front_on && !gfp.contains(Gfp::ZERO) {
            // Small requests come from this thread's front cache, with no
            // atomic at all unless it has to refill.
            if let Some(got) = inner.front_take(self.numa_node_id(), mt, zl, gfp, nr, &mut mark) {
                return got;
            }
        }
        for &zi in zl {
            let z = &inner.zones[zi];
            if !z.watermark_ok(Order::ZERO, af, gfp) {
                continue;
            }
            return inner.pcp_take(z, (Order::ZERO, mt, pi), af, gfp, nr, true, &mut mark).unwrap_or(0);
        }
        0
    }
}

/// Fill the holes of `dst` from `pages`, last page first. Returns how many
/// pages were used and the index of the first hole left (`dst.len()` when
/// every hole is filled).
///
/// The usual case, every slot a hole and enough pages, goes first as one
/// check and one straight copy, which vectorise; the scalar pass handles the
/// rest, and arrays of up to [`SMALL_SLOTS`] slots outright. The wide check
/// is best where the slots were last written wide (a wide load of narrow
/// fresh stores stalls on store forwarding): `free_pages_bulk_slots`'s full
/// path empties its slots with one memset; its inline path (a front-cache
/// batch) empties each slot as it frees its page, which costs less than a
/// memset call on the small arrays it serves.
#[inline(always)]
fn fill_holes(dst: &mut [Option<Pfn>], pages: &[u32]) -> (usize, usize) {
    // Without an early exit, so it vectorises.
    if dst.len() > SMALL_SLOTS && pages.len() >= dst.len() && dst.iter().fold(true, |a, s| a & s.is_none()) {
        copy_hottest_first(dst, pages);
        return (dst.len(), dst.len());
    }
    let mut src = pages.iter().rev();
    for (i, s) in dst.iter_mut().enumerate() {
        if s.is_none() {
            let Some(&p) = src.next() else {
                return (pages.len(), i);
            };
            *s = Some(Pfn::from_u32(p));
        }
    }
    (pages.len() - src.len(), dst.len())
}

/// Copy `pages`, last page first, into the leading slots of `dst`, all of
/// which the caller knows to be holes; returns how many were copied (the
/// shorter of the two lengths).
#[inline(always)]
fn copy_hottest_first(dst: &mut [Option<Pfn>], pages: &[u32]) -> usize {
    let k = pages.len().min(dst.len());
    for (d, &p) in dst[..k].iter_mut().zip(pages.iter().rev()) {
        *d = Some(Pfn::from_u32(p));
    }
    k
}
