//! The allocation fast path (the kernel's `get_page_from_freelist` and
//! `rmqueue_pcplist`): this thread's front cache, then this CPU's list, then
//! the buddy lists, trying each zone of the zonelist against its low
//! watermark; whatever cannot be served goes to [`super::slow`].
//!
//! Read top to bottom, an order-0 allocation enters each layer once:
//! `PageAllocator::alloc_pages` (façade) -> [`Core::alloc0_front`] (here) ->
//! `front` (the stack) -> on a miss [`Core::alloc_node`] (here) -> `pcp`
//! (take, refill) -> `zone`/`buddy` (rmqueue under the zone lock).

use super::{Core, Node};
use crate::error::AllocError;
use crate::front::{FrontStack, FRONT_BATCH};
use crate::pcp;
use crate::types::{Gfp, MigrateType, Order, Pfn, ZoneIdx};
use crate::zone::{AllocFlags, Zone};

impl Core {
    /// An allocation by every path, the inline order-0 hit first; `head` is
    /// the new block's flags word.
    #[inline(always)]
    pub fn alloc_pages(&self, gfp: Gfp, order: u32, head: u32) -> Result<Pfn, AllocError> {
        if order == 0 {
            if let Some(p) = self.alloc0_front(gfp, head) {
                return Ok(p);
            }
        }
        self.alloc_miss(gfp, order, head)
    }

    /// Every allocation but the inline hit, on the calling CPU's node. Cold
    /// to the caller (a call whatever happens), so the compiler lays the
    /// inline hit out as the straight path.
    #[cold]
    #[inline(never)]
    fn alloc_miss(&self, gfp: Gfp, order: u32, head: u32) -> Result<Pfn, AllocError> {
        self.alloc_node_body(self.numa_node_id(), gfp, order, head)
    }

    /// An order-0 allocation served from this thread's front cache, when its
    /// stack for the request's type has a page. None sends the caller to
    /// [`Core::alloc_node`], which refills.
    ///
    /// Budget: with the free fast path, an alloc+free pair on a front-cache
    /// hit stays within the `pair` budget of `crates/pagealloc/fastpath-budget.txt`
    /// (x86-64, callgrind; `scripts/fastpath-budget` checks it in CI). No atomic read-modify-write: a
    /// thread-local load, the slot's enter/exit handshake (two stores and a
    /// load), a pop and one store of the descriptor's flags; with backing
    /// memory and `Config::prefetch_on_alloc`, a prefetch of the frame four
    /// pops ahead (without backing, one test skips it).
    #[inline(always)]
    pub fn alloc0_front(&self, gfp: Gfp, head: u32) -> Option<Pfn> {
        // The slot's state also says whether `front_alloc_inline` is on.
        let mut g = self.enter_inline_for(gfp)?;
        let (stacks, events) = g.split();
        let s = &mut stacks[gfp.migratetype().index()];
        let p = s.pop()?;
        if self.prefetch_base != 0 {
            crate::memmap::prefetch_frame(self.prefetch_base, s.ahead());
        }
        // A page on stack `mt` has (order 0, type `mt`) in its private word
        // already (every way onto a stack stores it): one store of the flags.
        // SAFETY: every pfn on a stack is one of this allocator's pages (the
        // front cache's invariant), so below nr_pages.
        unsafe { self.mm.page_unchecked(p as u64) }.set_flags(head);
        events.add_owner(s.alloc_ev, 1);
        Some(Pfn::from_u32(p))
    }

    /// Allocate `order.pages()` pages preferring node `nid`: every path except
    /// the inline front-cache hit.
    #[inline(never)]
    pub fn alloc_node(&self, nid: u32, gfp: Gfp, order: u32, head: u32) -> Result<Pfn, AllocError> {
        self.alloc_node_body(nid, gfp, order, head)
    }

