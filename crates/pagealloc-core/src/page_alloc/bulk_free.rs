//! Bulk free, order 0 only (`free_pages_bulk`, and `free_pages_bulk_slots`,
//! the array form's partner). Every entry is claimed with the one atomic
//! read-modify-write of [`super::claim`]: a plain page in a tight pass, the
//! rest through the full checks; bad entries are reported by index and
//! change nothing.

use super::claim::{changed_under_claim, claim_head};
use super::give::{set_list_type, Giver, GIVE_CHUNK};
use super::Core;
use crate::error::{BulkFreeError, FreeError};
use crate::front::{Owner, FRONT_BATCH, FRONT_CAP, NR_STACKS};
use crate::page::{self, flags};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{Order, Pfn};
use crate::vmevent::VmEvent;
use crate::zone;

// The fast claims compare the flags word with exactly `HEAD`: a word with
// any bit that forbids a raw free, or a waiter to wake, never matches.
const _: () = assert!(flags::HEAD & (flags::NO_RAW_FREE | flags::WAITERS) == 0);

impl Core {
    /// Free order-0 pages in one pass. Invalid entries (the same classes as
    /// [`Core::free_pages`]) are skipped and reported with their indexes;
    /// every valid one is freed.
    ///
    /// A small batch of plain pages that this thread's front cache can take is
    /// handled inline in the caller; the rest is a call.
    #[inline(always)]
    pub fn free_pages_bulk(&self, pfns: &[Pfn]) -> Result<(), BulkFreeError> {
        let n = pfns.len();
        let mut done = 0;
        if n <= FRONT_BATCH {
            done = self.front_give_fast(n, pfns);
            if done == n {
                return Ok(());
            }
        }
        self.free_pages_bulk_slow(pfns, done)
    }

    /// The full path of [`Core::free_pages_bulk`] from entry `start` on.
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
    /// [`Core::alloc_pages_bulk`] (order-0 pages) and empty it: the
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
            // Each slot emptied as its page is pushed (holes stay holes).
            done = self.front_give_fast(n, &mut *slots);
            if done == n {
                return Ok(());
            }
        }
        self.free_pages_bulk_slots_slow(slots, done)
    }

    /// The full path of [`Core::free_pages_bulk_slots`] from slot `start` on.
    #[inline(never)]
    fn free_pages_bulk_slots_slow(&self, slots: &mut [Option<Pfn>], mut start: usize) -> Result<(), BulkFreeError> {
        if slots.len() > FRONT_BATCH {
            // This thread's front cache first, while it has room (as the
            // allocation took from it first), the per-CPU lists the rest.
            start = self.front_give_fast(slots.len(), &mut *slots);
            if start == slots.len() {
                return Ok(());
            }
        }
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
        let inner = self;
        let mut claims = Claims {
            rejected: Vec::new(),
            woken: Vec::new(),
            // Which old flags call for a wake-up: waiters, or every free without the bit.
            wake: if inner.cfg.waiters_bit() { flags::WAITERS } else { flags::HEAD },
            changed: Vec::new(),
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
        for (p, old) in claims.changed {
            inner.free_as_is(p, old);
        }
        claims.rejected
    }
}

/// What a bulk free has found so far.
struct Claims {
    rejected: Vec<(usize, FreeError)>,
    woken: Vec<Pfn>,
    wake: u32,
    /// Pages claimed whose block changed under the claim (freed and
    /// reallocated at another order or type meanwhile: see `claim`), freed
    /// as they are once the lists are let go.
    changed: Vec<(u64, u32)>,
}

