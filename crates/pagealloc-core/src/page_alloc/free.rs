//! Freeing (the kernel's `free_pages`, `free_unref_page` and
//! `free_one_page`): claim the block (see [`super::claim`]), then put it
//! where it goes: this thread's front cache (order 0), this CPU's list
//! (pcp orders), or the buddy lists (everything else, isolated and reserved
//! pageblocks, and a busy per-CPU lock, which is never waited for).

use super::Core;
use crate::error::FreeError;
use crate::front::{FrontStack, Owner, Stacks, FRONT_CAP, NR_STACKS};
use crate::page::flags;
use crate::pcp;
use crate::sync::Ordering;
use crate::types::{MigrateType, Order, Pfn};
use crate::zone::{self, Zone};

impl Core {
    /// Free the block `pfn` of `order`: the inline front-cache free for order
    /// 0, else the full path. What the public frees of both allocator types
    /// call, inlined into their callers.
    #[inline(always)]
    pub fn free_pages(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        if order == 0 && self.free0_front(pfn) {
            return Ok(());
        }
        self.free_miss(pfn, order)
    }

    /// An order-0 free onto this thread's front cache. True when it freed
    /// `pfn`: it claimed a plain allocated order-0 head (exactly `HEAD`: no
    /// lock state, no waiters, no owner; a private word naming a stack) and
    /// pushed it, or handed it on to [`Core::finish_free`] when the stack
    /// could not take it. False, changing nothing, otherwise:
    /// [`Core::free_slow`] handles it, misuse included.
    ///
    /// Budget: see [`Core::alloc0_front`] (the pair's, in the golden file). The
    /// claim is the one atomic read-modify-write of the pair: a compare-and-
    /// swap from exactly `HEAD` to `PCP`, so a racing free or lock of the
    /// same page makes one of the two fail cleanly.
    #[inline(always)]
    pub fn free0_front(&self, pfn: Pfn) -> bool {
        self.free0_front_raw(pfn.as_u64())
    }

