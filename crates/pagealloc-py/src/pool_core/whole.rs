//! The operations on every shard at once (in kind order): giving back the
//! free lists, eviction in the global LRU order, reset and close, and the
//! allocator's shrinker, which uses them.

use super::{Core, PoolError, REFILLING};
use pagealloc::{ShrinkControl, Shrinker};
use std::sync::{PoisonError, Weak};

/// The allocator's view of a pool: its unused cached blocks can be freed.
pub(super) struct Evictor(pub(super) Weak<Core>);

impl Shrinker for Evictor {
    fn count_objects(&self, _sc: &ShrinkControl) -> u64 {
        if REFILLING.get() {
            return 0;
        }
        self.0.upgrade().map_or(0, |c| {
            (0..c.kinds.len())
                .map(|k| {
                    let st = c.lock(k);
                    st.lru_frames + st.free.frames()
                })
                .sum()
        })
    }

    /// The free lists first, all of them (free blocks cost nothing to give
    /// back, and a larger kind may need their frames to merge), then the
    /// oldest cached blocks for what is still asked.
    fn scan_objects(&self, sc: &ShrinkControl) -> u64 {
        let Some(c) = self.0.upgrade() else { return 0 };
        if REFILLING.get() {
            return 0;
        }
        c.lock(0).counters.shrinker_scans += 1;
        let drained = c.drain();
        drained + c.evict(u64::MAX, sc.nr_to_scan.saturating_sub(drained))
    }
}

impl Core {
    /// Give every free list back to the allocator; returns the frames.
    pub(crate) fn drain(&self) -> u64 {
        let mut frames = 0;
        for k in 0..self.kinds.len() {
            let ids = std::mem::take(&mut self.lock(k).free.drain()[k].0);
            frames += ids.len() as u64 * self.kinds[k].frames;
            self.free_kind(&ids, k);
        }
        frames
    }

    /// Evict unused cached blocks, oldest first, until `max_blocks` blocks
    /// or `max_frames` frames are freed; returns the frames freed.
    pub(crate) fn evict(&self, max_blocks: u64, max_frames: u64) -> u64 {
        let mut victims = Vec::new();
        {
            let mut all = self.lock_all();
            let mut frames = 0;
            while (victims.len() as u64) < max_blocks && frames < max_frames {
                // The oldest stamp of all shards.
                let Some(s) = (0..all.len())
                    .filter_map(|s| all[s].lru.first_key_value().map(|(&t, _)| (t, s)))
                    .min()
                    .map(|(_, s)| s)
                else {
                    break;
                };
                let st = &mut *all[s];
                let (_, id) = st.lru.pop_first().expect("seen above");
                let k = self.unlink_cached(st, id);
                frames += self.kinds[k].frames;
                victims.push((id, k));
            }
        }
        let mut freed = 0;
        for (id, k) in victims {
            self.free_kind(&[id], k);
            freed += self.kinds[k].frames;
        }
        freed
    }

    /// Forget every hash: unused cached blocks are freed, blocks in use
    /// are freed when their last user frees them. Returns blocks freed.
    pub(crate) fn reset(&self) -> Result<u64, PoolError> {
        let evicted = |c: &Self| c.lock_all().iter().map(|st| st.counters.evicted).sum::<u64>();
        if self.lock(0).closed {
            return Err(PoolError::Invalid("the block pool is closed".into()));
        }
        let before = evicted(self);
        self.evict(u64::MAX, u64::MAX);
        for mut st in self.lock_all() {
            st.cached.clear();
            for e in st.blocks.values_mut() {
                e.key = None;
            }
        }
        Ok(evicted(self) - before)
    }

    /// Free every block (in use or cached) and refuse further calls.
    pub(crate) fn close(&self) {
        let mut victims: Vec<(u64, usize)> = Vec::new();
        for mut st in self.lock_all() {
            st.closed = true;
            st.lru.clear();
            st.cached.clear();
            st.lru_frames = 0;
            st.frames.fill(0);
            st.in_use.fill(0);
            victims.extend(st.blocks.drain().map(|(id, e)| (id, usize::from(e.kind))));
            for (k, (ids, _)) in st.free.drain().into_iter().enumerate() {
                victims.extend(ids.into_iter().map(|id| (id, k)));
            }
        }
        for (id, k) in victims {
            self.free_kind(&[id], k);
        }
        if let Some(id) = self.shrinker.lock().unwrap_or_else(PoisonError::into_inner).take() {
            self.alloc.reclaim().unregister_shrinker(id);
        }
    }
}
