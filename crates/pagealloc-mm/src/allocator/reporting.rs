//! The façade's free page reporting: the background reporter thread, the
//! synchronous passes, run-time switches and the resident-memory figures.
//!
//! The reporter thread holds the allocator's core, not a user handle: the drop
//! of the last user handle (`super::Users`) stops and joins it, so no
//! reporter thread outlives the last `PageAllocator` clone, not even for the
//! rest of a pass.

use super::handles::PageReporting;
use crate::mm::Mm;
use pagealloc_compaction::migrate::OwnerPanic;
use pagealloc_core::config::MAX_REPORTING_BATCH;
use pagealloc_core::error::ConfigError;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{Order, MAX_ORDER, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};
use pagealloc_reporting::ReportPass;
use std::sync::Arc;
#[cfg(not(loom))]
use std::time::{Duration, Instant};

/// Free page reporting's settings and lifetime counters.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(4 << 20).page_reporting(false)).unwrap();
/// a.free_pages(a.alloc_pages(Gfp::MOVABLE, 9).unwrap(), 9).unwrap();
/// let pass = a.reporting().report_free_pages_now(); // a synchronous pass; no background ones
/// let s = a.reporting().page_reporting_stats();
/// assert!(!s.enabled && s.passes == 1);
/// assert_eq!((s.released_pages, s.released_blocks), (pass.pages, pass.blocks));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportingStats {
    /// Background passes running.
    pub enabled: bool,
    /// Smallest order released.
    pub order: u32,
    /// How long a block stays free before it is released.
    pub delay_ms: u64,
    /// Passes run (background and synchronous).
    pub passes: u64,
    /// Pages released over the allocator's life (a page released twice counts
    /// twice).
    pub released_pages: u64,
    /// Blocks released over the allocator's life.
    pub released_blocks: u64,
    /// Blocks whose release failed (they stayed unreported).
    pub errors: u64,
    /// Release calls made (`madvise` calls or callbacks; one `madvise` call
    /// releases a run of adjacent free blocks).
    pub release_calls: u64,
    /// Pages whose zeroing (`Gfp::ZERO`, init_on_alloc) was skipped because
    /// they were released and read zero already.
    pub zeroing_skipped: u64,
    /// Pages zeroed when freed (`Config::init_on_free`).
    pub zeroed_on_free: u64,
    /// Compactions the reporter ran before releasing
    /// (`Config::page_reporting_compact`).
    pub compactions: u64,
    /// Pages those compactions migrated.
    pub compacted_pages: u64,
}

/// One zone's memory by residency (pages). Free pages in blocks marked
/// REPORTED are not resident (released, or never touched since the arena was
/// mapped); every other page is counted resident, an upper bound (a page
/// allocated but never written is not resident either).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(4 << 20).page_reporting(false)).unwrap();
/// let _pfn = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
/// let z = a.reporting().residency()[0];
/// assert_eq!((z.nid, z.zone, z.managed), (0, "Normal", 1024));
/// assert_eq!(z.resident, z.managed - z.reported); // never-used memory is not resident
/// assert!(z.resident >= 1 && z.resident < z.managed);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneResidency {
    /// The zone's node.
    pub nid: u32,
    /// The zone's name ("Normal", "Movable").
    pub zone: &'static str,
    /// Pages the zone manages.
    pub managed: u64,
    /// Free pages on the buddy lists (outside isolated blocks).
    pub free: u64,
    /// Free pages in released (REPORTED) blocks.
    pub reported: u64,
    /// Free pages still resident: `free - reported`, at least 0 (isolated
    /// released blocks are counted in `reported` but not in `free`).
    pub free_resident: u64,
    /// Estimate of resident pages: `managed - reported`.
    pub resident: u64,
}

/// The reporter's longest pause between passes: a quarter of the delay,
/// within 10 ms..=500 ms. A pass also tells when the first block it left for
/// being young comes of age, and the reporter wakes then if that is sooner
/// (but at least half a pause after the pass while there is traffic, so that
/// churn does not turn into back-to-back passes over the lists, and an
/// [`idle_check`] after it when idle): a block is released within that of its
/// delay, not up to a whole pause after it.
#[cfg(not(loom))]
fn interval(delay_ms: u64) -> Duration {
    Duration::from_millis((delay_ms / 4).clamp(10, 500))
}

