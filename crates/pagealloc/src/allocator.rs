//! The public allocator: construction, the zonelist walk with watermarks (the
//! kernel's `get_page_from_freelist` and `__alloc_pages_slowpath`), and free.
//!
//! Fast path: pick the zonelist, check the low watermark with lock-free counters,
//! take the block. Slow path (`_slow`, cold): retry against the min watermark
//! (high-priority requests dip below it), give back HighAtomic reserves, fail.

use crate::buddy::Took;
use crate::config::Config;
use crate::cpu;
use crate::error::{AllocError, ConfigError, FreeError};
use crate::front::FrontSlot;
use crate::memmap::MemMap;
use crate::page::flags;
use crate::pcp::{self, Pcp};
use crate::stats::events::{PerCpuEvents, VmEvent};
use crate::sync::{Arc, Mutex};
use crate::types::{Gfp, MigrateType, NodeId, Pfn, ZoneType, MAX_ORDER, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE};
use crate::zone::{self, Wmark, Zone, ZoneGuard};
use crossbeam_utils::CachePadded;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64 as StdAtomicU64;

static NEXT_ID: StdAtomicU64 = StdAtomicU64::new(1);

/// A zoned buddy page-frame allocator over one arena. `Send + Sync`: share it by
/// reference or clone the handle (clones share one allocator).
#[derive(Clone)]
pub struct PageAllocator {
    pub(crate) inner: Arc<Inner>,
}

/// Everything the allocator owns.
pub(crate) struct Inner {
    /// Unique per allocator in this process (never reused).
    pub(crate) id: u64,
    pub(crate) cfg: Config,
    pub(crate) mm: MemMap,
    pub(crate) zones: Box<[Zone]>,
    pub(crate) nodes: Box<[Node]>,
    /// The pageblock table (zone index, type and isolate bit per pageblock).
    pub(crate) pageblocks: zone::Pageblocks,
    /// Event counters for paths that hold no lock, one block per CPU slot
    /// (summed by `vmstat` with the zones', per-CPU lists' and front caches' blocks).
    pub(crate) events: PerCpuEvents,
    /// Per-CPU table size (CPU ids are taken modulo it).
    pub(crate) nr_cpus: usize,
    /// Per-CPU lists, `zone * nr_cpus + cpu`.
    pub(crate) pcps: Box<[CachePadded<Pcp>]>,
    /// Whether small orders go through the per-CPU lists.
    pub(crate) pcp_on: bool,
    /// Whether order-0 pages go through thread front caches.
    pub(crate) front_on: bool,
    /// Whether the inline front-cache allocation path applies (cache on, one
    /// node: no node choice to make).
    pub(crate) front_alloc_inline: bool,
    /// Whether the inline front-cache free path applies (cache on, and frees
    /// wake waiters only when the waiters bit says so).
    pub(crate) front_free_inline: bool,
    /// Every thread's front cache for this allocator.
    pub(crate) fronts: Mutex<Vec<std::sync::Arc<FrontSlot>>>,
    /// Serialises drainers of front caches (`drain_all_pages`, isolation, checks).
    pub(crate) drain_lock: Mutex<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for s in self.fronts.lock().iter() {
            s.detached.store(true, crate::sync::Ordering::Release);
        }
    }
}

/// One node's zones and its zonelists.
pub(crate) struct Node {
    /// Zonelist for requests that may use Movable zones / that may not,
    /// falling back to the other nodes in order.
    zonelist_movable: Vec<usize>,
    zonelist_normal: Vec<usize>,
    /// The same, restricted to this node (THISNODE).
    local_movable: Vec<usize>,
    local_normal: Vec<usize>,
}

/// Internal allocation flags derived from gfp and the pass (the kernel's ALLOC_*).
#[derive(Clone, Copy)]
pub(crate) struct AllocFlags {
    pub(crate) wmark: Wmark,
    pub(crate) high: bool,
}

