//! The pool's read-only views, apart from the operations: its self-check
//! ([`Core::check`]: the identities listed in the parent module's doc) and
//! its sizes and counters.

use super::{Core, Usage};
use std::collections::HashSet;

impl Core {
    /// Check the module's invariants; the first broken one, described.
    pub(crate) fn check(&self) -> Result<(), String> {
        let st = self.lock();
        let mut frames = vec![0u64; self.kinds.len()];
        let mut in_use = vec![0u64; self.kinds.len()];
        let mut lru_frames = 0;
        for (&id, e) in &st.blocks {
            let n = self.kinds[usize::from(e.kind)].frames;
            frames[usize::from(e.kind)] += n;
            if e.refs > 0 {
                in_use[usize::from(e.kind)] += 1;
                if e.lru != 0 {
                    return Err(format!("block {id} is in use and on the LRU list"));
                }
            } else {
                if e.key.is_none() || st.lru.get(&e.lru) != Some(&id) {
                    return Err(format!("unused block {id} is not a cached block on the LRU list"));
                }
                lru_frames += n;
            }
            if let Some(k) = &e.key {
                if st.cached.get(&(e.kind, k.clone())) != Some(&id) {
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
        st.free.check()?;
        let mut listed = HashSet::new();
        for (id, k) in st.free.ids() {
            if st.blocks.contains_key(&id) || !listed.insert(id) {
                return Err(format!("free block {id} of kind {k} is also held, or listed twice"));
            }
        }
        if frames != st.frames || in_use != st.in_use || lru_frames != st.lru_frames {
            return Err(format!(
                "counters drifted: frames {:?} vs {:?}, in use {:?} vs {:?}, LRU frames {} vs {lru_frames}",
                st.frames, frames, st.in_use, in_use, st.lru_frames
            ));
        }
        Ok(())
    }

    /// Frames held now (in use and cached), all kinds.
    pub(crate) fn frames_held(&self) -> u64 {
        self.lock().frames.iter().sum()
    }

    /// The sizes and counters now.
    pub(crate) fn usage(&self) -> Usage {
        let st = self.lock();
        let mut held = vec![0u64; self.kinds.len()];
        for e in st.blocks.values() {
            held[usize::from(e.kind)] += 1;
        }
        Usage {
            kinds: (0..self.kinds.len()).map(|k| (held[k], st.in_use[k], st.frames[k])).collect(),
            cached_blocks: st.cached.len() as u64,
            lru_blocks: st.lru.len() as u64,
            lru_frames: st.lru_frames,
            free_list_frames: st.free.frames(),
            counters: st.counters,
        }
    }

    /// The references of block `id`, or `None` if the pool does not hold it.
    pub(crate) fn refs(&self, id: u64) -> Option<u32> {
        self.lock().blocks.get(&id).map(|e| e.refs)
    }
}
