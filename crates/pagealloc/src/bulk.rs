//! The bulk allocator (seed 3) and bulk free, order 0 only.
//!
//! `alloc_pages_bulk` fills only the empty slots of a caller's slice, under one
//! hold of this CPU's per-CPU lock, and returns the number of leading populated
//! slots. It can only write through the `&mut [Option<Pfn>]` it was given, so the
//! kernel reviewer's worry in seed 3 (writing past the array) cannot happen. With
//! one slot to fill, or when the per-CPU lock is busy, it uses the single-page path.

use crate::allocator::{AllocFlags, Inner, PageAllocator};
use crate::error::{BulkFreeError, FreeError};
use crate::fastpath::{set_list_type, Giver, GIVE_CHUNK};
use crate::front::FRONT_BATCH;
use crate::page;
use crate::page::flags;
use crate::pcp;
use crate::stats::events::VmEvent;
use crate::sync::Ordering;
use crate::types::{Gfp, Pfn, PAGEBLOCK_ORDER};

use crate::zone::Wmark;

/// Slot arrays this short are filled one slot at a time: a wide check and
/// copy costs more than it saves on so few slots.
const SMALL_SLOTS: usize = 4;

impl PageAllocator {
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
        let len = slots.len();
        if len <= FRONT_BATCH {
            // The holes from the front cache in one take, hottest page first
            // (populated slots are stepped over, so no separate pass looks for
            // the leading ones).
            let mut hole = 0;
            self.inner.front_take_fast(gfp, len, |pages| {
                let used;
                (used, hole) = fill_holes(slots, pages);
                used
            });
            if hole == len {
                return len;
            }
        }
        self.alloc_pages_bulk_slow(gfp, slots)
    }

    #[inline(never)]
    fn alloc_pages_bulk_slow(&self, gfp: Gfp, slots: &mut [Option<Pfn>]) -> usize {
        let lead = slots.iter().take_while(|s| s.is_some()).count();
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
            self.bulk_fast(gfp, holes, |pages| {
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
    ///
    /// A small request that this thread's front cache can fill is handled inline
    /// in the caller; the rest is a call.
    #[inline(always)]
    pub fn alloc_pages_bulk_list(&self, gfp: Gfp, nr: usize, out: &mut Vec<Pfn>) -> usize {
        if nr <= FRONT_BATCH {
            let got = self.inner.front_take_fast(gfp, nr, |pages| {
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
        let before = out.len();
        // Room for what the arena could give, not for `nr`: a huge `nr` must not
        // reserve (and abort on) memory that could never be filled. Only a hint:
        // if even that cannot be had, the list grows as pages come.
        let _ = out.try_reserve(nr.min(self.inner.mm.nr_pages() as usize));
        if nr > 1 {
            self.bulk_fast(gfp, nr, |pages| {
                out.extend(pages.iter().rev().map(|&p| Pfn::from_u32(p)));
                pages.len()
            });
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
    /// first zone with room, under one pcp lock hold (or from this thread's
    /// front cache, for small requests). `take` gets them a slice at a time,
    /// hottest last, and returns how many it used, counting from the end
    /// (fewer than offered: it wants no more); those are marked allocated.
    /// `nr` must be no more than `take` will accept in all: the lists are
    /// refilled while fewer than `nr` have been taken, and a refill nobody
    /// takes from can leave a list over its `high`.
    /// Returns how many were used (0 when lists are off or busy, or no zone is
    /// above its watermark).
    #[inline(always)]
    fn bulk_fast(&self, gfp: Gfp, nr: usize, mut take: impl FnMut(&[u32]) -> usize) -> usize {
        let inner = &*self.inner;
        let mt = gfp.migratetype();
        let (Some(pi), true) = (pcp::pindex(0, mt), inner.pcp_on) else {
            return 0;
        };
        let af = AllocFlags { wmark: Wmark::Low, high: false };
        let Some(node) = inner.nodes.get(self.numa_node_id() as usize) else {
            return 0;
        };
        let zl = node.zonelist(gfp);
        let descs = inner.mm.descs();
        // The pages used out of each slice become allocated: prep_new_page,
        // with the descriptors in registers and one store each unless zeroing
        // (a page on stack or list `mt` already has private (0, mt)).
        let mut mark = |pages: &[u32]| {
            let used = take(pages).min(pages.len());
            for &p in &pages[pages.len() - used..] {
                if gfp.contains(Gfp::ZERO) {
                    inner.prep_new_page(p as u64, 0, gfp);
                } else {
                    descs[p as usize].set_flags(flags::HEAD);
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
            if !inner.watermark_ok(z, 0, af, gfp) {
                continue;
            }
            return inner.pcp_take(z, 0, mt, pi, af, gfp, nr, true, &mut mark).unwrap_or(0);
        }
        0
    }

    /// Free order-0 pages in one pass. Invalid entries (the same classes as
    /// [`PageAllocator::free_pages`]) are skipped and reported with their indexes;
    /// every valid one is freed.
    ///
    /// A small batch of plain pages that this thread's front cache can take is
    /// handled inline in the caller; the rest is a call.
    #[inline(always)]
    pub fn free_pages_bulk(&self, pfns: &[Pfn]) -> Result<(), BulkFreeError> {
        let n = pfns.len();
        let mut done = 0;
        if n <= FRONT_BATCH {
            done = self.inner.front_give_fast(n, |i| Some(pfns[i]), |_| {});
            if done == n {
                return Ok(());
            }
        }
        self.free_pages_bulk_slow(pfns, done)
    }

    /// The full path of [`PageAllocator::free_pages_bulk`] from entry `start` on.
    #[inline(never)]
    fn free_pages_bulk_slow(&self, pfns: &[Pfn], start: usize) -> Result<(), BulkFreeError> {
        let rejected = self.free_bulk_core(start, pfns.len(), |i| Some(pfns[i]));
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
    ///
    /// A small batch of plain pages that this thread's front cache can take is
    /// handled inline in the caller; the rest is a call.
    #[inline(always)]
    pub fn free_pages_bulk_slots(&self, slots: &mut [Option<Pfn>]) -> Result<(), BulkFreeError> {
        let n = slots.len();
        let mut done = 0;
        if n <= FRONT_BATCH {
            // Read in the loop, emptied after it in one sweep: every entry
            // before `done` was freed or was a hole.
            done = self.inner.front_give_fast(n, |i| slots[i], |_| {});
            slots[..done].fill(None);
            if done == n {
                return Ok(());
            }
        }
        self.free_pages_bulk_slots_slow(slots, done)
    }

    /// The full path of [`PageAllocator::free_pages_bulk_slots`] from slot `start` on.
    #[inline(never)]
    fn free_pages_bulk_slots_slow(&self, slots: &mut [Option<Pfn>], start: usize) -> Result<(), BulkFreeError> {
        let rejected = self.free_bulk_core(start, slots.len(), |i| slots[i]);
        // Emptied in one sweep (a memset), rejected entries put back.
        slots[start..].fill(None);
        if rejected.is_empty() {
            return Ok(());
        }
        for (i, e) in &rejected {
            slots[*i] = Some(e.pfn());
        }
        Err(BulkFreeError { rejected })
    }

    /// The bulk free: entries `start..len`, entry `i` given by `get(i)` (None: skip),
    /// each read once, in index order. Each entry is checked and claimed (all
    /// the checks of a free, then `PCP`), and joins this CPU's lists through a
    /// [`Giver`], which keeps each zone's list locked from its first page to
    /// its last; a request that fits one front-cache batch goes to this
    /// thread's front cache instead. Returns the rejected entries in index order.
    fn free_bulk_core(
        &self,
        start: usize,
        len: usize,
        mut get: impl FnMut(usize) -> Option<Pfn>,
    ) -> Vec<(usize, FreeError)> {
        let inner = &*self.inner;
        let mut claims = Claims {
            rejected: Vec::new(),
            woken: Vec::new(),
            // Which old flags call for a wake-up: waiters, or every free without the bit.
            wake: if inner.cfg.page_lock_waiters_bit { flags::WAITERS } else { flags::HEAD },
        };
        if !(len - start <= FRONT_BATCH && inner.front_on && claims.free_to_front(inner, &mut get, start, len)) {
            let mut giver = Giver::new(inner, true);
            let mut batch = ([0u32; GIVE_CHUNK], [0u16; GIVE_CHUNK]);
            let mut i = start;
            while i < len {
                let end = (i + GIVE_CHUNK).min(len);
                claims.free_chunk(inner, &mut giver, &mut get, (i, end), &mut batch);
                i = end;
            }
            giver.finish();
        }
        for p in claims.woken {
            inner.wake_freed(p);
        }
        claims.rejected
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
/// fresh stores stalls on store forwarding), which is why
/// `free_pages_bulk_slots` empties its slots with one memset.
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

/// What a bulk free has found so far.
struct Claims {
    rejected: Vec<(usize, FreeError)>,
    woken: Vec<Pfn>,
    wake: u32,
}

impl Claims {
    /// A small bulk free straight into this thread's front cache: each entry
    /// is claimed and pushed in one loop. False when the cache is unavailable
    /// (nothing was read).
    #[inline(always)]
    fn free_to_front(
        &mut self,
        inner: &Inner,
        get: &mut impl FnMut(usize) -> Option<Pfn>,
        start: usize,
        len: usize,
    ) -> bool {
        let Some(slot) = inner.front_slot() else {
            return false;
        };
        if !slot.enter() {
            return false;
        }
        // SAFETY: between a successful enter and exit on the owner thread.
        let stacks = unsafe { slot.stacks() };
        let descs = inner.mm.descs();
        let mut taken = 0u64;
        for i in start..len {
            let Some(pfn) = get(i) else {
                continue;
            };
            match inner.claim_for_free_in(descs, pfn, 0) {
                Ok(old) => {
                    if old & self.wake != 0 {
                        self.woken.push(pfn);
                    }
                }
                Err(e) => {
                    self.rejected.push((i, e));
                    continue;
                }
            }
            let p = pfn.as_u64();
            let d = &descs[p as usize];
            if inner.front_push(stacks, d, d.private_raw(), p, inner.pageblock_word_racy(p)) {
                taken += 1;
            } else {
                // Isolated or reserved pageblock, or another zone's page.
                inner.give_claimed(&[p as u32], true);
            }
        }
        slot.events.add_owner(VmEvent::Pgfree, taken);
        slot.exit();
        true
    }

    /// Free entries `start..end` (at most [`GIVE_CHUNK`]) through `giver`,
    /// `batch` being scratch space for the pass. First one tight pass with no
    /// calls: each plain order-0 head (the common case) is claimed, its
    /// pageblock word read and its private word set, and it joins the batch;
    /// anything else (misuse, page-lock state, the old design's wake on every
    /// free) is put aside. Then the batch goes to the lists run by run, and the
    /// entries put aside get the full checks (`get` is read again for them: it
    /// must be a plain read).
    #[inline(always)]
    fn free_chunk(
        &mut self,
        inner: &Inner,
        giver: &mut Giver<'_>,
        get: &mut impl FnMut(usize) -> Option<Pfn>,
        (start, end): (usize, usize),
        batch: &mut ([u32; GIVE_CHUNK], [u16; GIVE_CHUNK]),
    ) {
        debug_assert!(end - start <= GIVE_CHUNK && GIVE_CHUNK <= 64);
        // Everything the pass reads of the allocator, in locals.
        let (descs, pageblocks) = (inner.mm.descs(), &*inner.pageblocks);
        // A fast free's old flags: an allocated head, not locked, not under
        // writeback, and nobody to wake (the old design wakes on every free,
        // so none of its frees is fast).
        let (mask, fast) = (flags::HEAD | flags::LOCKED | flags::WRITEBACK | flags::WAITERS, flags::HEAD);
        let fast = if inner.cfg.page_lock_waiters_bit { fast } else { u32::MAX };
        let (pfns, words) = batch;
        // Bit k: entry `start + k` needs the full checks.
        let mut aside = 0u64;
        let mut c = 0;
        for i in start..end {
            let Some(pfn) = get(i) else {
                continue;
            };
            let p = pfn.as_u64();
            let Some(d) = descs.get(p as usize) else {
                aside |= 1 << (i - start);
                continue;
            };
            let (f, private) = (d.flags(), d.private_raw());
            if f & mask != fast || private & page::ORDER_MASK != 0 {
                aside |= 1 << (i - start);
                continue;
            }
            d.set_flags(flags::PCP);
            let w = pageblocks[(p >> PAGEBLOCK_ORDER) as usize].load(Ordering::Relaxed);
            set_list_type(d, private, w);
            // Claimed pfns are in range, and pfns fit in 32 bits.
            pfns[c] = p as u32;
            words[c] = w;
            c += 1;
        }
        giver.give_runs(&pfns[..c], &words[..c]);
        while aside != 0 {
            let i = start + aside.trailing_zeros() as usize;
            aside &= aside - 1;
            if let Some(pfn) = get(i) {
                self.free_checked(inner, giver, i, pfn);
            }
        }
    }

    /// The full checks of freeing order-0 page `pfn`, entry `i` (the rare
    /// cases): freed through `giver`, or the rejection recorded.
    #[cold]
    #[inline(never)]
    fn free_checked(&mut self, inner: &Inner, giver: &mut Giver<'_>, i: usize, pfn: Pfn) {
        match inner.claim_for_free_checked(pfn, 0) {
            Ok(old) => {
                if old & self.wake != 0 {
                    self.woken.push(pfn);
                }
                let p = pfn.as_u64();
                let (w, d) = (inner.pageblock_word_racy(p), inner.mm.page(p));
                set_list_type(d, d.private_raw(), w);
                giver.give_runs(&[p as u32], &[w]);
            }
            Err(e) => self.rejected.push((i, e)),
        }
    }
}