impl PageAllocator {
    /// Build an allocator: map the arena, lay out nodes and zones, free every page.
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        let pages = cfg.validate()?;
        let nblocks = pages / PAGEBLOCK_PAGES;
        let per_node = nblocks / cfg.nodes as u64;
        let movable_blocks = cfg.movable_zone_bytes.div_ceil(PAGE_SIZE as u64 * PAGEBLOCK_PAGES);
        // Zone indexes are a byte of the pageblock word: two zones per node.
        if cfg.nodes > 127 {
            return Err(ConfigError::Invalid { field: "nodes", why: "at most 127 nodes".into() });
        }
        let pageblocks = zone::new_pageblocks(nblocks as usize);
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
            let mut zs = vec![zones.len()];
            zones.push(Zone::new(
                zones.len(),
                nid,
                ZoneType::Normal,
                first * PAGEBLOCK_PAGES,
                split * PAGEBLOCK_PAGES,
                &pageblocks,
            ));
            if movable_blocks > 0 {
                zs.push(zones.len());
                zones.push(Zone::new(
                    zones.len(),
                    nid,
                    ZoneType::Movable,
                    split * PAGEBLOCK_PAGES,
                    last * PAGEBLOCK_PAGES,
                    &pageblocks,
                ));
            }
            nodes_zones.push(zs);
        }
        // Watermarks and lowmem reserves.
        let lowmem: u64 = zones.iter().filter(|z| z.ztype == ZoneType::Normal).map(|z| z.managed).sum();
        let min_kb =
            cfg.min_free_kbytes.unwrap_or_else(|| zone::clamp_min_free_kbytes(zone::default_min_free_kbytes(lowmem)));
        for zs in &nodes_zones {
            let movable_managed =
                zs.iter().map(|&i| &zones[i]).filter(|z| z.ztype == ZoneType::Movable).map(|z| z.managed).sum::<u64>();
            for &i in zs {
                let z = &mut zones[i];
                z.wmark = zone::compute_watermarks(z, min_kb / 4, lowmem, cfg.watermark_scale_factor);
                if z.ztype == ZoneType::Normal {
                    z.lowmem_reserve[ZoneType::Movable as usize] = movable_managed / cfg.lowmem_reserve_ratio as u64;
                }
            }
        }
        let nodes = (0..cfg.nodes as usize).map(|nid| Node::build(nid, &nodes_zones, &zones)).collect();
        let mm = MemMap::new(pages, cfg.backing)?;
        let nr_cpus = cfg.nr_cpus.unwrap_or_else(cpu::possible_cpus).max(1);
        let mut pcps = Vec::with_capacity(zones.len() * nr_cpus);
        for z in &zones {
            let batch = cfg.pcp_batch.unwrap_or_else(|| pcp::default_batch(z.managed)).max(1);
            let (lo, hi) = pcp::high_bounds(
                z.managed,
                z.wmark[Wmark::Low as usize],
                nr_cpus,
                batch,
                cfg.percpu_pagelist_high_fraction,
            );
            for _ in 0..nr_cpus {
                pcps.push(CachePadded::new(Pcp::new(batch, lo, hi)));
            }
        }
        let pcp_on = cfg.pcp_lists;
        #[cfg(not(loom))]
        let front_on = pcp_on && cfg.front_cache && crate::front::membarrier::available();
        #[cfg(loom)]
        let front_on = false;
        let (front_alloc_inline, front_free_inline) =
            (front_on && cfg.nodes == 1, front_on && cfg.page_lock_waiters_bit);
        let events = PerCpuEvents::new(nr_cpus);
        let inner = Inner {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cfg,
            mm,
            zones: zones.into_boxed_slice(),
            nodes,
            pageblocks,
            nr_cpus,
            pcps: pcps.into_boxed_slice(),
            pcp_on,
            front_on,
            front_alloc_inline,
            front_free_inline,
            fronts: Mutex::new(Vec::new()),
            drain_lock: Mutex::new(()),
            events,
        };
        for z in inner.zones.iter() {
            let mut g = z.lock(&inner.mm);
            let mut p = z.start;
            while p < z.end {
                let mut o = MAX_ORDER;
                while p & ((1 << o) - 1) != 0 || p + (1 << o) > z.end {
                    o -= 1;
                }
                g.add_to_free_list(p, o, MigrateType::Movable, true);
                p += 1 << o;
            }
        }
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The settings this allocator was built with.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    /// Pages in the arena (all of them are managed: there are no holes).
    pub fn nr_pages(&self) -> u64 {
        self.inner.mm.nr_pages()
    }

    /// Pages the allocator manages.
    pub fn managed_pages(&self) -> u64 {
        self.inner.zones.iter().map(|z| z.managed).sum()
    }

    /// Free pages in the buddy lists outside isolated blocks (NR_FREE_PAGES),
    /// read without locks. Pages on per-CPU lists are not counted.
    pub fn nr_free_pages(&self) -> u64 {
        self.inner.zones.iter().map(|z| z.free_pages_racy()).sum()
    }

    /// Number of nodes.
    pub fn nr_nodes(&self) -> u32 {
        self.inner.nodes.len() as u32
    }

    /// True when hugepage backing was asked for and the kernel refused it.
    pub fn hugepage_fallback(&self) -> bool {
        self.inner.mm.hugepage_fallback
    }

    /// The memory of a frame (`None` without backing or out of range).
    pub fn page_address(&self, pfn: Pfn) -> Option<NonNull<u8>> {
        self.inner.mm.page_address(pfn)
    }

    /// The node a pfn belongs to (`None` out of range).
    pub fn pfn_to_nid(&self, pfn: Pfn) -> Option<NodeId> {
        (pfn.as_u64() < self.nr_pages()).then(|| NodeId(self.inner.zone_of(pfn.as_u64()).nid))
    }

    /// The node the calling thread prefers (its CPU's node; fake NUMA maps CPUs
    /// round-robin onto nodes).
    #[inline]
    pub fn numa_node_id(&self) -> u32 {
        let n = self.inner.nodes.len() as u32;
        if n == 1 {
            return 0;
        }
        cpu::current_cpu() % n
    }

    /// Allocate `1 << order` contiguous pages on the caller's node (or, failing
    /// that, another unless `Gfp::THISNODE`).
    ///
    /// An order-0 request that this thread's front cache can serve is handled
    /// inline in the caller; everything else is a call.
    #[inline(always)]
    pub fn alloc_pages(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        if order == 0 {
            if let Some(p) = self.inner.front_alloc_fast(gfp) {
                return Ok(p);
            }
        }
        self.alloc_pages_node(self.numa_node_id(), gfp, order)
    }

    /// Allocate `1 << order` contiguous pages, preferring node `nid`.
    #[inline(never)]
    pub fn alloc_pages_node(&self, nid: u32, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        if order > MAX_ORDER {
            return Err(AllocError::InvalidOrder { order });
        }
        if crate::failinject::alloc_fails(self.inner.id, order) {
            return Err(AllocError::Injected);
        }
        let inner = &*self.inner;
        let Some(node) = inner.nodes.get(nid as usize) else {
            return Err(AllocError::InvalidNode { nid });
        };
        let zl = node.zonelist(gfp);
        let af = AllocFlags { wmark: Wmark::Low, high: false };
        let mt = gfp.migratetype();
        if inner.pcp_on && !(order > 0 && gfp.contains(Gfp::HIGH)) {
            if let Some(pi) = pcp::pindex(order, mt) {
                if order == 0 && inner.front_on {
                    if let Some(p) = inner.front_alloc(nid, mt, zl, gfp) {
                        return Ok(inner.prep_new_page(p, 0, gfp));
                    }
                }
                for &zi in zl {
                    if let Some(p) = inner.pcp_alloc(&inner.zones[zi], order, mt, pi, af, gfp) {
                        return Ok(inner.prep_new_page(p, order, gfp));
                    }
                }
                return inner.alloc_slow(zl, order, gfp);
            }
        }
        for &zi in zl {
            let z = &inner.zones[zi];
            if inner.watermark_ok(z, order, af, gfp) {
                if let Some(p) = inner.rmqueue(z, order, gfp, af, false) {
                    return Ok(inner.prep_new_page(p, order, gfp));
                }
            }
        }
        inner.alloc_slow(zl, order, gfp)
    }

    /// Free a block allocated with `alloc_pages*` of the same order. Misuse is
    /// reported without changing anything.
    ///
    /// An order-0 page that this thread's front cache can take is handled
    /// inline in the caller; everything else (misuse included) is a call.
    #[inline(always)]
    pub fn free_pages(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        if order == 0 && self.inner.front_free_fast(pfn) {
            return Ok(());
        }
        self.free_pages_slow(pfn, order)
    }

    #[inline(never)]
    fn free_pages_slow(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        let inner = &*self.inner;
        let p = pfn.as_u64();
        if inner.pcp_on && order <= PAGEBLOCK_ORDER && p < inner.mm.nr_pages() {
            let z = inner.zone_of(p);
            // The pageblock's effective type: isolated blocks bypass the lists.
            let mt = z.pageblock_mt_racy(p);
            if mt.is_pcptype() {
                if let Some(pi) = pcp::pindex(order, mt) {
                    // Checks (all of them, O(1)) before claiming, so misuse
                    // never changes anything.
                    let old = inner.claim_for_free_fast(pfn, order)?;
                    inner.free_claimed(z, p, order, mt, pi);
                    if old & flags::WAITERS != 0 || !inner.cfg.page_lock_waiters_bit {
                        inner.wake_freed(pfn);
                    }
                    return Ok(());
                }
            }
        }
        let old = inner.claim_for_free(pfn, order, 0)?;
        inner.free_to_buddy(inner.zone_of(p), p, order, false);
        if old & flags::WAITERS != 0 || !inner.cfg.page_lock_waiters_bit {
            inner.wake_freed(pfn);
        }
        Ok(())
    }
}

