//! Free page reporting (the kernel's mm/page_reporting.c, rebuilt from its
//! design): free blocks of at least the reporting order that have stayed free
//! for a delay are released (`madvise` for anonymous and hugepage backing, a
//! user callback without backing) and marked REPORTED on their buddy head, in
//! batches per hold of the zone's lock, off the allocation and free paths (a
//! background thread per allocator, in `pagealloc-mm`'s `allocator::reporting`, or a pass
//! asked for synchronously).
//!
//! Invariants:
//! - A block marked REPORTED is free and its memory was released as a whole
//!   (with `MADV_DONTNEED`: it reads zero). The mark is set only here, under
//!   the zone lock, after the release succeeded; a failed release leaves the
//!   block unmarked, on its list, untouched.
//! - Merging keeps the mark only when both halves had it, splitting gives it
//!   to both halves (`buddy`); a per-CPU refill keeps it on the pages of a
//!   released run (beside `PCP`); every other way off a free list drops it.
//! - Allocation: `Gfp::ZERO` (and init_on_alloc) skips zeroing a block that
//!   still carries the mark when it is handed out (straight from the buddy
//!   lists, or from a per-CPU list or front cache filled from a released
//!   run); the inline front-cache paths never read it (they serve no
//!   `Gfp::ZERO` request).
//! - init_on_free (`zero_on_free`): every free path zeroes the block after
//!   its claim and before it reaches a list or cache (migration zeroes the
//!   page it empties), so every free page reads zero and `Gfp::ZERO` zeroes
//!   nothing (counted in `zeroing_skipped`); a released block was zero
//!   before its release, so `MADV_FREE` keeps it zero too.
//! - `zone.stats.nr_reported` counts the pages of marked free blocks
//!   (`check_invariants` recounts it).
//! - Released blocks go to their list's tail, so allocations take resident
//!   blocks first (the list's head) and reach released ones last.
//!
//! Design choices:
//! - The default order is 0 with 4 KiB backing: after random frees the free
//!   pages are scattered (with three quarters of a region freed at random, a
//!   page's buddy is free only three times in four, so order 1 and above could
//!   release only about half of the freed memory), and the allocators users
//!   compare with release at page granularity. With hugepage backing the order
//!   is at least the pageblock's (2 MiB), so no release splits a hugepage.
//! - Hysteresis: a block is released only once it has stayed free for the
//!   delay (its free time is stamped in its head, 10 ms ticks), so memory
//!   freed and soon reused is never released and faulted back in a loop;
//!   released blocks are reused last.
//! - Releases happen under the zone's lock (a batch of at most
//!   `page_reporting_batch` blocks per hold): no block is ever off the lists,
//!   so conservation and isolation never see a block in flight. The cost is
//!   the lock's hold time of a batch of syscalls.
//! - With `madvise`, an eligible block grows into the run of eligible free
//!   blocks physically adjacent to it (any order and list but isolated ones)
//!   and the run is released by one call. After a burst freed in random order
//!   the free pages lie in runs of a few blocks between live pages; measured
//!   with `burst-idle` at 1 GiB, one call per run instead of per block makes
//!   1.4 to 1.9 times fewer calls (e.g. 43,000 for 81,000 blocks), and the
//!   pass that releases the burst ends within a second of its start (about
//!   0.7 s on a loaded 2-CPU machine). A callback is
//!   still called per block (its contract is a block: `pfn`, `order`).
//! - A pass tells the reporter when the first block it left for being young
//!   comes of age; the reporter wakes then (not sooner than 100 ms after the
//!   pass when idle, half a pause under traffic), so a block is released
//!   about the delay after it went free. The free clock that stamps blocks is
//!   advanced at each of the reporter's wakes (it was only advanced by passes,
//!   so stamps could be a pause old and blocks released before the delay).
// No unsafe code: the library forbids it; its tests open the core's door
// (`FrameAllocator::core`) in one allowed module.
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]
#![warn(missing_docs)]

