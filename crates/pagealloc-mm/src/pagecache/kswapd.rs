//! kswapd: one thread per node, asleep until an allocation finds a zone of
//! its node below the low watermark (the allocation slow path wakes it, and
//! so does a page-cache fill that leaves its zone below low), then
//! reclaiming through the shrinkers until every zone of the node is above
//! its high watermark (plus the node's boost, raised by direct reclaim:
//! `vmscan::wake`) or a pass frees nothing (`pageoutrun` counts the
//! runs). The wakeup itself is `vmscan::wake` (below the allocator); pages
//! kswapd reclaims from the page cache go straight to the buddy lists
//! (`reclaim`), where the watermarks count them. After a run for a request
//! of order > 0 that left the node without a free block of that order, it
//! wakes the node's kcompactd (`compaction::kcompactd`).

use super::CacheInner;
use crate::allocator::PageAllocator;
use crate::sync::{AtomicBool, Ordering};
use crate::types::Order;
use crate::vmevent::VmEvent;
use crate::zone::Wmark;
use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Pages asked of the shrinkers per kswapd pass (the kernel's
/// `SWAP_CLUSTER_MAX`); a run makes passes until the node is balanced.
const KSWAPD_BATCH: u64 = 32;

pub(crate) struct Kswapd {
    nr_nodes: usize,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Kswapd {
    pub(crate) fn new(nr_nodes: usize) -> Self {
        Self { nr_nodes, stop: AtomicBool::new(false), threads: Mutex::new(Vec::new()) }
    }

    pub(crate) fn wake_all(a: &PageAllocator) {
        for n in 0..a.core.nodes.len() {
            a.core.vmscan.kswapd.wake(n);
        }
    }

    /// Wake the node's kswapd if the zone of the page just allocated is below
    /// its low watermark (`wakeup_kswapd`).
    pub(crate) fn maybe_wake(a: &PageAllocator, pfn: u64) {
        if !a.core.vmscan.kswapd.running() {
            return;
        }
        let z = a.core.zone_of(pfn);
        let k = &a.core.vmscan.kswapd;
        if z.free_pages_racy() < z.wmark[Wmark::Low as usize] + k.boost_of(z.nid as usize) {
            k.wake(z.nid as usize);
        }
    }

    pub(crate) fn stop(&self, a: &PageAllocator) {
        self.stop.store(true, Ordering::Release);
        for n in 0..self.nr_nodes {
            a.core.vmscan.kswapd.kick(n);
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        a.core.vmscan.kswapd.running.store(false, Ordering::Relaxed);
    }
}

/// Start one kswapd per node.
pub(crate) fn start(c: &Arc<CacheInner>) {
    c.alloc.core.vmscan.kswapd.running.store(true, Ordering::Relaxed);
    let mut ts = c.kswapd.threads.lock();
    for nid in 0..c.kswapd.nr_nodes {
        let weak = Arc::downgrade(c);
        let t = std::thread::Builder::new().name(format!("kswapd{nid}")).spawn(move || {
            crate::cpu::block_async_signals();
            run(&weak, nid)
        });
        if let Ok(t) = t {
            ts.push(t);
        }
    }
}

/// Whether some zone of node `nid` is below its high watermark plus the
/// node's boost (`pgdat_balanced` is its negation).
pub(crate) fn below_high(a: &PageAllocator, nid: usize) -> bool {
    let boost = a.core.vmscan.kswapd.boost_of(nid);
    a.core
        .zones
        .iter()
        .filter(|z| z.nid as usize == nid)
        .any(|z| z.free_pages_racy() < z.wmark[Wmark::High as usize] + boost)
}

fn run(weak: &Weak<CacheInner>, nid: usize) {
    loop {
        {
            let Some(c) = weak.upgrade() else { return };
            // Sleep (holding no strong reference) until woken; every 100 ms
            // look anyway.
            let a = c.alloc.clone();
            drop(c);
            a.core.vmscan.kswapd.sleep(nid, Duration::from_millis(100));
        }
        let Some(c) = weak.upgrade() else { return };
        if c.kswapd.stop.load(Ordering::Acquire) {
            return;
        }
        balance_node(&c, nid);
        // A high-order request woke us and reclaim did not make a block of
        // that order: kcompactd's turn (`kswapd_try_to_sleep` →
        // `wakeup_kcompactd`).
        let order = c.alloc.core.vmscan.kswapd.take_order(nid);
        let high = Order::new(order).filter(|&o| o > Order::ZERO);
        if high.is_some_and(|o| !c.alloc.core.compaction().node_has_free_order(nid, o)) {
            c.alloc.core.mobility.kcompactd.wake(nid, order);
        }
    }
}

/// One kswapd run (`balance_pgdat`): reclaim from node `nid` until every
/// zone is above its high watermark, a pass frees nothing, or kswapd stops.
/// Returns the pages freed.
pub(crate) fn balance_node(c: &CacheInner, nid: usize) -> u64 {
    let a = &c.alloc;
    if !below_high(a, nid) {
        return 0;
    }
    a.core.events.count(VmEvent::Pageoutrun, 1);
    a.core.vmscan.kswapd.set_busy(nid, true);
    let freed = crate::vmscan::as_reclaimer(|| {
        let mut freed = 0;
        while below_high(a, nid) && !c.kswapd.stop.load(Ordering::Acquire) {
            let f = a.core.vmscan.shrink_all(KSWAPD_BATCH, Some(nid as u32), false);
            if f == 0 {
                break;
            }
            freed += f;
        }
        freed
    })
    .unwrap_or(0);
    a.core.vmscan.kswapd.set_busy(nid, false);
    a.core.vmscan.kswapd.decay(nid);
    freed
}
