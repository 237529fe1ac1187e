//! An arena per kernel zone, seeded with the zone's free-block distribution
//! from the start snapshot.
//!
//! The zone's managed pages (down to whole order-10 blocks) become the
//! arena, with the zone's min watermark. Then, on the fresh arena:
//! 1. pageblocks are tagged in the snapshot's proportions: order-10 blocks
//!    are taken as Unmovable and Reclaimable (a fallback claims each whole
//!    block for its type) and given back;
//! 2. for every free block the snapshot lists below order 10, two blocks of
//!    that order and type are taken: the buddy allocator splits them from one
//!    parent, so the second is the first's buddy and stays taken while the
//!    first is given back, and the free block cannot merge;
//! 3. the rest of the zone's in-use memory is taken page by page (order 0,
//!    by type in the snapshot's proportions), leaving as many order-10 blocks
//!    free as the snapshot lists;
//! 4. the first blocks of the pairs are freed.
//!
//! The pages kept in steps 2 and 3 stand for memory the kernel had allocated
//! before the capture: a free of a pfn never allocated in the trace gives
//! one of them back. What the seeding reached is measured (free pages per
//! order) and reported beside the snapshot's.

use super::proc::Zone;
use pagealloc::stats::events::VmEvent;
use pagealloc::{Config, Gfp, PageAllocator, Pfn};

/// A seeded arena.
pub struct Seeded {
    /// The kernel zone's name.
    pub name: String,
    /// The allocator.
    pub a: PageAllocator,
    /// Blocks taken while seeding, per order, that stand for the kernel's
    /// memory in use before the capture.
    pub in_use: Vec<Vec<Pfn>>,
    /// Free pages per order once seeded.
    pub free: [u64; 11],
    /// Fragmenting fallbacks, zone-lock acquisitions and (per-CPU refills,
    /// drains, failed allocations) the seeding itself made (subtracted from
    /// the replay's).
    pub base: (u64, u64, (u64, u64, u64)),
}

/// The Gfp of migratetype index `t` (0 Unmovable, 1 Movable, 2 Reclaimable).
pub fn gfp_of(t: usize) -> Gfp {
    match t {
        1 => Gfp::MOVABLE,
        2 => Gfp::RECLAIMABLE,
        _ => Gfp::UNMOVABLE,
    }
}

/// Free pages per order in `a`'s buddy lists.
pub fn free_pages(a: &PageAllocator) -> [u64; 11] {
    let mut v = [0u64; 11];
    for z in a.stats().buddyinfo().zones {
        for (o, n) in z.free.iter().enumerate().take(11) {
            v[o] += n << o;
        }
    }
    v
}

/// Zone-lock acquisitions so far, all zones.
pub fn lock_acquisitions(a: &PageAllocator) -> u64 {
    a.stats().lockstat().zones.iter().map(|z| z.acquisitions).sum()
}

/// Seed an arena for `z` on top of `config` (the design variant).
pub fn seed(z: &Zone, config: Config) -> Result<Seeded, String> {
    let pages = z.managed & !1023;
    if pages == 0 {
        return Err(format!("zone {} has {} managed pages, under one order-10 block", z.name, z.managed));
    }
    let config = config
        .arena_bytes(pages * 4096)
        .backing(pagealloc::Backing::None)
        .min_free_kbytes(Some(z.min * 4))
        .lock_stats(true);
    let a = PageAllocator::new(config).map_err(|e| format!("zone {}: {e:?}", z.name))?;
    let blocks = our_blocks(z, pages);
    tag(&a, &blocks);
    let mut in_use: Vec<Vec<Pfn>> = vec![Vec::new(); 11];
    let (to_free, pair_pages) = pairs(&a, z, &mut in_use);
    fill(&a, z, &blocks, &pair_pages, &mut in_use[0]);
    for (p, o) in to_free {
        let _ = a.free_pages(p, o);
    }
    a.drain_all_pages();
    let e = |ev: VmEvent| a.stats().event_count(ev);
    let pcp = (e(VmEvent::PcpRefill), e(VmEvent::PcpDrain), e(VmEvent::AllocFail));
    let base = (e(VmEvent::FallbackFragmenting), lock_acquisitions(&a), pcp);
    Ok(Seeded { name: z.name.clone(), free: free_pages(&a), a, in_use, base })
}

/// Our pageblocks per type: the kernel's proportions over our arena.
fn our_blocks(z: &Zone, pages: u64) -> [u64; 3] {
    let nb = pages / 512;
    let total: u64 = z.blocks.iter().sum::<u64>().max(1);
    let scale = |n: u64| (n as f64 * nb as f64 / total as f64).round() as u64;
    let (u, r) = (scale(z.blocks[0]).min(nb), scale(z.blocks[2]));
    let r = r.min(nb - u);
    [u, nb - u - r, r]
}

/// Step 1: claim order-10 blocks for Unmovable and Reclaimable, give them back.
fn tag(a: &PageAllocator, blocks: &[u64; 3]) {
    let mut taken = Vec::new();
    for t in [0, 2] {
        for _ in 0..blocks[t] / 2 {
            match a.alloc_pages(gfp_of(t), 10) {
                Ok(p) => taken.push(p),
                Err(_) => break,
            }
        }
    }
    for p in taken {
        let _ = a.free_pages(p, 10);
    }
}

/// Step 2: a buddy pair per free block below order 10; returns the blocks to
/// free at the end and the pages the pairs took per type.
fn pairs(a: &PageAllocator, z: &Zone, in_use: &mut [Vec<Pfn>]) -> (Vec<(Pfn, u32)>, [u64; 3]) {
    let mut to_free = Vec::new();
    let mut pages = [0u64; 3];
    for (t, taken) in pages.iter_mut().enumerate() {
        for o in (0..10u32).rev() {
            let want = z.free[t][o as usize];
            let (mut made, mut tries) = (0, 0);
            while made < want && tries < 2 * want + 8 {
                tries += 1;
                let Ok(p1) = a.alloc_pages(gfp_of(t), o) else { break };
                let Ok(p2) = a.alloc_pages(gfp_of(t), o) else {
                    // No buddy for it: it stays in use.
                    in_use[o as usize].push(p1);
                    *taken += 1 << o;
                    break;
                };
                *taken += 2 << o;
                if p2.as_u64() == p1.as_u64() ^ (1 << o) {
                    to_free.push((p1, o));
                    made += 1;
                } else {
                    in_use[o as usize].push(p1);
                }
                in_use[o as usize].push(p2);
            }
        }
    }
    (to_free, pages)
}

/// Step 3: take the rest of the in-use memory, order 0, by type.
fn fill(a: &PageAllocator, z: &Zone, blocks: &[u64; 3], pair_pages: &[u64; 3], out: &mut Vec<Pfn>) {
    for t in [0, 2, 1] {
        let keep_free = z.free[t][10] << 10;
        let n = (blocks[t] * 512).saturating_sub(pair_pages[t] + keep_free);
        for _ in 0..n {
            match a.alloc_pages(gfp_of(t), 0) {
                Ok(p) => out.push(p),
                Err(_) => break,
            }
        }
    }
}
