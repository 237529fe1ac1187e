//! kswapd's wakeup (the kernel's `wakeup_kswapd` and `pgdat->kswapd_wait`),
//! so that the allocation slow path can wake a node's kswapd when it finds
//! a zone below its low watermark; the threads (`kswapd`) set
//! [`KswapdWake::running`] while they run.
//!
//! Protocol, per node: a waker sets `woken` and, only when it changed it
//! from false, notifies the condition variable under its mutex; while a
//! wakeup is pending every further wake is one relaxed load. kswapd consumes
//! the wakeup (`woken := false`) when it starts a run, so a wake during the
//! run leaves `woken` set and the next [`KswapdWake::sleep`] returns at once:
//! no wakeup is lost, and kswapd never sleeps through a request made while
//! it was reclaiming. `sleep` tests `woken` under the mutex that wakers
//! notify under, so a wake cannot fall between its test and its wait. A set
//! `woken` also tells the slow path that kswapd has been woken but has not
//! started yet ([`KswapdWake::pending`]); `busy`, set by kswapd for the
//! length of a run, tells it that kswapd is reclaiming
//! ([`KswapdWake::active`]: the slow path then gives way to it before
//! reclaiming itself), and the per-node boost
//! ([`KswapdWake::boost`]) moves kswapd's thresholds up after direct
//! reclaim.

use pagealloc_core::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use parking_lot::{Condvar, Mutex};
use std::time::Duration;

struct NodeWake {
    woken: AtomicBool,
    /// kswapd is in a run (reclaiming toward the high watermark).
    busy: AtomicBool,
    /// Pages kswapd reclaims beyond the high watermark, and wakes that much
    /// above the low one (see [`KswapdWake::boost`]).
    boost: AtomicU64,
    /// The highest order of the requests that woke kswapd since its last
    /// run (`kswapd_order`): after the run it wakes kcompactd for it.
    order: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
}

/// See the module doc.
pub struct KswapdWake {
    nodes: Box<[NodeWake]>,
    /// kswapd threads run for this allocator (wakes are ignored otherwise).
    pub running: AtomicBool,
}

impl KswapdWake {
    pub fn new(nr_nodes: usize) -> Self {
        Self {
            nodes: (0..nr_nodes)
                .map(|_| NodeWake {
                    woken: AtomicBool::new(false),
                    busy: AtomicBool::new(false),
                    boost: AtomicU64::new(0),
                    order: AtomicU32::new(0),
                    lock: Mutex::new(()),
                    cv: Condvar::new(),
                })
                .collect(),
            running: AtomicBool::new(false),
        }
    }

    /// Whether kswapd threads run.
    #[inline]
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// Wake node `nid`'s kswapd (nothing if none runs, or a wakeup is
    /// pending already).
    #[inline]
    pub fn wake(&self, nid: usize) {
        if !self.running() {
            return;
        }
        let Some(w) = self.nodes.get(nid) else { return };
        if w.woken.load(Ordering::Relaxed) {
            return;
        }
        self.kick(nid);
    }

    /// Wake node `nid`'s kswapd for a request of `order`, remembering the
    /// highest order until [`KswapdWake::take_order`].
    #[inline]
    pub(crate) fn wake_order(&self, nid: usize, order: u32) {
        if !self.running() {
            return;
        }
        if let Some(w) = self.nodes.get(nid) {
            if order > 0 {
                w.order.fetch_max(order, Ordering::Relaxed);
            }
        }
        self.wake(nid);
    }

    /// The highest order asked for since the last call (0: none).
    pub fn take_order(&self, nid: usize) -> u32 {
        self.nodes.get(nid).map_or(0, |w| w.order.swap(0, Ordering::Relaxed))
    }

    /// Set node `nid`'s wakeup and notify, whether or not kswapd runs (its
    /// stop uses this too).
    pub(crate) fn kick(&self, nid: usize) {
        let Some(w) = self.nodes.get(nid) else { return };
        if !w.woken.swap(true, Ordering::AcqRel) {
            let _g = w.lock.lock();
            w.cv.notify_one();
        }
    }

    /// kswapd of node `nid`: sleep until woken or `timeout` passes, then
    /// consume the wakeup. True if it was woken.
    pub fn sleep(&self, nid: usize, timeout: Duration) -> bool {
        let w = &self.nodes[nid];
        {
            let mut g = w.lock.lock();
            if !w.woken.load(Ordering::Acquire) {
                w.cv.wait_for(&mut g, timeout);
            }
        }
        w.woken.swap(false, Ordering::AcqRel)
    }

