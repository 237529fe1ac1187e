//! The churn half of `stress --pagecache`: mappings that come and go while
//! threads use them. [`CHURN_IDS`] mapping ids beside the file mapping,
//! each over a source fixed for the run: even ids a [`Store`] (a versioned
//! stand-in for a file: writes, writeback, fsync, readahead), odd ids a
//! [`FillFn`] computing each page from (id, index) (read-only); half of
//! each kind behind a [`Faulty`] wrapper that panics or fails on a schedule.
//!
//! Churn threads open a mapping for a session of random calls (reads,
//! held `PageHandle`s, own-page writes, fsync, deletes, truncation,
//! requests past the largest index or file), while a remover thread, and
//! the churn threads now and then, call `remove_mapping` on the ids. The
//! rules each call is checked against:
//! - A call succeeds or fails with a refusal it may give: `MappingRemoved`
//!   (it raced a removal; every later call on that handle must then be
//!   refused the same way), `SourcePanicked` or the injected error on a
//!   faulty mapping for a call that reaches the failed source operation
//!   (and the retried call gets through), `OutOfMemory` for a fill (counted
//!   as the file workers count it), or the exact limit error. Anything else
//!   is a violation.
//! - Every page read is a churn image of its own id and index. Read-only
//!   pages (odd ids, and the upper half of even ids) hold version 0. Lower
//!   half pages of a store have one writer each (churn thread `j` writes
//!   index `i` with `i % churn_threads == j`), so that thread knows what
//!   they hold: the last version it wrote, unless a removal or truncation
//!   overlapped the time from that write to the read (then anything it
//!   wrote, down to what a clean fsync made durable, since a removal
//!   discards dirty pages). Other threads' pages hold no version above the
//!   highest their writer began to write.
//! - A held handle keeps its page: read-only pages keep their exact bytes,
//!   written pages never go back to an older version, across removals.
//!   Once a removal that killed a session's mapping has finished, deletes on
//!   the dead handle drop nothing and it holds no page.
//!
//! Overlap is judged with two counters per id, `started` (bumped before a
//! removal or truncation) and `finished` (bumped after): none overlapped
//! the span from a write to a later read iff `started` read after the read
//! equals `finished` read before the write. All SeqCst: the rule compares
//! counters and page contents across threads.
//!
//! At the end (`final_phase`) each churn thread opens two mappings, takes
//! handles on their pages, gives up its reference to the `PageCache` and
//! waits while the main thread drops the cache; then every call on its
//! mappings must fail with `MappingRemoved` and its handles still read
//! their pages.

use super::sources::{check_churn, churn_image, FaultCounts, Faulty, SourceOp, Store};
use super::Shared;
use pagealloc::{FillFn, Mapping, PageCache, PageCacheError, PageSource, MAX_FILE_BYTES, MAX_INDEX, PAGE_SIZE};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Churn mapping ids (after [`FIRST_ID`]).
pub(crate) const CHURN_IDS: usize = 8;
/// The id of the first churn mapping (the file mapping is 1).
const FIRST_ID: u64 = 1000;
/// Pages of each churn mapping: the lower half is written, the upper half
/// only read.
pub(crate) const CHURN_PAGES: u64 = 64;
pub(crate) const WRITTEN: u64 = CHURN_PAGES / 2;
/// Handles a churn thread holds at most (a handle pins its page against
/// reclaim: few enough that the arena keeps its reclaimable pages).
const HELD_MAX: usize = 8;
/// A churn thread sleeps after one call in `PACE` (see `Worker::run`).
const PACE: u64 = 4;

/// One churn mapping id and its fixed source.
pub(crate) struct ChurnId {
    pub(crate) id: u64,
    /// A store (written) rather than a fill (read-only).
    pub(crate) store: Option<Arc<Store>>,
    pub(crate) faulty: bool,
    pub(crate) source: Arc<dyn PageSource>,
    pub(crate) started: AtomicU64,
    pub(crate) finished: AtomicU64,
    /// Per written page: the highest version its writer began to write.
    pub(crate) max_written: Vec<AtomicU64>,
}

