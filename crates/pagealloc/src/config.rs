//! Construction-time settings. Everything here is fixed when the allocator is
//! built; old-design variants for the A/B experiments are chosen here so the fast
//! path pays nothing for them when they are off.

use crate::error::ConfigError;
use crate::types::{PAGEBLOCK_PAGES, PAGE_SIZE};

/// What stands behind the page frames.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Backing {
    /// Anonymous private mmap with MAP_NORESERVE: frames get memory when touched.
    #[default]
    Anonymous,
    /// Anonymous mmap aligned to 2 MiB and advised MADV_HUGEPAGE. When the kernel
    /// refuses the advice, the arena stays a plain anonymous mapping and
    /// [`crate::PageAllocator::hugepage_fallback`] says so.
    HugePages,
    /// Anonymous mmap populated up front (MAP_POPULATE): every frame is resident
    /// before the first allocation, as the kernel's memory is, so first touches
    /// never fault. Costs the whole arena in memory at once.
    Resident,
    /// No memory at all: the allocator hands out abstract frame numbers (device
    /// memory, disk blocks, GPU pages). `page_address` returns `None`.
    None,
}

/// How a per-CPU list is emptied into the buddy (seed 1's A/B).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum DrainMode {
    /// Today's kernel: pick and merge in one pass under the zone lock.
    #[default]
    SinglePass,
    /// Seed 1: pick pages off the lists first, then merge them under the zone lock.
    TwoPass,
}

/// Settings for a [`crate::PageAllocator`]. Build with [`Config::new`] and the
/// chained setters; every setter has the name of its field.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes in the arena (a multiple of 4096, at least one pageblock). Default 1 GiB.
    pub arena_bytes: u64,
    /// Fake NUMA nodes splitting the arena evenly. Default 1.
    pub nodes: u32,
    /// Bytes of each node given to a Movable zone at its top (0: no Movable zone).
    pub movable_zone_bytes: u64,
    /// What backs the frames.
    pub backing: Backing,
    /// The kernel's `min_free_kbytes`; `None` computes it from the arena size.
    pub min_free_kbytes: Option<u64>,
    /// The kernel's `watermark_scale_factor` (in 1/10000 of managed pages). Default 10.
    pub watermark_scale_factor: u32,
    /// The kernel's `lowmem_reserve_ratio` for the Normal zone. Default 32.
    pub lowmem_reserve_ratio: u32,
    /// CPUs to size per-CPU tables for; `None` reads the process's affinity.
    pub nr_cpus: Option<usize>,
    /// The kernel's `percpu_pagelist_high_fraction` (0: automatic high with tuning).
    pub percpu_pagelist_high_fraction: u32,
    /// Per-CPU batch override (`None`: the kernel's formula).
    pub pcp_batch: Option<u32>,
    /// Seed 1 A/B: how per-CPU lists drain.
    pub drain_mode: DrainMode,
    /// Seed 2 A/B: cache the migratetype on the page at free (the old design).
    pub pcp_migratetype_cache: bool,
    /// Use per-CPU page lists for small orders (off: every request goes to the
    /// buddy lists under the zone lock). Default on.
    pub pcp_lists: bool,
    /// Use the thread-owned front cache before the per-CPU lists. Default on.
    pub front_cache: bool,
    /// Seed 4 A/B: use the waiters bit (true, today) or always look up the queue.
    pub page_lock_waiters_bit: bool,
    /// How often a queued lock waiter may lose to a newcomer before direct handoff.
    pub page_lock_unfairness: u32,
    /// Seed 5 A/B: build pagetypeinfo by walking lists under the zone lock.
    pub pagetypeinfo_walk_lists: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            arena_bytes: 1 << 30,
            nodes: 1,
            movable_zone_bytes: 0,
            backing: Backing::Anonymous,
            min_free_kbytes: None,
            watermark_scale_factor: 10,
            lowmem_reserve_ratio: 32,
            nr_cpus: None,
            percpu_pagelist_high_fraction: 0,
            pcp_batch: None,
            drain_mode: DrainMode::SinglePass,
            pcp_migratetype_cache: false,
            pcp_lists: true,
            front_cache: true,
            page_lock_waiters_bit: true,
            page_lock_unfairness: 5,
            pagetypeinfo_walk_lists: false,
        }
    }
}