/// How often the reporter looks for the end of traffic while a drain is
/// pending: a twentieth of the delay, within 10 ms..=100 ms. It reads the
/// event counters only (no lock, no pass).
#[cfg(not(loom))]
fn idle_check(delay_ms: u64) -> Duration {
    Duration::from_millis((delay_ms / 20).clamp(10, 100))
}

/// Idleness as the reporter sees it: no allocation or free counted since
/// `since`. Pages on per-CPU lists and front caches are never reported (they
/// are the hot pages); once the allocator has been idle for the delay, the
/// reporter drains them to the buddy lists once, and then every free page has
/// been free for at least the delay, so the pass that follows takes them all.
///
/// `since` is the first check that saw the counters change for the last
/// time, so it is never before the last allocation or free: a page on a
/// per-CPU list has been free since `since` at least. The checks come every
/// [`idle_check`] while a drain is pending, so `since` is at most that late,
/// and the drain comes at `since` plus the delay (not up to a pass interval
/// after it). The kernel's reporting never drains per-CPU lists (it decays
/// their size on idle CPUs instead); here they can hold 15% of the live pages
/// of a burst, which would stay resident for as long as the process idles.
#[cfg(not(loom))]
#[derive(Default)]
struct Idle {
    events: u64,
    since: Option<Instant>,
    drained: bool,
    /// The counters moved at the last look (traffic now).
    moving: bool,
    /// Compactions before release this idle period may still run: set at
    /// the drain, one less after each compaction, 0 at new traffic. One
    /// compaction per idle period was not enough: pages the owner made
    /// movable after it (an owner still marking its pages when the idle
    /// period began, say preempted under load) left partly used pageblocks
    /// resident for as long as the process idled, since marking pages is no
    /// traffic.
    compact_more: u32,
    /// The last compaction of this idle period: the user's movable marks
    /// before it and the pages it migrated. Another one runs when it moved
    /// pages (more may move now) or the marks changed since; None: none yet.
    last_compaction: Option<(u64, u64)>,
}

/// At most this many compactions before release in one idle period (each
/// after the last moved pages or pages were marked movable since).
#[cfg(not(loom))]
const MAX_IDLE_COMPACTIONS: u32 = 8;

#[cfg(not(loom))]
impl Idle {
    fn traffic(c: &Mm) -> u64 {
        use pagealloc_core::vmevent::VmEvent;
        let ev = c.event_totals();
        [VmEvent::PgallocNormal, VmEvent::PgallocMovable, VmEvent::Pgfree].iter().map(|&e| ev[e as usize]).sum()
    }

    /// Look at the counters; drain when idle for the delay. True when it just
    /// drained.
    fn drained_now(&mut self, c: &Mm, now: Instant) -> bool {
        let ev = Self::traffic(c);
        self.moving = ev != self.events;
        if self.moving || self.since.is_none() {
            (self.events, self.since, self.drained, self.compact_more) = (ev, Some(now), false, 0);
            self.last_compaction = None;
            return false;
        }
        let delay = Duration::from_millis(c.reporting.delay_ms());
        let quiet = self.since.is_some_and(|t| now.duration_since(t) >= delay);
        if !quiet || self.drained {
            return false;
        }
        c.drain_all();
        (self.events, self.drained) = (Self::traffic(c), true);
        true
    }

    /// When the reporter should look next for the drain's sake: `None` when
    /// no drain is pending.
    fn next_check(&self, now: Instant, delay_ms: u64) -> Option<Instant> {
        if self.drained {
            return None;
        }
        let at = self.since.map_or(now, |t| t + Duration::from_millis(delay_ms));
        Some(at.min(now + idle_check(delay_ms)).max(now))
    }
}