/// What happened, for the report (racy counters).
#[derive(Default)]
pub(crate) struct ChurnCounts {
    pub(crate) sessions: AtomicU64,
    pub(crate) ops: AtomicU64,
    pub(crate) removals: AtomicU64,
    pub(crate) removals_absent: AtomicU64,
    pub(crate) truncates: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) fsyncs: AtomicU64,
    pub(crate) refused_removed: AtomicU64,
    pub(crate) seen_panics: AtomicU64,
    pub(crate) seen_errors: AtomicU64,
    pub(crate) recovered: AtomicU64,
    pub(crate) limit_refusals: AtomicU64,
    pub(crate) held_across_removal: AtomicU64,
    /// Own pages read below what a clean fsync made durable (after a
    /// removal overlapped): a removed mapping's writeback of an older
    /// version that reached the store after the newer one. Reported, not a
    /// violation: a new mapping of the id may open while the old one is
    /// still being removed.
    pub(crate) stale_after_removal: AtomicU64,
    pub(crate) refused_after_drop: AtomicU64,
    /// `find_get` handles on pages dropped unfilled (a failed fill).
    pub(crate) unfilled_found: AtomicU64,
}

/// The churn ids, their counters and the end's handshake.
pub(crate) struct Churn {
    pub(crate) ids: Vec<ChurnId>,
    pub(crate) threads: u64,
    pub(crate) faults: Arc<FaultCounts>,
    pub(crate) counts: ChurnCounts,
    /// Churn threads that hold their final mappings and no cache reference.
    pub(crate) ready: AtomicU64,
    /// Set by the main thread once the cache is dropped.
    pub(crate) dropped: AtomicBool,
}

impl Churn {
    pub(crate) fn new(threads: u64, faults: bool, seed: u64) -> Self {
        let counts = Arc::new(FaultCounts::default());
        let ids = (0..CHURN_IDS)
            .map(|c| {
                let id = FIRST_ID + c as u64;
                let store = c.is_multiple_of(2).then(|| Arc::new(Store::new(id, CHURN_PAGES)));
                let plain: Arc<dyn PageSource> = match &store {
                    Some(s) => s.clone(),
                    None => Arc::new(FillFn(move |i, buf: &mut [u8]| {
                        churn_image(id, i, 0, buf);
                        Ok(())
                    })),
                };
                let faulty = faults && c % 4 >= 2;
                let source: Arc<dyn PageSource> =
                    if faulty { Arc::new(Faulty::new(plain, seed ^ id, counts.clone())) } else { plain };
                ChurnId {
                    id,
                    store,
                    faulty,
                    source,
                    started: AtomicU64::new(0),
                    finished: AtomicU64::new(0),
                    max_written: (0..WRITTEN).map(|_| AtomicU64::new(0)).collect(),
                }
            })
            .collect();
        Self {
            ids,
            threads,
            faults: counts,
            counts: ChurnCounts::default(),
            ready: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
        }
    }

    /// Pages the stores were handed that were not their own images.
    pub(crate) fn bad_writes(&self) -> u64 {
        self.ids.iter().filter_map(|c| c.store.as_ref()).map(|s| s.bad_writes.load(Ordering::Relaxed)).sum()
    }

