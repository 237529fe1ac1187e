//! Taking blocks off a CPU's lists and putting them back (the kernel's
//! `rmqueue_pcplist`, `rmqueue_bulk` and `free_unref_page_commit`).
//!
//! Everything here works on one [`Pcp`] whose lock the caller holds (a
//! [`PcpLists`] borrowed from its guard), the zone it belongs to and the
//! memory map: it never sees the allocator.
//!
//! Refill, under the zone lock, does only buddy work: the blocks taken are
//! noted as runs, and their pages are marked and listed after the zone lock
//! is dropped. That is safe: off the free lists the blocks are nobody's but
//! the caller's (a free of one of their pfns in between finds no allocated
//! head and is refused), and the pcp lock the caller holds keeps every
//! checker and drainer out until they are listed.

use super::{block_key, unkey, Pcp, PcpLists, NR_PCP_LISTS};
use crate::config::Config;
use crate::memmap::MemMap;
use crate::page::flags;
use crate::types::{Gfp, MigrateType, Order, PAGEBLOCK_ORDER};
use crate::vmevent::VmEvent;
use crate::zone::{AllocFlags, Wmark, Zone};

/// Whether the block `rmqueue_smallest(order, mt)` would take was released
/// (REPORTED); `None` when there is none.
fn smallest_released(g: &crate::zone::ZoneGuard<'_>, order: Order, mt: MigrateType) -> Option<bool> {
    order.and_above().find_map(|o| g.first_free(o, mt)).map(|p| g.mm.page(p).flags() & flags::REPORTED != 0)
}

/// The run size (log2 of blocks of `order`) a refill takes next, at most
/// `max_run`: resident memory first. When the block a run would
/// take was released (REPORTED) while a smaller run can come from resident
/// memory, take the smaller run. After random frees the resident free memory
/// lies in small blocks inside partly used pageblocks, and the large runs
/// would otherwise come from released (or never touched) pageblocks,
/// faulting memory in while resident free memory waits. Released blocks sit
/// at their lists' tails, so a list's head is resident whenever the list
/// holds a resident block. `cap` keeps the sizes already refused refused for
/// this refill.
fn resident_run(g: &crate::zone::ZoneGuard<'_>, order: Order, mt: MigrateType, max_run: u32, cap: &mut u32) -> u32 {
    let mut run = max_run.min(*cap);
    let up = |run: u32| order.raised(run).unwrap_or(order);
    while run > 0 && smallest_released(g, up(run), mt) == Some(true) {
        run -= 1;
    }
    if run == 0 && smallest_released(g, order, mt) != Some(false) {
        // Nothing resident at any size: the largest size not yet refused.
        return max_run.min(*cap);
    }
    *cap = run;
    run
}

/// The run size a refill takes next under the hugepage filler:
/// at most `max_run`, and no larger than the largest free block of `mt`
/// below the pageblock order, when there is one. `rmqueue_smallest` then
/// takes the smallest block that fits, so free memory inside partly used
/// pageblocks (with hugepage backing: resident 2 MiB pages that already
/// hold live pages) is used before a wholly free pageblock is split. This is
/// Temeraire's filler in buddy terms: best fit by free range (its first
/// criterion; among blocks of one order the list's order decides, not the
/// pageblock's fullness, which nothing counts). Without such blocks,
/// `max_run`.
fn filler_run(g: &crate::zone::ZoneGuard<'_>, order: Order, mt: MigrateType, max_run: u32) -> u32 {
    (order.get()..PAGEBLOCK_ORDER)
        .rev()
        .find(|&o| Order::new(o).is_some_and(|o| g.first_free(o, mt).is_some()))
        .map_or(max_run, |o| max_run.min(o - order.get()))
}

