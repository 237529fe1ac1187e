//! Pageblock isolation and contiguous allocation (the kernel's
//! `start_isolate_page_range`, `undo_isolate_page_range`,
//! `test_pages_isolated`, `alloc_contig_pages`), without page migration: only
//! memory that is free counts.
//!
//! Isolating a pageblock sets its isolate bit (its stored type is kept), moves
//! its free blocks to the Isolate lists (which NR_FREE_PAGES does not count) and
//! drains every per-CPU list and front cache. From then on frees into the block
//! bypass the per-CPU lists, and pages that were on a list when the bit was set
//! land on the Isolate list when drained, because drains read the pageblock's
//! type at drain time (a type cached on the page at free would miss the bit).
//!
//! A free block larger than a pageblock that straddles the range's edge is split
//! first, so isolation never reaches outside the pageblocks asked for.

use crate::migrate::OwnerPanic;
use crate::{Compaction, CompactionHost};
use pagealloc_core::error::{AllocError, FreeError, PageStateError};
use pagealloc_core::page::flags;
use pagealloc_core::types::{Gfp, MigrateType, Order, Pfn, MAX_ORDER, PAGEBLOCK_PAGES};
use pagealloc_core::zone::Zone;

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// The pageblock-aligned span covering `[start, start + nr)`, inside one zone.
    pub(crate) fn block_span(&self, start: Pfn, nr_pages: u64) -> Result<(&Zone, u64, u64), PageStateError> {
        let s = start.as_u64();
        let bad = || PageStateError::BadRange { pfn: start };
        let end = s.checked_add(nr_pages).ok_or_else(bad)?;
        if nr_pages == 0 || end > self.mm.nr_pages() {
            return Err(bad());
        }
        let z = self.zone_of(s);
        if !z.contains(end - 1) {
            return Err(bad());
        }
        let bs = s & !(PAGEBLOCK_PAGES - 1);
        let be = end.div_ceil(PAGEBLOCK_PAGES) * PAGEBLOCK_PAGES;
        Ok((z, bs, be))
    }
}

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// Isolate the pageblocks covering `[start, start + nr_pages)` (one zone).
    /// Fails without changing anything if the range is bad or any of its
    /// pageblocks is already isolated.
    pub fn isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        let (z, bs, be) = self.block_span(start, nr_pages)?;
        {
            let mut g = z.lock(&self.mm);
            for b in pageblocks(bs, be) {
                if z.pageblock_isolated_racy(b) {
                    return Err(PageStateError::AlreadyIsolated { pfn: Pfn::new(b) });
                }
                let mt = z.pageblock_mt_racy(b);
                if !mt.is_pcptype() {
                    return Err(PageStateError::Unisolatable { pfn: Pfn::new(b), mt });
                }
            }
            for b in pageblocks(bs, be) {
                g.split_straddling_locked(b);
                g.set_pageblock_isolate_locked(b, true);
                g.move_freepages_block_locked(b, MigrateType::Isolate);
            }
        }
        // Pages parked on per-CPU lists come back onto the Isolate lists.
        self.drain_all();
        Ok(())
    }

    /// Undo [`Compaction::isolate_range`] for the same range. Fails without
    /// changing anything if any pageblock in it is not isolated.
    pub fn undo_isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        let (z, bs, be) = self.block_span(start, nr_pages)?;
        let mut g = z.lock(&self.mm);
        for b in pageblocks(bs, be) {
            if !z.pageblock_isolated_racy(b) {
                return Err(PageStateError::NotIsolated { pfn: Pfn::new(b) });
            }
        }
        for b in pageblocks(bs, be) {
            g.set_pageblock_isolate_locked(b, false);
            let mt = z.pageblock_mt_racy(b);
            g.move_freepages_block_locked(b, mt);
            g.remerge_block_locked(b);
        }
        Ok(())
    }

    /// Are all pageblocks covering the range isolated and every page of the
    /// range free on the Isolate lists?
    pub fn test_pages_isolated(&self, start: Pfn, nr_pages: u64) -> bool {
        let Ok((z, bs, be)) = self.block_span(start, nr_pages) else {
            return false;
        };
        let _g = z.lock(&self.mm);
        for b in pageblocks(bs, be) {
            if !z.pageblock_isolated_racy(b) {
                return false;
            }
        }
        let (s, e) = (start.as_u64(), start.as_u64() + nr_pages);
        // Walk the blocks from the first pageblock's start (free heads tile it);
        // before `s` anything may lie, as long as it does not reach into the range.
        let mut p = bs;
        while p < e {
            let d = self.mm.page(p);
            let f = d.flags();
            let n = if f & (flags::BUDDY | flags::HEAD | flags::PCP) != 0 { 1u64 << d.order() } else { 1 };
            if f & flags::BUDDY == 0 && p + n > s {
                return false;
            }
            p += n;
        }
        true
    }

    /// Find `nr_pages` contiguous free pages (aligned to the next power of two
    /// up to a pageblock), isolate them, drain the per-CPU lists, verify and take
    /// them. The pages come back as order-0 allocated pages: free them with
    /// [`Compaction::free_contig_range`] or one by one. Only free memory counts
    /// (no migration), so fragmentation can make this fail.
    /// With movable pages about it migrates (`alloc_contig_pages_migrate`),
    /// and an owner's panic there fails it, caught in `caught`.
    pub fn alloc_contig_pages(&self, nr_pages: u64, gfp: Gfp, caught: &mut OwnerPanic) -> Result<Pfn, AllocError> {
        if nr_pages == 0 || nr_pages > self.mm.nr_pages() {
            return Err(AllocError::NoMemory { order: MAX_ORDER + 1 });
        }
        let align = nr_pages.next_power_of_two().min(PAGEBLOCK_PAGES);
        let Some(node) = self.node(self.numa_node_id()) else {
            return Err(AllocError::InvalidNode { nid: self.numa_node_id() });
        };
        for &zi in node.zonelist(gfp) {
            let z = &self.zones[zi];
            let mut s = z.start.div_ceil(align) * align;
            while s + nr_pages <= z.end {
                // A racy look first: free or parked on a per-CPU list.
                let (ok, skip_to) = self.looks_free(s, s + nr_pages);
                if !ok {
                    s = skip_to.max(s + 1).div_ceil(align) * align;
                    continue;
                }
                if self.isolate_range(Pfn::new(s), nr_pages).is_ok() {
                    let taken = self.test_pages_isolated(Pfn::new(s), nr_pages)
                        && self.take_isolated(z, s, nr_pages, gfp.migratetype());
                    // Another thread may have undone an overlapping isolation of
                    // its own meanwhile; then there is nothing left to undo.
                    let _ = self.undo_isolate_range(Pfn::new(s), nr_pages);
                    if taken {
                        if gfp.contains(Gfp::ZERO) {
                            for p in s..s + nr_pages {
                                self.mm.zero_frames(p, Order::ZERO);
                            }
                        }
                        return Ok(Pfn::new(s));
                    }
                }
                s += align;
            }
        }
        // Compaction: with movable pages about, move them out of a range.
        if self.mobility().any_registered() {
            return self.alloc_contig_pages_migrate(nr_pages, gfp, caught);
        }
        Err(AllocError::NoMemory { order: contig_order(nr_pages) })
    }

    /// Free a range from [`Compaction::alloc_contig_pages`]
    /// (order-0 pages), all or nothing: every page is claimed first (the
    /// one-CAS claim of every free), and if any claim is refused, the claims
    /// already made are put back and the refusal is returned: nothing was freed.
    pub fn free_contig_range(&self, start: Pfn, nr_pages: u64) -> Result<(), FreeError> {
        let s = start.as_u64();
        // Claims stop at the first page past the arena, so at most the arena's
        // pages are ever held here, whatever `nr_pages` says.
        let mut olds = Vec::with_capacity(nr_pages.min(self.mm.nr_pages()) as usize);
        for i in 0..nr_pages {
            let claimed = match start.checked_add(i) {
                Some(pfn) => self.claim(pfn, Order::ZERO, false),
                None => Err(FreeError::OutOfRange { pfn: start, nr_pages: self.mm.nr_pages() }),
            };
            // A page reallocated at another order while its claim ran
            // (see `claim`) is not this range's: given back, the free refused.
            let claimed = claimed.and_then(|c| {
                if c.order == Order::ZERO {
                    return Ok(c.old);
                }
                let pfn = Pfn::new(s + i);
                self.unclaim(pfn, c.old);
                Err(FreeError::WrongOrder { pfn, order: 0, actual: c.order.get() })
            });
            match claimed {
                Ok(old) => olds.push(old),
                Err(e) => {
                    for (q, &old) in (s..).zip(&olds) {
                        self.unclaim(Pfn::new(q), old);
                    }
                    return Err(e);
                }
            }
        }
        for (p, &old) in (s..).zip(&olds) {
            self.init_on_free(p, Order::ZERO);
            self.free_claimed(p, Order::ZERO);
            if old & flags::WAITERS != 0 || !self.cfg.waiters_bit() {
                self.wake_freed(Pfn::new(p));
            }
        }
        Ok(())
    }
}

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// Racy pre-check: is every page in `[s, e)` in a free block or on a per-CPU
    /// list? Otherwise, where could the next candidate start?
    pub(crate) fn looks_free(&self, s: u64, e: u64) -> (bool, u64) {
        let mut p = s & !(PAGEBLOCK_PAGES - 1);
        while p < e {
            let d = self.mm.page(p);
            let f = d.flags();
            let n = 1u64 << d.order().min(MAX_ORDER);
            if flags::array_held(f) {
                // A `PageArray`'s page: allocated.
                return (false, p + n);
            } else if f & (flags::BUDDY | flags::PCP) != 0 {
                p += n;
            } else if f & flags::HEAD != 0 {
                return (false, p + n);
            } else if p < s {
                p += 1;
            } else {
                return (false, p + 1);
            }
        }
        (true, e)
    }

    /// Take `[s, s + nr)` off the Isolate lists (the caller checked it is all
    /// free), returning the remainders of straddling blocks, and mark each page an
    /// allocated order-0 page.
    pub(crate) fn take_isolated(&self, z: &Zone, s: u64, nr: u64, mt: MigrateType) -> bool {
        let e = s + nr;
        let mut g = z.lock(&self.mm);
        // Still isolated, all of it? (Another thread may have undone an
        // overlapping isolation since we tested.)
        for b in pageblocks(s & !(PAGEBLOCK_PAGES - 1), e) {
            if !z.pageblock_isolated_racy(b) {
                return false;
            }
        }
        let mut p = s & !(PAGEBLOCK_PAGES - 1);
        while p < e {
            let d = self.mm.page(p);
            if !d.is_buddy() {
                // Allocated pages before the range do not matter.
                let n = if d.flags() & (flags::HEAD | flags::PCP) != 0 { 1u64 << d.order() } else { 1 };
                if p + n <= s {
                    p += n;
                    continue;
                }
                return false;
            }
            let order = d.buddy_order();
            let bend = p + order.pages();
            if bend <= s {
                p = bend;
                continue;
            }
            g.del_from_free_list(p, order);
            // Give back the parts of this block outside the range, as aligned blocks.
            let mut q = p;
            while q < bend {
                if q >= s && q < e {
                    q += 1;
                    continue;
                }
                let mut o = Order::ZERO;
                while let Some(up) = o.next().filter(|&u| {
                    u <= order && q & (u.pages() - 1) == 0 && q + u.pages() <= bend && !overlaps(q, u.pages(), s, e)
                }) {
                    o = up;
                }
                g.add_to_free_list(q, o, MigrateType::Isolate, false);
                q += o.pages();
            }
            for r in p.max(s)..bend.min(e) {
                self.mm.page(r).set_allocated(Order::ZERO, mt);
            }
            p = bend;
        }
        true
    }
}

/// The order of the smallest power-of-two block that holds `nr_pages` pages,
/// for the `order` of a contiguous request's [`AllocError::NoMemory`]: 64 for
/// a count past the largest power of two a `u64` holds (`next_power_of_two`
/// would overflow there, and these counts come from callers unchecked).
pub(crate) const fn contig_order(nr_pages: u64) -> u32 {
    match nr_pages.checked_next_power_of_two() {
        Some(n) => n.trailing_zeros(),
        None => u64::BITS,
    }
}

/// The starts of the pageblocks from `start` (pageblock-aligned) up to `end`.
fn pageblocks(start: u64, end: u64) -> impl Iterator<Item = u64> {
    (start..end).step_by(PAGEBLOCK_PAGES as usize)
}

fn overlaps(a: u64, n: u64, s: u64, e: u64) -> bool {
    a < e && s < a + n
}
