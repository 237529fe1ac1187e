//! Multi-threaded stress: more threads than cores, mixed orders and types, with
//! cross-thread frees; invariants and conservation checked at the end.

use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use std::sync::{Arc, Mutex};

#[test]
fn many_threads_mixed_orders_then_whole_again() {
    let a = PageAllocator::new(Config::small(64 << 20).nr_cpus(Some(4))).unwrap();
    let threads = 16;
    let rounds = 3000;
    // A shared pool lets one thread free what another allocated.
    let shared: Arc<Mutex<Vec<(Pfn, u32)>>> = Arc::default();
    std::thread::scope(|s| {
        for t in 0..threads {
            let a = a.clone();
            let shared = shared.clone();
            s.spawn(move || {
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 * 0x1234_5678);
                let mut mine: Vec<(Pfn, u32)> = Vec::new();
                for _ in 0..rounds {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let order = match rng % 16 {
                        0..=9 => 0,
                        10..=12 => 1 + (rng >> 8) as u32 % 3,
                        13 | 14 => 4 + (rng >> 8) as u32 % 5,
                        _ => 9 + (rng >> 8) as u32 % 2,
                    };
                    let gfp = [Gfp::KERNEL, Gfp::MOVABLE, Gfp::RECLAIMABLE, Gfp::ATOMIC][(rng >> 20) as usize % 4];
                    if let Ok(p) = a.alloc_pages(gfp, order) {
                        mine.push((p, order));
                    }
                    if mine.len() > 24 || rng.is_multiple_of(5) {
                        if let Some((p, o)) = mine.pop() {
                            if rng.is_multiple_of(3) {
                                shared.lock().unwrap().push((p, o));
                            } else {
                                a.free_pages(p, o).unwrap();
                            }
                        }
                    }
                    if rng.is_multiple_of(7) {
                        let taken = shared.lock().unwrap().pop();
                        if let Some((p, o)) = taken {
                            a.free_pages(p, o).unwrap();
                        }
                    }
                }
                for (p, o) in mine {
                    a.free_pages(p, o).unwrap();
                }
            });
        }
    });
    for (p, o) in shared.lock().unwrap().drain(..) {
        a.free_pages(p, o).unwrap();
    }
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), a.managed_pages(), "pages leaked");
}
