//! The allocation paths (the kernel's mm/page_alloc.c): what the public
//! façade calls, built on the layers below it: the memory map, zones and
//! their buddy lists, per-CPU lists and the thread front caches.
//!
//! - [`fast`]: `get_page_from_freelist`: front cache, then this CPU's list,
//!   then the buddy, each zone of the zonelist against its low watermark.
//!   The order-0 front-cache hit is forced inline into the caller and states
//!   its instruction budget.
//! - [`slow`]: `__alloc_pages_slowpath`: the min watermark, draining per-CPU
//!   lists and HighAtomic reserves, then failure. Reclaim and compaction
//!   enter here.
//! - [`claim`]: the one claim routine every free goes through: checks, then
//!   one atomic read-modify-write that takes the block from `HEAD` (an
//!   allocated head with nothing that forbids the free) to `PCP`.
//! - [`free`] and [`give`]: where a claimed block goes: front cache, per-CPU
//!   list, buddy.
//! - [`bulk`] and [`bulk_free`]: the bulk allocator and its partner;
//!   [`array_release`]: a `PageArray`'s release (its pages taken back with a
//!   plain store each, no claim).
//! - [`drain`]: emptying per-CPU lists and front caches.
//! - [`nolock`] and [`deferred`]: allocation and free that never wait (any
//!   context, signal handlers included), and the lock-free list of frees
//!   that could not take a lock.
//!
//! Invariant (conservation, checked by `check_invariants`): every managed page
//! is, at any quiescent moment, in exactly one of: a free block on a zone's
//! buddy lists, a per-CPU list, a front cache, the deferred-free list (counted
//! with the per-CPU pages), or an allocated block (a `PageArray`'s pages,
//! `ARRAY_HELD`, count as allocated).

pub mod array_release;
pub mod bulk;
pub mod bulk_free;
#[cfg(feature = "seed-variants")]
pub mod bulk_linked;
pub mod claim;
pub mod deferred;
pub mod drain;
pub mod fast;
pub mod free;
pub mod give;
pub mod hooks;
mod hotplug;
pub mod nolock;
#[cfg(all(test, feature = "std", not(loom)))]
mod nolock_tests;
pub mod slow;
mod split;
mod zeroing;

use crate::config::Config;
use crate::error::ConfigError;
use crate::front::Fronts;
use crate::memmap::{MemMap, Pageblocks};
use crate::page::flags;
use crate::pcp::PcpSet;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{Gfp, MigrateType, Order, Pfn, ZoneIdx, ZoneType, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE};
use crate::vmevent::PerCpuEvents;
use crate::zone::{self, Zone, ZoneTable};
use alloc::sync::{Arc, Weak};
use core::sync::atomic::{AtomicU64, Ordering};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Everything one allocator owns.
pub struct Core {
    /// Unique per allocator in this process (never reused).
    pub id: u64,
    pub cfg: Config,
    pub mm: MemMap,
    pub zones: ZoneTable,
    pub nodes: Box<[Node]>,
    /// The pageblock table (zone index, type and isolate bit per pageblock).
    pub pageblocks: Pageblocks,
    /// Event counters for paths that hold no lock, one block per CPU slot.
    pub events: PerCpuEvents,
    /// Per-CPU lists.
    pub pcp: PcpSet,
    /// Whether small orders go through the per-CPU lists.
    pub(crate) pcp_on: bool,
    /// Whether order-0 pages go through thread front caches.
    pub front_on: bool,
    /// The arena's base address when the inline allocation prefetches
    /// frames (`Config::prefetch_on_alloc` with backing memory), else 0.
    pub prefetch_base: usize,
    /// Whether the inline front-cache free path applies (cache on, frees wake
    /// waiters only when the waiters bit says so, and no type is cached on
    /// the page at free, the old design of the `pcp-flush` experiment).
    pub(crate) front_free_inline: bool,
    /// Every thread's front cache for this allocator, and the drain lock.
    pub fronts: Fronts,
    /// Zeroing policy and counts.
    pub zeroing: zeroing::Zeroing,
    /// Reclaim and compaction, for the slow path (`hooks`); unset in a
    /// core built alone.
    pub hooks: Weak<dyn hooks::SlowPathHooks>,
    /// No-lock allocation and free (`nolock`): the deferred-free list.
    pub nolock: nolock::NoLock,
    /// The pfn ranges not yet given to the buddy lists (`hotplug`).
    pub holes: hotplug::Holes,
}