    /// [`Core::free0_front`] of a raw frame number, any `u64` (one outside
    /// the arena, `u64::MAX` included, is false): the C API's entry point
    /// needs no test of its own for the value that is not a pfn.
    #[inline(always)]
    pub fn free0_front_raw(&self, p: u64) -> bool {
        if !self.front_free_inline {
            return false;
        }
        let Some((d, w)) = self.mm.desc_and_block(p) else {
            return false;
        };
        // An order-0 page's private word is its type's index (see
        // `page::MT_MASK`): below NR_STACKS it names the stack, and says
        // order 0, so a page on that stack would carry this very word.
        // Anything else (another order: misuse; a type without a stack)
        // takes the full path, which checks and stores it.
        let t = d.private_raw() as usize;
        if t >= NR_STACKS {
            return false;
        }
        // The claim comes before the handshake, keeping the atomic ahead of
        // its stores. Claimed, the page is ours to put anywhere (as it is
        // now, if it changed since its word was read).
        // `claim::claim_head` and `claim::changed_under_claim` written out:
        // through the helpers the same instructions lay the pair's loop out
        // worse (`bench bulk` measured it slower).
        crate::failinject::claim_window();
        if d.flags.compare_exchange(flags::HEAD, flags::PCP, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        if d.private_raw() as usize != t {
            self.free_as_is(p, flags::HEAD);
            return true;
        }
        let Some(mut g) = self.fronts.enter_inline_free() else {
            self.free_as_is(p, flags::HEAD);
            return true;
        };
        let (stacks, events) = g.split();
        let s = crate::front::stack_by_branch(stacks, t);
        // The stack's key says zone, type and isolation in one compare: it
        // fails also when the block's type is not the word's (a fallback
        // allocation) and for HighAtomic's stack, which never adopts.
        let len = s.len as usize;
        if s.key != zone::pb_key(w) || len >= FRONT_CAP {
            drop(g);
            self.free_as_is(p, flags::HEAD);
            return true;
        }
        s.pfns[len] = p as u32;
        s.len = len as u32 + 1;
        events.add_owner(crate::vmevent::VmEvent::Pgfree, 1);
        true
    }

    /// Free the block `pfn` of `order` that an owning handle holds (`Pages`,
    /// `OwnedBlock`; flags exactly `HEAD | OWNED`) without a claim. Nobody
    /// but the handle writes an owned head's flags word: the raw frees
    /// refuse it before their compare-and-swap, the pfn API refuses to
    /// lock or mark it ([`crate::pagelock::PUBLIC_DENY`]), migration never
    /// isolates it, and a handle is the block's only one. So the handle's
    /// plain store of `PCP` is its claim (the free of a `PageArray`'s pages
    /// works the same way). Order 0 goes to this thread's front cache
    /// inline; the rest, and a word that is not the handle's, by the full
    /// path (the latter with the claim and its checks).
    #[inline(always)]
    pub fn free_owned(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        if order == 0 && self.free0_owned_front(pfn.as_u64()) {
            return Ok(());
        }
        self.free_owned_slow(pfn, order)
    }

    /// The inline order-0 part of [`Core::free_owned`]: true when it freed
    /// `p` onto this thread's front cache; false, changing nothing, when the
    /// cache cannot take it.
    #[inline(always)]
    fn free0_owned_front(&self, p: u64) -> bool {
        if !self.front_free_inline {
            return false;
        }
        let Some((d, w)) = self.mm.desc_and_block(p) else {
            return false;
        };
        let t = d.private_raw() as usize;
        if t >= NR_STACKS || d.flags() != flags::HEAD | flags::OWNED {
            return false;
        }
        let Some(mut g) = self.fronts.enter_inline_free() else {
            return false;
        };
        let (stacks, events) = g.split();
        let s = crate::front::stack_by_branch(stacks, t);
        let len = s.len as usize;
        if s.key != zone::pb_key(w) || len >= FRONT_CAP {
            return false;
        }
        // The handle's claim: see `free_owned`. Release: the owner's writes
        // to the frame happen before whoever sees it free.
        crate::sync::store_among_rmws(&d.flags, flags::PCP, Ordering::Release);
        s.pfns[len] = p as u32;
        s.len = len as u32 + 1;
        events.add_owner(crate::vmevent::VmEvent::Pgfree, 1);
        true
    }

    /// [`Core::free_owned`] beyond the inline path.
    #[inline(never)]
    fn free_owned_slow(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        let o = super::claim::checked_order(pfn, order)?;
        let d = self.mm.page(pfn.as_u64());
        let owned = flags::HEAD | flags::OWNED;
        if d.flags() != owned || d.order() != order || pfn.as_u64() & (o.pages() - 1) != 0 {
            // Not the word a handle leaves: the claim's checks say why.
            return self.free_slow(pfn, order, true);
        }
        crate::sync::store_among_rmws(&d.flags, flags::PCP, Ordering::Release);
        self.init_on_free(pfn.as_u64(), o);
        self.finish_free(pfn, o, owned);
        Ok(())
    }

    /// [`Core::free_slow`] of a raw free the inline path did not take. Cold
    /// to the caller (a call whatever happens), so the compiler lays the
    /// inline free out as the straight path.
    #[cold]
    #[inline(never)]
    pub fn free_miss(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.free_slow_body(pfn, order, false)
    }

    /// Free `pfn` of `order` by every path but the inline one. `owned`: the
    /// caller is the `Pages` handle that owns it.
    #[inline(never)]
    pub fn free_slow(&self, pfn: Pfn, order: u32, owned: bool) -> Result<(), FreeError> {
        self.free_slow_body(pfn, order, owned)
    }

    /// [`Core::free_slow`]'s body, inlined into it and into the cold
    /// [`Core::free_miss`] (no call between them).
    #[inline(always)]
    fn free_slow_body(&self, pfn: Pfn, order: u32, owned: bool) -> Result<(), FreeError> {
        let order = super::claim::checked_order(pfn, order)?;
        let c = self.claim(pfn, order, owned)?;
        self.init_on_free(pfn.as_u64(), c.order);
        self.finish_free(pfn, c.order, c.old);
        Ok(())
    }

    /// A free once its claim is held (`old`: the flags word the claim
    /// replaced): the block where it goes, its waiters woken, the no-lock
    /// frees' parked blocks put back.
    #[inline(always)]
    pub fn finish_free(&self, pfn: Pfn, order: Order, old: u32) {
        self.free_claimed(pfn.as_u64(), order);
        if old & flags::WAITERS != 0 || !self.cfg.waiters_bit() {
            self.wake_freed(pfn);
        }
        // Blocks the no-lock frees parked: a locked free may wait, so it
        // empties their list (one relaxed load when empty).
        self.drain_deferred();
    }

    /// Put a claimed block (flags PCP) where it goes: front cache, this CPU's
    /// list, or the buddy.
    pub fn free_claimed(&self, p: u64, order: Order) {
        let w = self.pageblock_word_racy(p);
        let z = &self.zones[zone::pb_zone(w)];
        let t = zone::pb_pcp_index(w).filter(|_| self.pcp_on && order <= Order::PAGEBLOCK);
        let mt = t.map(MigrateType::from_index);
        let pi = mt.and_then(|mt| pcp::pindex(order, mt));
        let (Some(mt), Some(pi)) = (mt, pi) else {
            // Isolated or reserved pageblocks, lists off, or an order the
            // lists do not keep.
            z.free_to_buddy(&self.mm, p, order, true, false);
            return;
        };
        self.mm.page(p).set_private(order, mt);
        if order == Order::ZERO && self.front_on && self.front_push(p, w) {
            return;
        }
        let pcp = self.pcp.here(z.idx);
        match self.pcp.try_lock(pcp) {
            Some(mut l) => {
                l.push(pcp, z, &self.mm, &self.cfg, p, order, pi);
                l.publish(pcp);
            }
            None => z.free_to_buddy(&self.mm, p, order, true, true),
        }
    }

    /// A claimed order-0 page (private already set for its list) onto this
    /// thread's front cache, adopting an empty stack's zone and flushing half
    /// of a full one first. False when the cache is unavailable or the stack
    /// holds another zone's pages.
    fn front_push(&self, p: u64, w: u16) -> bool {
        let Some(mut g) = self.fronts.current().and_then(Owner::enter) else {
            return false;
        };
        let (stacks, events) = g.split();
        if !self.push_on(stacks, p, w) {
            return false;
        }
        events.add_owner(crate::vmevent::VmEvent::Pgfree, 1);
        true
    }

    /// Push claimed order-0 page `p`, whose pageblock word is `w` and whose
    /// private word is set, on its stack in `stacks` (the caller holds the
    /// slot's guard). False, leaving it, when it cannot go there.
    pub(crate) fn push_on(&self, stacks: &mut Stacks, p: u64, w: u16) -> bool {
        let Some(t) = zone::pb_pcp_index(w) else {
            return false;
        };
        let s = &mut stacks[t];
        if !self.stack_takes(s, w) {
            return false;
        }
        s.pfns[s.len as usize] = p as u32;
        s.len += 1;
        true
    }

    /// Make room on stack `s` for a page whose pageblock word is `w`: adopt
    /// its zone if the stack is empty, flush half of a full stack. False when
    /// the stack holds another zone's pages.
    #[inline]
    pub(crate) fn stack_takes(&self, s: &mut FrontStack, w: u16) -> bool {
        if s.len == 0 {
            let z: &Zone = &self.zones[zone::pb_zone(w)];
            s.adopt(zone::pb_key(w), z.nid, z.alloc_event());
        } else if s.key != zone::pb_key(w) {
            return false;
        } else if s.len as usize == FRONT_CAP {
            self.front_flush(s);
        }
        true
    }

    /// A page was freed while its waiters bit was set (or, in the old design
    /// without the bit, any page was freed): wake whoever waits so they see it
    /// is gone (page-lock waiters re-check and report NotAllocated).
    #[cold]
    pub fn wake_freed(&self, pfn: Pfn) {
        crate::pagelock::wake_freed(&self.mm.page(pfn.as_u64()).flags);
    }
}
