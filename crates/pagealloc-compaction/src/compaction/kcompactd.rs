//! kcompactd (the kernel's per-node compaction daemon) and proactive
//! compaction.
//!
//! - One thread per node, started the first time something becomes movable
//!   (movable operations registered, a page cache attached), holding the
//!   core (not a user handle); the last user handle's drop stops and joins
//!   them (`allocator::Users`).
//! - Woken by kswapd (pagealloc-mm's `vmscan::kswapd`) when a request of order > 0 woke
//!   kswapd and, after its reclaim, the node still has no free block of that
//!   order: it compacts each zone of the node where compaction is suitable
//!   until a block of that order is free (`compact_daemon_wake`).
//! - Proactive compaction: every [`INTERVAL`] it computes the node's
//!   fragmentation score and, when it is above the high watermark, compacts
//!   the node's zones until each zone's score is at or below the low one.
//!   If a run does not lower the score, the next runs are deferred
//!   ([`DEFER_INTERVALS`] intervals), so a node that cannot be improved
//!   (pinned pages everywhere) is not rescanned every interval.
//! - Scores (written from the kernel's documented definitions): a zone's
//!   score is the share (percent) of its free pages not in free blocks of at
//!   least the pageblock order; a node's is the sum of its zones' scores
//!   weighted by zone size (`managed / (node managed + 1)`). Watermarks from
//!   `compaction_proactiveness` `p`: low = `max(100 - p, 5)`, high =
//!   `min(low + 10, 100)`; `p = 0` turns proactive compaction off.
//! - Scanned pages are counted in `compact_daemon_migrate_scanned` /
//!   `compact_daemon_free_scanned` as well as the ordinary compaction
//!   counters.
//! - An owner's panic in a migration callback is dropped, one failed
//!   migration (counted in `pgmigrate_fail`) like any other: the pass and
//!   the thread go on.

use super::{CompactOutcome, Suitable};
use crate::migrate::OwnerPanic;
use crate::{Compaction, CompactionHost};
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{Order, ZoneIdx, PAGEBLOCK_ORDER};
use pagealloc_core::vmevent::VmEvent;
use std::sync::Arc;
use std::time::Duration;

/// How often kcompactd checks the fragmentation score (the kernel's
/// `HPAGE_FRAG_CHECK_INTERVAL_MSEC`).
pub const INTERVAL: Duration = Duration::from_millis(500);