    /// `remove_mapping` (or `truncate`) of churn id `c`, between the
    /// overlap counters (module doc).
    fn removal(&self, c: usize, f: impl FnOnce()) {
        let cid = &self.ids[c];
        cid.started.fetch_add(1, Ordering::SeqCst);
        f();
        cid.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn remove(&self, pc: &PageCache, c: usize) {
        self.removal(c, || {
            let n =
                if pc.remove_mapping(self.ids[c].id) { &self.counts.removals } else { &self.counts.removals_absent };
            n.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Print the counts; pages the stores were handed that were not their
    /// own images are violations.
    pub(crate) fn report(&self, sh: &Shared) {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let k = &self.counts;
        println!(
            "stress --pagecache: churn: {} sessions, {} ops, {} writes, {} fsyncs; removals {} (+{} of absent ids), \
             truncations {}; MappingRemoved refusals {}, handles checked after their mapping died {}, calls \
             refused after the cache drop {}; limit refusals {}; stale reads after a removal {}; find_get \
             handles on pages dropped unfilled {}",
            n(&k.sessions),
            n(&k.ops),
            n(&k.writes),
            n(&k.fsyncs),
            n(&k.removals),
            n(&k.removals_absent),
            n(&k.truncates),
            n(&k.refused_removed),
            n(&k.held_across_removal),
            n(&k.refused_after_drop),
            n(&k.limit_refusals),
            n(&k.stale_after_removal),
            n(&k.unfilled_found),
        );
        let f = &self.faults;
        let per: Vec<String> = SourceOp::ALL
            .iter()
            .enumerate()
            .map(|(i, op)| format!("{} {}/{}", op.name(), n(&f.panics[i]), n(&f.errors[i])))
            .collect();
        let (panics, errors) = (f.panics.iter().map(n).sum::<u64>(), f.errors.iter().map(n).sum::<u64>());
        println!(
            "stress --pagecache: faults: injected panics {panics}, errors {errors} (panics/errors: {}); seen by \
             callers: SourcePanicked {}, injected errors {}; retried calls that then succeeded {}",
            per.join(", "),
            n(&k.seen_panics),
            n(&k.seen_errors),
            n(&k.recovered),
        );
        let bad = self.bad_writes();
        if bad > 0 {
            sh.violation(format!("{bad} pages written back to churn stores were not their own images"));
        }
    }
}

/// xorshift64.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 8) % n.max(1)
    }
}

/// The remover: a random churn id every few milliseconds until stopped.
pub(crate) fn remover(sh: &Shared, ch: &Churn, pc: &PageCache, slot: usize, mut rng: Rng) {
    while !sh.stop.load(Ordering::Relaxed) {
        ch.remove(pc, rng.below(CHURN_IDS as u64) as usize);
        std::thread::sleep(std::time::Duration::from_micros(500 + rng.below(4000)));
        sh.beat(slot);
    }
}

/// A churn thread's knowledge of one of its own written pages.
#[derive(Clone, Copy, Default)]
pub(crate) struct OwnPage {
    /// The last version written.
    pub(crate) hi: u64,
    /// `finished` of its id just before that write.
    pub(crate) fin_at_write: u64,
    /// A version a clean fsync made durable (no removal overlapped it).
    pub(crate) synced: u64,
    /// Written since that fsync.
    dirty: bool,
    /// Deleted since its last write (so a read goes to the store, which
    /// holds its last version only if the fsync that let it be deleted
    /// wrote it back).
    pub(crate) deleted: bool,
}

/// A handle a session holds, and what its page held when taken.
pub(crate) struct Held<'m> {
    pub(crate) h: pagealloc::PageHandle<'m>,
    pub(crate) version: u64,
}

/// One session on one mapping handle.
pub(crate) struct Session<'m> {
    pub(crate) c: usize,
    pub(crate) m: &'m Mapping,
    /// `started` of the id when a call was first refused with
    /// `MappingRemoved` (the handle is dead from then on).
    pub(crate) dead_at: Option<u64>,
    held: Vec<Held<'m>>,
}

/// A churn thread.
pub(crate) struct Worker<'a> {
    pub(crate) sh: &'a Shared,
    pub(crate) ch: &'a Churn,
    pub(crate) j: u64,
    pub(crate) slot: usize,
    pub(crate) rng: Rng,
    /// Per churn id (stores only): own pages, index `j + k * threads`.
    pub(crate) own: Vec<Vec<OwnPage>>,
}

impl<'a> Worker<'a> {
    pub(crate) fn new(sh: &'a Shared, ch: &'a Churn, j: u64, slot: usize, rng: Rng) -> Self {
        let n = WRITTEN.saturating_sub(j).div_ceil(ch.threads) as usize;
        let own = ch.ids.iter().map(|c| if c.store.is_some() { vec![OwnPage::default(); n] } else { Vec::new() });
        Self { sh, ch, j, slot, rng, own: own.collect() }
    }

