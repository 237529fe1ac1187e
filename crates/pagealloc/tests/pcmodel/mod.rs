//! The page cache's reference model, driven by `tests/integration/pagecache_model.rs`:
//! operation sequences run on a real [`PageCache`] over mappings backed by
//! fault-injecting in-memory sources, each answer checked against a model
//! of what the public API promises.
//!
//! - [`source`](source.rs): the in-memory file, its fault schedule, its log
//!   of calls, the panic hook that silences the injected panics;
//! - [`model`](model.rs): the expected state (files, mapping lives, cached
//!   and dirty pages, pending writeback errors);
//! - [`ops`](ops.rs): one step function per operation: call the cache,
//!   read the sources' logs, compare both with the model, update it.
//!
//! How the source calls are checked: the sources log every call; after an
//! operation the harness takes the logs and demands exactly the calls the
//! model predicts: a fill of each page it touches that the model has
//! uncached, in order, stopping at the first that failed; a writeback of
//! exactly the dirty pages, in index order, with the bytes the model holds;
//! one `sync` unless a writeback failed. Which call fails is the schedule's
//! choice; the log says which did, and the model then demands that call's
//! consequences.
//!
//! What the harness reads back instead of predicting:
//! - which pages `shrink` reclaims (LRU order and second chances): after a
//!   shrink it asks `is_cached` for every page the model has cached, and
//!   checks that each page that left was clean (after the shrink's own
//!   writebacks, checked as fsync's), held by no handle, and that their
//!   number is what `shrink` returned;
//! - the size of a readahead window, and when a marker starts an
//!   asynchronous one (stream history): it checks that a fill's window
//!   starts at the missing page, that an asynchronous window starts after
//!   a page being touched, that no window reads a page the model has cached
//!   (which would overwrite dirty data) or one past `MAX_INDEX`, and that a
//!   failed window leaves none of its pages cached. A failed asynchronous
//!   window fails no call.
//!
//! After every step the live mappings' pages are exactly the model's
//! (`is_cached` of each, and `nr_pages`), and the allocated frames are the
//! cached pages plus those held handles keep.
//!
//! Determinism: kswapd is off, proactive compaction is off, readahead has
//! no workers (the default: windows are read inline by the reader that
//! starts them), and the dirty pages stay far below the background
//! threshold (checked at setup), so no call reaches a source except from
//! the operation being run, on the test's thread.

mod model;
mod ops;
pub mod source;

use model::Model;
use pagealloc::{Mapping, PageAllocator, PageCache, PageCacheConfig, PageCacheError, PageHandle};
use source::{Event, FaultySource, Planned};
use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// Mapping ids the operations use.
pub const NR_IDS: usize = 3;
/// Handles held at once at most.
pub const MAX_HELD: usize = 8;

/// One operation. `m` picks a mapping handle among all opened so far,
/// removed ones included; `h` a held page handle.
#[derive(Clone, Debug)]
pub enum Op {
    Open(u64),
    Remove(u64),
    Get { m: usize, index: u64, hold: bool },
    FindGet { m: usize, index: u64, hold: bool },
    Read { m: usize, pos: u64, len: usize },
    Write { m: usize, pos: u64, len: usize, seed: u8 },
    Delete { m: usize, index: u64 },
    Truncate { m: usize },
    Fsync { m: usize },
    Shrink { nr: u64 },
    HandleRead { h: usize, off: usize, len: usize },
    DropHandle { h: usize },
    DropCache,
}

/// A source: whether it reads ahead, and its fault schedule.
pub type SourceSpec = (bool, Vec<Planned>);

/// A held page handle and what the model knows of its page.
struct Held<'a> {
    h: PageHandle<'a>,
    inst: usize,
    index: u64,
    /// The page's bytes when it left its mapping (then nothing changes them
    /// again); `None` while it is cached there.
    frozen: Option<model::Bytes>,
}

/// The cache under test, its mapping handles (in `arena`, which outlives
/// the harness so held page handles can borrow them), and the model.
pub struct Harness<'a> {
    alloc: &'a Arc<PageAllocator>,
    pc: Option<PageCache>,
    arena: &'a [OnceCell<Mapping>],
    /// Per arena slot in use: the instance its handle belongs to.
    opened: Vec<usize>,
    /// Per instance: an arena slot holding one of its handles.
    handle_of: Vec<usize>,
    sources: Vec<Arc<FaultySource>>,
    model: Model,
    held: Vec<Held<'a>>,
}

/// A page cache as the model needs it (module doc: determinism).
pub fn cache(alloc: &Arc<PageAllocator>) -> PageCache {
    PageCache::new(alloc.clone(), PageCacheConfig { kswapd: false }).unwrap()
}

/// `len` bytes of a pattern: what a write of seed `seed` writes.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|k| seed ^ (k % 251) as u8).collect()
}