impl PcpLists {
    /// Take up to `n` blocks of `order` from list `pi` (type `mt`) for zone
    /// `z`, refilling from the buddy while the zone is above the watermark of
    /// `af`. `take` gets them a slice at a time, hottest last, and returns how
    /// many it used, counting from the end (fewer than offered: it wants no
    /// more). Returns how many were used. The caller holds `pcp`'s lock
    /// (`self`) and publishes the counts afterwards.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn take(
        &mut self,
        pcp: &Pcp,
        z: &Zone,
        mm: &MemMap,
        (order, mt, pi): (Order, MigrateType, usize),
        af: AllocFlags,
        gfp: Gfp,
        n: usize,
        count_alloc: bool,
        mut take: impl FnMut(&[u32]) -> usize,
    ) -> usize {
        let mut got = 0usize;
        while got < n {
            let list = &mut self.lists[pi];
            if list.is_empty() {
                if !self.refill(pcp, z, mm, order, mt, pi, af, gfp) {
                    break;
                }
                continue;
            }
            // The hot end is the end of the deque's second slice (or of its
            // first, when the second is empty).
            let (front, back) = list.as_slices();
            let part = if back.is_empty() { front } else { back };
            let k = (n - got).min(part.len());
            let used = take(&part[part.len() - k..]).min(k);
            list.truncate(list.len() - used);
            // Kept exact as we go, so a refill sizes itself on what is
            // really left (a stale count would hold a long bulk request to
            // one-page refills once it passed `high`).
            self.count -= (used as u32) << order.get();
            got += used;
            if used < k {
                break;
            }
        }
        if got > 0 {
            self.note_alloc();
            if count_alloc {
                pcp.events.add_owner(z.alloc_event(), (got as u64) << order.get());
            }
        }
        got
    }

    /// Refill list `pi` (of set `pcp`) with a batch: order-0 pages from the
    /// zone's depot first (parked there by a drain, marked for this list
    /// already), the rest from the buddy under one zone-lock hold (see the
    /// module doc). False when the zone is below the watermark or has
    /// nothing of this type or its fallbacks.
    #[allow(clippy::too_many_arguments)]
    fn refill(
        &mut self,
        pcp: &Pcp,
        z: &Zone,
        mm: &MemMap,
        order: Order,
        mt: MigrateType,
        pi: usize,
        af: AllocFlags,
        gfp: Gfp,
    ) -> bool {
        if !z.watermark_ok(order, af, gfp) {
            return false;
        }
        let n = self.refill_blocks(order);
        let parked =
            if order == Order::ZERO { z.depot.try_pop(mt.index(), &mut self.lists[pi], n as usize) } else { 0 };
        if parked > 0 {
            pcp.events.add_owner(VmEvent::DepotTake, parked as u64);
        }
        let parked = parked as u32;
        let got = parked + if parked < n { self.refill_from_buddy(z, mm, (order, mt, pi), n - parked) } else { 0 };
        self.count += got << order.get();
        self.tune_on_refill(z.free_pages_racy() > z.wmark[Wmark::High as usize]);
        got > 0
    }

    /// The refill's part from the buddy: up to `n` blocks of `order` and
    /// type `mt` onto list `pi`, under one zone-lock hold. Returns the
    /// blocks taken (the caller counts them).
    fn refill_from_buddy(
        &mut self,
        z: &Zone,
        mm: &MemMap,
        (order, mt, pi): (Order, MigrateType, usize),
        n: u32,
    ) -> u32 {
        let mut runs = core::mem::take(&mut self.scratch);
        let mut got = 0u32;
        {
            let mut g = z.lock_batch(mm);
            // The largest run size still worth trying (see below).
            let mut cap = u32::MAX;
            while got < n {
                // Take the largest power-of-two run of blocks that still fits the
                // request from this type's own lists in one piece (one list
                // operation instead of one per block); when there is none of
                // that size, the next smaller size (whole blocks still: never
                // a page at a time while larger blocks are free). Only single
                // blocks go through the fallback path.
                let mut max_run = (n - got).ilog2().min(PAGEBLOCK_ORDER.saturating_sub(order.get()));
                if self.filler {
                    max_run = filler_run(&g, order, mt, max_run);
                }
                let run = resident_run(&g, order, mt, max_run, &mut cap);
                if run == 0 && !self.filler {
                    // Single blocks wanted and the head of this type's own
                    // list is resident: as many as wanted in one walk.
                    let k = g.take_resident_heads(order, mt, n - got, |p| runs.push(block_key(p, order)));
                    if k > 0 {
                        got += k;
                        continue;
                    }
                }
                // Runs are at most the pageblock's order: always an order.
                let up = |run: u32| order.raised(run).unwrap_or(order);
                let taken = if self.filler { g.rmqueue_fullest(up(run), mt) } else { g.rmqueue_smallest(up(run), mt) };
                let (p, k) = match taken {
                    Some(p) if run > 0 => (p, up(run)),
                    Some(p) => (p, order),
                    None if run > 0 => {
                        // Nothing of this type at this size or above: the
                        // sizes tried stay refused for this refill.
                        cap = run - 1;
                        continue;
                    }
                    None => match g.rmqueue_locked(order, mt) {
                        Some((p, how)) => {
                            g.count_fallback(how);
                            (p, order)
                        }
                        None => break,
                    },
                };
                // Bit 63: the run was released (free page reporting); its
                // pages keep REPORTED on the list, so Gfp::ZERO skips them.
                runs.push(block_key(p, k) | (g.took_reported as u64) << 63);
                got += 1 << (k.get() - order.get());
            }
            if got > 0 {
                z.stats.events.add_owner(VmEvent::PcpRefill, 1);
            }
            g.batch = crate::lockstat::Batch::Refill(got << order.get());
        }
        self.list_runs(mm, &runs, (order, mt, pi));
        runs.clear();
        self.scratch = runs;
        got
    }

    /// Mark and list the blocks of `runs` (taken by a refill, the zone lock
    /// dropped) at the cold end of list `pi`, each run's lowest pfn coldest.
    fn list_runs(&mut self, mm: &MemMap, runs: &[u64], (order, mt, pi): (Order, MigrateType, usize)) {
        let descs = mm.descs();
        for &r in runs {
            let (p, k) = unkey(r & !(1 << 63));
            let mark = flags::PCP | if r >> 63 != 0 { flags::REPORTED } else { 0 };
            let mut q = p + k.pages();
            while q > p {
                q -= order.pages();
                let d = &descs[q as usize];
                d.ensure_private(order, mt);
                d.set_flags(mark);
                self.lists[pi].push_front(q as u32);
            }
        }
    }

    /// Push one claimed block (flags already PCP, private set) on list `pi`,
    /// draining to the buddy if the set reaches `high`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn push(&mut self, pcp: &Pcp, z: &Zone, mm: &MemMap, cfg: &Config, p: u64, order: Order, pi: usize) {
        debug_assert!(pi < NR_PCP_LISTS);
        self.lists[pi].push_back(p as u32);
        self.count += order.pages_u32();
        self.note_free(order.pages_u32());
        pcp.events.add_owner(VmEvent::Pgfree, 1 << order.get());
        if self.over_high() {
            let nr = self.drain_target();
            self.drain(pcp, z, mm, nr, cfg, pi);
        }
    }

    /// After `n` pages were appended to the lists by the caller: count them,
    /// drain if the set reached `high` (starting where the last drain
    /// stopped). `count_free`: count pgfree for them.
    pub fn pushed(&mut self, pcp: &Pcp, z: &Zone, mm: &MemMap, cfg: &Config, n: u32, count_free: bool) {
        self.count += n;
        self.note_free(n);
        if count_free {
            pcp.events.add_owner(VmEvent::Pgfree, n as u64);
        }
        if self.over_high() {
            let nr = self.drain_target();
            let first = self.next_list();
            self.drain(pcp, z, mm, nr, cfg, first);
        }
    }

    /// Empty every list into the buddy (`drain_local_pages` for one set):
    /// none of its pages is parked in the depot.
    pub fn drain_all(&mut self, z: &Zone, mm: &MemMap, cfg: &Config) {
        let n = self.count;
        let first = self.next_list();
        let freed = self.drain_to_buddy(z, mm, n, cfg, first);
        self.count -= freed;
        self.tune_on_drain();
    }
}
