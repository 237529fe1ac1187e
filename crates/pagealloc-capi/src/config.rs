//! `pagealloc_config`, the C form of `pagealloc::Config`: its layout, the
//! values of its enum-like fields, and the conversions both ways (unknown
//! values are refused with a message rather than mapped to a default).

use ::pagealloc::{Backing, Config};

use crate::args::out;
use crate::status::{invalid, pagealloc_status, run, Res};

/// `pagealloc_config.backing`: anonymous private memory with MAP_NORESERVE
/// (frames get memory when touched). The default.
pub const PAGEALLOC_BACKING_ANONYMOUS: u32 = 0;
/// `pagealloc_config.backing`: anonymous memory advised MADV_HUGEPAGE.
pub const PAGEALLOC_BACKING_HUGEPAGES: u32 = 1;
/// `pagealloc_config.backing`: anonymous memory populated up front (MAP_POPULATE).
pub const PAGEALLOC_BACKING_RESIDENT: u32 = 2;
/// `pagealloc_config.backing`: no memory: abstract frame numbers only
/// (`pagealloc_page_address` fails).
pub const PAGEALLOC_BACKING_NONE: u32 = 3;

/// `pagealloc_config.drain_mode`: the library's drain (merged outside the
/// zone lock, which then frees blocks). The default.
pub const PAGEALLOC_DRAIN_BLOCKS: u32 = 0;
/// `pagealloc_config.drain_mode`: seed 1's two-pass drain (a library built
/// with the `seed-variants` feature only).
pub const PAGEALLOC_DRAIN_TWO_PASS: u32 = 1;
/// `pagealloc_config.drain_mode`: today's kernel, one pass under the zone
/// lock (a library built with the `seed-variants` feature only).
pub const PAGEALLOC_DRAIN_SINGLE_PASS: u32 = 2;

/// Settings for `pagealloc_create`. Initialise with `pagealloc_config_default`,
/// then change the fields you need. The layout is part of this version's ABI.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pagealloc_config {
    /// Bytes in the arena (a multiple of 4096, at least 2 MiB). Default 1 GiB.
    pub arena_bytes: u64,
    /// Bytes of each node given to a Movable zone at its top (0: none).
    pub movable_zone_bytes: u64,
    /// The kernel's min_free_kbytes; 0 computes it from the arena size.
    pub min_free_kbytes: u64,
    /// Fake NUMA nodes splitting the arena evenly. Default 1.
    pub nodes: u32,
    /// One of the PAGEALLOC_BACKING_* values.
    pub backing: u32,
    /// CPUs to size per-CPU tables for; 0 reads the process's affinity.
    pub nr_cpus: u32,
    /// The kernel's watermark_scale_factor (1..=3000). Default 10.
    pub watermark_scale_factor: u32,
    /// The kernel's lowmem_reserve_ratio for the Normal zone. Default 32.
    pub lowmem_reserve_ratio: u32,
    /// The kernel's percpu_pagelist_high_fraction (0: automatic).
    pub percpu_pagelist_high_fraction: u32,
    /// Per-CPU batch override; 0 uses the kernel's formula.
    pub pcp_batch: u32,
    /// How often a queued lock waiter may lose to a newcomer before direct handoff.
    pub page_lock_unfairness: u32,
    /// One of the PAGEALLOC_DRAIN_* values.
    pub drain_mode: u32,
    /// Per-CPU page lists for small orders. Default on.
    pub pcp_lists: bool,
    /// The thread-owned front cache before the per-CPU lists. Default on.
    pub front_cache: bool,
    /// Use the page lock's waiters bit. Default on; off (the old design) needs a
    /// library built with the `seed-variants` feature.
    pub page_lock_waiters_bit: bool,
    /// Cache the migratetype on the page at free (the old design; needs
    /// `seed-variants`). Default off.
    pub pcp_migratetype_cache: bool,
    /// Build pagetypeinfo by walking lists (the old design; needs
    /// `seed-variants`). Default off.
    pub pagetypeinfo_walk_lists: bool,
}

impl pagealloc_config {
    pub(crate) fn from_rust(c: &Config) -> Self {
        Self {
            arena_bytes: c.arena_bytes,
            movable_zone_bytes: c.movable_zone_bytes,
            min_free_kbytes: c.min_free_kbytes.unwrap_or(0),
            nodes: c.nodes,
            backing: match c.backing {
                Backing::HugePages => PAGEALLOC_BACKING_HUGEPAGES,
                Backing::Resident => PAGEALLOC_BACKING_RESIDENT,
                Backing::None => PAGEALLOC_BACKING_NONE,
                _ => PAGEALLOC_BACKING_ANONYMOUS,
            },
            nr_cpus: c.nr_cpus.map_or(0, |n| n.min(u32::MAX as usize) as u32),
            watermark_scale_factor: c.watermark_scale_factor,
            lowmem_reserve_ratio: c.lowmem_reserve_ratio,
            percpu_pagelist_high_fraction: c.percpu_pagelist_high_fraction,
            pcp_batch: c.pcp_batch.unwrap_or(0),
            page_lock_unfairness: c.page_lock_unfairness,
            pcp_lists: c.pcp_lists,
            front_cache: c.front_cache,
            drain_mode: PAGEALLOC_DRAIN_BLOCKS,
            page_lock_waiters_bit: true,
            pcp_migratetype_cache: false,
            pagetypeinfo_walk_lists: false,
        }
        .with_variants_of(c)
    }