/// The refusal carried by `res`, which must be one of `want`.
fn expect_refused<T>(res: &io::Result<T>, want: &[PageCacheError], what: &str) {
    let got = res.as_ref().err().and_then(PageCacheError::of);
    assert!(got.is_some_and(|g| want.contains(g)), "{what}: got {:?}, want one of {want:?}", res.as_ref().err());
}

impl<'a> Harness<'a> {
    /// A harness over `alloc` with one source per id (whether it reads
    /// ahead, and its fault schedule, from `sources`); mapping id 0 is
    /// opened, so every pick has a handle to land on. `arena` must have a
    /// slot per operation, plus one.
    pub fn new(alloc: &'a Arc<PageAllocator>, arena: &'a [OnceCell<Mapping>], sources: &[SourceSpec]) -> Self {
        source::silence_injected_panics();
        let sources = sources.iter().map(|(ra, plan)| Arc::new(FaultySource::new(*ra, plan.clone()))).collect();
        let mut h = Self {
            alloc,
            pc: Some(cache(alloc)),
            arena,
            opened: Vec::new(),
            handle_of: Vec::new(),
            sources,
            model: Model::new(NR_IDS),
            held: Vec::new(),
        };
        h.open(0);
        h
    }

    pub fn step(&mut self, op: &Op) {
        match *op {
            Op::Open(id) => self.open(id),
            Op::Remove(id) => self.remove(id),
            Op::Get { m, index, hold } => self.get(m, index, hold),
            Op::FindGet { m, index, hold } => self.find_get(m, index, hold),
            Op::Read { m, pos, len } => self.read(m, pos, len),
            Op::Write { m, pos, len, seed } => self.write(m, pos, len, seed),
            Op::Delete { m, index } => self.delete(m, index),
            Op::Truncate { m } => self.truncate(m),
            Op::Fsync { m } => self.fsync(m),
            Op::Shrink { nr } => self.shrink(nr),
            Op::HandleRead { h, off, len } => self.handle_read(h, off, len),
            Op::DropHandle { h } => {
                if !self.held.is_empty() {
                    self.held.swap_remove(h % self.held.len());
                }
            }
            Op::DropCache => self.drop_cache(),
        }
        self.after_step();
        let frees = matches!(op, Op::Remove(_) | Op::Delete { .. } | Op::Truncate { .. } | Op::DropHandle { .. });
        self.check_census(frees || matches!(op, Op::DropCache));
    }

    /// The source of mapping `id`.
    pub fn source(&self, id: u64) -> &FaultySource {
        &self.sources[id as usize]
    }

    fn pc(&self) -> &PageCache {
        self.pc.as_ref().expect("a cache is always attached between steps")
    }

    /// The handle `pick` chooses and its instance.
    fn mapping(&self, pick: usize) -> (usize, &'a Mapping) {
        let k = pick % self.opened.len();
        (self.opened[k], self.arena[k].get().expect("an opened slot"))
    }

    fn id_of(&self, inst: usize) -> u64 {
        self.model.insts[inst].id
    }

    /// The calls source `id` received since the last look.
    fn log(&self, id: u64) -> Vec<Event> {
        self.sources[id as usize].take_log()
    }

    /// Assert that no source was called.
    fn no_calls(&self, what: &str) {
        for (id, s) in self.sources.iter().enumerate() {
            let log = s.take_log();
            assert!(log.is_empty(), "{what} called source {id}: {log:?}");
        }
    }

    /// Freeze the bytes of the held handles on `inst` (on `index` only, if
    /// given) as their pages leave the mapping.
    fn detach(&mut self, inst: usize, index: Option<u64>) {
        for h in &mut self.held {
            if h.frozen.is_none() && h.inst == inst && index.is_none_or(|i| i == h.index) {
                h.frozen = Some(self.model.bytes(inst, h.index));
            }
        }
    }

    fn open(&mut self, id: u64) {
        let src: Arc<dyn pagealloc::PageSource> = self.sources[id as usize].clone();
        let m = self.pc().mapping(id, src);
        let inst = self.model.open(id);
        let k = self.opened.len();
        assert!(self.arena[k].set(m).is_ok(), "the arena has a slot per operation");
        self.opened.push(inst);
        if self.handle_of.len() == inst {
            self.handle_of.push(k);
        }
        let m = self.arena[k].get().unwrap();
        assert!(m.is_live() && m.id() == id);
        self.no_calls("mapping");
    }

    fn remove(&mut self, id: u64) {
        let cur = self.model.current[id as usize];
        assert_eq!(self.pc().remove_mapping(id), cur.is_some(), "remove_mapping({id})");
        if let Some(inst) = cur {
            self.detach(inst, None);
            self.model.kill(inst);
        }
        self.no_calls("remove_mapping");
    }