use pagealloc_core::config::{Backing, Config, ReportCallback};
use pagealloc_core::memmap::MemMap;
use pagealloc_core::page::flags;
use pagealloc_core::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use pagealloc_core::types::{MigrateType, Order, Pfn};
use pagealloc_core::zone::{Zone, FREE_CLOCK, FREE_CLOCK_MS};
use std::sync::Mutex as StdMutex;
use std::thread::JoinHandle;

/// Entries walked per hold of a zone's lock, at most (bounds the hold time
/// when a list holds many young or already-released blocks).
const WALK_PER_HOLD: usize = 512;

/// What a pass did.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(4 << 20)).unwrap(); // released by madvise
/// a.free_pages(a.alloc_pages(Gfp::MOVABLE, 9).unwrap(), 9).unwrap(); // used, so resident
/// let pass = a.reporting().report_free_pages_now();
/// assert!(pass.pages >= 512 && pass.errors == 0);
/// assert_eq!(a.reporting().report_free_pages_now().blocks, 0); // a released block is not released again
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportPass {
    /// Blocks released and marked.
    pub blocks: u64,
    /// Pages in them.
    pub pages: u64,
    /// Blocks whose release failed (they stay unreported).
    pub errors: u64,
    /// Release calls made, failed ones included (`madvise` calls, callbacks):
    /// with `madvise`, one call releases a run of adjacent blocks.
    pub releases: u64,
}

/// How a block's memory is released.
enum Release {
    Madvise { advice: libc::c_int },
    Callback(ReportCallback),
    Nothing,
}

/// One allocator's reporting state (beside its core, in `pagealloc`'s `Mm`).
pub struct Reporting {
    enabled: AtomicBool,
    order: AtomicU32,
    delay_ms: AtomicU64,
    batch: AtomicU32,
    release: Release,
    /// Whether this backing can report at all.
    pub can_report: bool,
    /// Held for a whole pass, and by readers that need a quiescent view.
    pub pass_lock: StdMutex<()>,
    /// Lifetime totals: pages and blocks released, releases that failed,
    /// calls of the release (madvise or callback), and passes.
    pub reported_pages: AtomicU64,
    /// See `reported_pages`.
    pub reported_blocks: AtomicU64,
    /// See `reported_pages`.
    pub errors: AtomicU64,
    /// See `reported_pages`.
    pub release_calls: AtomicU64,
    /// See `reported_pages`.
    pub passes: AtomicU64,
    /// Compactions run before releasing, and the pages they moved
    /// (`pagealloc-mm`'s `allocator::reporting::compact_for_release`).
    pub compactions: AtomicU64,
    /// See `compactions`.
    pub compacted_pages: AtomicU64,
    /// Pages the user has marked movable (`set_page_movable`): the reporter
    /// compacts again in an idle period when it changed since its last
    /// compaction (marking pages is no allocation traffic).
    pub movable_marks: AtomicU64,
    /// Fail every n-th release (0: never). For tests of the error path.
    fail_every: AtomicU32,
    fail_count: AtomicU32,
    /// The background thread's stop flag.
    pub stop: AtomicBool,
    /// The background thread, while it runs.
    pub thread: StdMutex<Option<JoinHandle<()>>>,
}

/// Advance the free clock to now (monotonic; any allocator may), on the
/// platform's clock, whose origin is process-wide.
pub fn tick_clock() -> u32 {
    let t = (pagealloc_core::platform::now_ns() / 1_000_000 / FREE_CLOCK_MS) as u32;
    FREE_CLOCK.fetch_max(t, Ordering::Relaxed).max(t)
}

