//! The allocator's use of per-CPU lists and front caches: taking and giving
//! pages (the kernel's `rmqueue_pcplist`, `rmqueue_bulk`, `free_unref_page`),
//! and draining (`drain_local_pages`, `drain_all_pages`).
//!
//! Layering: front cache (thread, order 0, no atomics) -> per-CPU lists (one
//! try-lock per operation) -> buddy lists (zone lock). The front-cache cases of
//! `alloc_pages`, `free_pages` and the small bulk calls (`*_fast` here) are
//! forced inline into the caller; everything behind them is a call. A busy per-CPU lock never
//! makes anyone wait: the request goes to the buddy instead. Pages are claimed for
//! freeing with one compare-and-swap on their flags (HEAD -> PCP), so two racing
//! frees of one page cannot both succeed.

use crate::allocator::{AllocFlags, Inner, PageAllocator};
use crate::error::FreeError;
use crate::front::{FrontSlot, FrontStack, FRONT_BATCH, FRONT_CAP};
use crate::page;
use crate::page::{flags, PageDesc};
use crate::pcp::{self, Pcp, PcpLists};
use crate::stats::events::VmEvent;
use crate::stats::report::PcpReport;
use crate::sync::{MutexGuard, Ordering};
use crate::types::{Gfp, MigrateType, Pfn, ZoneType, MIGRATE_PCPTYPES, PAGEBLOCK_ORDER};
use crate::zone::{self, Wmark, Zone};

/// One zone's per-CPU lists, locked by a [`Giver`], with the pages added so far.
struct Held<'a> {
    z: &'a Zone,
    pcp: &'a Pcp,
    l: MutexGuard<'a, PcpLists>,
    n: u32,
}

/// Pages a bulk free claims before they join the lists (the size of its
/// on-stack batch).
pub(crate) const GIVE_CHUNK: usize = 64;

/// The bits of a pageblock word that decide where a freed page goes: its
/// zone, and its block's type and isolate bit.
const GIVE_KEY: u16 = 0xff0f;

/// Claimed order-0 pages (flags PCP, private set for a pcp-type block) on
/// their way to this CPU's lists: each run of pages of one zone and one block
/// type joins its list in one copy, and one zone's list stays locked from its
/// first run to the last. Pages of isolated or reserved pageblocks go to the
/// buddy, and so does a run whose list is busy (a per-CPU lock is never
/// waited for).
pub(crate) struct Giver<'a> {
    inner: &'a Inner,
    held: Option<Held<'a>>,
    count_free: bool,
}

impl<'a> Giver<'a> {
    /// `count_free`: count pgfree for the pages given (false where the
    /// caller counted them already).
    #[inline]
    pub(crate) fn new(inner: &'a Inner, count_free: bool) -> Self {
        Self { inner, held: None, count_free }
    }

    /// Give claimed pages `pfns`, whose pageblock words are `words`, run by
    /// run (a run: consecutive pages whose words agree on [`GIVE_KEY`]).
    #[inline(never)]
    pub(crate) fn give_runs(&mut self, pfns: &[u32], words: &[u16]) {
        debug_assert_eq!(pfns.len(), words.len());
        let mut a = 0;
        while a < pfns.len() {
            let key = words[a] & GIVE_KEY;
            let b = a + 1 + words[a + 1..].iter().take_while(|&&w| w & GIVE_KEY == key).count();
            self.give(key, &pfns[a..b]);
            a = b;
        }
    }

    /// Give a run of claimed pages whose pageblock words share `key` to their
    /// list (or the buddy).
    pub(crate) fn give(&mut self, key: u16, run: &[u32]) {
        let inner = self.inner;
        if run.is_empty() {
            return;
        }
        let z = &inner.zones[zone::pb_zone(key)];
        let t = zone::pb_pcp_index(key).filter(|_| inner.pcp_on);
        if let Some(t) = t {
            if self.held.as_ref().is_none_or(|h| h.z.idx != z.idx) {
                if let Some(h) = self.held.take() {
                    inner.release_held(h, self.count_free);
                }
                let pcp = inner.pcp_here(z.idx);
                self.held = inner.pcp_try_lock(pcp).map(|l| Held { z, pcp, l, n: 0 });
            }
            if let Some(h) = self.held.as_mut() {
                h.l.lists[pcp::pindex_raw(0, t)].extend(run);
                h.n += run.len() as u32;
                return;
            }
        }
        // Isolated or reserved pageblocks, lists off, or the list is busy.
        for &q in run {
            inner.free_to_buddy_counted(z, q as u64, 0, t.is_some(), self.count_free);
        }
    }