/// Pages in free blocks below the pageblock order (free memory inside partly
/// used pageblocks: with hugepage backing, resident memory no release can
/// reach), read without the lock.
pub fn free_below_pageblock(c: &Mm) -> u64 {
    c.zones
        .iter()
        .map(|z| z.free_blocks_racy()[..PAGEBLOCK_ORDER as usize].iter().enumerate().map(|(o, n)| n << o).sum::<u64>())
        .sum()
}

/// Compaction before release (`Config::page_reporting_compact`), when the
/// reporter has just drained an allocator idle for the delay, and again at
/// its later passes of the same idle period while the last one moved pages
/// or pages were marked movable since (see [`Idle::compact_more`]): with
/// hugepage-granular reporting (order at least the pageblock's) and movable
/// pages registered, if the free memory inside partly used pageblocks adds
/// up to at least two pageblocks, compact every zone (the live movable pages move up into the
/// fullest pageblocks at the zone's top, the pageblocks below empty and
/// merge). The pages it migrated when it compacted (the caller then releases
/// the emptied pageblocks), None when it did not. Pinned pages stay where
/// they are (their pageblocks stay resident). An owner's panic goes to
/// `caught` (the reporter thread drops each, `compact_and_report_now`
/// resumes the first).
pub fn compact_for_release(c: &Mm, caught: &mut OwnerPanic) -> Option<u64> {
    let r = &c.reporting;
    if !c.cfg.page_reporting_compact || r.order() < Order::PAGEBLOCK || !c.mobility.any_registered() {
        return None;
    }
    if free_below_pageblock(c) < 2 * PAGEBLOCK_PAGES {
        return None;
    }
    let out = c.compaction().compact_memory(caught);
    r.compactions.fetch_add(1, Ordering::Relaxed);
    r.compacted_pages.fetch_add(out.migrated, Ordering::Relaxed);
    Some(out.migrated)
}

/// One wake of the reporter thread: advance the free clock, drain when idle
/// for the delay, run a pass when one is due; when to wake next.
#[cfg(not(loom))]
fn reporter_wake(c: &Mm, idle: &mut Idle, next_pass: &mut Instant) -> Instant {
    // Free blocks are stamped with this clock: advanced at every wake, it is
    // at most one wake behind (a block is never released before the delay
    // minus that).
    pagealloc_reporting::tick_clock();
    let delay_ms = c.reporting.delay_ms();
    if !c.reporting.enabled() {
        return Instant::now() + interval(delay_ms);
    }
    let now = Instant::now();
    let all = idle.drained_now(c, now);
    if all || now >= *next_pass {
        let due = reporter_pass(c, idle, all, delay_ms);
        let after = Instant::now();
        *next_pass = after + interval(delay_ms);
        if let Some(d) = due {
            // Under traffic, not more often than twice a pause (a pass walks
            // the free lists); idle, within an idle check of the block's
            // deadline.
            let floor = if idle.moving { interval(delay_ms) / 2 } else { idle_check(delay_ms) };
            *next_pass = (*next_pass).min(after + d.max(floor));
        }
    }
    let mut wake = *next_pass;
    if let Some(t) = idle.next_check(Instant::now(), delay_ms) {
        wake = wake.min(t);
    }
    wake
}