impl Reporting {
    /// The state `cfg` asks for (enabled only where the backing can release).
    pub fn new(cfg: &Config) -> Self {
        pagealloc_core::platform::now_ns(); // fix the clock's origin
        let release = match cfg.backing {
            Backing::Anonymous | Backing::HugePages => Release::Madvise {
                advice: if cfg.page_reporting_madv_free { libc::MADV_FREE } else { libc::MADV_DONTNEED },
            },
            Backing::None => cfg.page_reporting_callback.clone().map_or(Release::Nothing, Release::Callback),
            Backing::Resident => Release::Nothing,
        };
        let can_report = !matches!(release, Release::Nothing);
        Self {
            enabled: AtomicBool::new(cfg.page_reporting && can_report),
            order: AtomicU32::new(cfg.effective_reporting_order().get()),
            delay_ms: AtomicU64::new(cfg.page_reporting_delay_ms),
            batch: AtomicU32::new(cfg.page_reporting_batch),
            release,
            can_report,
            pass_lock: StdMutex::new(()),
            reported_pages: AtomicU64::new(0),
            reported_blocks: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            release_calls: AtomicU64::new(0),
            passes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            compacted_pages: AtomicU64::new(0),
            movable_marks: AtomicU64::new(0),
            fail_every: AtomicU32::new(0),
            fail_count: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            thread: StdMutex::new(None),
        }
    }

    /// Whether background passes run.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Switch background passes; `false` when this backing cannot report.
    pub fn set_enabled(&self, on: bool) -> bool {
        self.enabled.store(on && self.can_report, Ordering::Relaxed);
        self.can_report || !on
    }

    /// How long a block must stay free before it is reported.
    pub fn delay_ms(&self) -> u64 {
        self.delay_ms.load(Ordering::Relaxed)
    }

    /// The smallest order reported.
    pub fn order(&self) -> Order {
        // Only `tune` and `new` store it, each from an order.
        Order::new(self.order.load(Ordering::Relaxed)).unwrap_or(Order::MAX)
    }

    /// Change the settings at run time (already validated by the caller).
    pub fn tune(&self, order: Order, delay_ms: u64, batch: u32) {
        self.order.store(order.get(), Ordering::Relaxed);
        self.delay_ms.store(delay_ms, Ordering::Relaxed);
        self.batch.store(batch.max(1), Ordering::Relaxed);
    }

    /// Make every `n`-th release fail (0: none), as a failing `madvise` would.
    pub fn fail_every(&self, n: u32) {
        self.fail_count.store(0, Ordering::Relaxed);
        self.fail_every.store(n, Ordering::Relaxed);
    }

