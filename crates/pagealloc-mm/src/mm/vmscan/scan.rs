//! The LRU scan (the kernel's `shrink_node`, `shrink_inactive_list`,
//! `shrink_active_list`): reclaim's half of freeing page-cache pages. The
//! other half, what becomes of each isolated page, is the owner's
//! ([`LruEvict`], implemented by the page cache: `pagecache::evict`).
//!
//! Per node, per call: if the active list is longer than the inactive one,
//! age up to `nr` pages from the active tail (referenced ones rotate and
//! lose `REFERENCED`, the others move to the inactive list: `pgdeactivate`);
//! then scan up to `nr` pages from the inactive tail (`pgscan_*`) and ask
//! the owner to evict each. Evicted pages are frozen; all of a scan's go in
//! one batch straight to the buddy lists (`free_frozen_to_buddy`,
//! `pgsteal_*`), where the watermarks that reclaim works for count them (on
//! the reclaimer's front cache or per-CPU list they would be invisible to
//! the slow path's retry and to kswapd's balance check until a drain).

use super::lru::Which;
use crate::mm::Mm;
use pagealloc_core::page::flags::{ACTIVE, REFERENCED};
use pagealloc_core::sync::Ordering;
use pagealloc_core::vmevent::VmEvent;

/// What became of an isolated page.
pub(crate) enum Fate {
    /// Back to the LRU (isolation's reference put there).
    Back,
    /// Removed from its mapping and frozen (the word before the freeze):
    /// to be freed.
    Free(u32),
    /// Truncated while isolated: isolation's reference was put.
    Gone,
}

/// The owner of the pages on the LRU lists, asked to evict each page the
/// scan isolated from an inactive list (holding isolation's reference).
pub(crate) trait LruEvict {
    /// Evict isolated page `p`, or say why not.
    fn evict(&self, p: u64) -> Fate;
}

/// The most pages one scan isolates: `shrink_lru(nr)` works through a
/// larger `nr` in scans of this size, so what it holds at once does not
/// grow with what it is asked for.
const SCAN_MAX: u64 = 1024;

impl Mm {
    /// Node `nid`, or every node when `None` (or out of range).
    pub(crate) fn lru_nodes(&self, nid: Option<u32>) -> std::ops::Range<usize> {
        let n = self.nodes.len();
        match nid {
            Some(x) if (x as usize) < n => x as usize..x as usize + 1,
            _ => 0..n,
        }
    }

    /// Reclaim up to `nr` pages of `owner`'s from node `nid` (or every
    /// node); returns pages freed. `direct` picks the counters.
    pub(crate) fn shrink_lru(&self, owner: &dyn LruEvict, nr: u64, nid: Option<u32>, direct: bool) -> u64 {
        self.lru_add_drain_all();
        let mut freed = 0;
        for n in self.lru_nodes(nid) {
            // One round a node, as before the cap: a later scan only while the
            // last one freed all it was asked for.
            while freed < nr {
                let ask = (nr - freed).min(SCAN_MAX);
                let f = self.shrink_node(owner, n, ask, direct);
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
    fn shrink_node(&self, owner: &dyn LruEvict, n: usize, nr: u64, direct: bool) -> u64 {
        let (inactive, active) = self.vmscan.lru_sizes(n);
        if active > inactive {
            self.shrink_active(n, nr as usize);
        }
        let mut f = self.shrink_inactive(owner, n, nr as usize, direct);
        // A pass that freed nothing may only have taken second chances
        // away (a sequential reader leaves every page it read referenced
        // once, the tail included): scan on, up to the list's length, as
        // the kernel's falling reclaim priority scans more of the list.
        let mut scanned = nr.max(1);
        while f == 0 && scanned < inactive {
            f = self.shrink_inactive(owner, n, nr as usize, direct);
            scanned = scanned.saturating_add(nr.max(1));
        }
        f
    }

    /// Age the active list of node `n`.
    fn shrink_active(&self, n: usize, nr: usize) {
        let mut v = Vec::with_capacity(nr);
        self.vmscan.lrus[n].lock().isolate(&self.mm, Which::Active, nr, &mut v);
        let mut deact = 0;
        for &p in &v {
            let d = self.mm.page(p);
            if d.flags.fetch_and(!REFERENCED, Ordering::Relaxed) & REFERENCED == 0 {
                d.flags.fetch_and(!ACTIVE, Ordering::Relaxed);
                deact += 1;
            }
        }
        self.events.count(VmEvent::Pgdeactivate, deact);
        self.putback_lru(&v);
    }

    /// Scan the inactive list of node `n` from its tail; returns pages freed.
    fn shrink_inactive(&self, owner: &dyn LruEvict, n: usize, nr: usize, direct: bool) -> u64 {
        let mut v = Vec::with_capacity(nr);
        let scanned = self.vmscan.lrus[n].lock().isolate(&self.mm, Which::Inactive, nr, &mut v);
        self.events.count(if direct { VmEvent::PgscanDirect } else { VmEvent::PgscanKswapd }, scanned);
        let mut back = Vec::new();
        let mut to_buddy = Vec::new();
        for p in v {
            match owner.evict(p) {
                Fate::Back => back.push(p),
                Fate::Free(old) => to_buddy.push((p, old)),
                Fate::Gone => {}
            }
        }
        let freed = self.free_frozen_to_buddy(&to_buddy);
        self.putback_lru(&back);
        self.events.count(if direct { VmEvent::PgstealDirect } else { VmEvent::PgstealKswapd }, freed);
        freed
    }
}
