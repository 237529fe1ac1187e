//! Construction-time settings. Everything here is fixed when the allocator is
//! built.
//!
//! The old designs that the seed experiments compare against (a two-pass
//! per-CPU drain, the migratetype cached on the page, the page lock without a
//! waiters bit, `pagetypeinfo` by walking the free lists) exist only with the
//! `seed-variants` cargo feature. Without it their fields and setters are
//! absent and the accessors below are constants, so no path of a default
//! build branches on them.

mod holes;
mod setters;
mod variants;

pub(crate) use holes::validate_holes;
pub use holes::MAX_HOLES;

use crate::error::ConfigError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{Order, Pfn, MAX_ORDER, PAGEBLOCK_ORDER};
use crate::types::{MAX_ARENA_BYTES, PAGEBLOCK_BYTES};
use crate::types::{PAGEBLOCK_PAGES, PAGE_SIZE};
use alloc::sync::Arc;

/// Largest [`Config::nodes`]: a zone index is a byte of the pageblock word and
/// each node may have two zones.
pub(crate) const MAX_NODES: u32 = 127;

/// Largest [`Config::nr_cpus`]: the kernel's largest `NR_CPUS` on x86-64
/// (`CONFIG_MAXSMP`). Per-CPU tables are sized for this many CPUs up front, so the
/// bound also keeps their memory in proportion.
pub(crate) const MAX_CPUS: usize = 8192;

/// Largest [`Config::pcp_batch`]. The kernel's own formula never gives more than
/// 63 pages, and its old `percpu_pagelist_fraction` capped the batch at 96; 4096
/// leaves ample room for experiments while keeping each per-CPU list's
/// up-front capacity (a few times the batch) to a few hundred KiB.
pub(crate) const MAX_PCP_BATCH: u32 = 4096;

/// Largest [`Config::watermark_scale_factor`] (the kernel's sysctl bound: 30%).
pub(crate) const MAX_WATERMARK_SCALE_FACTOR: u32 = 3000;

/// Smallest non-zero [`Config::percpu_pagelist_high_fraction`] (the kernel's
/// `MIN_PERCPU_PAGELIST_HIGH_FRACTION`).
pub const MIN_PERCPU_PAGELIST_HIGH_FRACTION: u32 = 8;

/// What stands behind the page frames.
///
/// # Examples
/// ```
/// use pagealloc::{Backing, Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::new().arena_bytes(2 << 20).backing(Backing::None)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// assert!(a.page_address(pfn).is_none()); // frame numbers only: no memory behind them
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Backing {
    /// Anonymous private mmap with MAP_NORESERVE: frames get memory when touched.
    #[default]
    Anonymous,
    /// Anonymous mmap aligned to 2 MiB and advised MADV_HUGEPAGE. When the kernel
    /// refuses the advice, the arena stays a plain anonymous mapping and
    /// `PageAllocator::hugepage_fallback` says so.
    HugePages,
    /// Anonymous mmap populated up front (MAP_POPULATE): every frame is resident
    /// before the first allocation, as the kernel's memory is, so first touches
    /// never fault. Costs the whole arena in memory at once.
    Resident,
    /// No memory at all: the allocator hands out abstract frame numbers (device
    /// memory, disk blocks, GPU pages). `page_address` returns `None`.
    None,
}

/// How a per-CPU list is emptied into the buddy (the `pcp-flush` and
/// `page-fault1` experiments' A/B; `seed-variants` feature only).
#[cfg(feature = "seed-variants")]
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum DrainMode {
    /// pagealloc's design, the only one of a build without the feature:
    /// pick, sort by pfn and merge the batch's own buddies before the zone
    /// lock, which then frees blocks (see `pcp::drain`).
    #[default]
    Blocks,
    /// Today's kernel: pick and merge in one pass under the zone lock.
    SinglePass,
    /// Seed 1's patch: pick pages off the lists first, then merge them under the zone lock.
    TwoPass,
}

/// Largest [`Config::page_reporting_delay_ms`]: ten minutes (a block's free
/// time is kept in 16 bits of 10 ms ticks, which wrap after 655 s).
pub(crate) const MAX_REPORTING_DELAY_MS: u64 = 600_000;
/// Largest [`Config::page_reporting_batch`].
pub const MAX_REPORTING_BATCH: u32 = 4096;