    /// Unlock the list.
    #[inline]
    pub(crate) fn finish(mut self) {
        if let Some(h) = self.held.take() {
            self.inner.release_held(h, self.count_free);
        }
    }
}

/// A claimed order-0 page, descriptor `d` whose private word reads
/// `private`, on its way to the list of its pageblock (word `w`): the private
/// word says the block's type when that is a pcp type (the block may have
/// changed type since the page was allocated). Stored only when it changes.
#[inline(always)]
pub(crate) fn set_list_type(d: &PageDesc, private: u32, w: u16) {
    if let Some(t) = zone::pb_pcp_index(w) {
        if private != page::private_word_raw(0, t) {
            d.set_private_raw(page::private_word_raw(0, t));
        }
    }
}

#[inline(always)]
pub(crate) fn alloc_event(z: &Zone) -> VmEvent {
    if z.ztype == ZoneType::Movable {
        VmEvent::PgallocMovable
    } else {
        VmEvent::PgallocNormal
    }
}

impl Inner {
    /// Try to take a per-CPU lock (fault injection may say no).
    #[inline(always)]
    pub(crate) fn pcp_try_lock<'a>(&self, pcp: &'a Pcp) -> Option<MutexGuard<'a, PcpLists>> {
        pcp.lists.try_lock().filter(|_| crate::failinject::trylock_ok(self.id))
    }

    /// This CPU's lists for zone `zi`.
    #[inline(always)]
    pub(crate) fn pcp_here(&self, zi: usize) -> &Pcp {
        let cpu = crate::cpu::current_cpu() as usize % self.nr_cpus;
        &self.pcps[zi * self.nr_cpus + cpu]
    }

    /// Claim an allocated head for freeing: one CAS from its flags (HEAD plus any
    /// page-lock state a free allows) to `to`. Returns the old flags. Used where
    /// a lock is taken anyway (the buddy path), so two racing frees of one block
    /// cannot both succeed.
    #[inline(always)]
    pub(crate) fn claim_for_free(&self, pfn: Pfn, order: u32, to: u32) -> Result<u32, FreeError> {
        loop {
            let old = self.check_free(pfn, order)?;
            let d = self.mm.page(pfn.as_u64());
            if d.flags.compare_exchange(old, to, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(old);
            }
        }
    }

    /// The per-CPU paths' claim: the same checks, then a plain store of `PCP`
    /// (an atomic read-modify-write here would cost more than the rest of the
    /// free). Every misuse by one thread is still caught; what is not caught is
    /// two threads freeing the same block at the same instant, which is a race
    /// in the caller, as it is for the kernel. A `lock_page` racing the free of
    /// its own page cannot corrupt anything: its CAS needs `HEAD`, and if it wins
    /// just before this store, the later unlock finds the lock gone and reports
    /// `NotLocked`.
    #[inline(always)]
    pub(crate) fn claim_for_free_fast(&self, pfn: Pfn, order: u32) -> Result<u32, FreeError> {
        self.claim_for_free_in(self.mm.descs(), pfn, order)
    }

    /// [`Inner::claim_for_free_fast`] with the descriptor slice passed in, for
    /// loops that keep it in registers.
    #[inline(always)]
    pub(crate) fn claim_for_free_in(
        &self,
        descs: &[crate::page::PageDesc],
        pfn: Pfn,
        order: u32,
    ) -> Result<u32, FreeError> {
        // The common case in one look at the descriptor: an allocated head of
        // this order, neither locked nor under writeback.
        if let Some(d) = descs.get(pfn.as_u64() as usize) {
            let f = d.flags();
            if f & (flags::HEAD | flags::LOCKED | flags::WRITEBACK) == flags::HEAD
                && d.order() == order
                && pfn.as_u64() & ((1 << order) - 1) == 0
            {
                d.set_flags(flags::PCP);
                return Ok(f);
            }
        }
        self.claim_for_free_checked(pfn, order)
    }

    /// The common case of an order-0 free in one look at the descriptor: a
    /// plain allocated order-0 head (neither locked nor under writeback).
    /// Returns the descriptor, its flags and its private word; None sends the
    /// caller to the full checks. Claims nothing.
    #[inline(always)]
    pub(crate) fn plain_head0(descs: &[PageDesc], p: u64) -> Option<(&PageDesc, u32, u32)> {
        let d = descs.get(p as usize)?;
        let (f, private) = (d.flags(), d.private_raw());
        (f & (flags::HEAD | flags::LOCKED | flags::WRITEBACK) == flags::HEAD && private & page::ORDER_MASK == 0)
            .then_some((d, f, private))
    }

    /// The full checks of a per-CPU free claim (the rare cases: misuse, and heads
    /// with page-lock state a free allows).
    #[cold]
    #[inline(never)]
    pub(crate) fn claim_for_free_checked(&self, pfn: Pfn, order: u32) -> Result<u32, FreeError> {
        let old = self.check_free(pfn, order)?;
        self.mm.page(pfn.as_u64()).set_flags(flags::PCP);
        Ok(old)
    }

    // ---- allocation ----

    /// Order-0 allocation from this thread's front cache, refilled from the
    /// per-CPU lists of the first zone in `zl` that has pages.
    #[inline(always)]
    pub(crate) fn front_alloc(&self, nid: u32, mt: MigrateType, zl: &[usize], gfp: Gfp) -> Option<u64> {
        let slot = self.front_slot()?;
        self.front_alloc_in(slot, nid, mt, zl, gfp)
    }

    /// The inline part of an order-0 allocation: a page off this thread's front
    /// cache when it has one ready. None sends the caller to the full path,
    /// which refills.
    #[inline(always)]
    pub(crate) fn front_alloc_fast(&self, gfp: Gfp) -> Option<Pfn> {
        let mut r = None;
        self.front_take_fast(gfp, 1, |pages| {
            r = Some(Pfn::from_u32(pages[pages.len() - 1]));
            1
        });
        r
    }

    /// The inline part of small allocations: up to `n` pages off this thread's
    /// front cache, as many as it holds (no refill). `take` gets them in one
    /// slice, hottest last, and returns how many it used, counting from the
    /// end (it is not called when none are ready); those are marked allocated,
    /// the rest stay. Applies with one node and no zeroing; returns how many
    /// were used.
    ///
    /// The stack's length stays in a register for the whole take: no step
    /// waits on the store of the step before.
    #[inline(always)]
    pub(crate) fn front_take_fast(&self, gfp: Gfp, n: usize, take: impl FnOnce(&[u32]) -> usize) -> usize {
        if !self.front_alloc_inline || gfp.contains(Gfp::ZERO) {
            return 0;
        }
        if crate::failinject::armed() {
            return 0;
        }
        let Some(slot) = self.front_slot() else {
            return 0;
        };
        if !slot.enter() {
            return 0;
        }
        // SAFETY: between a successful enter and exit on the owner thread.
        let s = &mut unsafe { slot.stacks() }[gfp.migratetype().index()];
        let len = s.len as usize;
        let k = n.min(len);
        let mut used = 0;
        if k > 0 {
            let offered = &s.pfns[len - k..len];
            used = take(offered).min(k);
            let descs = self.mm.descs();
            for &p in &offered[k - used..] {
                // A page on stack `mt` already has private (0, mt): allocating
                // it for `mt` changes only its flags.
                descs[p as usize].set_flags(flags::HEAD);
            }
            s.len = (len - used) as u32;
            slot.events.add_owner(s.alloc_ev, used as u64);
        }
        slot.exit();
        used
    }

    /// The inline part of order-0 frees: entries `0..n` (entry `i` is `get(i)`,
    /// None is skipped) onto this thread's front cache, while each is a plain
    /// allocated order-0 head (no page-lock state, no waiters) of a pcp-type
    /// pageblock whose stack takes its zone; `done(i)` is called for each
    /// entry freed. Stops, changing nothing, at the first entry that is not;
    /// returns how many entries it got through (every one of them freed or
    /// skipped). The full path handles the rest, misuse
    /// included.
    ///
    /// The length of the stack being filled stays in a register while
    /// consecutive pages go to the same stack (the usual case).
    #[inline(always)]
    pub(crate) fn front_give_fast(
        &self,
        n: usize,
        mut get: impl FnMut(usize) -> Option<Pfn>,
        mut done: impl FnMut(usize),
    ) -> usize {
        if !self.front_free_inline {
            return 0;
        }
        let Some(slot) = self.front_slot() else {
            return 0;
        };
        if !slot.enter() {
            return 0;
        }
        // SAFETY: between a successful enter and exit on the owner thread.
        let stacks = unsafe { slot.stacks() };
        let (descs, pageblocks) = (self.mm.descs(), &*self.pageblocks);
        // A plain allocated order-0 head with nothing to wake: its descriptor
        // and private word, and its pageblock word (zone and type in one load).
        let plain = |p: u64| {
            let (d, f, private) = Inner::plain_head0(descs, p)?;
            let w = pageblocks.get((p >> PAGEBLOCK_ORDER) as usize)?.load(Ordering::Relaxed);
            (f & flags::WAITERS == 0).then_some((d, private, w))
        };
        let (mut i, mut taken) = (0, 0u64);
        // Outer loop: pick the stack for entry `i`; inner loop: fill it while
        // entries go to it, its length in a register.
        'pick: while i < n {
            let Some(pfn) = get(i) else {
                i += 1;
                continue;
            };
            let Some((_, _, w)) = plain(pfn.as_u64()) else {
                break;
            };
            let Some(t) = zone::pb_pcp_index(w) else {
                break;
            };
            let s = &mut stacks[t];
            if !self.front_stack_takes(s, w) {
                break;
            }
            let (key, want) = (w & GIVE_KEY, page::private_word_raw(0, t));
            let mut len = s.len as usize;
            while i < n && len < FRONT_CAP {
                // A hole reads as u64::MAX, which `plain` refuses like any
                // pfn out of range: no branch of its own in the loop.
                let p = get(i).map_or(u64::MAX, Pfn::as_u64);
                let Some((d, private, w)) = plain(p) else {
                    s.len = len as u32;
                    if get(i).is_none() {
                        i += 1;
                        continue 'pick;
                    }
                    break 'pick;
                };
                if w & GIVE_KEY != key {
                    break;
                }
                d.set_flags(flags::PCP);
                if private != want {
                    d.set_private_raw(want);
                }
                s.pfns[len] = p as u32;
                len += 1;
                taken += 1;
                done(i);
                i += 1;
            }
            s.len = len as u32;
        }
        if taken > 0 {
            slot.events.add_owner(VmEvent::Pgfree, taken);
        }
        slot.exit();
        i
    }

    /// The inline part of an order-0 free: `pfn` onto this thread's front cache
    /// if it is a plain allocated order-0 head (no page-lock state, no
    /// waiters) of a pcp-type pageblock whose stack takes its zone. False,
    /// changing nothing, otherwise: the full path handles it, misuse included.
    #[inline(always)]
    pub(crate) fn front_free_fast(&self, pfn: Pfn) -> bool {
        if !self.front_free_inline {
            return false;
        }
        let Some(slot) = self.front_slot() else {
            return false;
        };
        if !slot.enter() {
            return false;
        }
        let p = pfn.as_u64();
        let pushed = match Inner::plain_head0(self.mm.descs(), p) {
            Some((d, f, private)) if f & flags::WAITERS == 0 => {
                // SAFETY: between a successful enter and exit on the owner thread.
                let pushed = self.front_push(unsafe { slot.stacks() }, d, private, p, self.pageblock_word_racy(p));
                if pushed {
                    d.set_flags(flags::PCP);
                    slot.events.add_owner(VmEvent::Pgfree, 1);
                }
                pushed
            }
            _ => false,
        };
        slot.exit();
        pushed
    }

    /// Make room on stack `s` for a page whose pageblock word is `w`: adopt
    /// its zone if the stack is empty, flush half of a full stack. False when
    /// the stack holds another zone's pages.
    #[inline(always)]
    fn front_stack_takes(&self, s: &mut FrontStack, w: u16) -> bool {
        let zi = zone::pb_zone(w) as u32;
        if s.len == 0 {
            s.adopt(&self.zones[zi as usize]);
        } else if s.zone != zi {
            return false;
        } else if s.len as usize == FRONT_CAP {
            self.front_flush(s);
        }
        true
    }

    /// This thread's front cache for this allocator (registered on first use).
    #[inline(always)]
    pub(crate) fn front_slot(&self) -> Option<&FrontSlot> {
        // SAFETY: the returned reference borrows `self`, so it cannot outlive
        // the allocator.
        unsafe { crate::front::tls::current(self.id, || self.register_front()) }
    }

    /// The body of [`Inner::front_alloc`] (a function, not a closure, so it can
    /// be forced inline into every caller).
    #[inline(always)]
    fn front_alloc_in(&self, slot: &FrontSlot, nid: u32, mt: MigrateType, zl: &[usize], gfp: Gfp) -> Option<u64> {
        if !slot.enter() {
            return None;
        }
        // SAFETY: between a successful enter and exit on the owner thread.
        let s = &mut unsafe { slot.stacks() }[mt.index()];
        let r = if (s.len > 0 && s.nid == nid) || (s.len == 0 && self.front_fill(s, mt, zl, gfp)) {
            s.len -= 1;
            Some(s.pfns[s.len as usize] as u64)
        } else {
            None
        };
        if r.is_some() {
            slot.events.add_owner(s.alloc_ev, 1);
        }
        slot.exit();
        r
    }

    /// Fill an empty stack with a batch from this CPU's list of the first zone
    /// in `zl` that has pages. False when none had any.
    #[cold]
    fn front_fill(&self, s: &mut FrontStack, mt: MigrateType, zl: &[usize], gfp: Gfp) -> bool {
        debug_assert_eq!(s.len, 0);
        let af = AllocFlags { wmark: Wmark::Low, high: false };
        let Some(pi) = pcp::pindex(0, mt) else {
            return false;
        };
        for &zi in zl {
            let z = &self.zones[zi];
            let mut n = 0usize;
            let got = self.pcp_take(z, 0, mt, pi, af, gfp, FRONT_BATCH, false, |pages| {
                // Hottest first into the stack.
                for (d, &p) in s.pfns[n..].iter_mut().zip(pages.iter().rev()) {
                    *d = p;
                }
                n += pages.len();
                pages.len()
            });
            match got {
                Some(0) => continue,
                Some(_) => {
                    s.adopt(z);
                    // The last page taken ends on top: a fresh refill is
                    // then handed out in ascending pfn order.
                    s.len = n as u32;
                    return true;
                }
                None => return false,
            }
        }
        false
    }

    /// Up to `n` order-0 pages from this thread's front cache, refilled from the
    /// per-CPU lists as it empties (one list hold per refill). `take` gets them
    /// a slice at a time, hottest last, and returns how many it used, counting
    /// from the end (fewer than offered: it wants no more). Returns how many
    /// were used; None when the cache cannot serve: off, being drained right
    /// now, or holding another node's pages.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn front_take(
        &self,
        nid: u32,
        mt: MigrateType,
        zl: &[usize],
        gfp: Gfp,
        n: usize,
        mut take: impl FnMut(&[u32]) -> usize,
    ) -> Option<usize> {
        let slot = self.front_slot()?;
        if !slot.enter() {
            return None;
        }
        // SAFETY: between a successful enter and exit on the owner thread.
        let s = &mut unsafe { slot.stacks() }[mt.index()];
        if s.len > 0 && s.nid != nid {
            slot.exit();
            return None;
        }
        let mut got = 0usize;
        while got < n {
            if s.len == 0 && !self.front_fill(s, mt, zl, gfp) {
                break;
            }
            let top = s.len as usize;
            let k = (n - got).min(top);
            let used = take(&s.pfns[top - k..top]).min(k);
            s.len -= used as u32;
            got += used;
            slot.events.add_owner(s.alloc_ev, used as u64);
            if used < k {
                break;
            }
        }
        slot.exit();
        Some(got)
    }

    /// One block of a pcp order from zone `z` through this CPU's list. None when
    /// the zone is below its watermark (try the next zone).
    #[inline]
    pub(crate) fn pcp_alloc(
        &self,
        z: &Zone,
        order: u32,
        mt: MigrateType,
        pi: usize,
        af: AllocFlags,
        gfp: Gfp,
    ) -> Option<u64> {
        let mut r = None;
        match self.pcp_take(z, order, mt, pi, af, gfp, 1, true, |blocks| {
            r = Some(blocks[blocks.len() - 1] as u64);
            1
        }) {
            Some(_) => r,
            None => {
                // The list is busy (another thread on this CPU, or a drain): the
                // buddy serves us instead of making us wait.
                if self.watermark_ok(z, order, af, gfp) {
                    self.rmqueue(z, order, gfp, af, true)
                } else {
                    None
                }
            }
        }
    }

    /// Take up to `n` blocks from this CPU's list `pi` for zone `z`, refilling
    /// from the buddy as needed. `take` gets them a slice at a time, hottest
    /// last, and returns how many it used, counting from the end (fewer than
    /// offered: it wants no more). Returns how many were used; None if the lock
    /// was busy.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn pcp_take(
        &self,
        z: &Zone,
        order: u32,
        mt: MigrateType,
        pi: usize,
        af: AllocFlags,
        gfp: Gfp,
        n: usize,
        count_alloc: bool,
        mut take: impl FnMut(&[u32]) -> usize,
    ) -> Option<usize> {
        let pcp = self.pcp_here(z.idx);
        let mut l = self.pcp_try_lock(pcp)?;
        let mut got = 0usize;
        while got < n {
            let list = &mut l.lists[pi];
            if list.is_empty() {
                if !self.pcp_refill(z, &mut l, order, mt, pi, af, gfp) {
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
            l.count -= (used as u32) << order;
            got += used;
            if used < k {
                break;
            }
        }
        if got > 0 {
            l.note_alloc();
            if count_alloc {
                pcp.events.add_owner(alloc_event(z), (got as u64) << order);
            }
            l.publish(pcp);
        }
        Some(got)
    }

    /// Refill list `pi` with a batch from the buddy under one zone-lock hold.
    ///
    /// Only the buddy work happens under the zone lock: the blocks taken are
    /// noted as runs, and their pages are marked and listed after it is
    /// dropped. That is safe: off the free lists the blocks are nobody's but
    /// ours, a free of one of their pfns in between finds no allocated head
    /// and is refused, and the pcp lock we hold keeps every checker and
    /// drainer out until they are listed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pcp_refill(
        &self,
        z: &Zone,
        l: &mut PcpLists,
        order: u32,
        mt: MigrateType,
        pi: usize,
        af: AllocFlags,
        gfp: Gfp,
    ) -> bool {
        if !self.watermark_ok(z, order, af, gfp) {
            return false;
        }
        let n = l.refill_blocks(order);
        let mut runs = std::mem::take(&mut l.scratch);
        let mut got = 0u32;
        let above_high = {
            let mut g = z.lock(&self.mm);
            while got < n {
                // Take the largest power-of-two run of blocks that still fits the
                // request from this type's own lists in one piece (one list
                // operation instead of one per block); only single blocks go
                // through the fallback path.
                let run = (n - got).ilog2().min(PAGEBLOCK_ORDER.saturating_sub(order));
                let (p, k) = match g.rmqueue_smallest(order + run, mt) {
                    Some(p) if run > 0 => (p, order + run),
                    Some(p) => (p, order),
                    None => match g.rmqueue_locked(order, mt) {
                        Some((p, how)) => {
                            self.count_fallback(z, how);
                            (p, order)
                        }
                        None => break,
                    },
                };
                runs.push(pcp::block_key(p, k));
                got += 1 << (k - order);
            }
            if got > 0 {
                z.stats.events.add_owner(VmEvent::PcpRefill, 1);
            }
            z.free_pages_racy() > z.wmark[Wmark::High as usize]
        };
        // Refilled pages go to the cold end, each run's lowest pfn coldest.
        let descs = self.mm.descs();
        for &r in &runs {
            let (p, k) = pcp::unkey(r);
            let mut q = p + (1u64 << k);
            while q > p {
                q -= 1 << order;
                let d = &descs[q as usize];
                d.ensure_private(order, mt);
                d.set_flags(flags::PCP);
                l.lists[pi].push_front(q as u32);
            }
        }
        runs.clear();
        l.scratch = runs;
        l.count += got << order;
        l.tune_on_refill(above_high);
        got > 0
    }

    // ---- free ----

    /// Free a claimed block (flags already PCP) of a pcp order whose pageblock
    /// has pcp type `mt`: front cache, else per-CPU list, else buddy.
    #[inline(always)]
    pub(crate) fn free_claimed(&self, z: &Zone, p: u64, order: u32, mt: MigrateType, pi: usize) {
        if order == 0 && self.front_on && self.front_free(p) {
            return;
        }
        let pcp = self.pcp_here(z.idx);
        if let Some(mut l) = self.pcp_try_lock(pcp) {
            self.mm.page(p).ensure_private(order, mt);
            self.pcp_push(z, pcp, &mut l, p, order, pi, true);
            l.publish(pcp);
        } else {
            self.free_to_buddy(z, p, order, true);
        }
    }

    /// Push one claimed block on a locked list, draining if it reaches `high`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn pcp_push(&self, z: &Zone, pcp: &Pcp, l: &mut PcpLists, p: u64, order: u32, pi: usize, count_free: bool) {
        l.lists[pi].push_back(p as u32);
        l.count += 1 << order;
        l.note_free(1 << order);
        if count_free {
            pcp.events.add_owner(VmEvent::Pgfree, 1 << order);
        }
        if l.over_high() {
            let nr = l.drain_target();
            l.drain(z, &self.mm, nr, self.cfg.drain_mode, self.cfg.pcp_migratetype_cache, pi);
        }
    }

    #[inline(always)]
    fn front_free(&self, p: u64) -> bool {
        match self.front_slot() {
            Some(slot) => self.front_free_in(slot, p),
            None => false,
        }
    }

    /// The body of [`Inner::front_free`] (see [`Inner::front_alloc_in`]).
    #[inline(always)]
    fn front_free_in(&self, slot: &FrontSlot, p: u64) -> bool {
        if !slot.enter() {
            return false;
        }
        let (w, d) = (self.pageblock_word_racy(p), self.mm.page(p));
        // SAFETY: between a successful enter and exit on the owner thread.
        let pushed = self.front_push(unsafe { slot.stacks() }, d, d.private_raw(), p, w);
        if pushed {
            slot.events.add_owner(VmEvent::Pgfree, 1);
        }
        slot.exit();
        pushed
    }

    /// Push order-0 page `p` (descriptor `d`, private word `private`, as the
    /// caller read them), whose pageblock word is `w`, on its stack (the
    /// caller has entered the slot), flushing a full stack first. False,
    /// leaving the page as it was, when it cannot go there: not a pcp type, or
    /// the stack holds another zone's pages.
    #[inline(always)]
    pub(crate) fn front_push(
        &self,
        stacks: &mut [FrontStack; MIGRATE_PCPTYPES],
        d: &PageDesc,
        private: u32,
        p: u64,
        w: u16,
    ) -> bool {
        let Some(t) = zone::pb_pcp_index(w) else {
            return false;
        };
        let s = &mut stacks[t];
        if !self.front_stack_takes(s, w) {
            return false;
        }
        set_list_type(d, private, w);
        s.pfns[s.len as usize] = p as u32;
        s.len += 1;
        true
    }

    /// Move the oldest half of a full stack to the per-CPU lists.
    #[cold]
    fn front_flush(&self, s: &mut FrontStack) {
        self.give_claimed(&s.pfns[..FRONT_BATCH], false);
        s.pfns.copy_within(FRONT_BATCH.., 0);
        s.len -= FRONT_BATCH as u32;
    }

    /// Free claimed order-0 pages (flags already PCP) to this CPU's lists,
    /// re-reading each one's pageblock (see [`Giver`]). `count_free` counts
    /// pgfree (callers that counted already pass false).
    pub(crate) fn give_claimed(&self, pages: &[u32], count_free: bool) {
        let descs = self.mm.descs();
        let mut g = Giver::new(self, count_free);
        let mut words = [0u16; GIVE_CHUNK];
        for chunk in pages.chunks(GIVE_CHUNK) {
            for (w, &p) in words.iter_mut().zip(chunk) {
                *w = self.pageblock_word_racy(p as u64);
                let d = &descs[p as usize];
                set_list_type(d, d.private_raw(), *w);
            }
            g.give_runs(chunk, &words[..chunk.len()]);
        }
        g.finish();
    }

    /// End a [`Held`] list: count what joined it, drain it if it reached
    /// `high`, publish its counts and unlock it.
    fn release_held(&self, h: Held<'_>, count_free: bool) {
        let Held { z, pcp, mut l, n } = h;
        l.count += n;
        l.note_free(n);
        if count_free {
            pcp.events.add_owner(VmEvent::Pgfree, n as u64);
        }
        if l.over_high() {
            let nr = l.drain_target();
            let first = l.next_list();
            l.drain(z, &self.mm, nr, self.cfg.drain_mode, self.cfg.pcp_migratetype_cache, first);
        }
        l.publish(pcp);
    }

    /// Free a claimed block straight to the buddy lists.
    pub(crate) fn free_to_buddy(&self, z: &Zone, p: u64, order: u32, trylock_failed: bool) {
        self.free_to_buddy_counted(z, p, order, trylock_failed, true)
    }

    /// [`Inner::free_to_buddy`], counting pgfree only if `count_free`.
    #[allow(clippy::too_many_arguments)]
    fn free_to_buddy_counted(&self, z: &Zone, p: u64, order: u32, trylock_failed: bool, count_free: bool) {
        let mut g = z.lock(&self.mm);
        self.mm.page(p).clear();
        g.free_block_locked(p, order);
        let ev = &z.stats.events;
        if count_free {
            ev.add_owner(VmEvent::Pgfree, 1 << order);
        }
        if trylock_failed {
            ev.add_owner(VmEvent::PcpTrylockFail, 1);
        }
    }

    // ---- front cache registry and drains ----

    fn register_front(&self) -> Option<std::sync::Arc<FrontSlot>> {
        let s = std::sync::Arc::new(FrontSlot::new());
        self.fronts.lock().push(s.clone());
        Some(s)
    }

    /// Empty every front cache (dropping those of exited threads) and return
    /// their pages to the buddy. Caller holds `drain_lock`.
    pub(crate) fn drain_fronts_locked(&self) {
        let slots: Vec<_> = self.fronts.lock().clone();
        let mut pages = Vec::new();
        // Slots whose thread had exited before we emptied them: only those can be
        // forgotten. A thread that exits after its slot was emptied may have freed
        // pages into it meanwhile; the next drain takes them (and the slot).
        let mut dead: Vec<*const FrontSlot> = Vec::new();
        for s in &slots {
            // Acquire: pairs with the Release store at thread exit, after the
            // owner's last `exit()`: it adds nothing to the slot after this.
            if s.orphaned.load(Ordering::Acquire) {
                dead.push(std::sync::Arc::as_ptr(s));
            }
            s.pause();
            // SAFETY: paused: this drainer holds the slot.
            unsafe { s.take_all(&mut pages) };
            s.resume();
        }
        // Forget those slots, keeping their event counts.
        let mut kept = [0u64; crate::stats::events::NR_VM_EVENTS];
        self.fronts.lock().retain(|s| {
            let gone = dead.contains(&std::sync::Arc::as_ptr(s));
            if gone {
                s.events.sum_into(&mut kept);
            }
            !gone
        });
        for (ev, n) in crate::stats::events::VmEvent::ALL.iter().zip(kept) {
            if n != 0 {
                self.events.count_on(0, *ev, n);
            }
        }
        self.free_pages_to_buddy(&mut pages);
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
                g.free_one_locked(p, 0, mt);
                i += 1;
            }
        }
    }

    /// Empty one CPU's lists for one zone (blocking on its lock: remote drains
    /// wait, as the kernel's do).
    pub(crate) fn drain_pcp(&self, zi: usize, cpu: usize) {
        let pcp = &self.pcps[zi * self.nr_cpus + cpu];
        let mut l = pcp.lists.lock();
        let n = l.count;
        let first = l.next_list();
        l.drain(&self.zones[zi], &self.mm, n, self.cfg.drain_mode, self.cfg.pcp_migratetype_cache, first);
        l.publish(pcp);
    }

    /// Every page on per-CPU lists and in front caches back to the buddy.
    pub(crate) fn drain_all(&self) {
        let _d = self.drain_lock.lock();
        if self.front_on {
            self.drain_fronts_locked();
        }
        for zi in 0..self.zones.len() {
            for cpu in 0..self.nr_cpus {
                self.drain_pcp(zi, cpu);
            }
        }
    }

    /// Pages of zone `z` on per-CPU lists (from the locked sets in `pcps`) and in
    /// the paused front caches `fronts`, checking each one's marks.
    pub(crate) fn pcp_pages_checked(
        &self,
        z: &Zone,
        pcps: &[MutexGuard<'_, PcpLists>],
        fronts: &[std::sync::Arc<FrontSlot>],
    ) -> Result<u64, (u64, String)> {
        let mut total = 0u64;
        for cpu in 0..self.nr_cpus {
            let l = &pcps[z.idx * self.nr_cpus + cpu];
            let mut n = 0u64;
            for (pi, list) in l.lists.iter().enumerate() {
                let order = pcp::pindex_order(pi);
                for &p in list {
                    let p = p as u64;
                    let d = self.mm.page(p);
                    if d.flags() & flags::PCP == 0 || d.order() != order || !z.contains(p) {
                        return Err((
                            p,
                            format!("on cpu {cpu}'s list {pi} but flags {:#x} order {}", d.flags(), d.order()),
                        ));
                    }
                    n += 1 << order;
                }
            }
            if n != l.count as u64 {
                return Err((z.start, format!("cpu {cpu}'s count is {} but its lists hold {n}", l.count)));
            }
            if l.count > l.high.max(l.high_max) || l.high < l.high_min || l.high > l.high_max {
                return Err((
                    z.start,
                    format!("cpu {cpu}: count {} high {} bounds {}..{}", l.count, l.high, l.high_min, l.high_max),
                ));
            }
            total += n;
        }
        for s in fronts {
            // SAFETY: the caller paused every slot in `fronts`.
            for st in unsafe { s.stacks() }.iter() {
                for &p in &st.pfns[..st.len as usize] {
                    let p = p as u64;
                    if !z.contains(p) {
                        continue;
                    }
                    let d = self.mm.page(p);
                    if d.flags() & flags::PCP == 0 || d.order() != 0 {
                        return Err((p, format!("in a front cache but flags {:#x} order {}", d.flags(), d.order())));
                    }
                    total += 1;
                }
            }
        }
        Ok(total)
    }
}

