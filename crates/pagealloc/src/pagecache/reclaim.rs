//! Reclaim of page-cache pages (the kernel's `shrink_node`,
//! `shrink_inactive_list`, `shrink_active_list`, `shrink_folio_list`), and
//! the shrinker through which the allocator's direct reclaim and kswapd
//! reach it.
//!
//! Per node, per call: if the active list is longer than the inactive one,
//! age up to `nr` pages from the active tail (referenced ones rotate and
//! lose `REFERENCED`, the others move to the inactive list: `pgdeactivate`);
//! then scan up to `nr` pages from the inactive tail (`pgscan_*`). Each
//! isolated page (holding isolation's reference):
//! - `REFERENCED`: cleared, the page goes back (second chance);
//! - page lock taken by someone else, or under writeback: back;
//! - dirty: writeback is started and done now (the source's write is
//!   synchronous); if the page is then clean and unlocked it is reclaimed in
//!   the same pass, else it goes back;
//! - no longer in a mapping (truncated meanwhile): isolation's reference is
//!   put, which frees it if it was the last;
//! - otherwise the count is frozen from exactly 2 (cache + isolation) to 0,
//!   which fails if anyone else holds a reference (the page goes back); on
//!   success the page leaves its mapping, is unlocked and freed through the
//!   claim (`pgsteal_*`), all of a scan's pages in one batch straight to the
//!   buddy lists, where the watermarks that reclaim works for count them (on
//!   the reclaimer's front cache or per-CPU list they would be invisible to
//!   the slow path's retry and to kswapd's balance check until a drain).

use super::mapping::Mapping;
use super::CacheInner;
use crate::page::flags::{ACTIVE, DIRTY, GUARD, REFERENCED, WRITEBACK};
use crate::pageref;
use crate::sync::Ordering;
use crate::types::Pfn;
use crate::vmevent::VmEvent;
use crate::vmscan::lru::Which;
use crate::vmscan::{ShrinkControl, Shrinker};
use std::sync::Weak;

/// The page cache as the allocator's shrinker.
pub(crate) struct CacheShrinker(pub(crate) Weak<CacheInner>);

impl Shrinker for CacheShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(c) = self.0.upgrade() else { return 0 };
        let v = &c.alloc.core.vmscan;
        nodes(&c, sc.nid).map(|n| v.lru_sizes(n)).map(|(i, a)| i + a).sum::<u64>()
            + v.batches.iter().map(|b| b.lock().len() as u64).sum::<u64>()
    }
    fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(c) = self.0.upgrade() else { return 0 };
        if sc.direct {
            super::kswapd::Kswapd::wake_all(&c.alloc);
        }
        shrink(&c, sc.nr_to_scan, sc.nid, sc.direct)
    }
}

fn nodes(c: &CacheInner, nid: Option<u32>) -> impl Iterator<Item = usize> {
    let n = c.alloc.nr_nodes() as usize;
    let (lo, hi) = match nid {
        Some(x) if (x as usize) < n => (x as usize, x as usize + 1),
        _ => (0, n),
    };
    lo..hi
}

/// Reclaim up to `nr` pages from node `nid` (or every node); returns pages
/// freed. `direct` picks the counters.
pub(crate) fn shrink(c: &CacheInner, nr: u64, nid: Option<u32>, direct: bool) -> u64 {
    let core = &c.alloc.core;
    core.lru_add_drain_all();
    let mut freed = 0;
    for n in nodes(c, nid) {
        let (inactive, active) = core.vmscan.lru_sizes(n);
        if active > inactive {
            shrink_active(c, n, nr as usize);
        }
        let mut f = shrink_inactive(c, n, nr as usize, direct);
        // A pass that freed nothing may only have taken second chances
        // away (a sequential reader leaves every page it read referenced
        // once, the tail included): scan on, up to the list's length, as
        // the kernel's falling reclaim priority scans more of the list.
        let mut scanned = nr.max(1);
        while f == 0 && scanned < inactive {
            f = shrink_inactive(c, n, nr as usize, direct);
            scanned += nr.max(1);
        }
        freed += f;
        if freed >= nr {
            break;
        }
    }
    freed
}