/// One node's zonelists.
pub struct Node {
    /// Zonelist for requests that may use Movable zones / that may not,
    /// falling back to the other nodes in order.
    zonelist_movable: Vec<ZoneIdx>,
    zonelist_normal: Vec<ZoneIdx>,
    /// The same, restricted to this node (THISNODE).
    local_movable: Vec<ZoneIdx>,
    local_normal: Vec<ZoneIdx>,
}

impl Node {
    fn build(nid: usize, nodes_zones: &[Vec<ZoneIdx>], zones: &[Zone]) -> Self {
        let n = nodes_zones.len();
        let order: Vec<usize> = (0..n).map(|k| (nid + k) % n).collect();
        let pick = |movable: bool, nodes: &[usize]| -> Vec<ZoneIdx> {
            let mut v = Vec::new();
            for &node in nodes {
                // Highest zone first, as the kernel's zonelists are built.
                for &zi in nodes_zones[node].iter().rev() {
                    if movable || zones[zi.get()].ztype != ZoneType::Movable {
                        v.push(zi);
                    }
                }
            }
            v
        };
        Self {
            zonelist_movable: pick(true, &order),
            zonelist_normal: pick(false, &order),
            local_movable: pick(true, &order[..1]),
            local_normal: pick(false, &order[..1]),
        }
    }

    /// The zones a request with `gfp` may use, in the order to try them.
    #[inline(always)]
    pub fn zonelist(&self, gfp: Gfp) -> &[ZoneIdx] {
        match (gfp.contains(Gfp::MOVABLE), gfp.contains(Gfp::THISNODE)) {
            (true, false) => &self.zonelist_movable,
            (false, false) => &self.zonelist_normal,
            (true, true) => &self.local_movable,
            (false, true) => &self.local_normal,
        }
    }
}

impl Core {
    /// Map the arena, lay out nodes and zones, free every page.
    pub(crate) fn new(cfg: Config) -> Result<Self, ConfigError> {
        Self::new_in(cfg, None)
    }

    /// As [`Core::new`], with the page descriptors in `descs` when given.
    pub(crate) fn new_in(cfg: Config, descs: Option<crate::memmap::DescStorage>) -> Result<Self, ConfigError> {
        let pages = cfg.validate()?;
        let nblocks = pages / PAGEBLOCK_PAGES;
        let pageblocks = zone::new_pageblocks(nblocks as usize);
        let (mut zones, nodes_zones) = lay_out_zones(&cfg, nblocks, &pageblocks)?;
        set_watermarks(&mut zones, &nodes_zones, &cfg);
        for z in &mut zones {
            z.lockstat.on.set(cfg.lock_stats);
            if cfg.depot_on() {
                z.depot.set_cap(z.managed / cfg.depot_fraction as u64);
            }
            z.group_off = cfg.page_group_by_mobility_disabled;
            if cfg.hugepage_filler && cfg.backing == crate::config::Backing::HugePages {
                z.enable_filler();
            }
        }
        let nodes = (0..cfg.nodes as usize).map(|nid| Node::build(nid, &nodes_zones, &zones)).collect();
        let mm = MemMap::new_in(pages, cfg.backing, pageblocks.clone(), descs)?;
        let nr_cpus = cfg.nr_cpus.unwrap_or_else(crate::cpu::possible_cpus).max(1);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let pcp = PcpSet::new(&zones, nr_cpus, &cfg, id);
        let pcp_on = cfg.pcp_lists;
        let front_on = pcp_on && cfg.front_cache && crate::front::available();
        // The inline path picks its stack by the request's type: not with
        // grouping by mobility off (`Core::alloc_mt`).
        let front_alloc_inline =
            front_on && cfg.nodes == 1 && !cfg.init_on_alloc && !cfg.page_group_by_mobility_disabled;
        let front_free_inline = front_on && cfg.waiters_bit() && !cfg.pcp_mt_cache() && !cfg.init_on_free;
        let holes = hotplug::Holes::new(hotplug::validate(&cfg.holes, pages)?, zones.iter());
        let prefetch_base = if cfg.prefetch_on_alloc { mm.prefetch_base() } else { 0 };
        let core = Core {
            id,
            mm,
            zones: ZoneTable::new(zones),
            nodes,
            pageblocks,
            events: PerCpuEvents::new(nr_cpus),
            pcp,
            pcp_on,
            front_on,
            prefetch_base,
            front_free_inline,
            fronts: Fronts::new(id, (front_alloc_inline, front_free_inline)),
            zeroing: zeroing::Zeroing::new(&cfg),
            hooks: Weak::<hooks::NoHooks>::new(),
            nolock: nolock::NoLock::default(),
            holes,
            cfg,
        };

        crate::sync::prepare_parking();
        core.free_all_at_boot();
        Ok(core)
    }

