//! Eviction by region: when a block of a high order cannot be had, freeing
//! the oldest cached blocks first frees frames all over the arena, and the
//! order may still be missing after the whole LRU list is gone. Instead the
//! pool looks for the aligned region of that order that no block in use
//! touches and that cached blocks fill the least, and evicts exactly those:
//! the region is then free (the pool is its arena's only user when built
//! by `pool_for`; otherwise the retry fails and the caller goes on to the
//! oldest-first eviction). Blocks in use are never moved here: a region
//! that every in-use block pins stays pinned.

use super::{kind_gfp, Core, State, REFILLING};
use pagealloc::{AllocError, Pfn};
use std::collections::HashMap;

impl Core {
    /// Take unused cached block `id` out of the pool's state (LRU entry
    /// excepted: the caller has removed it or removes it); its kind.
    pub(super) fn unlink_cached(&self, st: &mut State, id: u64) -> usize {
        let e = st.blocks.remove(&id).expect("the caller names a held block");
        let (k, n) = (usize::from(e.kind), self.kinds[usize::from(e.kind)].frames);
        if let Some(key) = e.key {
            st.cached.remove(&(e.kind, key));
        }
        st.frames[k] -= n;
        st.lru_frames -= n;
        st.counters.evicted += 1;
        st.counters.evicted_frames += n;
        k
    }

    /// A block of `order` without this pool's shrinker (whose oldest-first
    /// eviction would scatter the frames it frees): the allocator as it is,
    /// then after giving back the free lists, then after each region
    /// emptied. None when no region can be emptied.
    pub(super) fn alloc_block_by_region(&self, order: u32) -> Option<Pfn> {
        // Regions emptied per try, doubling: a try that finds a region free
        // can still fail (a watermark, a frame someone else holds), and one
        // scan of every block per region would be quadratic.
        let mut regions = 1;
        loop {
            REFILLING.set(true);
            let got = self.alloc.alloc_pages(kind_gfp(order), order);
            REFILLING.set(false);
            match got {
                Ok(pfn) => return Some(pfn),
                Err(AllocError::NoMemory { .. }) if self.drain() > 0 => {}
                Err(AllocError::NoMemory { .. }) if self.evict_region(order, regions) => {
                    self.lock(0).counters.own_evictions += 1;
                    regions *= 2;
                }
                Err(_) => return None,
            }
        }
    }

    /// Evict the unused cached blocks of the `count` order-`order` regions
    /// that no block in use overlaps and that hold the fewest cached
    /// frames; false when no region has cached blocks and nothing in use.
    pub(super) fn evict_region(&self, order: u32, count: usize) -> bool {
        let victims: Vec<(u64, usize)> = {
            let mut all = self.lock_all();
            // Region index -> (a block in use overlaps it, cached frames in it).
            let mut regions: HashMap<u64, (bool, u64)> = HashMap::new();
            for st in &all {
                for (&id, e) in &st.blocks {
                    let n = self.kinds[usize::from(e.kind)].frames;
                    for r in id >> order..=(id + n - 1) >> order {
                        let slot = regions.entry(r).or_default();
                        slot.0 |= e.refs > 0;
                        slot.1 += n;
                    }
                }
            }
            let mut best: Vec<(u64, u64)> = regions.iter().filter(|(_, v)| !v.0).map(|(&r, v)| (v.1, r)).collect();
            if best.is_empty() {
                return false;
            }
            best.sort_unstable();
            let chosen: std::collections::HashSet<u64> = best.iter().take(count).map(|&(_, r)| r).collect();
            let mut victims = Vec::new();
            for st in &mut all {
                let st = &mut **st;
                let ids: Vec<u64> = st
                    .blocks
                    .iter()
                    .filter(|(&id, e)| {
                        let n = self.kinds[usize::from(e.kind)].frames;
                        (id >> order..=(id + n - 1) >> order).any(|r| chosen.contains(&r))
                    })
                    .map(|(&id, _)| id)
                    .collect();
                for id in ids {
                    let stamp = st.blocks[&id].lru;
                    st.lru.remove(&stamp);
                    victims.push((id, self.unlink_cached(st, id)));
                }
            }
            victims
        };
        let any = !victims.is_empty();
        for (id, k) in victims {
            self.free_kind(&[id], k);
        }
        any
    }
}