/// Age the active list of node `n`.
fn shrink_active(c: &CacheInner, n: usize, nr: usize) {
    let core = &c.alloc.core;
    let mut v = Vec::with_capacity(nr);
    core.vmscan.lrus[n].lock().isolate(&core.mm, Which::Active, nr, &mut v);
    let mut deact = 0;
    for &p in &v {
        let d = core.mm.page(p);
        if d.flags.fetch_and(!REFERENCED, Ordering::Relaxed) & REFERENCED == 0 {
            d.flags.fetch_and(!ACTIVE, Ordering::Relaxed);
            deact += 1;
        }
    }
    core.events.count(VmEvent::Pgdeactivate, deact);
    core.putback_lru(&v);
}

/// Scan the inactive list of node `n` from its tail; returns pages freed.
fn shrink_inactive(c: &CacheInner, n: usize, nr: usize, direct: bool) -> u64 {
    let core = &c.alloc.core;
    let mut v = Vec::with_capacity(nr);
    let scanned = core.vmscan.lrus[n].lock().isolate(&core.mm, Which::Inactive, nr, &mut v);
    core.events.count(if direct { VmEvent::PgscanDirect } else { VmEvent::PgscanKswapd }, scanned);
    let mut back = Vec::new();
    let mut to_buddy = Vec::new();
    for p in v {
        let pfn = Pfn::new(p);
        let d = core.mm.page(p);
        if d.flags.fetch_and(!REFERENCED, Ordering::Relaxed) & REFERENCED != 0 {
            back.push(p);
            continue;
        }
        let Ok(r) = c.alloc.cache_page_ref(pfn) else { continue };
        if !r.try_lock_as(GUARD).unwrap_or(false) {
            back.push(p);
            continue;
        }
        let f = d.flags();
        if f & WRITEBACK != 0 {
            r.guard_unlock(false);
            back.push(p);
            continue;
        }
        let Some((slot, index)) = c.owner_of(p) else {
            // Truncated while isolated: ours may be the last reference.
            r.guard_unlock(false);
            let _ = core.put_page(pfn);
            continue;
        };
        let Some(m) = c.mapping_at(slot) else {
            r.guard_unlock(false);
            back.push(p);
            continue;
        };
        if f & DIRTY != 0 {
            // Written back, and unlocked. The write is synchronous: unless
            // someone dirtied or locked the page meanwhile (or the write
            // failed), it is clean now and goes the way of a clean page in
            // this same pass.
            Mapping::writeback_locked(c, &m, pfn, index);
            if !r.try_lock_as(GUARD).unwrap_or(false) {
                back.push(p);
                continue;
            }
            if d.flags() & (DIRTY | WRITEBACK) != 0 {
                r.guard_unlock(false);
                back.push(p);
                continue;
            }
        }
        if !pageref::freeze(&d.flags, 2) {
            r.guard_unlock(false);
            back.push(p);
            continue;
        }
        if !m.remove_if(index, p) {
            // The owner word names a slot that no longer maps this page (a
            // mapping removed while a fill raced it): leave the page alone.
            d.flags.fetch_add(2 * crate::page::flags::REF_ONE, Ordering::Relaxed);
            r.guard_unlock(false);
            back.push(p);
            continue;
        }
        c.owners[p as usize].store(0, Ordering::Release);
        r.guard_unlock(false);
        to_buddy.push(p);
    }
    let freed = core.free_unreferenced_to_buddy(&to_buddy);
    core.putback_lru(&back);
    core.events.count(if direct { VmEvent::PgstealDirect } else { VmEvent::PgstealKswapd }, freed);
    freed
}