/// The consumer of free page reports with [`Backing::None`] (a hypervisor's
/// balloon, a device's discard): called with the head and order of each free
/// block to release, under the zone's lock (keep it short, never call back into
/// the allocator). Return `false` when the release failed: the block then stays
/// unreported and is offered again on a later pass. A callback that panics
/// counts as a failed release: the panic is caught before it can unwind
/// through the zone lock, and the pass goes on.
///
/// # Examples
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator, ReportCallback};
/// use std::sync::{atomic::{AtomicU64, Ordering::Relaxed}, Arc};
/// static RELEASED: AtomicU64 = AtomicU64::new(0);
/// let cb = ReportCallback(Arc::new(|_pfn, order| { RELEASED.fetch_add(1 << order, Relaxed); true }));
/// let a = PageAllocator::new(Config::small(4 << 20).page_reporting_callback(Some(cb))).unwrap();
/// a.free_pages(a.alloc_pages(Gfp::MOVABLE, 9).unwrap(), 9).unwrap(); // fresh memory counts as released
/// let pass = a.reporting().report_free_pages_now(); // a balloon driver would take these pages
/// assert!(pass.pages >= 512 && RELEASED.load(Relaxed) == pass.pages);
/// ```
#[derive(Clone)]
pub struct ReportCallback(pub Arc<dyn Fn(Pfn, u32) -> bool + Send + Sync>);

impl core::fmt::Debug for ReportCallback {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ReportCallback(..)")
    }
}

/// Settings for an allocator. Build with [`Config::new`] (or
/// [`Config::small`]) and the chained setters, one per setting; read a
/// setting as a field (`cfg.nodes`), through [`ConfigValues`]. The setters
/// are the only way to change one: a `Config`'s fields cannot be assigned.
///
/// # Examples
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let cfg = Config::small(8 << 20).nodes(2).pcp_batch(Some(8));
/// assert_eq!(cfg.nodes, 2); // read
/// let a = PageAllocator::new(cfg).unwrap();
/// assert_eq!((a.nr_nodes(), a.nr_pages()), (2, 2048));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Config {
    v: ConfigValues,
}

impl core::ops::Deref for Config {
    type Target = ConfigValues;
    #[inline(always)]
    fn deref(&self) -> &ConfigValues {
        &self.v
    }
}

