//! Regression (found by `pagealloc stress`): a thread that frees pages into its
//! front cache and exits while another thread runs `drain_all_pages` must not
//! lose those pages. The drainer used to empty the slot, then (in the same
//! pass) forget every slot whose thread had exited by then, including one whose
//! thread freed more pages after the slot was emptied and exited just before
//! the forgetting.

use pagealloc::{Config, Gfp, PageAllocator};
use std::sync::atomic::{AtomicBool, Ordering};

/// Sets the stop flag when dropped, so a panic in the main thread still ends
/// the drainer (the scope would otherwise wait for it forever).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn pages_freed_by_exiting_threads_survive_concurrent_drains() {
    let a = PageAllocator::new(Config::small(16 << 20).nr_cpus(Some(2))).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                a.drain_all_pages();
            }
        });
        let _stop = StopOnDrop(&stop);
        for _ in 0..300 {
            std::thread::scope(|s2| {
                for _ in 0..2 {
                    s2.spawn(|| {
                        // (Leaked pages may make this run short: take what there is.)
                        let pages: Vec<_> = (0..24).map_while(|_| a.alloc_pages(Gfp::KERNEL, 0).ok()).collect();
                        for p in pages {
                            a.free_pages(p, 0).unwrap();
                        }
                    });
                }
            });
        }
    });
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.census().pcp, 0, "pages left marked PCP on no list: a front cache was forgotten");
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages leaked");
}
