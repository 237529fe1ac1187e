//! One node's LRU lists (the kernel's `lruvec`, file lists only): see the
//! parent module's invariants. Every method here runs under the node's LRU
//! lock (it takes `&mut NodeLru` from that lock's guard).

use crate::list::PfnList;
use crate::memmap::MemMap;
use crate::page::flags::{ACTIVE, LRU, REF_MASK};
use crate::pageref;
use crate::sync::{AtomicU64, Ordering};

/// The two lists and their lengths.
#[derive(Debug, Default)]
pub(crate) struct NodeLru {
    inactive: PfnList,
    active: PfnList,
    nr_inactive: AtomicU64,
    nr_active: AtomicU64,
}

/// Which list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    Inactive,
    Active,
}

impl NodeLru {
    /// Racy (inactive, active) lengths.
    pub(crate) fn sizes_racy(&self) -> (u64, u64) {
        (self.nr_inactive.load(Ordering::Relaxed), self.nr_active.load(Ordering::Relaxed))
    }

    fn list(&mut self, w: Which) -> (&mut PfnList, &AtomicU64) {
        match w {
            Which::Inactive => (&mut self.inactive, &self.nr_inactive),
            Which::Active => (&mut self.active, &self.nr_active),
        }
    }

    /// Put `pfn` (not on a list, a reference held by the caller) at the head
    /// of the list its `ACTIVE` bit names, and set `LRU`.
    pub(crate) fn add(&mut self, mm: &MemMap, pfn: u64) {
        let d = mm.page(pfn);
        let old = d.flags.fetch_or(LRU, Ordering::Relaxed);
        debug_assert!(old & LRU == 0, "pfn {pfn} already on an LRU list");
        let w = if old & ACTIVE != 0 { Which::Active } else { Which::Inactive };
        let (l, n) = self.list(w);
        l.push_head(mm, pfn);
        n.fetch_add(1, Ordering::Relaxed);
    }

    /// Take `pfn` off its list if it is on one (`LRU` set): the last
    /// reference's release path (`__page_cache_release`). True if it was.
    pub(crate) fn remove_if_listed(&mut self, mm: &MemMap, pfn: u64) -> bool {
        let old = mm.page(pfn).flags.fetch_and(!LRU, Ordering::Relaxed);
        if old & LRU == 0 {
            return false;
        }
        let w = if old & ACTIVE != 0 { Which::Active } else { Which::Inactive };
        let (l, n) = self.list(w);
        l.remove(mm, pfn);
        n.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// Isolate one listed page for migration (`folio_isolate_lru`): take a
    /// reference and take it off its list. False if it is not listed or its
    /// count is 0 (being freed).
    pub(crate) fn isolate_one(&mut self, mm: &MemMap, pfn: u64) -> bool {
        let d = mm.page(pfn);
        if d.flags() & LRU == 0 || !pageref::try_get(&d.flags) {
            return false;
        }
        self.remove_if_listed(mm, pfn)
    }

    /// Move a listed inactive page to the active list and set `ACTIVE`
    /// (`folio_activate`). False if it is not on the inactive list.
    pub(crate) fn activate(&mut self, mm: &MemMap, pfn: u64) -> bool {
        let d = mm.page(pfn);
        let f = d.flags();
        if f & LRU == 0 || f & ACTIVE != 0 {
            return false;
        }
        self.inactive.remove(mm, pfn);
        self.nr_inactive.fetch_sub(1, Ordering::Relaxed);
        d.flags.fetch_or(ACTIVE, Ordering::Relaxed);
        self.active.push_head(mm, pfn);
        self.nr_active.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Isolate up to `nr` pages from the tail of list `w` (`isolate_lru_folios`):
    /// each taken gets a reference and loses `LRU`; a page whose count is 0
    /// (its last reference is being put) is left for that path, moved to the
    /// head. Returns the pages scanned past and the pages isolated in `out`.
    pub(crate) fn isolate(&mut self, mm: &MemMap, w: Which, nr: usize, out: &mut Vec<u64>) -> u64 {
        let mut scanned = 0;
        let (l, n) = self.list(w);
        while scanned < nr as u64 {
            let Some(p) = l.last() else { break };
            scanned += 1;
            let d = mm.page(p);
            l.remove(mm, p);
            if pageref::try_get(&d.flags) {
                d.flags.fetch_and(!LRU, Ordering::Relaxed);
                n.fetch_sub(1, Ordering::Relaxed);
                out.push(p);
            } else {
                l.push_head(mm, p);
            }
        }
        scanned
    }

    /// Walk both lists: counts, flags and references agree (under the lock).
    pub(crate) fn check(&self, mm: &MemMap) -> Result<(), String> {
        for (l, n, active) in [(&self.inactive, &self.nr_inactive, false), (&self.active, &self.nr_active, true)] {
            let mut c = 0u64;
            for p in l.iter(mm) {
                let f = mm.page(p).flags();
                if f & LRU == 0 || (f & ACTIVE != 0) != active {
                    return Err(format!(
                        "pfn {p} on the {} list with flags {f:#x}",
                        if active { "active" } else { "inactive" }
                    ));
                }
                let _ = f & REF_MASK; // the list holds no reference; a count of 0 is a page being freed
                c += 1;
                if c > mm.nr_pages() {
                    return Err("cycle in an LRU list".into());
                }
            }
            if c != n.load(Ordering::Relaxed) {
                return Err(format!("list length {c}, counter {}", n.load(Ordering::Relaxed)));
            }
        }
        Ok(())
    }
}