/// The values of a [`Config`], each documented with its bounds and default;
/// read them through the `Config` (`cfg.arena_bytes`), set them with its
/// setter of the same name.
///
/// # Examples
/// ```
/// use pagealloc::Config;
/// let cfg = Config::new().arena_bytes(64 << 20);
/// assert_eq!(cfg.arena_bytes, 64 << 20);
/// assert_eq!(cfg.nodes, 1); // a default
/// ```
#[derive(Clone, Debug)]
pub struct ConfigValues {
    /// Bytes in the arena: a whole number of pageblocks (2 MiB), at least one and
    /// at most 2^32 - 512 pages (16 TiB less one pageblock: pfn links are 32
    /// bits). Default 1 GiB.
    pub arena_bytes: u64,
    /// Fake NUMA nodes splitting the arena evenly: 1..=127, and at most one per
    /// pageblock. Default 1.
    pub nodes: u32,
    /// Bytes of each node given to a Movable zone at its top (0: no Movable zone),
    /// rounded up to whole pageblocks. The Normal zone below must keep at least
    /// one pageblock, or construction fails with [`ConfigError::EmptyZone`].
    pub movable_zone_bytes: u64,
    /// What backs the frames.
    pub backing: Backing,
    /// Ranges of pages, `(first pfn, pages)`, kept out of the buddy lists at
    /// construction: holes in a memory map, firmware areas, or memory given
    /// later with `PageAllocator::add_free_memory`. Each inside the
    /// arena, non-empty, none overlapping another; at most [`MAX_HOLES`].
    /// Default none.
    pub holes: Vec<(Pfn, u64)>,
    /// The kernel's `min_free_kbytes`; `None` computes it from the arena size.
    /// At most the arena's size in KiB (a larger reserve than the memory it
    /// reserves from means nothing, and would overflow the watermark arithmetic).
    pub min_free_kbytes: Option<u64>,
    /// The kernel's `watermark_scale_factor` (in 1/10000 of managed pages):
    /// 1..=3000, the kernel's range. Default 10.
    pub watermark_scale_factor: u32,
    /// The kernel's `lowmem_reserve_ratio` for the Normal zone: at least 1. Default 32.
    pub lowmem_reserve_ratio: u32,
    /// CPUs to size per-CPU tables for: 1..=8192 (the kernel's largest `NR_CPUS`
    /// on x86-64); `None` reads the process's affinity.
    pub nr_cpus: Option<usize>,
    /// The kernel's `percpu_pagelist_high_fraction`: 0 (automatic high with
    /// tuning) or at least 8, the kernel's minimum.
    pub percpu_pagelist_high_fraction: u32,
    /// The depot between the per-CPU lists and the buddy (free order-0 pages
    /// that one CPU's drain parks and another's refill takes; free in every
    /// count): at most `1/depot_fraction` of each zone's pages. 0 turns it
    /// off. Default 32. A build with `seed-variants` uses it with today's
    /// drain only.
    pub depot_fraction: u32,
    /// Per-CPU batch override (`None`: the kernel's formula, at most 63 pages):
    /// 1..=4096. The kernel never batches more than 96 pages; the bound leaves
    /// room for experiments while keeping each per-CPU list's up-front capacity,
    /// a few times the batch, small.
    pub pcp_batch: Option<u32>,
    /// How per-CPU lists drain (`seed-variants` feature only).
    #[cfg(feature = "seed-variants")]
    pub drain_mode: DrainMode,
    /// Cache the migratetype on the page at free, the design before the
    /// `pcp-flush` experiment's patch (`seed-variants` feature only).
    #[cfg(feature = "seed-variants")]
    pub pcp_migratetype_cache: bool,
    /// Use per-CPU page lists for small orders (off: every request goes to the
    /// buddy lists under the zone lock). Default on.
    pub pcp_lists: bool,
    /// Use the thread-owned front cache before the per-CPU lists. Default on.
    pub front_cache: bool,
    /// Use the waiters bit (true, today) or always look up the wait queue at
    /// unlock, as before the `page-lock` experiment's patch (`seed-variants`
    /// feature only).
    #[cfg(feature = "seed-variants")]
    pub page_lock_waiters_bit: bool,
    /// How often a queued lock waiter may lose to a newcomer before direct
    /// handoff (any value; 0 hands off at once). Default 5.
    pub page_lock_unfairness: u32,
    /// Build pagetypeinfo by walking the free lists under the zone lock, as
    /// before the `pagetypeinfo` experiment's patch (`seed-variants` feature
    /// only).
    #[cfg(feature = "seed-variants")]
    pub pagetypeinfo_walk_lists: bool,
    // --- Free page reporting and page initialisation ---
    /// Free page reporting: release free blocks that stayed free for
    /// [`Config::page_reporting_delay_ms`] (madvise with anonymous or hugepage
    /// backing, [`Config::page_reporting_callback`] with [`Backing::None`]; never
    /// with [`Backing::Resident`], which asked for residency). Default on; can be
    /// switched at run time (`PageAllocator::set_page_reporting`).
    pub page_reporting: bool,
    /// Smallest order reported (`None`: 0 with 4 KiB backing and without backing,
    /// the pageblock order with hugepage backing). At most [`MAX_ORDER`]; with
    /// hugepage backing orders below the pageblock's are raised to it (a release
    /// never splits a 2 MiB page).
    pub page_reporting_order: Option<u32>,
    /// How long a block must stay free before it is released (the kernel's
    /// 2 s): 0..=600000 ms.
    pub page_reporting_delay_ms: u64,
    /// Blocks released per hold of a zone's lock (the kernel's 32): 1..=4096.
    pub page_reporting_batch: u32,
    /// Release with `MADV_FREE` instead of `MADV_DONTNEED` (cheaper; the pages
    /// then are not known to read zero, so `Gfp::ZERO` zeroes them as usual).
    pub page_reporting_madv_free: bool,
    /// The release with [`Backing::None`]; without it nothing is reported there.
    pub page_reporting_callback: Option<ReportCallback>,
    /// The kernel's `init_on_alloc`: zero every allocation (as `Gfp::ZERO`;
    /// released blocks are already zero and are not zeroed again). The inline
    /// front-cache allocation paths step aside while it is on. Default off.
    pub init_on_alloc: bool,
    // Compaction.
    /// The kernel's `vm.extfrag_threshold` (0..=1000, default 500): direct
    /// compaction for an order above 3 is skipped when the fragmentation
    /// index is at or below it (the failure is lack of memory, not
    /// fragmentation).
    pub extfrag_threshold: u32,
    // Zone-lock statistics (lockstat):
    /// Count zone-lock wait and hold times (`PageAllocator::lockstat`). Default on.
    pub lock_stats: bool,
    // --- Free page reporting with hugepage backing, init_on_free ---
    /// With hugepage backing and movable pages registered: when the reporter
    /// finds the allocator idle for the delay, it first compacts the zones if
    /// their free memory outside whole free pageblocks adds up to at least two
    /// pageblocks (partly used 2 MiB pages that compaction could empty), then
    /// releases the pageblocks that emptied; at its later passes of the same
    /// idle period it compacts again while the last compaction migrated
    /// pages or pages were marked movable since, at most 8 times. Default
    /// on.
    pub page_reporting_compact: bool,
    /// The kernel's `init_on_free`: zero every block when it is freed (before
    /// it reaches any free list or cache), so no tenant's data outlives its
    /// free. Every free page then reads zero, so `Gfp::ZERO` and
    /// init_on_alloc zero nothing (counted as skipped); with reporting the
    /// two combine: a released block is zero whichever way it was released.
    /// The inline free path steps aside while it is on. Default off.
    pub init_on_free: bool,
    // kcompactd, proactive compaction and grouping by mobility.
    /// The kernel's `vm.compaction_proactiveness` (0..=100, default 20):
    /// kcompactd compacts a node in the background when its fragmentation
    /// score is above `min(max(100 - p, 5) + 10, 100)` and stops at
    /// `max(100 - p, 5)`; 0 turns proactive compaction off (kcompactd still
    /// answers kswapd's wakeups for high orders).
    pub compaction_proactiveness: u32,
    /// The kernel's `page_group_by_mobility_disabled`: every allocation
    /// takes its pages from one migratetype's lists (Movable here, so
    /// compaction still finds targets), so unmovable pages land among
    /// movable ones anywhere. Turns the inline front-cache allocation off.
    /// Default off (the kernel sets it when memory is too small to group).
    pub page_group_by_mobility_disabled: bool,
    // --- Hugepage filler ---
    /// With hugepage backing, per-CPU refills fill partly used pageblocks
    /// before they split a wholly free one (Temeraire's filler in buddy
    /// terms: best fit by free range), so live memory packs into few 2 MiB
    /// pages and whole ones stay free for reporting. No effect with other
    /// backings. Default on.
    pub hugepage_filler: bool,
    /// An order-0 allocation served by this thread's front cache prefetches
    /// (for writing) the first line of the frame it will hand out
    /// four allocations later, so that a caller
    /// writing each page it gets finds the line on its way: page-fault1's
    /// writes then overlap the allocator's own stores instead of queueing
    /// behind them. No effect without backing memory. Default on; a caller
    /// that never touches its pages' memory (a device writes them) saves a
    /// useless line fill per allocation with it off.
    pub prefetch_on_alloc: bool,
}

