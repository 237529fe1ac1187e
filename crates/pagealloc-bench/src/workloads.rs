//! Workloads shared by `pagealloc show` and the experiments: a fragmenting mix
//! of orders and migratetypes, and will-it-scale's page_fault1 pattern.

use crate::harness::rand::Lcg;
use pagealloc::{Gfp, PageAllocator, Pfn};

/// `ops` random allocations and frees of mixed orders (mostly 0..3, a few up to
/// 9) and types (70% movable, 20% unmovable, 10% reclaimable), holding about
/// `live_pct` percent of the arena at the end. Returns the live blocks (the
/// caller frees them, or keeps them to keep the arena fragmented).
pub fn fragment(a: &PageAllocator, ops: u64, seed: u64, live_pct: u64) -> Vec<(Pfn, u32)> {
    let mut live: Vec<(Pfn, u32)> = Vec::new();
    let mut rng = Lcg(seed | 1);
    let target_live = a.managed_pages() * live_pct / 100;
    let mut live_pages = 0u64;
    for _ in 0..ops {
        let want_alloc = live.is_empty() || (live_pages < target_live && rng.next() % 100 < 55);
        if want_alloc {
            let x = rng.next();
            let gfp = match x % 10 {
                0..=6 => Gfp::MOVABLE,
                7 | 8 => Gfp::KERNEL,
                _ => Gfp::RECLAIMABLE,
            };
            let order = match (x >> 8) % 100 {
                0..=79 => 0,
                80..=89 => 1,
                90..=95 => 2,
                96..=98 => 3,
                _ => 4 + ((x >> 16) % 6) as u32,
            };
            if let Ok(p) = a.alloc_pages(gfp, order) {
                live.push((p, order));
                live_pages += 1 << order;
            }
        } else {
            let k = (rng.next() as usize) % live.len();
            let (p, o) = live.swap_remove(k);
            a.free_pages(p, o).expect("free a live block");
            live_pages -= 1 << o;
        }
    }
    live
}

/// The fragmenting workload of the seed 5 experiments, in the spirit of "after
/// building a kernel": [`fragment`] (`ops` mixed operations, 60% live), then
/// page-cache-like churn: fill to 97% with order-0 movable pages and free a
/// random half of them, leaving tens of thousands of scattered free order-0 and
/// order-1 blocks on the lists. Returns the live blocks.
pub fn fragment_hard(a: &PageAllocator, ops: u64, seed: u64) -> Vec<(Pfn, u32)> {
    let mut live = fragment(a, ops, seed, 60);
    live.extend(fragment_hard_churn(a, seed));
    live
}

/// The order-0 churn of [`fragment_hard`]: returns the pages it keeps.
fn fragment_hard_churn(a: &PageAllocator, seed: u64) -> Vec<(Pfn, u32)> {
    let mut live = Vec::new();
    let fill_to = a.managed_pages() * 3 / 100;
    let mut fill = Vec::new();
    while a.nr_free_pages() > fill_to {
        match a.alloc_pages(Gfp::MOVABLE, 0) {
            Ok(p) => fill.push(p),
            Err(_) => break,
        }
    }
    let mut rng = Lcg(seed.rotate_left(17) | 1);
    for p in fill {
        if rng.next().is_multiple_of(2) {
            a.free_pages(p, 0).expect("free a fill page");
        } else {
            live.push((p, 0));
        }
    }
    live
}

/// Long free lists with high orders still available, for pagealloc-micro:
/// [`fragment_hard`], then free everything but the surviving order-0 churn
/// pages. The mixed allocations merge back into large blocks; the scattered
/// order-0 pages keep tens of thousands of small free blocks on the lists, as
/// a machine's page cache does.
pub fn scattered_order0(a: &PageAllocator, ops: u64, seed: u64) -> Vec<(Pfn, u32)> {
    let mut live = fragment(a, ops, seed, 60);
    let mixed = live.len();
    live.extend(fragment_hard_churn(a, seed));
    let fill = live.split_off(mixed);
    free_all(a, live);
    fill
}

/// Free what [`fragment`] left live.
pub fn free_all(a: &PageAllocator, live: Vec<(Pfn, u32)>) {
    for (p, o) in live {
        a.free_pages(p, o).expect("free a live block");
    }
}

/// will-it-scale page_fault1's pattern: each of `threads` threads takes
/// `pages` order-0 movable pages one at a time, writes to each, then frees them.
pub fn page_fault1(a: &PageAllocator, threads: usize, pages: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                crate::harness::pin(t);
                let mut got = Vec::with_capacity(pages);
                for _ in 0..pages {
                    let Ok(p) = a.alloc_pages(Gfp::MOVABLE, 0) else { break };
                    if let Some(ptr) = a.page_address(p) {
                        // SAFETY: we own the frame at `ptr` (PAGE_SIZE bytes) until we free it.
                        unsafe { ptr.as_ptr().write_volatile(1) };
                    }
                    got.push(p);
                }
                for p in got {
                    a.free_pages(p, 0).expect("free a page_fault1 page");
                }
            });
        }
    });
}