    /// Sessions until stopped, then the end's handshake (module doc).
    pub(crate) fn run(mut self, pc: Arc<PageCache>) {
        let mut buf = vec![0u8; PAGE_SIZE];
        while !self.sh.stop.load(Ordering::Relaxed) {
            let c = self.rng.below(CHURN_IDS as u64) as usize;
            let m = self.open(&pc, c);
            self.ch.counts.sessions.fetch_add(1, Ordering::Relaxed);
            let mut s = Session { c, m: &m, dead_at: None, held: Vec::new() };
            let mut dead_ops = 0;
            for _ in 0..20 + self.rng.below(180) {
                // A dead handle refuses a few more calls, then the session
                // ends: its refusals are cheap and would crowd out the rest.
                dead_ops += u32::from(s.dead_at.is_some());
                if self.sh.stop.load(Ordering::Relaxed) || dead_ops > 8 {
                    break;
                }
                self.op(&pc, &mut s, &mut buf);
                self.ch.counts.ops.fetch_add(1, Ordering::Relaxed);
                self.sh.beat(self.slot);
                // Paced: churn calls are cheap, and unpaced the churn threads
                // would take most of the CPU from the file workers.
                if self.rng.below(PACE) == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
            self.end_session(&mut s, &mut buf);
        }
        super::cache_drop::final_phase(&mut self, pc, &mut buf);
    }

    fn op<'m>(&mut self, pc: &PageCache, s: &mut Session<'m>, buf: &mut [u8]) {
        let written = self.ch.ids[s.c].store.is_some();
        match self.rng.below(100) {
            0..=29 => {
                let i = self.rng.below(CHURN_PAGES);
                self.read(s, i, buf);
            }
            30..=39 => self.hold(s, buf),
            40..=44 => {
                let i = self.rng.below(CHURN_PAGES);
                let r = s.m.find_get(i);
                if let Some(Some(h)) = self.outcome(s, "find_get", &[], r) {
                    self.check_found(s, &h, buf);
                }
            }
            45..=64 if written => self.write_own(s, buf),
            65..=71 => self.delete(s),
            72..=76 => self.fsync(s),
            77..=79 => {
                if !s.held.is_empty() {
                    let k = self.rng.below(s.held.len() as u64) as usize;
                    let h = s.held.swap_remove(k);
                    self.check_held(s, &h, buf);
                }
            }
            80 => self.ch.removal(s.c, || {
                s.m.truncate();
                self.ch.counts.truncates.fetch_add(1, Ordering::Relaxed);
            }),
            81 => self.ch.remove(pc, s.c),
            82 => self.ch.remove(pc, self.rng.below(CHURN_IDS as u64) as usize),
            83..=87 => self.limits(s, buf),
            _ if written && !self.own[s.c].is_empty() => {
                let k = self.rng.below(self.own[s.c].len() as u64);
                self.read(s, self.j + k * self.ch.threads, buf);
            }
            _ => {
                let i = self.rng.below(CHURN_PAGES);
                self.read(s, i, buf);
            }
        }
    }

    /// Read page `i` through the mapping and check it.
    fn read(&self, s: &mut Session<'_>, i: u64, buf: &mut [u8]) {
        let (m, pos) = (s.m, i * PAGE_SIZE as u64);
        if self.retry(s, "read", &["read_pages"], || m.read(pos, buf)).is_some() {
            self.check_read(s.c, i, buf, true);
        }
    }