    /// Release the memory of `pages` pages from `pfn`: one free block, or
    /// (with `madvise`) a run of adjacent ones. `false` on failure.
    fn release(&self, mm: &MemMap, pfn: u64, pages: u64) -> bool {
        let every = self.fail_every.load(Ordering::Relaxed);
        if every != 0 && (self.fail_count.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every) {
            return false;
        }
        match &self.release {
            Release::Madvise { advice } => mm.madvise_free_run(pfn, pages, *advice),
            // Never merged: one block, of `pages` = 2^order pages.
            // A panic of the user's callback is a failed release (counted in
            // the pass's errors), not an unwind through the zone lock the
            // caller holds: the reporter thread and `report_now`'s caller go
            // on, and the block stays unreported.
            Release::Callback(cb) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (cb.0)(Pfn::new(pfn), pages.trailing_zeros())))
                    .unwrap_or(false)
            }
            Release::Nothing => false,
        }
    }

    /// One pass over every zone: release unreported free blocks of at least
    /// the reporting order that have been free for the delay (every one with
    /// `ignore_age`). Runs whether or not background passes are enabled.
    pub fn pass(&self, zones: &[Zone], mm: &MemMap, ignore_age: bool) -> ReportPass {
        self.pass_timed(zones, mm, ignore_age, || false).0
    }

    /// [`Reporting::pass`], and how long until the first block it left for
    /// being young comes of age (`None`: it left none), so that the reporter
    /// thread can wake right then. `all_from_now` is asked before each list:
    /// once it answers true (the reporter has just drained the per-CPU lists
    /// of an allocator idle for the delay), the rest of the pass ignores ages.
    pub fn pass_timed(
        &self,
        zones: &[Zone],
        mm: &MemMap,
        ignore_age: bool,
        mut all_from_now: impl FnMut() -> bool,
    ) -> (ReportPass, Option<std::time::Duration>) {
        let mut r = ReportPass::default();
        if !self.can_report {
            return (r, None);
        }
        let _p = self.pass_lock.lock().unwrap_or_else(|e| e.into_inner());
        let now = tick_clock() as u16;
        let delay = self.delay_ms().div_ceil(FREE_CLOCK_MS).min(u16::MAX as u64) as u16;
        let min_order = self.order();
        let mut ages = Ages { now, delay, ignore: ignore_age, soonest: None };
        for z in zones {
            // Every free page released: nothing to walk (the common case of an
            // idle allocator). Racy and approximate: released blocks in
            // isolated pageblocks count in `nr_reported` but not in the free
            // pages, so while some are isolated a zone may be skipped with a
            // few unreleased blocks, until the isolation is undone.
            if z.free_pages_racy() <= z.stats.nr_reported.get_racy() {
                continue;
            }
            for order in min_order.and_above().rev() {
                for mt in
                    [MigrateType::Movable, MigrateType::Unmovable, MigrateType::Reclaimable, MigrateType::HighAtomic]
                {
                    if !ages.ignore && all_from_now() {
                        ages.ignore = true;
                    }
                    self.pass_list(z, mm, order, mt, &mut ages, &mut r);
                }
            }
        }
        self.passes.fetch_add(1, Ordering::Relaxed);
        let due = ages.soonest.map(|t| std::time::Duration::from_millis(u64::from(t) * FREE_CLOCK_MS));
        (r, due)
    }

    /// Report the eligible blocks of one free list, a batch per lock hold.
    /// With `madvise`, each eligible block grows into the run of eligible
    /// free blocks around it (physically adjacent, whatever their order or
    /// list), released by one call: after random frees the free pages lie in
    /// short runs of a few blocks, and one call per run makes fewer calls.
    fn pass_list(&self, z: &Zone, mm: &MemMap, order: Order, mt: MigrateType, ages: &mut Ages, total: &mut ReportPass) {
        let mut r = ReportPass::default();
        let batch = self.batch.load(Ordering::Relaxed) as usize;
        let merge = matches!(self.release, Release::Madvise { .. });
        let min_order = self.order();
        let mut run: Vec<(u64, Order)> = Vec::with_capacity(batch);
        // Walk at most the list's length (and a little): released blocks move
        // to the tail and are met again at the end.
        let mut budget = z.stats.free_blocks[order.idx()][mt.index()].get_racy() as usize + 1;
        let mut cursor: Option<u64> = None;
        while budget > 0 {
            let mut g = z.lock(mm);
            let on_list = |p: u64| {
                let d = mm.page(p);
                d.is_buddy() && d.order() == order.get() && d.private_mt() == mt
            };
            let mut p = match cursor {
                Some(c) if on_list(c) => Some(c),
                _ => g.first_free(order, mt),
            };
            let (mut walked, mut done) = (0, 0);
            while let Some(q) = p {
                if walked == WALK_PER_HOLD || done >= batch || budget == 0 {
                    break;
                }
                let d = mm.page(q);
                p = d.list_next();
                walked += 1;
                budget -= 1;
                if d.flags() & flags::REPORTED != 0 || !ages.old(d.stamp()) {
                    continue;
                }
                run.clear();
                run.push((q, order));
                if merge {
                    grow_run(z, mm, min_order, ages, batch - done, &mut run);
                    // The walk goes on from a block that stays where it is.
                    while let Some(x) = p.filter(|x| run.iter().any(|&(b, _)| b == *x)) {
                        p = mm.page(x).list_next();
                    }
                }
                done += run.len();
                let (start, _) = run[0];
                let (last, last_order) = run[run.len() - 1];
                let pages = last + last_order.pages() - start;
                r.releases += 1;
                if self.release(mm, start, pages) {
                    for &(b, o) in &run {
                        let bmt = mm.page(b).private_mt();
                        g.del_from_free_list(b, o);
                        g.add_to_free_list_marked(b, o, bmt, true, true);
                    }
                    r.blocks += run.len() as u64;
                    r.pages += pages;
                } else {
                    // A failed release ends this list's walk for this pass (as
                    // an error ends the kernel's reporting cycle): its blocks
                    // are not tried again, as part of a neighbour's run, within
                    // the same pass.
                    r.errors += run.len() as u64;
                    budget = 0;
                }
            }
            drop(g);
            if p.is_none() {
                break;
            }
            cursor = p;
        }
        self.reported_blocks.fetch_add(r.blocks, Ordering::Relaxed);
        self.reported_pages.fetch_add(r.pages, Ordering::Relaxed);
        self.errors.fetch_add(r.errors, Ordering::Relaxed);
        self.release_calls.fetch_add(r.releases, Ordering::Relaxed);
        total.blocks += r.blocks;
        total.pages += r.pages;
        total.errors += r.errors;
        total.releases += r.releases;
    }
}

