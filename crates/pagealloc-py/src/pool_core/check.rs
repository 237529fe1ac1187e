//! The pool's read-only views, apart from the operations: its self-check
//! ([`Core::check`]: the identities listed in the parent module's doc) and
//! its sizes and counters.

use super::{Core, Counters, State, Usage};
use std::collections::HashSet;

impl Core {
    /// Check the module's invariants; the first broken one, described.
    pub(crate) fn check(&self) -> Result<(), String> {
        let all = self.lock_all();
        let mut seen = HashSet::new();
        for (k, st) in all.iter().enumerate() {
            self.check_shard(k, st)?;
            if let Some(id) = st.blocks.keys().find(|&&id| !seen.insert(id)) {
                return Err(format!("block {id} is held by two shards"));
            }
        }
        for (k, st) in all.iter().enumerate() {
            st.free.check()?;
            for (id, lk) in st.free.ids() {
                if lk != k || !seen.insert(id) {
                    return Err(format!("free block {id} of kind {lk} is also held, listed twice, or in shard {k}"));
                }
            }
        }
        Ok(())
    }

    fn check_shard(&self, k: usize, st: &State) -> Result<(), String> {
        let (mut frames, mut in_use, mut lru_frames) = (0u64, 0u64, 0u64);
        let n = self.kinds[k].frames;
        for (&id, e) in &st.blocks {
            if usize::from(e.kind) != k {
                return Err(format!("block {id} of kind {} is in shard {k}", e.kind));
            }
            frames += n;
            if e.refs > 0 {
                in_use += 1;
                if e.lru != 0 {
                    return Err(format!("block {id} is in use and on the LRU list"));
                }
            } else {
                if e.key.is_none() || st.lru.get(&e.lru) != Some(&id) {
                    return Err(format!("unused block {id} is not a cached block on the LRU list"));
                }
                lru_frames += n;
            }
            if let Some(key) = &e.key {
                if st.cached.get(&(e.kind, key.clone())) != Some(&id) {
                    return Err(format!("block {id} has a hash the cache map does not give it"));
                }
            }
        }
        if st.lru.len() != st.blocks.values().filter(|e| e.refs == 0).count() {
            return Err("the LRU list names blocks that are not unused".into());
        }
        if st.cached.values().any(|id| !st.blocks.contains_key(id)) {
            return Err("the cache map names a block the pool does not hold".into());
        }
        let others = (0..self.kinds.len()).filter(|&j| j != k);
        if frames != st.frames[k]
            || in_use != st.in_use[k]
            || lru_frames != st.lru_frames
            || others.clone().any(|j| st.frames[j] != 0 || st.in_use[j] != 0)
        {
            return Err(format!(
                "counters of kind {k} drifted: frames {} vs {frames}, in use {} vs {in_use}, LRU frames {} vs {lru_frames}",
                st.frames[k], st.in_use[k], st.lru_frames
            ));
        }
        Ok(())
    }

    /// Frames held now (in use and cached), all kinds.
    pub(crate) fn frames_held(&self) -> u64 {
        self.lock_all().iter().map(|st| st.frames.iter().sum::<u64>()).sum()
    }

    /// The sizes and counters now.
    pub(crate) fn usage(&self) -> Usage {
        let all = self.lock_all();
        let mut c = Counters::default();
        for st in &all {
            let s = st.counters;
            c.queries += s.queries;
            c.hits += s.hits;
            c.evicted += s.evicted;
            c.evicted_frames += s.evicted_frames;
            c.shrinker_scans += s.shrinker_scans;
            c.own_evictions += s.own_evictions;
        }
        Usage {
            kinds: all.iter().enumerate().map(|(k, st)| (st.blocks.len() as u64, st.in_use[k], st.frames[k])).collect(),
            cached_blocks: all.iter().map(|st| st.cached.len() as u64).sum(),
            lru_blocks: all.iter().map(|st| st.lru.len() as u64).sum(),
            lru_frames: all.iter().map(|st| st.lru_frames).sum(),
            free_list_frames: all.iter().map(|st| st.free.frames()).sum(),
            counters: c,
        }
    }

    /// The references of block `id` of `kind`, or `None` if the pool does not hold it.
    pub(crate) fn refs(&self, id: u64, kind: u8) -> Option<u32> {
        self.lock(usize::from(kind)).blocks.get(&id).map(|e| e.refs)
    }
}
