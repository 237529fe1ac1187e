//! kswapd: one thread per node, asleep until a page-cache allocation finds
//! its zone below the low watermark (or direct reclaim runs), then reclaiming
//! through the shrinkers until every zone of the node is above its high
//! watermark or no progress is made (`pageoutrun` counts the runs).

use super::CacheInner;
use crate::allocator::PageAllocator;
use crate::sync::{AtomicBool, Ordering};
use crate::vmevent::VmEvent;
use crate::zone::Wmark;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

struct NodeWake {
    pending: Mutex<bool>,
    cv: Condvar,
}

pub(crate) struct Kswapd {
    nodes: Box<[NodeWake]>,
    running: AtomicBool,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Kswapd {
    pub(crate) fn new(nr_nodes: usize) -> Self {
        Self {
            nodes: (0..nr_nodes).map(|_| NodeWake { pending: Mutex::new(false), cv: Condvar::new() }).collect(),
            running: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        }
    }

    fn wake(&self, nid: usize) {
        if !self.running.load(Ordering::Relaxed) {
            return;
        }
        let w = &self.nodes[nid];
        let mut p = w.pending.lock();
        if !*p {
            *p = true;
            w.cv.notify_one();
        }
    }

    pub(crate) fn wake_all(&self) {
        for n in 0..self.nodes.len() {
            self.wake(n);
        }
    }

    /// Wake the node's kswapd if the zone of the page just allocated is below
    /// its low watermark (`wakeup_kswapd`).
    pub(crate) fn maybe_wake(&self, a: &PageAllocator, pfn: u64) {
        if !self.running.load(Ordering::Relaxed) {
            return;
        }
        let z = a.core.zone_of(pfn);
        if z.free_pages_racy() < z.wmark[Wmark::Low as usize] {
            self.wake(z.nid as usize);
        }
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        for w in self.nodes.iter() {
            let mut p = w.pending.lock();
            *p = true;
            w.cv.notify_one();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        self.running.store(false, Ordering::Relaxed);
    }
}

/// Start one kswapd per node.
pub(crate) fn start(c: &Arc<CacheInner>) {
    c.kswapd.running.store(true, Ordering::Relaxed);
    let mut ts = c.kswapd.threads.lock();
    for nid in 0..c.kswapd.nodes.len() {
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

fn below_high(a: &PageAllocator, nid: usize) -> bool {
    a.core.zones.iter().filter(|z| z.nid as usize == nid).any(|z| z.free_pages_racy() < z.wmark[Wmark::High as usize])
}

fn run(weak: &Weak<CacheInner>, nid: usize) {
    loop {
        {
            let Some(c) = weak.upgrade() else { return };
            let w = &c.kswapd.nodes[nid];
            let mut p = w.pending.lock();
            if !*p {
                w.cv.wait_for(&mut p, Duration::from_millis(100));
            }
            *p = false;
        }
        let Some(c) = weak.upgrade() else { return };
        if c.kswapd.stop.load(Ordering::Acquire) {
            return;
        }
        let a = &c.alloc;
        if !below_high(a, nid) {
            continue;
        }
        a.core.events.count(VmEvent::Pageoutrun, 1);
        crate::vmscan::as_reclaimer(|| {
            while below_high(a, nid) && !c.kswapd.stop.load(Ordering::Acquire) {
                if a.core.vmscan.shrink_all(32, Some(nid as u32), false) == 0 {
                    break;
                }
                // Freed pages may sit on per-CPU lists; the watermark counts
                // only the buddy's.
                a.core.drain_all();
            }
        });
    }
}