/// The reporter's pass (`all`: the allocator was just found idle and
/// drained, so ages are ignored); how long until the first block it left
/// for being young comes of age.
#[cfg(not(loom))]
fn reporter_pass(c: &Mm, idle: &mut Idle, all: bool, delay_ms: u64) -> Option<Duration> {
    // A long pass (a burst's worth of releases) looks for the drain's
    // deadline between lists rather than after it.
    let mut mid = false;
    let (_, mut due) = c.reporting.pass_timed(c.zones.as_slice(), &c.mm, all, || {
        let t = Instant::now();
        if idle.next_check(t, delay_ms).is_none_or(|at| at > t) {
            return false;
        }
        mid = idle.drained_now(c, t);
        mid
    });
    if mid {
        // Lists walked before the drain may hold its pages (merged into
        // larger blocks): one more pass, all ages.
        due = c.reporting.pass_timed(c.zones.as_slice(), &c.mm, true, || false).1;
    }
    if all || mid {
        (idle.compact_more, idle.last_compaction) = (MAX_IDLE_COMPACTIONS, None);
    }
    let marks = c.reporting.movable_marks.load(Ordering::Relaxed);
    // Again at a later pass of the idle period when the last compaction
    // moved pages or pages were marked movable since: the pages an owner
    // was still marking when the idle period began move then.
    let again = idle.last_compaction.is_none_or(|(m, moved)| moved > 0 || m != marks);
    if idle.compact_more > 0 && !idle.moving && again {
        // The reporter's thread lives on: an owner's panic is one failed
        // migration (counted), as in kcompactd.
        match compact_for_release(c, &mut OwnerPanic::background()) {
            Some(migrated) => {
                idle.compact_more -= 1;
                idle.last_compaction = Some((marks, migrated));
                // The pageblocks compaction emptied: released now.
                due = c.reporting.pass_timed(c.zones.as_slice(), &c.mm, true, || false).1;
            }
            // Nothing to compact now (nothing registered, too few holes):
            // look again once pages are marked.
            None => idle.last_compaction = Some((marks, 0)),
        }
    }
    due
}

/// Start the reporter thread unless it runs.
#[cfg(not(loom))]
pub(crate) fn start_reporter(core: &Arc<Mm>) {
    let r = &core.reporting;
    if !r.can_report {
        return;
    }
    let mut slot = r.thread.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return;
    }
    let c = Arc::clone(core);
    let spawned = std::thread::Builder::new().name("pagealloc-report".into()).spawn(move || {
        pagealloc_core::cpu::block_async_signals();
        let mut idle = Idle::default();
        let mut next_pass = Instant::now();
        while !c.reporting.stop.load(Ordering::Relaxed) {
            let wake = reporter_wake(&c, &mut idle, &mut next_pass);
            std::thread::park_timeout(wake.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)));
        }
    });
    // Without a thread (the process is out of threads) reporting still runs
    // when asked for synchronously.
    *slot = spawned.ok();
}

#[cfg(loom)]
pub(crate) fn start_reporter(_core: &Arc<Mm>) {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_reporter_looks_often_while_a_drain_is_pending_and_wakes_at_its_deadline() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut idle =
            Idle { events: 7, since: Some(t0), drained: false, moving: false, compact_more: 0, last_compaction: None };
        assert_eq!(idle.next_check(t0 + ms(50), 2000), Some(t0 + ms(150)), "every 100 ms with a 2 s delay");
        assert_eq!(idle.next_check(t0 + ms(1950), 2000), Some(t0 + ms(2000)), "the drain's deadline");
        assert_eq!(idle.next_check(t0 + ms(2500), 2000), Some(t0 + ms(2500)), "overdue: now");
        assert_eq!(idle.next_check(t0, 0), Some(t0), "no delay: now");
        idle.drained = true;
        assert_eq!(idle.next_check(t0, 2000), None, "drained: nothing pending");
        assert_eq!(interval(2000), ms(500));
        assert_eq!(idle_check(2000), ms(100));
        assert_eq!(idle_check(0), ms(10));
    }
}

impl<'a> PageReporting<'a> {
    /// Release every unreported free block of at least the reporting order now,
    /// whatever its age and whether or not background reporting is on (a
    /// synchronous pass, for tests and for users who know they are idle).
    pub fn report_free_pages_now(&self) -> ReportPass {
        self.a.core.reporting.pass(self.a.core.zones.as_slice(), &self.a.core.mm, true)
    }

    /// What the reporter does once the allocator has been idle for the delay,
    /// with hugepage backing and movable pages (see
    /// `Config::page_reporting_compact`): compact when partly used
    /// pageblocks hold at least two pageblocks of free memory, then release
    /// every free block of at least the reporting order, whatever its age.
    /// Returns whether it compacted, and the pass. Per-CPU lists are drained
    /// by the compaction (not otherwise).
    ///
    /// # Panics
    /// When an owner's [`crate::MovableOps`] callback panics while compacting:
    /// as [`crate::Compactor::compact_memory`], with no release pass.
    pub fn compact_and_report_now(&self) -> (bool, ReportPass) {
        let compacted = OwnerPanic::resuming(|caught| compact_for_release(&self.a.core, caught)).is_some();
        (compacted, self.a.core.reporting.pass(self.a.core.zones.as_slice(), &self.a.core.mm, true))
    }

