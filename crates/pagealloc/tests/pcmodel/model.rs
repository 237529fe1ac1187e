//! The model's state: what every mapping id's file holds (its written-back
//! pages) and, for each life of a mapping (an *instance*: from the `mapping`
//! call that created it to its removal or its cache's drop), which pages it
//! caches, which of them are dirty with what bytes, and the writeback fault
//! its next fsync must report.
//!
//! Identities the harness checks against the cache:
//! - a cached page of a live instance holds `dirty[index]` if dirty, else
//!   the file's page (zeros where the file has none): a clean page always
//!   equals the file, because only this instance's writeback changes the
//!   file's pages while it lives;
//! - `dirty` keys are cached (`dirty ⊆ cached`);
//! - a dead instance caches nothing and has nothing dirty or pending.

use super::source::{Call, Event, Fault};
use pagealloc::PAGE_SIZE;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub type Bytes = Vec<u8>;

/// One life of a mapping id (module doc).
#[derive(Debug)]
pub struct Inst {
    pub id: u64,
    pub live: bool,
    pub cached: BTreeSet<u64>,
    /// Bytes of the pages written since their last successful writeback.
    pub dirty: BTreeMap<u64, Bytes>,
    /// The first writeback fault since the last fsync (its error is the
    /// one the next fsync returns).
    pub pending: Option<Fault>,
}

#[derive(Debug)]
pub struct Model {
    /// Per id: the source's pages.
    pub disk: Vec<HashMap<u64, Bytes>>,
    pub insts: Vec<Inst>,
    /// Per id: its live instance.
    pub current: Vec<Option<usize>>,
}

impl Model {
    pub fn new(nr_ids: usize) -> Self {
        Self { disk: vec![HashMap::new(); nr_ids], insts: Vec::new(), current: vec![None; nr_ids] }
    }

    /// `mapping(id, ..)`: the live instance of `id`, or a new, empty one.
    pub fn open(&mut self, id: u64) -> usize {
        if let Some(i) = self.current[id as usize] {
            return i;
        }
        let inst = Inst { id, live: true, cached: BTreeSet::new(), dirty: BTreeMap::new(), pending: None };
        self.insts.push(inst);
        self.current[id as usize] = Some(self.insts.len() - 1);
        self.insts.len() - 1
    }

    /// Removal (or the cache's drop): every page dropped, dirty data and
    /// the pending error discarded, as a truncate would.
    pub fn kill(&mut self, inst: usize) {
        let i = &mut self.insts[inst];
        i.live = false;
        i.cached.clear();
        i.dirty.clear();
        i.pending = None;
        self.current[i.id as usize] = None;
    }

    /// The bytes page `index` of `inst` holds (module doc).
    pub fn bytes(&self, inst: usize, index: u64) -> Bytes {
        let i = &self.insts[inst];
        i.dirty.get(&index).or_else(|| self.disk[i.id as usize].get(&index)).cloned().unwrap_or_else(zero_page)
    }

    /// `delete(index)` of a cached page: gone, with its dirty data.
    pub fn drop_page(&mut self, inst: usize, index: u64) {
        let i = &mut self.insts[inst];
        assert!(i.cached.remove(&index));
        i.dirty.remove(&index);
    }

    /// Apply a `write_page` the source received for a page of `inst`: it
    /// must be a dirty page, handed with the bytes the cache holds. A
    /// successful write makes it clean and the file's; a failed one leaves
    /// it dirty and records the fault for the next fsync.
    pub fn written_back(&mut self, inst: usize, e: &Event) {
        assert_eq!(e.call, Call::Write);
        let i = &mut self.insts[inst];
        let Some(want) = i.dirty.get(&e.index) else {
            panic!("a writeback of page {} of mapping {}, which the model has clean", e.index, i.id);
        };
        assert!(e.bytes == *want, "the writeback of page {} of mapping {} wrote other bytes", e.index, i.id);
        match e.fault {
            None => {
                let b = i.dirty.remove(&e.index).unwrap();
                self.disk[i.id as usize].insert(e.index, b);
            }
            Some(f) => {
                i.pending.get_or_insert(f);
            }
        }
    }
}

pub fn zero_page() -> Bytes {
    vec![0; PAGE_SIZE]
}