/// Intervals a proactive run that did not lower the score defers the next.
pub const DEFER_INTERVALS: u32 = 32;

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// Zone `zi`'s fragmentation score (0..=100).
    pub(crate) fn fragmentation_score_zone(&self, zi: ZoneIdx) -> u64 {
        let fb = self.zones[zi].free_blocks_racy();
        let free: u64 = fb.iter().enumerate().map(|(o, n)| n << o).sum();
        let big: u64 = fb.iter().enumerate().skip(PAGEBLOCK_ORDER as usize).map(|(o, n)| n << o).sum();
        ((free - big) * 100).checked_div(free).unwrap_or(0)
    }

    /// Node `nid`'s fragmentation score: its zones' scores weighted by size.
    pub fn fragmentation_score_node(&self, nid: usize) -> u64 {
        let zones = || self.zones.iter().filter(move |z| z.nid as usize == nid);
        let total: u64 = zones().map(|z| z.managed).sum();
        zones().map(|z| self.fragmentation_score_zone(z.idx) * z.managed / (total + 1)).sum()
    }

    /// The proactive watermarks (low, high) for this allocator's
    /// `compaction_proactiveness`.
    pub fn fragmentation_score_wmarks(&self) -> (u64, u64) {
        let low = 100u64.saturating_sub(u64::from(self.cfg.compaction_proactiveness)).max(5);
        (low, (low + 10).min(100))
    }

    /// Whether node `nid` should be compacted proactively now.
    pub(crate) fn should_proactive_compact_node(&self, nid: usize) -> bool {
        self.cfg.compaction_proactiveness > 0
            && self.fragmentation_score_node(nid) > self.fragmentation_score_wmarks().1
    }

    pub(crate) fn count_daemon(&self, o: &CompactOutcome) {
        self.events.count(VmEvent::CompactDaemonMigrateScanned, o.migrate_scanned);
        self.events.count(VmEvent::CompactDaemonFreeScanned, o.free_scanned);
    }

    /// Compact each zone of node `nid` until its score is at or below the
    /// low watermark (`proactive_compact_node`).
    pub fn proactive_compact_node(&self, nid: usize) -> CompactOutcome {
        let (low, _) = self.fragmentation_score_wmarks();
        let mut sum = CompactOutcome::default();
        for zi in self.zones.iter().map(|z| z.idx) {
            if self.zones[zi].nid as usize != nid || self.fragmentation_score_zone(zi) <= low {
                continue;
            }
            // kcompactd's thread lives on: an owner's panic is one failed
            // migration (counted), not the end of compaction for the node.
            let o = self.compact_zone_until(zi, None, Some(low), &mut OwnerPanic::background());
            self.count_daemon(&o);
            sum.migrated += o.migrated;
            sum.migrate_scanned += o.migrate_scanned;
            sum.free_scanned += o.free_scanned;
        }
        sum
    }

    /// kcompactd woken for `order` (`kcompactd_do_work`): compact each zone
    /// of node `nid` that has no free block of that order and where
    /// compaction is suitable.
    pub fn kcompactd_do_work(&self, nid: usize, order: Order) {
        self.events.count(VmEvent::CompactDaemonWake, 1);
        for zi in self.zones.iter().map(|z| z.idx) {
            let z = &self.zones[zi];
            if z.nid as usize != nid || z.has_free_order(order) || self.compaction_suitable(zi, order) == Suitable::Skip
            {
                continue;
            }
            // As in `proactive_compact_node`.
            let o = self.compact_zone(zi, Some(order), &mut OwnerPanic::background());
            self.count_daemon(&o);
        }
    }

    /// Whether some zone of node `nid` has a free block of `order` (racy).
    pub fn node_has_free_order(&self, nid: usize, order: Order) -> bool {
        self.zones.iter().any(|z| z.nid as usize == nid && z.has_free_order(order))
    }
}

/// Start one kcompactd per node (once per allocator; nothing under loom).
pub fn start<H: CompactionHost + 'static>(core: &Arc<H>) {
    #[cfg(not(loom))]
    {
        let st = &core.mobility().kcompactd;
        if st.started.swap(true, Ordering::AcqRel) || st.stop.load(Ordering::Acquire) {
            return;
        }
        let mut ts = st.threads.lock();
        for nid in 0..core.nodes.len() {
            let c = Arc::clone(core);
            let t = std::thread::Builder::new().name(format!("kcompactd{nid}")).spawn(move || {
                pagealloc_core::cpu::block_async_signals();
                run(&*c, nid);
            });
            if let Ok(t) = t {
                ts.push(t);
            }
        }
    }
    #[cfg(loom)]
    let _ = (core, Ordering::Relaxed);
}

/// One node's kcompactd (`kcompactd()`).
#[cfg(not(loom))]
fn run<H: CompactionHost + ?Sized>(host: &H, nid: usize) {
    let core = Compaction::new(host);
    let st = &core.mobility().kcompactd;
    let mut defer = 0u32;
    loop {
        let woken = st.sleep(nid, INTERVAL);
        if st.stop.load(Ordering::Acquire) {
            return;
        }
        // Wake orders are stored as numbers; each came from an Order.
        if let Some(order) = woken.filter(|&o| o > 0).and_then(Order::new) {
            core.kcompactd_do_work(nid, order);
        }
        if defer > 0 {
            defer -= 1;
            continue;
        }
        if core.should_proactive_compact_node(nid) {
            let before = core.fragmentation_score_node(nid);
            core.proactive_compact_node(nid);
            if core.fragmentation_score_node(nid) >= before {
                defer = DEFER_INTERVALS;
            }
        }
    }
}