    /// Free memory inside partly used pageblocks (free blocks below the
    /// pageblock order, on the buddy lists), in pages: with hugepage backing,
    /// resident memory that no release reaches until compaction empties its
    /// pageblocks. Read without locks.
    #[must_use]
    pub fn free_pages_below_pageblock(&self) -> u64 {
        free_below_pageblock(&self.a.core)
    }

    /// One pass as the background reporter runs it: only blocks free for at
    /// least the delay are released.
    pub fn report_aged_free_pages(&self) -> ReportPass {
        self.a.core.reporting.pass(self.a.core.zones.as_slice(), &self.a.core.mm, false)
    }

    /// Switch background reporting at run time (starting the reporter thread
    /// the first time). Returns `false`, changing nothing, when this backing
    /// cannot report ([`crate::Backing::Resident`], or [`crate::Backing::None`]
    /// without a callback).
    pub fn set_page_reporting(&self, on: bool) -> bool {
        if !self.a.core.reporting.set_enabled(on) {
            return false;
        }
        if on {
            start_reporter(&self.a.core);
        }
        true
    }

    /// Change the reporting order, delay and batch at run time.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a value outside [`crate::Config`]'s
    /// bounds (nothing changes).
    pub fn tune_page_reporting(&self, order: u32, delay_ms: u64, batch: u32) -> Result<(), ConfigError> {
        let probe = self
            .a
            .core
            .cfg
            .clone()
            .page_reporting_order(Some(order))
            .page_reporting_delay_ms(delay_ms)
            .page_reporting_batch(batch);
        probe.validate()?;
        debug_assert!(order <= MAX_ORDER && batch <= MAX_REPORTING_BATCH);
        self.a.core.reporting.tune(probe.effective_reporting_order(), delay_ms, batch);
        Ok(())
    }

    /// Reporting's settings and counters, read without locks.
    #[must_use]
    pub fn page_reporting_stats(&self) -> ReportingStats {
        let r = &self.a.core.reporting;
        ReportingStats {
            enabled: r.enabled(),
            order: r.order().get(),
            delay_ms: r.delay_ms(),
            passes: r.passes.load(Ordering::Relaxed),
            released_pages: r.reported_pages.load(Ordering::Relaxed),
            released_blocks: r.reported_blocks.load(Ordering::Relaxed),
            errors: r.errors.load(Ordering::Relaxed),
            release_calls: r.release_calls.load(Ordering::Relaxed),
            zeroing_skipped: self.a.core.zeroing.zeroing_skipped.load(Ordering::Relaxed),
            zeroed_on_free: self.a.core.zeroing.zeroed_on_free.load(Ordering::Relaxed),
            compactions: r.compactions.load(Ordering::Relaxed),
            compacted_pages: r.compacted_pages.load(Ordering::Relaxed),
        }
    }

    /// Every zone's memory by residency, read without locks.
    #[must_use]
    pub fn residency(&self) -> Vec<ZoneResidency> {
        self.a
            .core
            .zones
            .iter()
            .map(|z| {
                let free = z.free_pages_racy();
                let reported = z.stats.nr_reported.get_racy();
                let managed = self.a.core.managed_now(z);
                ZoneResidency {
                    nid: z.nid,
                    zone: z.ztype.name(),
                    managed,
                    free,
                    reported,
                    free_resident: free.saturating_sub(reported),
                    resident: managed.saturating_sub(reported),
                }
            })
            .collect()
    }

    /// Make every `n`-th release fail (0: none), as a failing `madvise` or
    /// callback would: the block must stay unreported and intact. For tests
    /// of the error path (costs nothing outside reporting passes).
    pub fn inject_report_errors(&self, n: u32) {
        self.a.core.reporting.fail_every(n);
    }
}
