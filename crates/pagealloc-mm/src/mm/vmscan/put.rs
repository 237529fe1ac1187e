//! Page references and the LRU, as the allocator sees them (the kernel's
//! mm/swap.c): `put_page` (the last reference frees through the ordinary
//! claim, after taking the page off its LRU list), per-CPU LRU add batches
//! and their drain, `mark_page_accessed`, and putting isolated pages back.
//! Invariants and lock order: `vmscan`'s module doc.

use crate::mm::vmscan::LRU_BATCH;
use crate::mm::Mm;
use pagealloc_core::error::{FreeError, PageStateError};
use pagealloc_core::page::flags::{ACTIVE, DIRTY, LRU, REFERENCED};
use pagealloc_core::pageref;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{Order, Pfn};
use pagealloc_core::vmevent::VmEvent;

impl Mm {
    /// The node of `pfn` (in range).
    #[inline]
    pub(crate) fn nid_of(&self, pfn: u64) -> usize {
        self.zone_of(pfn).nid as usize
    }

    /// Take a user's reference on an allocated, already referenced page.
    pub fn get_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        let d = self.mm.descs().get(pfn.as_u64() as usize).ok_or(PageStateError::OutOfRange { pfn })?;
        match pageref::get(&d.flags) {
            pageref::TryGet::Got => Ok(()),
            pageref::TryGet::Saturated => Err(PageStateError::Saturated { pfn }),
            pageref::TryGet::Zero => Err(PageStateError::NotAllocated { pfn }),
        }
    }

    /// Drop a reference; the last one frees the page (order 0 or the block
    /// its head describes). The last put leaves the page frozen for its free
    /// (`pageref::put_testzero`), so the free cannot be refused.
    pub fn put_page(&self, pfn: Pfn) -> Result<(), FreeError> {
        let p = pfn.as_u64();
        let d = self.mm.descs().get(p as usize).ok_or(FreeError::OutOfRange { pfn, nr_pages: self.mm.nr_pages() })?;
        match pageref::put_testzero(&d.flags) {
            Ok(Some(old)) => {
                self.free_frozen(pfn, old);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(_) => Err(self.diagnose_free(pfn, Order::ZERO)),
        }
    }

    /// Free a page frozen for its free (`pageref::frozen_word`: the last
    /// put's, or a page the cache froze), whose word before the freeze was
    /// `old`: off its LRU list under the LRU lock, its dirty state dropped,
    /// then freed by the ordinary path (the frozen word is a claim already:
    /// nobody else can lock, reference or free it). `old`'s `WAITERS` says
    /// whom to wake.
    pub fn free_frozen(&self, pfn: Pfn, old: u32) {
        let p = pfn.as_u64();
        self.unlist_and_clean(p);
        debug_assert_eq!(self.mm.page(p).flags(), pagealloc_core::page::flags::PCP, "pfn {p} was not frozen");
        let order = pagealloc_core::page_alloc::claim::claimed_order(self.mm.page(p).order());
        self.init_on_free(p, order);
        self.finish_free(pfn, order, old);
    }

    /// Take unreferenced page `p` off its LRU list (under the LRU lock) and
    /// drop its dirty, active and referenced state, counting the dirty page
    /// gone.
    fn unlist_and_clean(&self, p: u64) {
        let d = self.mm.page(p);
        if d.flags() & LRU != 0 {
            self.vmscan.lrus[self.nid_of(p)].lock().remove_if_listed(&self.mm, p);
        }
        let old = d.flags.fetch_and(!(DIRTY | ACTIVE | REFERENCED), Ordering::Relaxed);
        if old & DIRTY != 0 {
            self.vmscan.gauges.dirty(self.zone_of(p).idx.get(), false);
        }
    }

    /// [`Core::free_frozen`] for a batch of order-0 pages (each with its
    /// word before the freeze), straight to the buddy lists with one
    /// zone-lock hold per zone run, skipping this thread's front cache and
    /// per-CPU list: kswapd's frees (the thread allocates nothing, and pages
    /// parked on its caches would be hidden from the watermarks it reclaims
    /// for). Returns the pages freed.
    pub fn free_frozen_to_buddy(&self, pages: &[(u64, u32)]) -> u64 {
        let mut claimed = Vec::with_capacity(pages.len());
        let mut wake = Vec::new();
        for &(p, old) in pages {
            self.unlist_and_clean(p);
            self.init_on_free(p, Order::ZERO);
            claimed.push(p);
            if old & pagealloc_core::page::flags::WAITERS != 0 || !self.cfg.waiters_bit() {
                wake.push(p);
            }
        }
        claimed.sort_unstable();
        let mut i = 0;
        while i < claimed.len() {
            let z = self.zone_of(claimed[i]);
            let mut g = z.lock(&self.mm);
            let from = i;
            while i < claimed.len() && z.contains(claimed[i]) {
                self.mm.page(claimed[i]).clear();
                g.free_block_locked(claimed[i], Order::ZERO);
                i += 1;
            }
            z.stats.events.add_owner(VmEvent::Pgfree, (i - from) as u64);
        }
        for p in wake {
            self.wake_freed(Pfn::new(p));
        }
        self.drain_deferred();
        claimed.len() as u64
    }

    /// Queue `pfn` for its node's LRU (`folio_add_lru`), handing this call's
    /// reference on it to the batch; a full batch (15) is drained.
    pub(crate) fn lru_cache_add(&self, pfn: u64) {
        let slot = pagealloc_core::cpu::current_cpu() as usize % self.vmscan.batches.len();
        let full = {
            let mut b = self.vmscan.batches[slot].lock();
            b.push(pfn as u32);
            if b.len() >= LRU_BATCH {
                std::mem::take(&mut *b)
            } else {
                Vec::new()
            }
        };
        self.lru_add_pages(&full);
    }

    /// Drain this CPU slot's LRU batch (`lru_add_drain`).
    pub fn lru_add_drain(&self) {
        let slot = pagealloc_core::cpu::current_cpu() as usize;
        let b = self.vmscan.take_batch(slot);
        self.lru_add_pages(&b);
    }

    /// Drain every CPU slot's LRU batch (`lru_add_drain_all`).
    pub fn lru_add_drain_all(&self) {
        for slot in 0..self.vmscan.batches.len() {
            let b = self.vmscan.take_batch(slot);
            self.lru_add_pages(&b);
        }
    }

    /// Add pages (each with a reference the caller gives up) to their nodes'
    /// lists, one LRU lock hold per run of one node, then put the references.
    /// A page whose reference somebody else put meanwhile (an internal
    /// `put_page` of a reference it did not hold: the frame may be free or
    /// another owner's now) is neither listed nor put again.
    fn lru_add_pages(&self, pfns: &[u32]) {
        // The refused ones (rare: misuse only), so the usual drain allocates nothing.
        let mut refused = Vec::new();
        let mut i = 0;
        while i < pfns.len() {
            let nid = self.nid_of(pfns[i] as u64);
            let mut l = self.vmscan.lrus[nid].lock();
            while i < pfns.len() && self.nid_of(pfns[i] as u64) == nid {
                if !l.add(&self.mm, pfns[i] as u64) {
                    refused.push(pfns[i]);
                }
                i += 1;
            }
        }
        for &p in pfns.iter().filter(|p| !refused.contains(p)) {
            let _ = self.put_page(Pfn::from_u32(p));
        }
    }

    /// Put isolated pages (each holding the isolation's reference) back on
    /// their lists, then drop those references.
    pub(crate) fn putback_lru(&self, pfns: &[u64]) {
        let v: Vec<u32> = pfns.iter().map(|&p| p as u32).collect();
        self.lru_add_pages(&v);
    }

    /// Second-chance promotion (`folio_mark_accessed`): the first access sets
    /// `REFERENCED`; a second one on an inactive page moves it to the active
    /// list (or, if it is not on a list now, sets `ACTIVE` so it joins that
    /// one) and clears `REFERENCED`.
    pub fn mark_page_accessed(&self, pfn: u64) {
        let d = self.mm.page(pfn);
        let f = d.flags();
        if f & REFERENCED == 0 {
            d.flags.fetch_or(REFERENCED, Ordering::Relaxed);
            return;
        }
        if f & ACTIVE != 0 {
            return;
        }
        // Under the LRU lock: `add` reads ACTIVE under it to pick the list.
        let done = {
            let mut l = self.vmscan.lrus[self.nid_of(pfn)].lock();
            if d.flags() & LRU != 0 {
                l.activate(&self.mm, pfn)
            } else {
                d.flags.fetch_or(ACTIVE, Ordering::Relaxed) & ACTIVE == 0
            }
        };
        if done {
            d.flags.fetch_and(!REFERENCED, Ordering::Relaxed);
            self.events.count(VmEvent::Pgactivate, 1);
        }
    }
}
