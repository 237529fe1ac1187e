//! kswapd: one thread per node, asleep until an allocation finds a zone of
//! its node below the low watermark (the allocation slow path wakes it, and
//! so does a page-cache fill that leaves its zone below low), then
//! reclaiming through the shrinkers until every zone of the node is above
//! its high watermark (plus the node's boost, raised by direct reclaim:
//! `vmscan::wake`) or a pass frees nothing (`pageoutrun` counts the
//! runs). The wakeup itself is `vmscan::wake`; pages
//! kswapd reclaims from the page cache go straight to the buddy lists
//! (`scan`), where the watermarks count them. After a run for a request
//! of order > 0 that left the node without a free block of that order, it
//! wakes the node's kcompactd (`compaction::kcompactd`).

use crate::mm::Mm;
use pagealloc_core::sync::{AtomicBool, Ordering};
use pagealloc_core::types::Order;
use pagealloc_core::vmevent::VmEvent;
use pagealloc_core::zone::Wmark;
use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Pages asked of the shrinkers per kswapd pass (the kernel's
/// `SWAP_CLUSTER_MAX`); a run makes passes until the node is balanced.
const KSWAPD_BATCH: u64 = 32;

/// One set of kswapd threads, one per node: started by the page cache when
/// it attaches (with `PageCacheConfig::kswapd`), stopped and joined when it
/// goes.
pub(crate) struct Kswapd {
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Kswapd {
    pub(crate) fn new() -> Self {
        Self { stop: Arc::new(AtomicBool::new(false)), threads: Mutex::new(Vec::new()) }
    }

    /// Start one kswapd per node of `mm`. The threads hold it weakly: they
    /// end when stopped or when the allocator goes.
    pub(crate) fn start(&self, mm: &Arc<Mm>) {
        mm.vmscan.kswapd.running.store(true, Ordering::Relaxed);
        let mut ts = self.threads.lock();
        for nid in 0..mm.nodes.len() {
            let (weak, stop) = (Arc::downgrade(mm), Arc::clone(&self.stop));
            let t = std::thread::Builder::new().name(format!("kswapd{nid}")).spawn(move || {
                pagealloc_core::cpu::block_async_signals();
                run(&weak, &stop, nid)
            });
            if let Ok(t) = t {
                ts.push(t);
            }
        }
    }

    /// Stop and join the threads.
    pub(crate) fn stop(&self, mm: &Mm) {
        self.stop.store(true, Ordering::Release);
        for n in 0..mm.nodes.len() {
            mm.vmscan.kswapd.kick(n);
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        mm.vmscan.kswapd.running.store(false, Ordering::Relaxed);
    }
}

impl Mm {
    /// Wake every node's kswapd.
    pub(crate) fn kswapd_wake_all(&self) {
        for n in 0..self.nodes.len() {
            self.vmscan.kswapd.wake(n);
        }
    }

    /// Wake the node's kswapd if the zone of the page just allocated is below
    /// its low watermark (`wakeup_kswapd`).
    pub(crate) fn kswapd_maybe_wake(&self, pfn: u64) {
        let k = &self.vmscan.kswapd;
        if !k.running() {
            return;
        }
        let z = self.zone_of(pfn);
        if z.free_pages_racy() < z.wmark[Wmark::Low as usize] + k.boost_of(z.nid as usize) {
            k.wake(z.nid as usize);
        }
    }

    /// Whether some zone of node `nid` is below its high watermark plus the
    /// node's boost (`pgdat_balanced` is its negation).
    pub(crate) fn below_high(&self, nid: usize) -> bool {
        let boost = self.vmscan.kswapd.boost_of(nid);
        self.zones
            .iter()
            .filter(|z| z.nid as usize == nid)
            .any(|z| z.free_pages_racy() < z.wmark[Wmark::High as usize] + boost)
    }

    /// One kswapd run (`balance_pgdat`): reclaim from node `nid` until every
    /// zone is above its high watermark, a pass frees nothing, or `stop` is
    /// set. Returns the pages freed.
    pub(crate) fn balance_node(&self, nid: usize, stop: &AtomicBool) -> u64 {
        if !self.below_high(nid) {
            return 0;
        }
        self.events.count(VmEvent::Pageoutrun, 1);
        self.vmscan.kswapd.set_busy(nid, true);
        let freed = super::as_reclaimer(|| {
            let mut freed = 0;
            while self.below_high(nid) && !stop.load(Ordering::Acquire) {
                let f = self.vmscan.shrink_all(KSWAPD_BATCH, Some(nid as u32), false);
                if f == 0 {
                    break;
                }
                freed += f;
            }
            freed
        })
        .unwrap_or(0);
        self.vmscan.kswapd.set_busy(nid, false);
        self.vmscan.kswapd.decay(nid);
        freed
    }
}

fn run(weak: &Weak<Mm>, stop: &AtomicBool, nid: usize) {
    loop {
        {
            let Some(mm) = weak.upgrade() else { return };
            // Sleep until woken; every 100 ms look anyway.
            mm.vmscan.kswapd.sleep(nid, Duration::from_millis(100));
        }
        let Some(mm) = weak.upgrade() else { return };
        if stop.load(Ordering::Acquire) {
            return;
        }
        mm.balance_node(nid, stop);
        // A high-order request woke us and reclaim did not make a block of
        // that order: kcompactd's turn (`kswapd_try_to_sleep` →
        // `wakeup_kcompactd`).
        let order = mm.vmscan.kswapd.take_order(nid);
        let high = Order::new(order).filter(|&o| o > Order::ZERO);
        if high.is_some_and(|o| !mm.compaction().node_has_free_order(nid, o)) {
            mm.mobility.kcompactd.wake(nid, order);
        }
    }
}