impl Default for ConfigValues {
    fn default() -> Self {
        Self {
            arena_bytes: 1 << 30,
            nodes: 1,
            movable_zone_bytes: 0,
            backing: Backing::Anonymous,
            holes: Vec::new(),
            min_free_kbytes: None,
            watermark_scale_factor: 10,
            lowmem_reserve_ratio: 32,
            nr_cpus: None,
            percpu_pagelist_high_fraction: 0,
            depot_fraction: 32,
            pcp_batch: None,
            #[cfg(feature = "seed-variants")]
            drain_mode: DrainMode::Blocks,
            #[cfg(feature = "seed-variants")]
            pcp_migratetype_cache: false,
            pcp_lists: true,
            front_cache: true,
            #[cfg(feature = "seed-variants")]
            page_lock_waiters_bit: true,
            page_lock_unfairness: 5,
            #[cfg(feature = "seed-variants")]
            pagetypeinfo_walk_lists: false,
            page_reporting: true,
            page_reporting_order: None,
            page_reporting_delay_ms: 2000,
            page_reporting_batch: 32,
            page_reporting_madv_free: false,
            page_reporting_callback: None,
            init_on_alloc: false,
            extfrag_threshold: 500,
            lock_stats: true,
            page_reporting_compact: true,
            init_on_free: false,
            compaction_proactiveness: 20,
            page_group_by_mobility_disabled: false,
            hugepage_filler: true,
            prefetch_on_alloc: true,
        }
    }
}