    /// [`Core::alloc_node`]'s body, inlined into it and into the cold
    /// [`Core::alloc_miss`] (no call between them).
    #[inline(always)]
    fn alloc_node_body(&self, nid: u32, gfp: Gfp, order: u32, head: u32) -> Result<Pfn, AllocError> {
        // init_on_alloc: every allocation zeroed (no inline path runs then).
        let gfp = gfp | self.zeroing.alloc_extra;
        // The one place an allocation's order is checked: below, an Order.
        let Some(order) = Order::new(order) else {
            return Err(AllocError::InvalidOrder { order });
        };
        if crate::failinject::alloc_fails(self.id, order.get()) {
            return Err(AllocError::Injected);
        }
        let Some(node) = self.nodes.get(nid as usize) else {
            return Err(AllocError::InvalidNode { nid });
        };
        let zl = node.zonelist(gfp);
        let af = AllocFlags::FAST;
        let mt = self.alloc_mt(gfp);
        if self.pcp_on && !(order > Order::ZERO && gfp.contains(Gfp::HIGH)) {
            if let Some(pi) = pcp::pindex(order, mt) {
                if order == Order::ZERO && self.front_on {
                    if let Some(p) = self.front_alloc(nid, mt, zl, gfp) {
                        return Ok(self.prep_new_page(p, Order::ZERO, gfp, head));
                    }
                }
                for &zi in zl {
                    if let Some(p) = self.pcp_alloc(&self.zones[zi], order, mt, pi, af, gfp) {
                        return Ok(self.prep_new_page(p, order, gfp, head));
                    }
                }
                return self.alloc_slow(zl, order, gfp, head);
            }
        }
        for &zi in zl {
            let z = &self.zones[zi];
            if z.watermark_ok(order, af, gfp) {
                if let Some(p) = z.rmqueue(&self.mm, order, gfp, af, false) {
                    return Ok(self.prep_new_page(p, order, gfp, head));
                }
            }
        }
        self.alloc_slow(zl, order, gfp, head)
    }

    /// The zonelist of node `nid` (or None for a node that does not exist).
    #[inline(always)]
    pub fn node(&self, nid: u32) -> Option<&Node> {
        self.nodes.get(nid as usize)
    }

    /// One order-0 page from this thread's front cache, refilling an empty
    /// stack from the per-CPU lists of the first zone in `zl` that has pages.
    #[inline]
    fn front_alloc(&self, nid: u32, mt: MigrateType, zl: &[ZoneIdx], gfp: Gfp) -> Option<u64> {
        let mut g = self.fronts.current()?.enter()?;
        let (stacks, events) = g.split();
        let s = &mut stacks[mt.index()];
        if (s.len == 0 || s.nid != nid) && !(s.len == 0 && self.front_fill(s, mt, zl, gfp)) {
            return None;
        }
        s.len -= 1;
        events.add_owner(s.alloc_ev, 1);
        Some(s.pfns[s.len as usize] as u64)
    }