impl Node {
    fn build(nid: usize, nodes_zones: &[Vec<usize>], zones: &[Zone]) -> Self {
        let n = nodes_zones.len();
        let order: Vec<usize> = (0..n).map(|k| (nid + k) % n).collect();
        let pick = |movable: bool, nodes: &[usize]| -> Vec<usize> {
            let mut v = Vec::new();
            for &node in nodes {
                // Highest zone first, as the kernel's zonelists are built.
                for &zi in nodes_zones[node].iter().rev() {
                    if movable || zones[zi].ztype != ZoneType::Movable {
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

    #[inline(always)]
    pub(crate) fn zonelist(&self, gfp: Gfp) -> &[usize] {
        match (gfp.contains(Gfp::MOVABLE), gfp.contains(Gfp::THISNODE)) {
            (true, false) => &self.zonelist_movable,
            (false, false) => &self.zonelist_normal,
            (true, true) => &self.local_movable,
            (false, true) => &self.local_normal,
        }
    }
}

impl Inner {
    #[inline(always)]
    pub(crate) fn zone_of(&self, pfn: u64) -> &Zone {
        &self.zones[zone::pb_zone(self.pageblock_word_racy(pfn))]
    }

    /// The pageblock word of `pfn` (in range): its zone and its block's type
    /// in one load. Lock-free: a concurrent retag may or may not be seen.
    #[inline(always)]
    pub(crate) fn pageblock_word_racy(&self, pfn: u64) -> u16 {
        self.pageblocks[(pfn >> PAGEBLOCK_ORDER) as usize].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The kernel's `__zone_watermark_ok`, on lock-free counters.
    #[inline]
    pub(crate) fn watermark_ok(&self, z: &Zone, order: u32, af: AllocFlags, gfp: Gfp) -> bool {
        let mut min = z.wmark[af.wmark as usize];
        let highest = if gfp.contains(Gfp::MOVABLE) { ZoneType::Movable } else { ZoneType::Normal };
        let mut free = z.free_pages_racy() as i64 - ((1i64 << order) - 1);
        if af.high {
            min -= min / 2;
            min -= min / 4;
        } else {
            free -= z.stats.nr_reserved_highatomic.get_racy() as i64;
        }
        if free <= (min + z.lowmem_reserve[highest as usize]) as i64 {
            return false;
        }
        order == 0 || ZoneGuard::has_free_block_racy(z, order, af.high)
    }

    /// Take a block from a zone's buddy lists.
    #[inline]
    pub(crate) fn rmqueue(&self, z: &Zone, order: u32, gfp: Gfp, af: AllocFlags, trylock_failed: bool) -> Option<u64> {
        let mt = gfp.migratetype();
        let mut g = z.lock(&self.mm);
        let highatomic = af.high && order > 0;
        let mut took = None;
        if highatomic {
            took = g.rmqueue_smallest(order, MigrateType::HighAtomic).map(|p| (p, Took::Own));
        }
        if took.is_none() {
            took = g.rmqueue_locked(order, mt);
        }
        let ev = &z.stats.events;
        if trylock_failed {
            ev.add_owner(VmEvent::PcpTrylockFail, 1);
        }
        let (pfn, how) = took?;
        self.count_fallback(z, how);
        if highatomic && z.pageblock_mt_racy(pfn) != MigrateType::HighAtomic && g.reserve_highatomic_locked(pfn, order)
        {
            ev.add_owner(VmEvent::HighatomicReserve, 1);
        }
        ev.add_owner(crate::fastpath::alloc_event(z), 1 << order);
        Some(pfn)
    }

    /// Count a fallback claim or steal (caller holds the zone lock).
    #[inline(always)]
    pub(crate) fn count_fallback(&self, z: &Zone, how: Took) {
        match how {
            Took::Own => {}
            Took::Claimed => z.stats.events.add_owner(VmEvent::FallbackClaim, 1),
            Took::Stolen => z.stats.events.add_owner(VmEvent::FallbackSteal, 1),
        }
    }

    /// Mark a block allocated and zero it if asked.
    #[inline(always)]
    pub(crate) fn prep_new_page(&self, pfn: u64, order: u32, gfp: Gfp) -> Pfn {
        self.mm.page(pfn).set_allocated(order, gfp.migratetype());
        if gfp.contains(Gfp::ZERO) {
            self.mm.zero_frames(pfn, order);
        }
        Pfn::new(pfn)
    }

    #[cold]
    #[inline(never)]
    fn alloc_slow(&self, zl: &[usize], order: u32, gfp: Gfp) -> Result<Pfn, AllocError> {
        let af = AllocFlags { wmark: Wmark::Min, high: gfp.contains(Gfp::HIGH) };
        for attempt in 0..2 {
            for &zi in zl {
                let z = &self.zones[zi];
                if self.watermark_ok(z, order, af, gfp) {
                    if let Some(p) = self.rmqueue(z, order, gfp, af, false) {
                        return Ok(self.prep_new_page(p, order, gfp));
                    }
                }
            }
            if attempt == 0 {
                // Pages parked on per-CPU lists and front caches count as free
                // memory the request may have: bring them back first.
                let mut any = self.pcp_on;
                if self.pcp_on {
                    self.drain_all();
                }
                for &zi in zl {
                    let z = &self.zones[zi];
                    any |= z.lock(&self.mm).unreserve_highatomic_locked(gfp.migratetype(), true);
                }
                if !any {
                    break;
                }
            }
        }
        self.events.count(VmEvent::AllocFail, 1);
        Err(AllocError::NoMemory { order })
    }

    /// O(1) checks before a free; returns the head's flags.
    #[inline(always)]
    pub(crate) fn check_free(&self, pfn: Pfn, order: u32) -> Result<u32, FreeError> {
        let p = pfn.as_u64();
        if order > MAX_ORDER {
            return Err(FreeError::InvalidOrder { pfn, order });
        }
        if p >= self.mm.nr_pages() {
            return Err(FreeError::OutOfRange { pfn, nr_pages: self.mm.nr_pages() });
        }
        if p & ((1 << order) - 1) != 0 {
            return Err(FreeError::Misaligned { pfn, order });
        }
        let d = self.mm.page(p);
        let f = d.flags();
        if f & flags::HEAD == 0 {
            return Err(self.diagnose_free(pfn, order));
        }
        if d.order() != order {
            return Err(FreeError::WrongOrder { pfn, order, actual: d.order() });
        }
        if f & (flags::LOCKED | flags::WRITEBACK) != 0 {
            return Err(if f & flags::LOCKED != 0 { FreeError::Locked { pfn } } else { FreeError::Writeback { pfn } });
        }
        Ok(f)
    }

    /// Why a pfn that is not an allocated head cannot be freed: O(MAX_ORDER).
    #[cold]
    #[inline(never)]
    pub(crate) fn diagnose_free(&self, pfn: Pfn, _order: u32) -> FreeError {
        let p = pfn.as_u64();
        let f = self.mm.page(p).flags();
        if f & (flags::BUDDY | flags::PCP) != 0 {
            return FreeError::DoubleFree { pfn };
        }
        for k in 1..=MAX_ORDER {
            let h = p & !((1u64 << k) - 1);
            let d = self.mm.page(h);
            let hf = d.flags();
            if h != p && hf & (flags::BUDDY | flags::HEAD | flags::PCP) != 0 && d.order() >= k {
                return if hf & flags::HEAD != 0 {
                    FreeError::InsideBlock { pfn, head: Pfn::new(h) }
                } else {
                    FreeError::DoubleFree { pfn }
                };
            }
        }
        FreeError::NotAllocated { pfn }
    }

    /// A page was freed while its waiters bit was set: wake whoever waits so they
    /// see it is gone (page-lock waiters re-check and report NotAllocated).
    #[cold]
    pub(crate) fn wake_freed(&self, pfn: Pfn) {
        crate::pagelock::wake_freed(&self.mm.page(pfn.as_u64()).flags);
    }
}