impl Config {
    /// The defaults: a 1 GiB anonymous arena, one node, a Normal zone only.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An arena of `bytes` without backing (abstract frames), handy for tests.
    #[must_use]
    pub fn small(bytes: u64) -> Self {
        Self::default().arena_bytes(bytes).backing(Backing::None)
    }

    /// Arena size in pages, after the checks that need nothing else.
    ///
    /// Every field is checked here, so that no value of any field can make
    /// construction overflow, index out of bounds or ask the memory allocator for
    /// an absurd amount: the bounds are documented on each field.
    pub fn validate(&self) -> Result<u64, ConfigError> {
        let pages = self.validate_arena()?;
        validate_holes(&self.holes, pages)?;
        self.validate_tuning()?;
        self.validate_reporting()?;
        Ok(pages)
    }

    /// The arena's size and its split into nodes; the arena's pages.
    fn validate_arena(&self) -> Result<u64, ConfigError> {
        let min = PAGEBLOCK_BYTES;
        if !self.arena_bytes.is_multiple_of(PAGE_SIZE as u64) {
            return Err(ConfigError::ArenaNotPageMultiple { bytes: self.arena_bytes });
        }
        if self.arena_bytes < min {
            return Err(ConfigError::ArenaTooSmall { bytes: self.arena_bytes, min });
        }
        if self.arena_bytes > MAX_ARENA_BYTES {
            return Err(ConfigError::ArenaTooLarge { bytes: self.arena_bytes });
        }
        let pages = self.arena_bytes / PAGE_SIZE as u64;
        if !self.arena_bytes.is_multiple_of(PAGEBLOCK_BYTES) {
            return Err(ConfigError::ArenaNotPageblockMultiple { bytes: self.arena_bytes });
        }
        let blocks = pages / PAGEBLOCK_PAGES;
        if self.nodes == 0 || self.nodes as u64 > blocks {
            return Err(ConfigError::TooManyNodes { nodes: self.nodes, pageblocks: blocks });
        }
        if self.nodes > MAX_NODES {
            return Err(ConfigError::Invalid {
                field: "nodes",
                why: format!("{} is above the maximum of {MAX_NODES} nodes", self.nodes),
            });
        }
        Ok(pages)
    }