    /// Drop the cache with its mappings and handles alive (every mapping dies
    /// as if removed: no writeback), then attach a fresh cache.
    fn drop_cache(&mut self) {
        for inst in 0..self.model.insts.len() {
            if self.model.insts[inst].live {
                self.detach(inst, None);
                self.model.kill(inst);
            }
        }
        drop(self.pc.take());
        self.no_calls("dropping the cache");
        self.pc = Some(cache(self.alloc));
    }

    /// Liveness of every mapping handle; the pages of every live mapping
    /// exactly the model's (each of its pages cached, and as many as it
    /// has); none of them, nor any held page, locked or under writeback.
    fn after_step(&self) {
        for (k, &inst) in self.opened.iter().enumerate() {
            let m = self.arena[k].get().unwrap();
            let i = &self.model.insts[inst];
            assert_eq!(m.is_live(), i.live, "is_live of a handle on mapping {}", i.id);
            if !i.live {
                assert_eq!(m.nr_pages(), 0, "a removed mapping holds pages");
            } else if self.handle_of[inst] == k {
                assert_eq!(m.nr_pages(), i.cached.len() as u64, "pages of mapping {}: {:?}", i.id, i.cached);
                for &index in &i.cached {
                    assert!(m.is_cached(index), "page {index} of mapping {} is not cached", i.id);
                    let h = m.find_get(index).unwrap().unwrap();
                    self.assert_idle(&h, "a cached page");
                }
            }
        }
        for held in &self.held {
            self.assert_idle(&held.h, "a held page");
        }
    }

    /// Between steps no page is locked or under writeback: whatever failed
    /// or panicked released them.
    fn assert_idle(&self, h: &PageHandle<'_>, what: &str) {
        let (pfn, now) = (h.pfn(), Duration::ZERO);
        let locked = self.alloc.page_locks().wait_on_page_locked_timeout(pfn, now);
        assert!(locked.is_ok(), "{what} ({pfn:?}, index {}) is locked: {locked:?}", h.index());
        let wb = self.alloc.page_locks().wait_on_page_writeback_timeout(pfn, now);
        assert!(wb.is_ok(), "{what} ({pfn:?}, index {}) is under writeback: {wb:?}", h.index());
    }

    /// Frames allocated now: the pages the model has cached in live
    /// mappings, plus the frames held handles keep after their pages left
    /// (a page is freed when its last reference goes). Exact after a drain
    /// of the LRU add batches (`exact`), whose references also keep deleted
    /// pages a while; a lower bound otherwise (left undrained, so the other
    /// steps meet pages in the batches too).
    fn check_census(&self, exact: bool) {
        if exact {
            self.alloc.reclaim().lru_add_drain_all();
        }
        let cached: usize = self.model.insts.iter().filter(|i| i.live).map(|i| i.cached.len()).sum();
        let kept: BTreeSet<u64> = self.held.iter().filter(|h| h.frozen.is_some()).map(|h| h.h.pfn().as_u64()).collect();
        let want = (cached + kept.len()) as u64;
        let got = self.alloc.census().allocated;
        if exact {
            assert_eq!(got, want, "allocated frames: {cached} cached, {} kept by handles", kept.len());
        } else {
            assert!(got >= want, "allocated frames: {got}, fewer than {cached} cached and {} kept", kept.len());
        }
    }

    /// The end of a sequence: every cached page of every live mapping and
    /// every held handle read back against the model, every file against
    /// the model's, the allocator's invariants; then handles and cache
    /// dropped (the caller drops the mapping handles and checks
    /// conservation).
    pub fn finish(mut self) {
        for (inst, i) in self.model.insts.iter().enumerate().filter(|(_, i)| i.live) {
            let m = self.arena[self.handle_of[inst]].get().unwrap();
            for &index in &i.cached {
                let h = m.find_get(index).unwrap().unwrap_or_else(|| panic!("page {index} of {} left", i.id));
                check_page(&h, &self.model.bytes(inst, index), "a cached page at the end");
            }
        }
        for held in &self.held {
            let want = held.frozen.clone().unwrap_or_else(|| self.model.bytes(held.inst, held.index));
            check_page(&held.h, &want, "a held page at the end");
        }
        for (id, s) in self.sources.iter().enumerate() {
            assert!(s.pages() == self.model.disk[id], "the file of mapping {id} differs from the model's");
        }
        self.no_calls("the final checks");
        self.alloc.check_invariants().unwrap();
        self.held.clear();
        drop(self.pc.take());
    }
}

/// Page `h` holds `want`, read whole.
fn check_page(h: &PageHandle<'_>, want: &[u8], what: &str) {
    let mut buf = model::zero_page();
    assert_eq!(h.read(0, &mut buf), buf.len());
    assert!(buf == want, "{what}: page {} holds other bytes than the model's", h.index());
}

/// Everything is back once the cache, its handles and its mappings are
/// gone and the lists drained (the shared check).
pub fn assert_conserved(a: &PageAllocator) {
    crate::common::all_back(a);
}