/// A pass's view of block ages, and the soonest a young block comes of age.
struct Ages {
    now: u16,
    delay: u16,
    ignore: bool,
    /// Ticks until the youngest-but-soonest block left behind is old enough.
    soonest: Option<u16>,
}

impl Ages {
    /// Whether a block stamped `s` has been free for the delay; notes when a
    /// younger one will have been.
    fn old(&mut self, s: u16) -> bool {
        let age = self.now.wrapping_sub(s);
        if self.ignore || age >= self.delay {
            return true;
        }
        let left = self.delay - age;
        self.soonest = Some(self.soonest.map_or(left, |t| t.min(left)));
        false
    }
}

/// Whether the free block with its head at `pfn` (if any) may join a run.
fn eligible(z: &Zone, mm: &MemMap, pfn: u64, min_order: Order, ages: &mut Ages) -> Option<Order> {
    if !z.contains(pfn) {
        return None;
    }
    let d = mm.page(pfn);
    let ok = d.is_buddy()
        && d.flags() & flags::REPORTED == 0
        && d.order() >= min_order.get()
        && d.private_mt() != MigrateType::Isolate
        && ages.old(d.stamp());
    ok.then(|| d.buddy_order())
}

/// Grow `run` (one block so far) over the eligible free blocks physically
/// adjacent to it, backwards then forwards, to at most `room` blocks. Under
/// the zone's lock: free heads do not move meanwhile. Free blocks never
/// overlap, so the page right after a block is either the head of the next
/// free block or not free, and the block right before one is the free head of
/// order `o` at `start - 2^o`, if any, for exactly one `o`.
fn grow_run(z: &Zone, mm: &MemMap, min_order: Order, ages: &mut Ages, room: usize, run: &mut Vec<(u64, Order)>) {
    let (mut start, o0) = run[0];
    let mut end = start + o0.pages();
    let mut before = Vec::new();
    'back: while run.len() + before.len() < room {
        for o in min_order.and_above() {
            let Some(h) = start.checked_sub(o.pages()) else { break };
            if !h.is_multiple_of(o.pages()) || !z.contains(h) {
                continue;
            }
            let d = mm.page(h);
            if d.is_buddy() && d.order() == o.get() {
                if eligible(z, mm, h, min_order, ages) == Some(o) {
                    before.push((h, o));
                    start = h;
                    continue 'back;
                }
                break 'back;
            }
        }
        break;
    }
    if !before.is_empty() {
        before.reverse();
        before.extend_from_slice(run);
        *run = before;
    }
    while run.len() < room {
        let Some(o) = eligible(z, mm, end, min_order, ages) else { break };
        run.push((end, o));
        end += o.pages();
    }
}

