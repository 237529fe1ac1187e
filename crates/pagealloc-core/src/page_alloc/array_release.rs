//! A `PageArray`'s release: its pages back to this thread's front cache and
//! this CPU's lists, with no claim.
//!
//! Every populated slot of a `PageArray` holds an order-0 page whose flags
//! word is exactly `ARRAY_HELD`, a word no pfn-taking call acts on and only
//! the array writes (see `page`). So a page is taken back with one plain
//! store of `PCP` (what a free's claim leaves), with no checks (the array
//! put it there) and nothing to reject, and no waiter can be queued on it.
//! From there it is an ordinary claimed page: onto the stack of its type
//! while its pageblock has the stack's key and the stack has room, then
//! through a [`Giver`] (the per-CPU list of its pageblock's type, under one
//! lock hold a run; the buddy for isolated or reserved pageblocks).

use super::give::{set_list_type, Giver, GIVE_CHUNK};
use super::Core;
use crate::front::{FrontGuard, Owner, FRONT_CAP, NR_STACKS};
use crate::page::{flags, PageDesc};
use crate::types::{Order, Pfn};
use crate::vmevent::VmEvent;
use crate::zone;

/// Take a `PageArray`'s page `d` back for freeing: `PCP` over its
/// `ARRAY_HELD` word, a plain store (nobody else writes that word).
#[inline(always)]
fn take_held(d: &PageDesc) {
    debug_assert_eq!(d.flags(), flags::ARRAY_HELD, "a PageArray's page lost its mark");
    d.set_flags(flags::PCP);
}

impl Core {
    /// Free every page of a `PageArray`'s slots (each populated slot holds
    /// an `ARRAY_HELD` page the array placed there) and empty them.
    #[inline(always)]
    pub fn release_array(&self, slots: &mut [Option<Pfn>]) {
        let done = self.front_release(slots);
        if done < slots.len() {
            self.release_array_rest(slots, done);
        }
    }

    /// The front-cache part of [`Core::release_array`]: from the first
    /// populated slot on, each page pushed onto this thread's stack of the
    /// first page's type while its private word names that type, its
    /// pageblock word has the stack's key and the stack has room, and its
    /// slot emptied. Returns the index of the first slot not handled (every
    /// slot before it is empty). Per page: loads of the slot, the private
    /// word and the pageblock word, three compares, the store of `PCP` and
    /// the push; no range check (the array's pages are this allocator's).
    #[inline(always)]
    fn front_release(&self, slots: &mut [Option<Pfn>]) -> usize {
        if !self.front_free_inline {
            return 0;
        }
        let tables = self.mm.tables();
        // (A search then a read: one `find_map` over (index, pfn) counted
        // owned2 100 instructions a page against 94.)
        let Some(first) = slots.iter().position(Option::is_some) else {
            return slots.len();
        };
        let Some(p) = slots[first] else {
            return first;
        };
        // SAFETY: a PageArray's pages came off this allocator's lists, so
        // they are below its page count.
        let (d, w) = unsafe { tables.desc_and_block_unchecked(p.as_u64()) };
        let t = d.private_raw() as usize;
        if t >= NR_STACKS {
            return first;
        }
        // This thread's last slot, or (its last slot is another
        // allocator's, or it has none yet) the full lookup, which registers.
        let Some(mut g) = self.fronts.enter_inline_free().or_else(|| self.enter_front_cold()) else {
            return first;
        };
        let (stacks, events) = g.split();
        let s = &mut stacks[t];
        if s.len == 0 && zone::pb_pcp_index(w) == Some(t) {
            // An empty stack takes the first page's zone, as a single free's.
            self.stack_takes(s, w);
        }
        let (key, base) = (s.key, s.len as usize);
        // At most as many slots as the stack has room for (a hole among
        // them leaves room unused: the rest of the release takes it).
        let end = slots.len().min(first + FRONT_CAP.saturating_sub(base));
        let mut len = base;
        let mut i = first;
        while i < end {
            if let Some(pfn) = slots[i] {
                let p = pfn.as_u64();
                // SAFETY: as above.
                let (d, w) = unsafe { tables.desc_and_block_unchecked(p) };
                if d.private_raw() as usize != t || zone::pb_key(w) != key {
                    break;
                }
                take_held(d);
                // SAFETY: len - base <= i - first < end - first <= FRONT_CAP - base,
                // so len < FRONT_CAP, the stack's length.
                unsafe { *s.pfns.get_unchecked_mut(len) = p as u32 };
                len += 1;
                slots[i] = None;
            }
            i += 1;
        }
        s.len = len as u32;
        events.add_owner(VmEvent::Pgfree, (len - base) as u64);
        i
    }

    /// This thread's front-cache slot by the full lookup (registered on
    /// first use): the way in where the inline path's last-slot check fails.
    #[cold]
    #[inline(never)]
    fn enter_front_cold(&self) -> Option<FrontGuard<'_>> {
        self.fronts.current().and_then(Owner::enter)
    }

    /// Slots `start..` of [`Core::release_array`] (what the front cache did
    /// not take), [`GIVE_CHUNK`] at a time: the chunk's pages gathered and
    /// its slots emptied, then each page taken back with its private word
    /// set to its pageblock's type, then the chunk given run by run (pages
    /// in a row whose pageblocks share a key) through one [`Giver`].
    #[inline(never)]
    fn release_array_rest(&self, slots: &mut [Option<Pfn>], start: usize) {
        let tables = self.mm.tables();
        let zero = self.zeroing.zero_on_free;
        let mut giver = Giver::new(self, true);
        let (mut pfns, mut words) = ([0u32; GIVE_CHUNK], [0u16; GIVE_CHUNK]);
        for chunk in slots[start..].chunks_mut(GIVE_CHUNK) {
            let mut n = 0;
            for slot in chunk.iter() {
                if let Some(pfn) = *slot {
                    let p = pfn.as_u64();
                    // SAFETY: as in `front_release`.
                    let (d, word) = unsafe { tables.desc_and_block_unchecked(p) };
                    take_held(d);
                    set_list_type(d, d.private_raw(), word);
                    // Pfns fit in 32 bits (the arena's bound); n < the
                    // chunk's length <= GIVE_CHUNK.
                    pfns[n] = p as u32;
                    words[n] = word;
                    n += 1;
                }
            }
            chunk.fill(None);
            if zero {
                for &p in &pfns[..n] {
                    self.init_on_free(p as u64, Order::ZERO);
                }
            }
            giver.give_runs(&pfns[..n], &words[..n]);
        }
        giver.finish();
    }
}