impl Claims {
    /// A small bulk free straight into this thread's front cache: each entry
    /// is claimed and pushed in one loop. False when the cache is unavailable
    /// (nothing was read).
    #[inline(always)]
    fn free_to_front(
        &mut self,
        inner: &Core,
        get: &mut impl FnMut(usize) -> Option<Pfn>,
        start: usize,
        len: usize,
    ) -> bool {
        let Some(mut g) = inner.fronts.current().and_then(Owner::enter) else {
            return false;
        };
        let (stacks, events) = g.split();
        let mut taken = 0u64;
        for i in start..len {
            let Some(pfn) = get(i) else {
                continue;
            };
            match inner.claim(pfn, Order::ZERO, false) {
                Ok(c) if c.order != Order::ZERO => {
                    self.changed.push((pfn.as_u64(), c.old));
                    continue;
                }
                Ok(c) => {
                    inner.init_on_free(pfn.as_u64(), Order::ZERO);
                    if c.old & self.wake != 0 {
                        self.woken.push(pfn);
                    }
                }
                Err(e) => {
                    self.rejected.push((i, e));
                    continue;
                }
            }
            let p = pfn.as_u64();
            let d = inner.mm.page(p);
            let w = inner.pageblock_word_racy(p);
            set_list_type(d, d.private_raw(), w);
            if inner.push_on(stacks, p, w) {
                taken += 1;
            } else {
                // Isolated or reserved pageblock, or another zone's page.
                inner.give_claimed(&[p as u32], true);
            }
        }
        events.add_owner(VmEvent::Pgfree, taken);
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
        inner: &Core,
        giver: &mut Giver<'_>,
        get: &mut impl FnMut(usize) -> Option<Pfn>,
        (start, end): (usize, usize),
        batch: &mut ([u32; GIVE_CHUNK], [u16; GIVE_CHUNK]),
    ) {
        debug_assert!(end - start <= GIVE_CHUNK && GIVE_CHUNK <= 64);
        // Everything the pass reads of the allocator, in locals.
        let tables = inner.mm.tables();
        let zero = inner.zeroing.zero_on_free;
        // Whether any free is fast: the old design wakes on every free, so
        // none of its frees is.
        let fast = inner.cfg.waiters_bit();
        let (pfns, words) = batch;
        // Bit k: entry `start + k` needs the full checks.
        let mut aside = 0u64;
        let mut c = 0;
        for i in start..end {
            let Some(pfn) = get(i) else {
                continue;
            };
            let p = pfn.as_u64();
            // The pageblock word with the descriptor (one range check): read
            // before the claim, as the inline frees read it; a word that
            // changes meanwhile is the race every free has with a type
            // change or an isolation (see `Giver`).
            let Some((d, w)) = tables.desc_and_block(p) else {
                aside |= 1 << (i - start);
                continue;
            };
            let private = d.private_raw();
            // The claim: one CAS from exactly `HEAD` (an allocated head with
            // nothing that forbids the free or asks for a wake-up), as the
            // inline single free's; any other word (page-cache bits, lock
            // state, misuse, a word changing meanwhile) sends the entry to
            // the full checks.
            if !fast || private & page::ORDER_MASK != 0 || !claim_head(d) {
                aside |= 1 << (i - start);
                continue;
            }
            if changed_under_claim(d, private) {
                self.changed.push((p, flags::HEAD));
                continue;
            }
            if zero {
                inner.init_on_free(p, Order::ZERO);
            }
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
    fn free_checked(&mut self, inner: &Core, giver: &mut Giver<'_>, i: usize, pfn: Pfn) {
        match inner.claim(pfn, Order::ZERO, false) {
            Ok(c) if c.order != Order::ZERO => self.changed.push((pfn.as_u64(), c.old)),
            Ok(c) => {
                inner.init_on_free(pfn.as_u64(), Order::ZERO);
                if c.old & self.wake != 0 {
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

impl Core {
    /// The inline part of order-0 frees: entries `0..n` (entry `i` is `get(i)`,
    /// None is skipped) onto this thread's front cache, while each is what
    /// the inline single free ([`Core::free0_front`]) takes: a plain
    /// allocated order-0 head (exactly `HEAD`: no lock state, no waiters, no
    /// owner) whose private word names the stack of the batch's first page
    /// and whose pageblock word has that stack's key, with room; each is
    /// claimed with one CAS. Stops, changing nothing, at the first entry
    /// that is not (or whose CAS fails: a page of another stack too, which
    /// a batch from one bulk allocation does not have); returns how many
    /// entries it got through (every one of them freed or skipped). The full
    /// path handles the rest, misuse included.
    ///
    /// One handshake for the whole batch (the thread's last slot, as the
    /// inline single free enters it), and per page the single free's checks:
    /// the descriptor and pageblock word in one range check, the private
    /// word against the stack's index (an order-0 page's private word is its
    /// type's index, so it also says order 0), the stack's key against the
    /// word's (zone, type, isolation), the claim, the push. The stack's key
    /// and length stay in registers. The first page is claimed before the
    /// handshake (once claimed it is freed whatever follows: onto the stack,
    /// or by the full path when the slot cannot be entered or its stack
    /// does not take it), and each entry is read before the claim of the
    /// one before it.
    #[inline(always)]
    pub fn front_give_fast(&self, n: usize, mut e: impl Entries) -> usize {
        if !self.front_free_inline {
            return 0;
        }
        let mm = &self.mm;
        let Some((mut i, first)) = first_entry(&e, n) else {
            return n;
        };
        // The first page picks the stack and is claimed before the handshake
        // (as the single inline free): a locked instruction right after the
        // handshake's store costs far more. The rest follow to the same stack.
        let p = first.as_u64();
        let Some((d, w)) = mm.desc_and_block(p) else {
            return i;
        };
        let t = d.private_raw() as usize;
        // Each entry is read before the claim of the one before it: a load
        // after a locked instruction waits for it, and the next claim's
        // address would wait on that load.
        let mut next = if i + 1 < n { e.get(i + 1) } else { None };
        if t >= NR_STACKS || !claim_head(d) {
            return i;
        }
        // Claimed: freed whatever happens from here (as it is, if need be).
        e.consumed(i);
        i += 1;
        if changed_under_claim(d, t as u32) {
            self.free_as_is(p, flags::HEAD);
            return i;
        }
        let Some(mut g) = self.fronts.enter_inline_free() else {
            self.free_as_is(p, flags::HEAD);
            return i;
        };
        let (stacks, events) = g.split();
        let s = &mut stacks[t];
        let key = s.key;
        let mut len = s.len as usize;
        if key != zone::pb_key(w) || len >= FRONT_CAP {
            drop(g);
            self.free_as_is(p, flags::HEAD);
            return i;
        }
        s.pfns[len] = p as u32;
        len += 1;
        while i < n {
            let Some(pfn) = next else {
                i += 1;
                next = if i < n { e.get(i) } else { None };
                continue;
            };
            let p = pfn.as_u64();
            let Some((d, w)) = mm.desc_and_block(p) else {
                break;
            };
            next = if i + 1 < n { e.get(i + 1) } else { None };
            if d.private_raw() as usize != t || key != zone::pb_key(w) || len >= FRONT_CAP || !claim_head(d) {
                break;
            }
            e.consumed(i);
            i += 1;
            if changed_under_claim(d, t as u32) {
                // Changed under the claim: freed as it is, after the stack
                // is let go.
                let taken = len - s.len as usize;
                s.len = len as u32;
                events.add_owner(VmEvent::Pgfree, taken as u64);
                drop(g);
                self.free_as_is(p, flags::HEAD);
                return i;
            }
            s.pfns[len] = p as u32;
            len += 1;
        }
        // The stack's length in memory is still the one it had on entry.
        let taken = len - s.len as usize;
        s.len = len as u32;
        events.add_owner(VmEvent::Pgfree, taken as u64);
        i
    }
}

/// The first entry of `e[..n]` that holds a page, with its index. A plain
/// loop: `find_map` over the range costs the inline free an instruction.
#[inline(always)]
fn first_entry(e: &impl Entries, n: usize) -> Option<(usize, Pfn)> {
    let mut i = 0;
    while i < n {
        if let Some(p) = e.get(i) {
            return Some((i, p));
        }
        i += 1;
    }
    None
}

/// The entries of an inline bulk free: a list of pfns, or the array form's
/// slots (emptied as their pages are freed).
pub trait Entries {
    /// Entry `i` (None: a hole, skipped).
    fn get(&self, i: usize) -> Option<Pfn>;
    /// Entry `i`'s page has been freed.
    fn consumed(&mut self, i: usize);
}

impl Entries for &[Pfn] {
    #[inline(always)]
    fn get(&self, i: usize) -> Option<Pfn> {
        Some(self[i])
    }
    #[inline(always)]
    fn consumed(&mut self, _: usize) {}
}

impl Entries for &mut [Option<Pfn>] {
    #[inline(always)]
    fn get(&self, i: usize) -> Option<Pfn> {
        self[i]
    }
    #[inline(always)]
    fn consumed(&mut self, i: usize) {
        self[i] = None;
    }
}
