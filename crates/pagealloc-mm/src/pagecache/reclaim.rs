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
//!   success the page leaves its mapping and is freed from the frozen word
//!   (`Core::free_frozen_to_buddy`; the frozen word is a claim, so no
//!   stranger can lock, mark or reference it between its removal and its
//!   free) (`pgsteal_*`), all of a scan's
//!   pages in one batch straight to the
//!   buddy lists, where the watermarks that reclaim works for count them (on
//!   the reclaimer's front cache or per-CPU list they would be invisible to
//!   the slow path's retry and to kswapd's balance check until a drain).

use super::handle::CacheLock;
use super::mapping::Mapping;
use super::CacheInner;
use crate::page::flags::{ACTIVE, DIRTY, REFERENCED, WRITEBACK};
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

/// The most pages one scan isolates: `shrink(nr)` works through a larger
/// `nr` in scans of this size, so what it holds at once does not grow with
/// what it is asked for.
const SCAN_MAX: u64 = 1024;

/// Reclaim up to `nr` pages from node `nid` (or every node); returns pages
/// freed. `direct` picks the counters.
pub(crate) fn shrink(c: &CacheInner, nr: u64, nid: Option<u32>, direct: bool) -> u64 {
    c.alloc.core.lru_add_drain_all();
    let mut freed = 0;
    for n in nodes(c, nid) {
        // One round a node, as before the cap: a later scan only while the
        // last one freed all it was asked for.
        while freed < nr {
            let ask = (nr - freed).min(SCAN_MAX);
            let f = shrink_node(c, n, ask, direct);
            freed += f;
            if f < ask {
                break;
            }
        }
        if freed >= nr {
            break;
        }
    }
    freed
}

/// One round on node `n` for up to `nr` (at most `SCAN_MAX`) pages.
fn shrink_node(c: &CacheInner, n: usize, nr: u64, direct: bool) -> u64 {
    let (inactive, active) = c.alloc.core.vmscan.lru_sizes(n);
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
        scanned = scanned.saturating_add(nr.max(1));
    }
    f
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
        match reclaim_one(c, p) {
            Fate::Back => back.push(p),
            Fate::Free(old) => to_buddy.push((p, old)),
            Fate::Gone => {}
        }
    }
    let freed = core.free_frozen_to_buddy(&to_buddy);
    core.putback_lru(&back);
    core.events.count(if direct { VmEvent::PgstealDirect } else { VmEvent::PgstealKswapd }, freed);
    freed
}

/// What became of an isolated page.
enum Fate {
    /// Back to the LRU (isolation's reference put there).
    Back,
    /// Removed from its mapping and frozen (the word before the freeze):
    /// to be freed.
    Free(u32),
    /// Truncated while isolated: isolation's reference was put.
    Gone,
}

/// Try to reclaim isolated page `p` (holding isolation's reference).
fn reclaim_one(c: &CacheInner, p: u64) -> Fate {
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