    /// Register the layers above the core for its slow path (before the
    /// core is shared: the registration is read without a lock).
    pub(crate) fn set_hooks(&mut self, hooks: Weak<dyn hooks::SlowPathHooks>) {
        self.hooks = hooks;
    }

    /// The slow path's hooks, when registered and still alive.
    #[inline]
    pub fn hooks(&self) -> Option<Arc<dyn hooks::SlowPathHooks>> {
        self.hooks.upgrade()
    }

    /// Hand every page of every zone to the buddy lists, in max-order blocks.
    ///
    /// A fresh anonymous mapping is zero and not resident, so every block starts
    /// marked REPORTED, except with `Backing::Resident` (populated up front).
    fn free_all_at_boot(&self) {
        let released = self.cfg.backing != crate::config::Backing::Resident;
        let holes = self.holes.snapshot();
        for z in self.zones.iter() {
            let mut g = z.lock(&self.mm);
            // The largest aligned blocks of every part outside the holes
            // (without holes: the zone's whole pageblocks).
            for part in hotplug::present_parts(&holes, z.start..z.end) {
                for (p, o) in hotplug::aligned_blocks(part) {
                    g.add_to_free_list_marked(p, o, MigrateType::Movable, true, released);
                }
            }
        }
    }

    /// The zone of `pfn` (in range).
    #[inline(always)]
    pub fn zone_of(&self, pfn: u64) -> &Zone {
        &self.zones[zone::pb_zone(self.pageblock_word_racy(pfn))]
    }

    /// The pageblock word of `pfn` (in range): its zone and its block's type
    /// in one load. Lock-free: a concurrent retag may or may not be seen.
    #[inline(always)]
    pub(crate) fn pageblock_word_racy(&self, pfn: u64) -> u16 {
        self.pageblocks[(pfn >> PAGEBLOCK_ORDER) as usize].load(Ordering::Relaxed)
    }

    /// The migratetype whose lists serve `gfp`: its own, or Movable for
    /// every request with `page_group_by_mobility_disabled` (one type, as
    /// the kernel's Unmovable; Movable keeps every pageblock a compaction
    /// target).
    #[inline(always)]
    pub(crate) fn alloc_mt(&self, gfp: Gfp) -> MigrateType {
        if self.cfg.page_group_by_mobility_disabled {
            MigrateType::Movable
        } else {
            gfp.migratetype()
        }
    }

    /// Mark a block allocated (with `head`: `HEAD`, plus `OWNED` for a
    /// `Pages` handle) and zero it if asked.
    #[inline(always)]
    pub fn prep_new_page(&self, pfn: u64, order: Order, gfp: Gfp, head: u32) -> Pfn {
        let d = self.mm.page(pfn);
        if gfp.contains(Gfp::ZERO) {
            // A block taken straight off the buddy lists carries REPORTED for
            // this moment when its memory was released: it reads zero already.
            // With init_on_free every free page reads zero.
            let released = (d.flags() & flags::REPORTED != 0 && self.zeroing.zero_ok) || self.zeroing.zero_on_free;
            d.set_private(order, self.alloc_mt(gfp));
            d.set_flags(head);
            if released {
                self.zeroing.zeroing_skipped.fetch_add(order.pages(), Ordering::Relaxed);
            } else {
                self.mm.zero_frames(pfn, order);
            }
        } else {
            d.set_private(order, self.alloc_mt(gfp));
            d.set_flags(head);
        }
        Pfn::new(pfn)
    }