    /// Direct reclaim had to run on node `nid`: kswapd was too late (its
    /// wakeup at the low watermark came less than the allocators' headroom
    /// down to the min watermark before they got there). Raise the node's
    /// boost by `pages`, up to `cap`: kswapd then wakes at low + boost and
    /// reclaims to high + boost, so it runs longer and less often, with more
    /// headroom for its wakeup. The kernel boosts its watermarks
    /// (`watermark_boost_factor`, up to 150% of high) after fragmentation
    /// events; this boosts kswapd's two thresholds only (the allocators' min
    /// watermark stays), after reclaim events.
    pub fn boost(&self, nid: usize, pages: u64, cap: u64) {
        if let Some(w) = self.nodes.get(nid) {
            let _ =
                w.boost.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| (b < cap).then(|| (b + pages).min(cap)));
        }
    }

    /// Node `nid`'s boost now (pages).
    #[inline]
    pub(crate) fn boost_of(&self, nid: usize) -> u64 {
        self.nodes.get(nid).map_or(0, |w| w.boost.load(Ordering::Relaxed))
    }

    /// A kswapd run ended: the boost decays by a sixteenth, so it fades when
    /// direct reclaim stops.
    pub fn decay(&self, nid: usize) {
        if let Some(w) = self.nodes.get(nid) {
            let _ = w.boost.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| (b > 0).then(|| b - b.div_ceil(16)));
        }
    }

    /// kswapd of node `nid` starts (`true`) or ends a run.
    pub(crate) fn set_busy(&self, nid: usize, on: bool) {
        if let Some(w) = self.nodes.get(nid) {
            w.busy.store(on, Ordering::Relaxed);
        }
    }

    /// Whether node `nid`'s kswapd is woken or in a run: reclaim for the
    /// node is under way or about to be (racy).
    #[inline]
    pub fn active(&self, nid: usize) -> bool {
        self.nodes.get(nid).is_some_and(|w| w.woken.load(Ordering::Relaxed) || w.busy.load(Ordering::Relaxed))
    }

    /// Whether a wakeup of node `nid` is pending: kswapd was woken and has
    /// not started its run yet (racy).
    #[inline]
    pub fn pending(&self, nid: usize) -> bool {
        self.nodes.get(nid).is_some_and(|w| w.woken.load(Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Long enough that a sleep which should return at once and did not
    /// would be noticed as a failed assertion on its result, not on time.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn wakes_are_ignored_until_kswapd_runs_then_never_lost() {
        let k = KswapdWake::new(2);
        k.wake(0);
        assert!(!k.pending(0), "no kswapd: nothing pending");
        k.running.store(true, Ordering::Relaxed);
        k.wake(1);
        assert!(k.pending(1) && !k.pending(0));
        // A pending wakeup is consumed by the next sleep, which does not wait.
        assert!(k.sleep(1, LONG));
        assert!(!k.pending(1));
        // A wake during a run (after the sleep consumed the last one) makes
        // the next sleep return at once, woken.
        k.wake(1);
        k.wake(1);
        assert!(k.sleep(1, LONG));
        // Nothing pending: a short sleep times out, not woken.
        assert!(!k.sleep(1, Duration::from_millis(1)));
        k.wake(7); // no such node: ignored
    }

    #[test]
    fn a_sleeping_kswapd_is_woken_by_another_thread() {
        let k = std::sync::Arc::new(KswapdWake::new(1));
        k.running.store(true, Ordering::Relaxed);
        let k2 = k.clone();
        let t = std::thread::spawn(move || k2.sleep(0, LONG));
        // Whether the wake comes before or after the thread sleeps, it is
        // seen: the sleep returns true (a lost wakeup would return false
        // after LONG).
        k.wake(0);
        assert!(t.join().unwrap());
    }

    #[test]
    fn boost_is_capped_and_decays() {
        let k = KswapdWake::new(1);
        for _ in 0..10 {
            k.boost(0, 32, 100);
        }
        assert_eq!(k.boost_of(0), 100);
        k.boost(0, 32, 50); // over a lower cap already: unchanged
        assert_eq!(k.boost_of(0), 100);
        k.decay(0);
        assert_eq!(k.boost_of(0), 93);
        for _ in 0..200 {
            k.decay(0);
        }
        assert_eq!(k.boost_of(0), 0);
        assert_eq!(k.boost_of(3), 0);
    }
}