macro_rules! setters {
    ($($(#[$m:meta])* $name:ident : $t:ty),* $(,)?) => {
        impl Config {
            $(
                $(#[$m])*
                #[must_use]
                pub fn $name(mut self, v: $t) -> Self {
                    self.$name = v;
                    self
                }
            )*
        }
    };
}

setters! {
    /// Set [`Config::arena_bytes`].
    arena_bytes: u64,
    /// Set [`Config::nodes`].
    nodes: u32,
    /// Set [`Config::movable_zone_bytes`].
    movable_zone_bytes: u64,
    /// Set [`Config::backing`].
    backing: Backing,
    /// Set [`Config::min_free_kbytes`].
    min_free_kbytes: Option<u64>,
    /// Set [`Config::watermark_scale_factor`].
    watermark_scale_factor: u32,
    /// Set [`Config::lowmem_reserve_ratio`].
    lowmem_reserve_ratio: u32,
    /// Set [`Config::nr_cpus`].
    nr_cpus: Option<usize>,
    /// Set [`Config::percpu_pagelist_high_fraction`].
    percpu_pagelist_high_fraction: u32,
    /// Set [`Config::pcp_batch`].
    pcp_batch: Option<u32>,
    /// Set [`Config::drain_mode`].
    drain_mode: DrainMode,
    /// Set [`Config::pcp_migratetype_cache`].
    pcp_migratetype_cache: bool,
    /// Set [`Config::pcp_lists`].
    pcp_lists: bool,
    /// Set [`Config::front_cache`].
    front_cache: bool,
    /// Set [`Config::page_lock_waiters_bit`].
    page_lock_waiters_bit: bool,
    /// Set [`Config::page_lock_unfairness`].
    page_lock_unfairness: u32,
    /// Set [`Config::pagetypeinfo_walk_lists`].
    pagetypeinfo_walk_lists: bool,
}

impl Config {
    /// The defaults: a 1 GiB anonymous arena, one node, a Normal zone only.
    pub fn new() -> Self {
        Self::default()
    }

    /// A small arena without backing, handy for tests.
    pub fn small(bytes: u64) -> Self {
        Self::default().arena_bytes(bytes).backing(Backing::None)
    }

    /// Arena size in pages, after the checks that need nothing else.
    pub(crate) fn validate(&self) -> Result<u64, ConfigError> {
        let min = PAGEBLOCK_PAGES * PAGE_SIZE as u64;
        if !self.arena_bytes.is_multiple_of(PAGE_SIZE as u64) {
            return Err(ConfigError::ArenaNotPageMultiple { bytes: self.arena_bytes });
        }
        if self.arena_bytes < min {
            return Err(ConfigError::ArenaTooSmall { bytes: self.arena_bytes, min });
        }
        let pages = self.arena_bytes / PAGE_SIZE as u64;
        if pages >= u32::MAX as u64 - 1 {
            return Err(ConfigError::ArenaTooLarge { bytes: self.arena_bytes });
        }
        let blocks = pages / PAGEBLOCK_PAGES;
        if self.nodes == 0 || self.nodes as u64 > blocks {
            return Err(ConfigError::TooManyNodes { nodes: self.nodes, pageblocks: blocks });
        }
        if self.watermark_scale_factor == 0 || self.watermark_scale_factor > 3000 {
            return Err(ConfigError::Invalid {
                field: "watermark_scale_factor",
                why: format!("{} is outside 1..=3000", self.watermark_scale_factor),
            });
        }
        if self.lowmem_reserve_ratio == 0 {
            return Err(ConfigError::Invalid { field: "lowmem_reserve_ratio", why: "must be at least 1".into() });
        }
        if self.percpu_pagelist_high_fraction != 0 && self.percpu_pagelist_high_fraction < 8 {
            return Err(ConfigError::Invalid {
                field: "percpu_pagelist_high_fraction",
                why: format!(
                    "{} is below the kernel's minimum of 8 (or 0 for automatic)",
                    self.percpu_pagelist_high_fraction
                ),
            });
        }
        if let Some(0) = self.nr_cpus {
            return Err(ConfigError::Invalid { field: "nr_cpus", why: "must be at least 1".into() });
        }
        if let Some(b) = self.pcp_batch {
            if b == 0 {
                return Err(ConfigError::Invalid { field: "pcp_batch", why: "must be at least 1".into() });
            }
        }
        Ok(pages)
    }
}