    /// init_on_free: zero the block `p` of `order` that a free has just
    /// claimed (or that migration has just emptied), before it reaches any
    /// list. Called where a free is certain, after its claim: never where a
    /// claim may still be undone (`free_contig_range` zeroes after all its
    /// claims held).
    #[inline(always)]
    pub fn init_on_free(&self, p: u64, order: Order) {
        if self.zeroing.zero_on_free {
            self.mm.zero_frames(p, order);
            self.zeroing.zeroed_on_free.fetch_add(order.pages(), Ordering::Relaxed);
        }
    }

    /// The node the calling thread prefers (its CPU's node; fake NUMA maps
    /// CPUs round-robin onto nodes).
    #[inline]
    pub fn numa_node_id(&self) -> u32 {
        let n = self.nodes.len() as u32;
        if n == 1 {
            return 0;
        }
        crate::cpu::current_cpu() % n
    }
}

/// The flags word of a new allocation: `HEAD`, plus `OWNED` when a `Pages`
/// handle will own it.
#[inline(always)]
pub const fn head_flags(owned: bool) -> u32 {
    if owned {
        flags::HEAD | flags::OWNED
    } else {
        flags::HEAD
    }
}

/// Split the arena's pageblocks into nodes and each node into a Normal zone
/// and, with `movable_zone_bytes`, a Movable zone at its top; the zones and
/// each node's zone indexes.
fn lay_out_zones(
    cfg: &Config,
    nblocks: u64,
    pageblocks: &Pageblocks,
) -> Result<(Vec<Zone>, Vec<Vec<ZoneIdx>>), ConfigError> {
    let movable_blocks = cfg.movable_zone_bytes.div_ceil(PAGE_SIZE as u64 * PAGEBLOCK_PAGES);
    let per_node = nblocks / cfg.nodes as u64;
    let mut zones = Vec::new();
    let mut nodes_zones = Vec::new();
    for nid in 0..cfg.nodes {
        let first = nid as u64 * per_node;
        let last = if nid + 1 == cfg.nodes { nblocks } else { first + per_node };
        let span = last - first;
        if movable_blocks >= span {
            return Err(ConfigError::EmptyZone {
                nid,
                zone: "Normal",
                why: format!(
                    "the Movable zone ({} pageblocks) takes all of the node's {} pageblocks",
                    movable_blocks, span
                ),
            });
        }
        let split = last - movable_blocks;
        // At most 2 * MAX_NODES zones (Config::validate): every index
        // fits the pageblock word's zone field.
        let next = |zones: &Vec<Zone>| ZoneIdx::new(zones.len()).expect("zone count bounded by MAX_NODES");
        let mut zs = vec![next(&zones)];
        let (lo, mid, hi) = (first * PAGEBLOCK_PAGES, split * PAGEBLOCK_PAGES, last * PAGEBLOCK_PAGES);
        zones.push(Zone::new(next(&zones), nid, ZoneType::Normal, lo, mid, pageblocks));
        if movable_blocks > 0 {
            zs.push(next(&zones));
            zones.push(Zone::new(next(&zones), nid, ZoneType::Movable, mid, hi, pageblocks));
        }
        nodes_zones.push(zs);
    }
    Ok((zones, nodes_zones))
}

/// Watermarks and lowmem reserves of every zone.
fn set_watermarks(zones: &mut [Zone], nodes_zones: &[Vec<ZoneIdx>], cfg: &Config) {
    let lowmem: u64 = zones.iter().filter(|z| z.ztype == ZoneType::Normal).map(|z| z.managed).sum();
    let min_kb =
        cfg.min_free_kbytes.unwrap_or_else(|| zone::clamp_min_free_kbytes(zone::default_min_free_kbytes(lowmem)));
    for zs in nodes_zones {
        let movable_managed = zs
            .iter()
            .map(|&i| &zones[i.get()])
            .filter(|z| z.ztype == ZoneType::Movable)
            .map(|z| z.managed)
            .sum::<u64>();
        for &i in zs {
            let z = &mut zones[i.get()];
            z.wmark = zone::compute_watermarks(z, min_kb / 4, lowmem, cfg.watermark_scale_factor);
            if z.ztype == ZoneType::Normal {
                z.lowmem_reserve[ZoneType::Movable as usize] = movable_managed / cfg.lowmem_reserve_ratio as u64;
            }
        }
    }
}