impl Reporting {
    /// Stop the background thread and wait for it to end (idempotent). Called
    /// when the last user handle goes (`allocator::Users`' drop), so the
    /// thread is gone before that drop returns.
    pub fn stop_and_join(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ages;

    #[test]
    fn ages_note_when_the_first_young_block_comes_of_age() {
        let mut a = Ages { now: 1000, delay: 200, ignore: false, soonest: None };
        assert!(a.old(800) && a.soonest.is_none(), "free for the delay exactly");
        assert!(!a.old(900));
        assert!(!a.old(850));
        assert!(!a.old(990));
        assert_eq!(a.soonest, Some(50), "the block stamped 850 is old in 50 ticks");
        let mut w = Ages { now: 5, delay: 200, ignore: false, soonest: None };
        assert!(w.old(u16::MAX - 300), "the clock wrapped");
        assert!(!w.old(u16::MAX - 10));
        assert_eq!(w.soonest, Some(184));
        let mut all = Ages { now: 0, delay: 200, ignore: true, soonest: None };
        assert!(all.old(0) && all.soonest.is_none());
    }
}

/// Passes over a real core (a `FrameAllocator`'s zones and memory map).
#[cfg(all(test, not(loom)))]
#[allow(unsafe_code)]
mod pass_tests {
    use super::*;
    use pagealloc_core::{FrameAllocator, Gfp, PAGEBLOCK_ORDER};
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// A core with no memory behind it, every release going to a callback
    /// that counts pages (or panics, with `panic`).
    fn setup(released: &Arc<AtomicU64>, panic: bool) -> (FrameAllocator, Reporting) {
        let r = Arc::clone(released);
        let cb = ReportCallback(Arc::new(move |_pfn, order| {
            assert!(!panic, "a consumer that panics");
            r.fetch_add(1 << order, Ordering::Relaxed);
            true
        }));
        let cfg = Config::small(8 << 20).page_reporting_callback(Some(cb));
        let reporting = Reporting::new(&cfg);
        (FrameAllocator::new(cfg).unwrap(), reporting)
    }

    fn pass(f: &FrameAllocator, r: &Reporting) -> ReportPass {
        // SAFETY: a test of this workspace, reading the core as the
        // allocator's reporter does (under the zone locks the pass takes).
        let core = unsafe { f.core() };
        r.pass(core.zones.as_slice(), &core.mm, true)
    }

    /// Free a pageblock after boot: a free block not yet reported.
    fn unreport_a_block(f: &FrameAllocator) {
        let p = f.alloc(Gfp::MOVABLE, PAGEBLOCK_ORDER).unwrap();
        f.free(p, PAGEBLOCK_ORDER).unwrap();
        f.drain();
    }

    /// A block freed after boot is released once, then marked: the next
    /// pass releases nothing.
    #[test]
    fn a_pass_releases_each_free_block_once() {
        let released = Arc::new(AtomicU64::new(0));
        let (f, r) = setup(&released, false);
        assert_eq!(pass(&f, &r).blocks, 0, "a fresh arena counts as released already");
        unreport_a_block(&f);
        // The freed half merged back with its reported buddy: the whole
        // max-order block is unreported now, and released as one.
        let first = pass(&f, &r);
        assert_eq!((first.blocks, first.pages, first.errors), (1, 1024, 0));
        assert_eq!(released.load(Ordering::Relaxed), 1024);
        assert_eq!(pass(&f, &r).blocks, 0, "a reported block is not reported again");
        f.check_invariants().unwrap();
    }

    /// A failed release (here every one) leaves the block unreported, to
    /// be offered again by a later pass.
    #[test]
    fn a_failed_release_leaves_the_block_for_a_later_pass() {
        let released = Arc::new(AtomicU64::new(0));
        let (f, r) = setup(&released, false);
        unreport_a_block(&f);
        r.fail_every(1);
        let failed = pass(&f, &r);
        assert_eq!((failed.blocks, failed.errors), (0, 1));
        r.fail_every(0);
        assert_eq!(pass(&f, &r).blocks, 1);
        f.check_invariants().unwrap();
    }

    /// A consumer's panic is a failed release, caught before it unwinds
    /// through the zone lock: the core stays usable and intact.
    #[test]
    fn a_panicking_consumer_is_a_failed_release() {
        let released = Arc::new(AtomicU64::new(0));
        let (f, r) = setup(&released, true);
        unreport_a_block(&f);
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let out = pass(&f, &r);
        std::panic::set_hook(prev);
        assert_eq!((out.blocks, out.errors), (0, 1));
        f.check_invariants().unwrap();
        let q = f.alloc(Gfp::MOVABLE, PAGEBLOCK_ORDER).unwrap();
        f.free(q, PAGEBLOCK_ORDER).unwrap();
    }
}
