//! One node's LRU lists (the kernel's `lruvec`, file lists only): see the
//! parent module's invariants. Every method here runs under the node's LRU
//! lock (it takes `&mut NodeLru` from that lock's guard).

use pagealloc_core::list::PfnList;
use pagealloc_core::memmap::MemMap;
use pagealloc_core::page::flags::{ACTIVE, HEAD, LRU, REF_MASK};
use pagealloc_core::pageref;
use pagealloc_core::sync::{AtomicU64, Ordering};

/// The two lists and their lengths, in all and per zone.
#[derive(Debug, Default)]
pub struct NodeLru {
    inactive: PfnList,
    active: PfnList,
    nr_inactive: AtomicU64,
    nr_active: AtomicU64,
    /// Per zone (global zone index; grown on demand): pages on the
    /// (inactive, active) list (`nr_zone_inactive_file`,
    /// `nr_zone_active_file`). Their sums equal the two counters above.
    per_zone: Vec<[u64; 2]>,
}

/// The zone (global index) of `pfn`, from its pageblock word.
fn zone_ix(mm: &MemMap, pfn: u64) -> usize {
    mm.desc_and_block(pfn).map_or(0, |(_, w)| pagealloc_core::zone::pb_zone(w).get())
}

/// Which list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Inactive,
    Active,
}

impl NodeLru {
    /// Racy (inactive, active) lengths.
    pub(crate) fn sizes_racy(&self) -> (u64, u64) {
        (self.nr_inactive.load(Ordering::Relaxed), self.nr_active.load(Ordering::Relaxed))
    }

    /// Count `pfn` on (`+1`) or off (`-1`) list `w` of its zone.
    fn count_zone(&mut self, mm: &MemMap, pfn: u64, w: Which, on: bool) {
        let z = zone_ix(mm, pfn);
        if self.per_zone.len() <= z {
            self.per_zone.resize(z + 1, [0; 2]);
        }
        let c = &mut self.per_zone[z][w as usize];
        *c = if on { *c + 1 } else { c.saturating_sub(1) };
    }

    /// Zone `z`'s (inactive, active) pages on these lists.
    pub(crate) fn zone_sizes(&self, z: usize) -> (u64, u64) {
        self.per_zone.get(z).map_or((0, 0), |c| (c[0], c[1]))
    }

    fn list(&mut self, w: Which) -> (&mut PfnList, &AtomicU64) {
        match w {
            Which::Inactive => (&mut self.inactive, &self.nr_inactive),
            Which::Active => (&mut self.active, &self.nr_active),
        }
    }

    /// Put `pfn` (not on a list, a reference held by the caller) at the head
    /// of the list its `ACTIVE` bit names, and set `LRU`. False (nothing
    /// done) when the word is not an allocated head with a reference and no
    /// `LRU`: the caller's reference was put by somebody else (an internal
    /// `put_page` of a reference it did not hold; the public API has none,
    /// its references are `PageReference`s) and the frame freed, maybe handed out again, even to a
    /// `PageArray`, whose word nobody else may write. `LRU` is set with a
    /// compare-and-swap that requires all of it.
    pub fn add(&mut self, mm: &MemMap, pfn: u64) -> bool {
        let d = mm.page(pfn);
        let mut old = d.flags();
        loop {
            if old & (HEAD | LRU) != HEAD || pageref::count_of(old) == 0 {
                return false;
            }
            match d.flags.compare_exchange_weak(old, old | LRU, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(f) => old = f,
            }
        }
        let w = if old & ACTIVE != 0 { Which::Active } else { Which::Inactive };
        let (l, n) = self.list(w);
        l.push_head(mm, pfn);
        n.fetch_add(1, Ordering::Relaxed);
        self.count_zone(mm, pfn, w, true);
        true
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
        self.count_zone(mm, pfn, w, false);
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
        self.count_zone(mm, pfn, Which::Inactive, false);
        self.count_zone(mm, pfn, Which::Active, true);
        true
    }

    /// Isolate up to `nr` pages from the tail of list `w` (`isolate_lru_folios`):
    /// each taken gets a reference and loses `LRU`; a page whose count is 0
    /// (its last reference is being put) is left for that path, moved to the
    /// head. Returns the pages scanned past and the pages isolated in `out`.
    pub fn isolate(&mut self, mm: &MemMap, w: Which, nr: usize, out: &mut Vec<u64>) -> u64 {
        let mut scanned = 0;
        let first = out.len();
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
        for &p in &out[first..] {
            self.count_zone(mm, p, w, false);
        }
        scanned
    }

    /// Walk both lists: counts, flags and references agree (under the lock).
    pub fn check(&self, mm: &MemMap) -> Result<(), String> {
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
        let (i, a) = self.per_zone.iter().fold((0, 0), |s, z| (s.0 + z[0], s.1 + z[1]));
        if (i, a) != self.sizes_racy() {
            return Err(format!("per-zone counts sum to ({i}, {a}), lists hold {:?}", self.sizes_racy()));
        }
        Ok(())
    }
}
