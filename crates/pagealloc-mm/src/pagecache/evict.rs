//! Eviction of page-cache pages: what reclaim (`mm::vmscan::scan`, the
//! kernel's `shrink_folio_list`) asks of the cache for each page it isolated
//! from an inactive list (the kernel's `__remove_mapping` and the writeback
//! of a dirty page), and the shrinker through which the allocator's direct
//! reclaim and kswapd reach the cache's LRU pages. Each isolated page
//! (holding isolation's reference):
//! - `REFERENCED`: cleared, the page goes back (second chance);
//! - page lock taken by someone else, or under writeback: back;
//! - dirty: writeback is started and done now (the source's write is
//!   synchronous); if the page is then clean and unlocked it is evicted in
//!   the same pass, else it goes back;
//! - no longer in a mapping (truncated meanwhile): isolation's reference is
//!   put, which frees it if it was the last;
//! - otherwise the count is frozen from exactly 2 (cache + isolation) to 0,
//!   which fails if anyone else holds a reference (the page goes back); on
//!   success the page leaves its mapping and reclaim frees it from the
//!   frozen word (the frozen word is a claim, so no stranger can lock, mark
//!   or reference it between its removal and its free).

use super::handle::CacheLock;
use super::mapping::Mapping;
use super::CacheInner;
use crate::mm::vmscan::scan::{Fate, LruEvict};
use crate::mm::vmscan::{ShrinkControl, Shrinker};
use pagealloc_core::page::flags::{DIRTY, REFERENCED, WRITEBACK};
use pagealloc_core::pageref;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::Pfn;
use std::sync::Weak;

/// The page cache as the allocator's shrinker.
pub(crate) struct CacheShrinker(pub(crate) Weak<CacheInner>);

impl Shrinker for CacheShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(c) = self.0.upgrade() else { return 0 };
        let v = &c.alloc.core.vmscan;
        c.alloc.core.lru_nodes(sc.nid).map(|n| v.lru_sizes(n)).map(|(i, a)| i + a).sum::<u64>()
            + v.batches.iter().map(|b| b.lock().len() as u64).sum::<u64>()
    }
    fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(c) = self.0.upgrade() else { return 0 };
        if sc.direct {
            c.alloc.core.kswapd_wake_all();
        }
        c.alloc.core.shrink_lru(&*c, sc.nr_to_scan, sc.nid, sc.direct)
    }
}

impl LruEvict for CacheInner {
    fn evict(&self, p: u64) -> Fate {
        evict(self, p)
    }
}

/// Try to evict isolated page `p` (holding isolation's reference).
fn evict(c: &CacheInner, p: u64) -> Fate {
    let core = &c.alloc.core;
    let pfn = Pfn::new(p);
    let d = core.mm.page(p);
    if d.flags.fetch_and(!REFERENCED, Ordering::Relaxed) & REFERENCED != 0 {
        return Fate::Back;
    }
    let Some(mut lock) = CacheLock::try_lock(&c.alloc, pfn) else { return Fate::Back };
    if d.flags() & WRITEBACK != 0 {
        return Fate::Back;
    }
    if c.owner_of(p).is_none() {
        // Truncated while isolated: ours may be the last reference (put
        // after the unlock: a lock holder holds a reference).
        drop(lock);
        let _ = core.put_page(pfn);
        return Fate::Gone;
    }
    // Whose page it is, checked against the mapping's own map: a page is
    // written back only to the source of the mapping that holds it.
    let Some((m, index)) = c.owner(p) else { return Fate::Back };
    if d.flags() & DIRTY != 0 {
        // Written back, and unlocked. The write is synchronous: unless
        // someone dirtied, locked or deleted the page meanwhile (or the
        // write failed), it is clean now and goes the way of a clean page
        // in this same pass.
        Mapping::writeback_locked(c, &m, lock, pfn, index);
        let Some(again) = CacheLock::try_lock(&c.alloc, pfn) else { return Fate::Back };
        lock = again;
        if d.flags() & (DIRTY | WRITEBACK) != 0 {
            return Fate::Back;
        }
    }
    let Some(old) = pageref::freeze(&d.flags, 2) else { return Fate::Back };
    if !m.remove_if(index, p) {
        // Deleted while unlocked for its writeback: undo the freeze (nobody
        // else writes a frozen word).
        d.flags.store(old, Ordering::Release);
        return Fate::Back;
    }
    c.owners[p as usize].store(0, Ordering::Release);
    lock.into_frozen();
    Fate::Free(old)
}