    /// Take a handle on a random page and keep it (dropping the oldest
    /// past [`HELD_MAX`]).
    fn hold<'m>(&mut self, s: &mut Session<'m>, buf: &mut [u8]) {
        let i = self.rng.below(CHURN_PAGES);
        let m = s.m;
        let Some(h) = self.retry(s, "get", &["read_pages"], || m.get(i)) else { return };
        let Some(version) = self.check_handle(s, &h, buf, true) else { return };
        if s.held.len() >= HELD_MAX {
            let old = s.held.remove(0);
            self.check_held(s, &old, buf);
        }
        s.held.push(Held { h, version });
    }

    /// Write a new version of an own page.
    fn write_own(&mut self, s: &mut Session<'_>, buf: &mut [u8]) {
        let (c, t) = (s.c, self.ch.threads);
        if self.own[c].is_empty() {
            return;
        }
        let k = self.rng.below(self.own[c].len() as u64) as usize;
        let i = self.j + k as u64 * t;
        let cid = &self.ch.ids[c];
        let v = self.own[c][k].hi + 1;
        cid.max_written[i as usize].fetch_max(v, Ordering::SeqCst);
        let fin = cid.finished.load(Ordering::SeqCst);
        churn_image(cid.id, i, v, buf);
        let (m, pos) = (s.m, i * PAGE_SIZE as u64);
        if self.retry(s, "write", &["read_pages"], || m.write(pos, buf)).is_some() {
            self.ch.counts.writes.fetch_add(1, Ordering::Relaxed);
            self.own[c][k] = OwnPage { hi: v, fin_at_write: fin, dirty: true, deleted: false, ..self.own[c][k] };
        }
    }

    /// fsync; a clean one (no removal or truncation overlapped it) makes
    /// every own page of the id durable at its last version.
    fn fsync(&mut self, s: &mut Session<'_>) {
        let cid = &self.ch.ids[s.c];
        let (m, fin) = (s.m, cid.finished.load(Ordering::SeqCst));
        let ok = self.retry(s, "fsync", &["write_page", "sync"], || m.fsync()).is_some();
        self.ch.counts.fsyncs.fetch_add(1, Ordering::Relaxed);
        if ok && cid.started.load(Ordering::SeqCst) == fin {
            // Every own page is durable now at what the cache held; its
            // last version, if no removal came between its write and here.
            for o in &mut self.own[s.c] {
                let synced = if o.fin_at_write == fin { o.hi } else { o.synced };
                *o = OwnPage { synced, dirty: false, ..*o };
            }
        }
    }

    /// Delete a read-only page, or an own page with nothing unsynced (a
    /// delete discards dirty data).
    fn delete(&mut self, s: &mut Session<'_>) {
        let (c, t) = (s.c, self.ch.threads);
        let i = if self.own[c].is_empty() || self.rng.below(2) == 0 {
            self.read_only_index(c)
        } else {
            let k = self.rng.below(self.own[c].len() as u64) as usize;
            if self.own[c][k].dirty {
                return;
            }
            self.own[c][k].deleted = true;
            self.j + k as u64 * t
        };
        s.m.delete(i);
    }

    /// Calls past the largest index or file: the exact limit error, before
    /// any other refusal; the largest index itself is served.
    fn limits(&mut self, s: &mut Session<'_>, buf: &mut [u8]) {
        let m = s.m;
        let (what, r) = match self.rng.below(6) {
            0 => ("find_get", m.find_get(MAX_INDEX + 1).map(|_| ())),
            1 => ("get", m.get(u64::MAX).map(|_| ())),
            2 => ("read", m.read(MAX_FILE_BYTES - 100, buf).map(|_| ())),
            3 => ("write", m.write(u64::MAX - 10, &buf[..100]).map(|_| ())),
            4 => {
                if m.delete(MAX_INDEX + 1) {
                    self.sh.violation("delete past the largest index dropped a page".into());
                }
                return;
            }
            _ => {
                let pos = MAX_FILE_BYTES - PAGE_SIZE as u64;
                if self.retry(s, "read at the largest index", &["read_pages"], || m.read(pos, buf)).is_some() {
                    if let Err(e) = check_churn(m.id(), MAX_INDEX, buf) {
                        self.sh.violation(e);
                    }
                }
                m.delete(MAX_INDEX);
                return;
            }
        };
        let ok = match r.as_ref().map_err(PageCacheError::of) {
            Err(Some(PageCacheError::IndexTooLarge { .. })) => what == "find_get" || what == "get",
            Err(Some(PageCacheError::RangeTooLarge { .. })) => what == "read" || what == "write",
            _ => false,
        };
        if ok {
            self.ch.counts.limit_refusals.fetch_add(1, Ordering::Relaxed);
        } else {
            self.sh.violation(format!("{what} past the limits on churn mapping {}: {r:?}", m.id()));
        }
    }

    /// Check the held handles; on a dead handle, once the removal has
    /// finished: no page, deletes drop nothing, the handles still read.
    fn end_session(&mut self, s: &mut Session<'_>, buf: &mut [u8]) {
        let cid = &self.ch.ids[s.c];
        if s.dead_at.is_some() {
            // Until no removal is in progress (`finished` read first: equal
            // to a later `started`, none was at that read): the one that
            // killed the handle has then finished.
            while cid.finished.load(Ordering::SeqCst) != cid.started.load(Ordering::SeqCst) {
                std::thread::yield_now();
                self.sh.beat(self.slot);
            }
            if s.m.is_live() || s.m.nr_pages() != 0 || s.m.delete(self.rng.below(CHURN_PAGES)) {
                self.sh.violation(format!(
                    "removed churn mapping {}: live {}, {} pages after its removal",
                    cid.id,
                    s.m.is_live(),
                    s.m.nr_pages()
                ));
            }
        }
        for h in std::mem::take(&mut s.held) {
            self.check_held(s, &h, buf);
        }
    }

    /// Open churn id `c` over its source.
    pub(crate) fn open(&self, pc: &PageCache, c: usize) -> Mapping {
        pc.mapping(self.ch.ids[c].id, self.ch.ids[c].source.clone())
    }

    /// A random read-only page of churn id `c`.
    pub(crate) fn read_only_index(&mut self, c: usize) -> u64 {
        let lo = if self.ch.ids[c].store.is_some() { WRITTEN } else { 0 };
        lo + self.rng.below(CHURN_PAGES - lo)
    }
}