    /// Watermarks, reserves, fragmentation threshold and per-CPU lists.
    fn validate_tuning(&self) -> Result<(), ConfigError> {
        if self.compaction_proactiveness > 100 {
            return Err(ConfigError::Invalid {
                field: "compaction_proactiveness",
                why: format!("{} is outside 0..=100", self.compaction_proactiveness),
            });
        }
        if self.extfrag_threshold > 1000 {
            return Err(ConfigError::Invalid {
                field: "extfrag_threshold",
                why: format!("{} is outside 0..=1000", self.extfrag_threshold),
            });
        }
        if self.watermark_scale_factor == 0 || self.watermark_scale_factor > MAX_WATERMARK_SCALE_FACTOR {
            return Err(ConfigError::Invalid {
                field: "watermark_scale_factor",
                why: format!("{} is outside 1..={MAX_WATERMARK_SCALE_FACTOR}", self.watermark_scale_factor),
            });
        }
        if self.lowmem_reserve_ratio == 0 {
            return Err(ConfigError::Invalid { field: "lowmem_reserve_ratio", why: "must be at least 1".into() });
        }
        if self.percpu_pagelist_high_fraction != 0
            && self.percpu_pagelist_high_fraction < MIN_PERCPU_PAGELIST_HIGH_FRACTION
        {
            return Err(ConfigError::Invalid {
                field: "percpu_pagelist_high_fraction",
                why: format!(
                    "{} is below the kernel's minimum of {MIN_PERCPU_PAGELIST_HIGH_FRACTION} (or 0 for automatic)",
                    self.percpu_pagelist_high_fraction
                ),
            });
        }
        if let Some(kb) = self.min_free_kbytes {
            let arena_kb = self.arena_bytes / 1024;
            if kb > arena_kb {
                return Err(ConfigError::Invalid {
                    field: "min_free_kbytes",
                    why: format!("{kb} KiB is more than the whole arena ({arena_kb} KiB)"),
                });
            }
        }
        if let Some(n) = self.nr_cpus {
            if n == 0 || n > MAX_CPUS {
                return Err(ConfigError::Invalid { field: "nr_cpus", why: format!("{n} is outside 1..={MAX_CPUS}") });
            }
        }
        if let Some(b) = self.pcp_batch {
            if b == 0 || b > MAX_PCP_BATCH {
                return Err(ConfigError::Invalid {
                    field: "pcp_batch",
                    why: format!("{b} is outside 1..={MAX_PCP_BATCH}"),
                });
            }
        }
        Ok(())
    }

    /// Free page reporting's settings.
    fn validate_reporting(&self) -> Result<(), ConfigError> {
        if let Some(o) = self.page_reporting_order {
            if o > MAX_ORDER {
                return Err(ConfigError::Invalid {
                    field: "page_reporting_order",
                    why: format!("{o} is above the largest order {MAX_ORDER}"),
                });
            }
        }
        if self.page_reporting_delay_ms > MAX_REPORTING_DELAY_MS {
            return Err(ConfigError::Invalid {
                field: "page_reporting_delay_ms",
                why: format!("{} is above {MAX_REPORTING_DELAY_MS} ms", self.page_reporting_delay_ms),
            });
        }
        if self.page_reporting_batch == 0 || self.page_reporting_batch > MAX_REPORTING_BATCH {
            return Err(ConfigError::Invalid {
                field: "page_reporting_batch",
                why: format!("{} is outside 1..={MAX_REPORTING_BATCH}", self.page_reporting_batch),
            });
        }
        Ok(())
    }

    /// The reporting order in effect (see [`Config::page_reporting_order`]).
    /// A validated config's order is one; an invalid one reads as the
    /// largest.
    pub fn effective_reporting_order(&self) -> Order {
        let o = self.page_reporting_order.unwrap_or(0);
        let o = if self.backing == Backing::HugePages { o.max(PAGEBLOCK_ORDER) } else { o };
        Order::new(o).unwrap_or(Order::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_validate() {
        assert_eq!(Config::new().validate().ok(), Some((1 << 30) / PAGE_SIZE as u64));
    }

    #[test]
    fn bounds_are_inclusive() {
        let base = || Config::small(8 << 20);
        assert_eq!(MAX_ARENA_BYTES, ((1 << 32) - 512) * 4096);
        assert!(base().arena_bytes(MAX_ARENA_BYTES).validate().is_ok());
        assert!(base().arena_bytes(MAX_ARENA_BYTES + PAGEBLOCK_BYTES).validate().is_err());
        assert!(base().nr_cpus(Some(MAX_CPUS)).validate().is_ok());
        assert!(base().nr_cpus(Some(MAX_CPUS + 1)).validate().is_err());
        assert!(base().pcp_batch(Some(MAX_PCP_BATCH)).validate().is_ok());
        assert!(base().pcp_batch(Some(MAX_PCP_BATCH + 1)).validate().is_err());
        assert!(base().min_free_kbytes(Some(8 << 10)).validate().is_ok());
        assert!(base().min_free_kbytes(Some((8 << 10) + 1)).validate().is_err());
        assert!(base().watermark_scale_factor(MAX_WATERMARK_SCALE_FACTOR).validate().is_ok());
        assert!(Config::small(256 << 20).nodes(MAX_NODES).validate().is_ok());
        assert!(Config::small(256 << 20).nodes(MAX_NODES + 1).validate().is_err());
    }
}