    /// The old designs' switches as `c` has them (`seed-variants` only: a
    /// library without it always has today's design).
    fn with_variants_of(self, c: &Config) -> Self {
        #[cfg(feature = "seed-variants")]
        return Self {
            drain_mode: match c.drain_mode {
                ::pagealloc::DrainMode::Blocks => PAGEALLOC_DRAIN_BLOCKS,
                ::pagealloc::DrainMode::TwoPass => PAGEALLOC_DRAIN_TWO_PASS,
                ::pagealloc::DrainMode::SinglePass => PAGEALLOC_DRAIN_SINGLE_PASS,
            },
            page_lock_waiters_bit: c.page_lock_waiters_bit,
            pcp_migratetype_cache: c.pcp_migratetype_cache,
            pagetypeinfo_walk_lists: c.pagetypeinfo_walk_lists,
            ..self
        };
        #[cfg(not(feature = "seed-variants"))]
        {
            let _ = c;
            self
        }
    }

    /// Apply the old designs' switches to `c`. Without `seed-variants` only
    /// today's design is accepted, with an error that says what is missing.
    fn variants_to_rust(self, c: Config) -> Res<Config> {
        let old_drain = match self.drain_mode {
            PAGEALLOC_DRAIN_BLOCKS => None,
            PAGEALLOC_DRAIN_TWO_PASS => Some(true),
            PAGEALLOC_DRAIN_SINGLE_PASS => Some(false),
            d => return Err(invalid(format_args!("drain_mode {d} is not one of PAGEALLOC_DRAIN_*"))),
        };
        #[cfg(feature = "seed-variants")]
        return Ok(c
            .drain_mode(match old_drain {
                None => ::pagealloc::DrainMode::Blocks,
                Some(true) => ::pagealloc::DrainMode::TwoPass,
                Some(false) => ::pagealloc::DrainMode::SinglePass,
            })
            .page_lock_waiters_bit(self.page_lock_waiters_bit)
            .pcp_migratetype_cache(self.pcp_migratetype_cache)
            .pagetypeinfo_walk_lists(self.pagetypeinfo_walk_lists));
        #[cfg(not(feature = "seed-variants"))]
        {
            if old_drain.is_some()
                || !self.page_lock_waiters_bit
                || self.pcp_migratetype_cache
                || self.pagetypeinfo_walk_lists
            {
                return Err(invalid(format_args!(
                    "drain_mode, page_lock_waiters_bit, pcp_migratetype_cache and pagetypeinfo_walk_lists \
                     select the seed experiments' old designs, which need a library built with the \
                     seed-variants feature"
                )));
            }
            Ok(c)
        }
    }

    pub(crate) fn to_rust(self) -> Res<Config> {
        let backing = match self.backing {
            PAGEALLOC_BACKING_ANONYMOUS => Backing::Anonymous,
            PAGEALLOC_BACKING_HUGEPAGES => Backing::HugePages,
            PAGEALLOC_BACKING_RESIDENT => Backing::Resident,
            PAGEALLOC_BACKING_NONE => Backing::None,
            b => return Err(invalid(format_args!("backing {b} is not one of PAGEALLOC_BACKING_*"))),
        };
        let c = Config::new()
            .arena_bytes(self.arena_bytes)
            .movable_zone_bytes(self.movable_zone_bytes)
            .min_free_kbytes((self.min_free_kbytes != 0).then_some(self.min_free_kbytes))
            .nodes(self.nodes)
            .backing(backing)
            .nr_cpus((self.nr_cpus != 0).then_some(self.nr_cpus as usize))
            .watermark_scale_factor(self.watermark_scale_factor)
            .lowmem_reserve_ratio(self.lowmem_reserve_ratio)
            .percpu_pagelist_high_fraction(self.percpu_pagelist_high_fraction)
            .pcp_batch((self.pcp_batch != 0).then_some(self.pcp_batch))
            .page_lock_unfairness(self.page_lock_unfairness)
            .pcp_lists(self.pcp_lists)
            .front_cache(self.front_cache);
        self.variants_to_rust(c)
    }
}

/// Fill `*cfg` with the defaults (1 GiB anonymous arena, one node, per-CPU
/// lists and front cache on, everything else as the kernel does it).
///
/// Returns `PAGEALLOC_ERR_INVALID_ARGUMENT` if `cfg` is NULL.
/// Thread safety: touches only `*cfg`; safe to call from any thread.
///
/// # Safety
/// `cfg` is NULL or points to a writable `pagealloc_config`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_config_default(cfg: *mut pagealloc_config) -> pagealloc_status {
    run("pagealloc_config_default", || {
        out(cfg, "cfg")?.write(pagealloc_config::from_rust(&Config::default()));
        Ok(())
    })
}
