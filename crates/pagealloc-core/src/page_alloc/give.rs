//! Claimed order-0 pages on their way to this CPU's lists, many at a time:
//! a bulk free, a front-cache flush. Each run of pages of one zone and one
//! pageblock type joins its list in one copy, and one zone's list stays
//! locked from its first run to its last. Pages of isolated or reserved
//! pageblocks go to the buddy, and so does a run whose list is busy (a
//! per-CPU lock is never waited for).

use super::Core;
use crate::front::{FrontStack, FRONT_BATCH};
use crate::page::{self, PageDesc};
use crate::pcp::{self, Pcp, PcpGuard};
use crate::types::{MigrateType, Order};
use crate::vmevent::VmEvent;
use crate::zone::{self, Zone};

/// Pages a bulk free claims before they join the lists (the size of its
/// on-stack batch).
pub const GIVE_CHUNK: usize = 64;

/// One zone's per-CPU lists, locked by a [`Giver`], with the pages added so far.
struct Held<'a> {
    z: &'a Zone,
    pcp: &'a Pcp,
    l: PcpGuard<'a>,
    n: u32,
}

/// See the module doc.
pub struct Giver<'a> {
    core: &'a Core,
    held: Option<Held<'a>>,
    count_free: bool,
}

impl<'a> Giver<'a> {
    /// `count_free`: count pgfree for the pages given (false where the
    /// caller counted them already).
    #[inline]
    pub(crate) fn new(core: &'a Core, count_free: bool) -> Self {
        Self { core, held: None, count_free }
    }

    /// Give claimed pages `pfns`, whose pageblock words are `words`, run by
    /// run (a run: consecutive pages whose words have one key, `zone::pb_key`).
    #[inline(never)]
    pub(crate) fn give_runs(&mut self, pfns: &[u32], words: &[u16]) {
        debug_assert_eq!(pfns.len(), words.len());
        let Some(&first) = words.first() else {
            return;
        };
        // The usual batch, one run: found by one check without an early
        // exit (it vectorises) instead of a compare and branch per page.
        let key = zone::pb_key(first);
        if words.iter().fold(true, |a, &w| a & (zone::pb_key(w) == key)) {
            self.give(key, pfns);
            return;
        }
        let mut a = 0;
        while a < pfns.len() {
            let key = zone::pb_key(words[a]);
            let b = a + 1 + words[a + 1..].iter().take_while(|&&w| zone::pb_key(w) == key).count();
            self.give(key, &pfns[a..b]);
            a = b;
        }
    }

    /// Give a run of claimed pages whose pageblock words share `key` to their
    /// list (or the buddy).
    fn give(&mut self, key: u16, run: &[u32]) {
        let core = self.core;
        let z = &core.zones[zone::pb_zone(key)];
        let t = zone::pb_pcp_index(key).filter(|_| core.pcp_on);
        if let Some(t) = t {
            if self.held.as_ref().is_none_or(|h| h.z.idx != z.idx) {
                if let Some(h) = self.held.take() {
                    self.release(h);
                }
                let pcp = core.pcp.here(z.idx);
                self.held = core.pcp.try_lock(pcp).map(|l| Held { z, pcp, l, n: 0 });
            }
            if let Some(h) = self.held.as_mut() {
                h.l.lists[pcp::pindex_raw(Order::ZERO, t)].extend(run);
                h.n += run.len() as u32;
                return;
            }
        }
        // The list is busy: the depot takes what it has room for (pages of
        // a pcp type, marked for their list already). The rest, and pages
        // of isolated or reserved pageblocks, or with the lists off: to the
        // buddy in one zone-lock hold, merged first.
        let mut run = run;
        if let Some(t) = t {
            core.events.count(VmEvent::PcpTrylockFail, run.len() as u64);
            let isolating = || z.stats.block_count[MigrateType::Isolate.index()].get_racy() != 0;
            let parked = z.depot.try_push_slice(t, run, isolating);
            if parked > 0 {
                core.events.count(VmEvent::DepotPark, parked as u64);
                if self.count_free {
                    core.events.count(VmEvent::Pgfree, parked as u64);
                }
                run = &run[parked..];
            }
        }
        for part in run.chunks(GIVE_CHUNK) {
            let mut keys = [0u64; GIVE_CHUNK];
            for (k, &q) in keys.iter_mut().zip(part) {
                *k = pcp::block_key(q as u64, Order::ZERO);
            }
            let n = part.len() as u64;
            let events = [(VmEvent::Pgfree, if self.count_free { n } else { 0 })];
            pcp::free_blocks_to_buddy(z, &core.mm, &mut keys[..part.len()], n as u32, &events);
        }
    }

    /// End a [`Held`] list: count what joined it, drain it if it reached
    /// `high`, publish its counts and unlock it.
    fn release(&self, h: Held<'_>) {
        let Held { z, pcp, mut l, n } = h;
        l.pushed(pcp, z, &self.core.mm, &self.core.cfg, n, self.count_free);
        l.publish(pcp);
    }

    /// Unlock the list.
    #[inline]
    pub fn finish(mut self) {
        if let Some(h) = self.held.take() {
            self.release(h);
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
        if private != page::private_word_raw(Order::ZERO, t) {
            d.set_private_raw(page::private_word_raw(Order::ZERO, t));
        }
    }
}

impl Core {
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

    /// Move the oldest half of a full stack to the per-CPU lists. When every
    /// page's pageblock still has the stack's key (the usual case), the half
    /// joins the list of the stack's type in one run: each page's private
    /// word names that type already (the front cache's invariant), so
    /// neither the words nor the runs are looked at again.
    #[cold]
    pub(crate) fn front_flush(&self, s: &mut FrontStack) {
        let half = &s.pfns[..FRONT_BATCH];
        let same = half.iter().fold(true, |a, &p| a & (zone::pb_key(self.pageblock_word_racy(p as u64)) == s.key));
        if same {
            let mut g = Giver::new(self, false);
            g.give(s.key, half);
            g.finish();
        } else {
            self.give_claimed(half, false);
        }
        s.pfns.copy_within(FRONT_BATCH.., 0);
        s.len -= FRONT_BATCH as u32;
    }
}
