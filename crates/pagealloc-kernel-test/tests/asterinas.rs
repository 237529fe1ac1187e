//! The Asterinas-shaped frame allocator (`src/frames.rs`): boot on a memory
//! map with holes, then allocations of every layout and frees of whole runs
//! and of their parts, from several threads (on this crate's platform they
//! all share CPU 0's list and spin on its lock); never a frame in a hole or
//! a firmware area, never one twice, every frame back at the end.

mod common;

use common::Rng;
use pagealloc_core::PAGE_SIZE;
use pagealloc_kernel_test::frames::{boot, GlobalFrameAllocator};
use std::alloc::Layout;
use std::collections::HashSet;
use std::sync::Mutex;

const BASE: usize = 0x8000_0000;

/// Whether `[addr, addr + len)` lies in the usable memory `boot` gives.
fn usable(addr: usize, len: usize) -> bool {
    let regions = [
        (0x0000_1000, 0x0009_f000),
        (0x0010_0000, 0x0200_0000),
        (0x0200_1000, 0x02ff_f000),
        (0x0300_0000, 0x0400_0000),
    ];
    let (s, e) = (addr - BASE, addr - BASE + len);
    regions.iter().any(|&(rs, re)| s >= rs && e <= re)
}

#[test]
fn frames_of_every_layout_come_from_usable_memory_and_go_back_in_parts() {
    let f = boot();
    let usable_pages = f.allocator().managed_pages();
    assert_eq!(usable_pages, (0x9e000 + 0x1f0_0000 + 0xffe000 + 0x100_0000) as u64 / PAGE_SIZE as u64);
    let taken = Mutex::new(HashSet::new());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (f, taken) = (&f, &taken);
            s.spawn(move || {
                let mut rng = Rng(t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                let mut held: Vec<(usize, usize)> = Vec::new();
                for _ in 0..400 {
                    if rng.below(10) < 6 {
                        let pages = [1usize, 1, 2, 3, 8, 16, 100][rng.below(7)];
                        let align = PAGE_SIZE << rng.below(pages.next_power_of_two().trailing_zeros() as usize + 1);
                        let layout = Layout::from_size_align(pages * PAGE_SIZE, align).unwrap();
                        if let Some(addr) = f.alloc(layout) {
                            assert_eq!(addr % align, 0, "{layout:?} at {addr:#x}");
                            assert!(usable(addr, layout.size()), "{layout:?} at {addr:#x} outside usable memory");
                            let mut tk = taken.lock().unwrap();
                            for p in 0..pages {
                                assert!(
                                    tk.insert(addr + p * PAGE_SIZE),
                                    "frame {:#x} given twice",
                                    addr + p * PAGE_SIZE
                                );
                            }
                            held.push((addr, pages));
                        }
                    } else if let Some((addr, pages)) = held.pop() {
                        // Back in up to three parts, in any order.
                        let cut = rng.below(pages);
                        let parts = [(addr, cut), (addr + cut * PAGE_SIZE, pages - cut)];
                        for (a, n) in parts.into_iter().filter(|&(_, n)| n > 0) {
                            let mut tk = taken.lock().unwrap();
                            for p in 0..n {
                                assert!(tk.remove(&(a + p * PAGE_SIZE)));
                            }
                            drop(tk);
                            f.dealloc(a, n * PAGE_SIZE);
                        }
                    }
                }
                for (addr, pages) in held {
                    let mut tk = taken.lock().unwrap();
                    for p in 0..pages {
                        tk.remove(&(addr + p * PAGE_SIZE));
                    }
                    drop(tk);
                    f.dealloc(addr, pages * PAGE_SIZE);
                }
            });
        }
    });
    let a = f.allocator();
    a.drain();
    a.check_invariants().unwrap();
    assert_eq!((a.nr_free_pages(), a.managed_pages()), (usable_pages, usable_pages));
    // An alignment a run cannot give is refused, not faked.
    assert_eq!(f.alloc(Layout::from_size_align(PAGE_SIZE, 1 << 30).unwrap()), None);
}