    /// Fill an empty stack with a batch from this CPU's list of the first zone
    /// in `zl` that has pages. False when none had any.
    #[cold]
    fn front_fill(&self, s: &mut FrontStack, mt: MigrateType, zl: &[ZoneIdx], gfp: Gfp) -> bool {
        debug_assert_eq!(s.len, 0);
        let Some(pi) = pcp::pindex(Order::ZERO, mt) else {
            return false;
        };
        for &zi in zl {
            let z = &self.zones[zi];
            let mut n = 0usize;
            let got = self.pcp_take(z, (Order::ZERO, mt, pi), AllocFlags::FAST, gfp, FRONT_BATCH, false, |pages| {
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
                    s.adopt(crate::zone::key_of(z.idx, mt.index()), z.nid, z.alloc_event());
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

    /// The inline allocation paths' entry: this thread's last front-cache
    /// slot, whose state checks allocator, `front_alloc_inline` and nesting
    /// in one compare (no registry lookup; a miss takes the full path, which
    /// looks up and registers), when the request may be served inline (no
    /// zeroing, no failure injection armed); else None.
    #[inline(always)]
    pub(super) fn enter_inline_for(&self, gfp: Gfp) -> Option<crate::front::FrontGuard<'_>> {
        if gfp.contains(Gfp::ZERO) || crate::failinject::armed() {
            return None;
        }
        self.fronts.enter_inline_alloc()
    }

    /// The inline part of small allocations: up to `n` pages off this
    /// thread's front cache, as many as it holds (no refill). `take` gets
    /// them in one slice, hottest last, and returns how many it used,
    /// counting from the end (it is not called when none are ready); those
    /// are marked allocated, the rest stay. Applies with one node and no
    /// zeroing; returns how many were used.
    #[inline(always)]
    pub fn front_take_fast(&self, gfp: Gfp, n: usize, take: impl FnOnce(&[u32]) -> usize) -> usize {
        let Some(mut g) = self.enter_inline_for(gfp) else {
            return 0;
        };
        let (stacks, events) = g.split();
        let s = &mut stacks[gfp.migratetype().index()];
        let len = s.len as usize;
        let k = n.min(len);
        if k == 0 {
            return 0;
        }
        let offered = &s.pfns[len - k..len];
        let used = take(offered).min(k);
        let descs = self.mm.descs();
        for &p in &offered[k - used..] {
            descs[p as usize].set_flags(crate::page::flags::HEAD);
        }
        s.len = (len - used) as u32;
        events.add_owner(s.alloc_ev, used as u64);
        used
    }

    /// The inline part of the array form: the holes of `slots` filled from
    /// this thread's front cache in one pass (populated slots stepped over),
    /// each page marked allocated as it is placed, the stack's length in a
    /// register. Returns the index of the first hole left (`slots.len()`
    /// when none). Applies where [`Core::front_take_fast`] does; elsewhere
    /// returns 0. Each page placed gets `mark` as its flags word.
    ///
    /// When the stack holds a page for every slot, the array is filled back
    /// to front: the last hole gets the hottest page, and an array freed in
    /// index order (`free_pages_bulk_slots`, or page by page as the kernel's
    /// bench does) pushes its pages back in the order the stack had them, so
    /// a round trip leaves the cache as it found it, its hottest page on
    /// top. Filled front to back, a round trip reversed the top of the stack
    /// (the hottest page went under the others), and the round trip itself
    /// cost more (`pagealloc bench bulk`, array form at bulk 2; so does
    /// marking a page before its slot is written). With fewer pages than
    /// slots, when the first slots are all holes (a large request, as usual)
    /// they take the whole stack, back to front too, and the per-CPU lists
    /// fill the rest (faster at bulk 2-4, 128 unchanged); otherwise it
    /// fills front to back and stops when the stack runs dry. Either way
    /// the pages it placed are a prefix of the holes, as the return value
    /// says.
    #[inline(always)]
    pub(crate) fn front_fill_slots(&self, gfp: Gfp, slots: &mut [Option<Pfn>], mark: u32) -> usize {
        let Some(mut g) = self.enter_inline_for(gfp) else {
            return 0;
        };
        let (stacks, events) = g.split();
        let s = &mut stacks[gfp.migratetype().index()];
        let descs = self.mm.descs();
        // A stack never holds more than its array (the front cache's
        // invariant); the bound lets the pops go unchecked.
        let top = (s.len as usize).min(s.pfns.len());
        let mut len = top;
        let place = |slot: &mut Option<Pfn>, len: &mut usize| {
            debug_assert!(*len >= 1 && *len <= s.pfns.len());
            // SAFETY: 1 <= *len <= top <= the stack's array length (every
            // caller places only while *len > 0, and len starts at top).
            let p = unsafe { *s.pfns.get_unchecked(*len - 1) };
            *len -= 1;
            debug_assert!((p as usize) < descs.len());
            // The slot first, then the mark (measured: see above).
            *slot = Some(Pfn::from_u32(p));
            // SAFETY: every pfn on a stack is one of this allocator's
            // pages (the front cache's invariant), so below nr_pages.
            unsafe { descs.get_unchecked(p as usize) }.set_flags(mark);
        };
        let mut i = 0;
        if top >= slots.len() {
            // A page for every hole, however many of the slots are holes.
            for slot in slots.iter_mut().rev() {
                if slot.is_none() {
                    place(slot, &mut len);
                }
            }
            i = slots.len();
        } else if top > 0 && slots[..top].iter().fold(true, |a, s| a & s.is_none()) {
            // More slots than pages, the first `top` of them holes (a large
            // request, as usual): they take the whole stack, back to front
            // too, and the rest of the array is the per-CPU lists' part.
            // (A loop of its own: one loop over a computed prefix for both
            // cases counted bulk2 94.5 instructions a page against 91.5,
            // bulk4 75.3 against 73.3.)
            for slot in slots[..top].iter_mut().rev() {
                place(slot, &mut len);
            }
            i = top;
        }
        while i < slots.len() {
            if slots[i].is_none() {
                if len == 0 {
                    break;
                }
                place(&mut slots[i], &mut len);
            }
            i += 1;
        }
        s.len = len as u32;
        events.add_owner(s.alloc_ev, (top - len) as u64);
        i
    }

    /// Up to `n` order-0 pages from this thread's front cache, refilled from
    /// the per-CPU lists as it empties (one list hold per refill). `take`
    /// gets them a slice at a time, hottest last, and returns how many it
    /// used, counting from the end (fewer than offered: it wants no more).
    /// Returns how many were used; None when the cache cannot serve: off,
    /// being drained right now, or holding another node's pages.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn front_take(
        &self,
        nid: u32,
        mt: MigrateType,
        zl: &[ZoneIdx],
        gfp: Gfp,
        n: usize,
        mut take: impl FnMut(&[u32]) -> usize,
    ) -> Option<usize> {
        let mut g = self.fronts.current()?.enter()?;
        let (stacks, events) = g.split();
        let s = &mut stacks[mt.index()];
        if s.len > 0 && s.nid != nid {
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
            events.add_owner(s.alloc_ev, used as u64);
            if used < k {
                break;
            }
        }
        Some(got)
    }

    /// One block of a pcp order from zone `z` through this CPU's list. None when
    /// the zone is below its watermark (try the next zone).
    #[inline]
    fn pcp_alloc(&self, z: &Zone, order: Order, mt: MigrateType, pi: usize, af: AllocFlags, gfp: Gfp) -> Option<u64> {
        let mut r = None;
        match self.pcp_take(z, (order, mt, pi), af, gfp, 1, true, |blocks| {
            r = Some(blocks[blocks.len() - 1] as u64);
            1
        }) {
            Some(_) => r,
            // The list is busy (another thread on this CPU, or a drain): the
            // buddy serves us instead of making us wait.
            None if z.watermark_ok(order, af, gfp) => z.rmqueue(&self.mm, order, gfp, af, true),
            None => None,
        }
    }

    /// Take up to `n` blocks from this CPU's list for zone `z` (see
    /// `PcpLists::take`), under one try-lock hold. None if the lock was busy.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn pcp_take(
        &self,
        z: &Zone,
        list: (Order, MigrateType, usize),
        af: AllocFlags,
        gfp: Gfp,
        n: usize,
        count_alloc: bool,
        take: impl FnMut(&[u32]) -> usize,
    ) -> Option<usize> {
        let pcp = self.pcp.here(z.idx);
        let mut l = self.pcp.try_lock(pcp)?;
        let got = l.take(pcp, z, &self.mm, list, af, gfp, n, count_alloc, take);
        if got > 0 {
            l.publish(pcp);
        }
        Some(got)
    }
}