impl PageAllocator {
    /// Return this CPU's per-CPU pages and this thread's front cache to the buddy.
    pub fn drain_local_pages(&self) {
        let inner = &*self.inner;
        if inner.front_on {
            let mut pages = Vec::new();
            // SAFETY: the reference borrows `inner`, so it cannot outlive the allocator.
            if let Some(slot) = unsafe { crate::front::tls::current(inner.id, || None) } {
                if slot.enter() {
                    // SAFETY: entered on the owner thread.
                    unsafe { slot.take_all(&mut pages) };
                    slot.exit();
                }
            }
            inner.free_pages_to_buddy(&mut pages);
        }
        let cpu = crate::cpu::current_cpu() as usize % inner.nr_cpus;
        for zi in 0..inner.zones.len() {
            inner.drain_pcp(zi, cpu);
        }
    }

    /// Return every per-CPU page and every thread's front cache to the buddy
    /// (serialised with other drains). Pages freed concurrently may land on the
    /// lists again at once; this drains what was there when it ran.
    pub fn drain_all_pages(&self) {
        self.inner.drain_all();
    }

    /// Every CPU's per-CPU list totals for every zone, read without locks.
    pub fn pcp_report(&self) -> Vec<PcpReport> {
        let inner = &*self.inner;
        inner.zones.iter().flat_map(|z| inner.pcp_report(z)).collect()
    }
}
