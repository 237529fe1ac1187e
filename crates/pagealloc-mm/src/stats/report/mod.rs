//! The /proc reports: `buddyinfo`, `pagetypeinfo`, `zoneinfo` and `vmstat`, each
//! as a structured value and as text in the kernel's format, holding only what
//! Linux 6.18 prints (keys, names, order and widths as in the captured
//! `crates/pagealloc/tests/fixtures/proc-6.18/`, which the stats tests hold
//! every line against); and `pcpstat`, this allocator's own counters, which
//! /proc has no place for.
//!
//! Every report is built from counters read without the zone lock (see
//! [`super::snapshot`]). (The bench's build also has the old design the
//! `pagetypeinfo` experiment compares against: walk every free list under the
//! zone lock, at most 100000 entries per list, dropping and retaking the lock
//! between orders, as the kernel did before.)
//!
//! Formats, as Linux 6.18 prints them (`%6lu ` means the value right aligned in
//! six columns, then one space). Every key printed is in 6.18's files; we print
//! a subset of them, in the kernel's order:
//! - buddyinfo, one line per zone: `Node %d, zone %8s ` then `%6lu ` per order.
//! - pagetypeinfo, per node: `Page block order: %d`, `Pages per block:  %lu`, a
//!   blank line; the header `%-43s ` ("Free pages count per migrate type at
//!   order") with `%6d ` per order; per zone and type `Node %4d, zone %8s, type
//!   %12s ` then per order `>` if capped and `%6lu `; a blank line; the header
//!   `%-23s` ("Number of blocks type ") with `%12s ` per type; per zone
//!   `Node %d, zone %8s ` and `%12lu ` per type.
//! - zoneinfo, per zone: `Node %d, zone %8s`, `  pages free     %lu`, then
//!   `        %-8s %lu` for boost, min, low, high, promo, spanned, present,
//!   managed, cma; `        protection: (a, b)`; `      %-12s %lu` per zone
//!   statistic (of the kernel's, `nr_free_pages` and `nr_free_pages_blocks`);
//!   `  pagesets` with, per CPU, `    cpu: %i`, the `              count:    %i`
//!   family and `  vm stats threshold: %d`; `  node_unreclaimable:  %u` and
//!   `  start_pfn:           %lu`. On each node's first zone, right after its
//!   `Node` line, the kernel's `  per-node stats` section with `      %-12s
//!   %lu` for `nr_inactive_file` and `nr_active_file` (the page cache's LRU
//!   lists; the section's other keys are counters this allocator does not
//!   have, as are the kernel's other zone statistics).
//! - vmstat: `name value` per line: `nr_free_pages`, `nr_free_pages_blocks`,
//!   `pgalloc_normal`, `pgalloc_movable`, `pgfree`.
//! - pcpstat (ours, no kernel file): `name value` per line, the keys of
//!   [`PcpStat`].

use super::snapshot::{Snapshot, ZoneCounters};
use crate::mm::Mm;
use pagealloc_core::types::{MigrateType, MIGRATE_TYPES, NR_ORDERS, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};
use pagealloc_core::zone::Zone;
use std::fmt::{self, Write as _};

/// The kernel's cap on a pagetypeinfo count: larger counts print as `>100000`.
pub const PAGETYPEINFO_CAP: u64 = 100_000;

mod zoneinfo;
pub use zoneinfo::{PcpReport, ZoneInfo, ZoneInfoZone};

// ---------------------------------------------------------------- buddyinfo

/// /proc/buddyinfo: free blocks per order, per zone.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let info = a.stats().buddyinfo();
/// // 4 MiB, all free: one order-10 block in one Normal zone.
/// assert_eq!(info.zones[0].free[10], 1);
/// assert!(info.to_string().starts_with("Node 0, zone   Normal "));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuddyInfo {
    /// One entry per zone.
    pub zones: Vec<BuddyInfoZone>,
}

/// One line of /proc/buddyinfo.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let p = a.alloc_pages(pagealloc::Gfp::KERNEL, 0).unwrap();
/// let zone = &a.stats().buddyinfo().zones[0];
/// // The zone's free blocks hold every free page (a batch went to this CPU's list).
/// let pages: u64 = (0..11).map(|o| zone.free[o] << o).sum();
/// assert_eq!((zone.zone, pages), ("Normal", a.nr_free_pages()));
/// a.free_pages(p, 0).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuddyInfoZone {
    /// Node.
    pub nid: u32,
    /// Zone name as the kernel prints it.
    pub zone: &'static str,
    /// Free blocks per order over all migratetypes.
    pub free: [u64; NR_ORDERS],
}

impl fmt::Display for BuddyInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for z in &self.zones {
            write!(f, "Node {}, zone {:>8} ", z.nid, z.zone)?;
            for n in z.free {
                write!(f, "{n:>6} ")?;
            }
            f.write_char('\n')?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------- pagetypeinfo

/// /proc/pagetypeinfo: free blocks per order and type, and pageblocks per type.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let info = a.stats().pagetypeinfo();
/// assert_eq!(info.pages_per_block, 512);
/// assert!(info.render().starts_with("Page block order: 9\n"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageTypeInfo {
    /// Order of a pageblock.
    pub pageblock_order: u32,
    /// Pages per pageblock.
    pub pages_per_block: u64,
    /// Zones in order; the text groups them by node.
    pub zones: Vec<PageTypeInfoZone>,
    /// `Some(cap)` when the counts came from a walk that stopped at `cap` entries
    /// (the old design): a count equal to `cap` means "at least".
    pub walk_cap: Option<u64>,
}

/// One zone of /proc/pagetypeinfo.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let zone = &a.stats().pagetypeinfo().zones[0];
/// // Two pageblocks of 512 pages; per order, the types add up to buddyinfo's count.
/// assert_eq!(zone.blocks.iter().sum::<u64>(), 2);
/// let order10: u64 = zone.free.iter().map(|by_order| by_order[10]).sum();
/// assert_eq!(order10, a.stats().buddyinfo().zones[0].free[10]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageTypeInfoZone {
    /// Node.
    pub nid: u32,
    /// Zone name as the kernel prints it.
    pub zone: &'static str,
    /// Free blocks per migratetype (outer index) and order (inner index).
    pub free: [[u64; NR_ORDERS]; MIGRATE_TYPES],
    /// Pageblocks per migratetype.
    pub blocks: [u64; MIGRATE_TYPES],
}

impl PageTypeInfo {
    /// The text with the kernel's cap (`>100000`), as /proc prints it.
    pub fn render(&self) -> String {
        self.render_with(Some(PAGETYPEINFO_CAP))
    }

    /// The text with exact counts (no cap). Counts from a capped walk still
    /// print `>` at the cap, since the walk did not see past it.
    pub fn render_exact(&self) -> String {
        self.render_with(None)
    }

    fn render_with(&self, cap: Option<u64>) -> String {
        let mut s = String::with_capacity(256 + self.zones.len() * 600);
        let mut i = 0;
        while i < self.zones.len() {
            let nid = self.zones[i].nid;
            let end = i + self.zones[i..].iter().take_while(|z| z.nid == nid).count();
            self.render_node(&mut s, &self.zones[i..end], cap);
            i = end;
        }
        s
    }

    fn render_node(&self, s: &mut String, zones: &[PageTypeInfoZone], cap: Option<u64>) {
        let _ = write!(s, "Page block order: {}\nPages per block:  {}\n\n", self.pageblock_order, self.pages_per_block);
        let _ = write!(s, "{:<43} ", "Free pages count per migrate type at order");
        for o in 0..NR_ORDERS {
            let _ = write!(s, "{o:>6} ");
        }
        s.push('\n');
        for z in zones {
            for mt in MigrateType::ALL {
                s.push_str("Node ");
                push_right(s, &z.nid.to_string(), 4);
                s.push_str(", zone ");
                push_right(s, z.zone, 8);
                s.push_str(", type ");
                push_right(s, mt.name(), 12);
                s.push(' ');
                for &n in &z.free[mt.index()] {
                    let capped = self.walk_cap.is_some_and(|c| n >= c);
                    let (over, v) = match cap {
                        Some(c) if n >= c => (true, c),
                        _ => (capped, n),
                    };
                    if over {
                        s.push('>');
                    }
                    push_num(s, v, 6);
                    s.push(' ');
                }
                s.push('\n');
            }
        }
        let _ = write!(s, "\n{:<23}", "Number of blocks type ");
        for mt in MigrateType::ALL {
            let _ = write!(s, "{:>12} ", mt.name());
        }
        s.push('\n');
        for z in zones {
            let _ = write!(s, "Node {}, zone {:>8} ", z.nid, z.zone);
            for n in z.blocks {
                push_num(s, n, 12);
                s.push(' ');
            }
            s.push('\n');
        }
    }
}

/// Append `text` right-aligned in `width` columns (printf's `%Ns`).
#[inline]
fn push_right(s: &mut String, text: &str, width: usize) {
    for _ in text.len()..width {
        s.push(' ');
    }
    s.push_str(text);
}

/// Append `v` right-aligned in `width` columns (printf's `%Nlu`), without the
/// formatting machinery: the report is on the monitor's hot path.
#[inline]
fn push_num(s: &mut String, mut v: u64, width: usize) {
    let mut buf = [b' '; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let start = buf.len().saturating_sub(width).min(i);
    // The bytes are ASCII spaces and digits.
    s.push_str(std::str::from_utf8(&buf[start..]).unwrap_or_default());
}

impl fmt::Display for PageTypeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

// ------------------------------------------------------------------- vmstat

/// /proc/vmstat: `name value` lines.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let p = a.alloc_pages(pagealloc::Gfp::KERNEL, 0).unwrap();
/// assert_eq!(a.stats().vmstat().get("nr_free_pages"), Some(a.nr_free_pages()));
/// a.free_pages(p, 0).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmStat {
    /// Every item in print order.
    pub items: Vec<(&'static str, u64)>,
}

impl VmStat {
    /// The value of one item.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.items.iter().find(|(k, _)| *k == name).map(|&(_, v)| v)
    }
}

impl fmt::Display for VmStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in &self.items {
            writeln!(f, "{k} {v}")?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ pcpstat

/// `pcpstat`: this allocator's own counters, which no /proc file of Linux 6.18
/// has (they used to be printed in `vmstat` and `zoneinfo`). Printed as `name
/// value` lines in field order; the name of each is the field's name.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let before = a.stats().pcpstat();
/// let p = a.alloc_pages(pagealloc::Gfp::KERNEL, 0).unwrap();
/// a.free_pages(p, 0).unwrap();
/// assert!(a.stats().pcpstat().pcp_refill >= before.pcp_refill);
/// assert!(a.stats().pcpstat().to_string().contains("pcp_refill "));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcpStat {
    /// `pcp_refill`: refills of a per-CPU list from the buddy lists, one per
    /// refill (a refill takes a batch of blocks under one zone-lock hold).
    pub pcp_refill: u64,
    /// `pcp_drain`: drains of a per-CPU list back to the buddy lists, one per
    /// drain (over `high`, or `drain_all_pages`).
    pub pcp_drain: u64,
    /// `pcp_trylock_fail`: allocations and frees that found their per-CPU
    /// list's lock taken and went to the depot or the buddy lists instead.
    pub pcp_trylock_fail: u64,
    /// `pcp_depot_park`: pages per-CPU drains (and frees whose list was
    /// busy) parked in the depot instead of the buddy lists.
    pub pcp_depot_park: u64,
    /// `pcp_depot_take`: pages per-CPU refills took from the depot.
    pub pcp_depot_take: u64,
    /// `nr_depot`: pages in the depots now (free pages, counted in
    /// `nr_free_pages` and at order 0 of buddyinfo and pagetypeinfo).
    pub nr_depot: u64,
    /// `pgalloc_fallback_claim`: fallback allocations (from another
    /// migratetype's free list) that claimed the whole pageblock for the
    /// requested type.
    pub pgalloc_fallback_claim: u64,
    /// `pgalloc_fallback_steal`: fallback allocations that took a block from
    /// another type's list without claiming its pageblock.
    pub pgalloc_fallback_steal: u64,
    /// `pgalloc_fallback_fragmenting`: fallback allocations (claims and
    /// steals) from a block smaller than a pageblock, the kernel's
    /// `fragmenting` extfrag events.
    pub pgalloc_fallback_fragmenting: u64,
    /// `highatomic_reserve`: pageblocks moved into the HighAtomic reserve.
    pub highatomic_reserve: u64,
    /// `pgalloc_fail`: allocation requests that failed (`Err(AllocError)`).
    pub pgalloc_fail: u64,
    /// `nr_reserved_highatomic`: pages now in the HighAtomic reserve, summed
    /// over zones (the kernel keeps this per zone but prints it in no /proc
    /// file of 6.18).
    pub nr_reserved_highatomic: u64,
    // --- Free page reporting: Linux prints none of these ---
    /// `page_reporting_passes`: reporting passes run.
    pub page_reporting_passes: u64,
    /// `page_reporting_released`: pages released over the allocator's life.
    pub page_reporting_released: u64,
    /// `page_reporting_errors`: releases that failed (blocks left unreported).
    pub page_reporting_errors: u64,
    /// `page_reporting_zero_skipped`: pages `Gfp::ZERO` did not zero because
    /// they were released and read zero.
    pub page_reporting_zero_skipped: u64,
    /// `nr_free_reported`: free pages now in released (REPORTED) blocks.
    pub nr_free_reported: u64,
    /// `nr_free_resident`: free pages now resident (not released).
    pub nr_free_resident: u64,
    /// `nr_resident_estimate`: managed pages less released ones (an upper bound
    /// of the arena's resident memory).
    pub nr_resident_estimate: u64,
    // No-lock allocation and free (page_alloc/nolock.rs).
    /// `nolock_alloc`: `alloc_pages_nolock` calls that got a block.
    pub nolock_alloc: u64,
    /// `nolock_alloc_fail`: `alloc_pages_nolock` calls that failed (a lock
    /// was taken, or nothing was free).
    pub nolock_alloc_fail: u64,
    /// `nolock_trylock_fail`: per-CPU and zone locks the no-lock paths found
    /// taken.
    pub nolock_trylock_fail: u64,
    /// `nolock_free`: `free_pages_nolock` calls that freed (parked ones too).
    pub nolock_free: u64,
    /// `nolock_deferred_free`: no-lock frees parked on the deferred list.
    pub nolock_deferred_free: u64,
}

impl PcpStat {
    /// Every key with its value, in print order.
    pub fn items(&self) -> [(&'static str, u64); 24] {
        [
            ("pcp_refill", self.pcp_refill),
            ("pcp_drain", self.pcp_drain),
            ("pcp_trylock_fail", self.pcp_trylock_fail),
            ("pcp_depot_park", self.pcp_depot_park),
            ("pcp_depot_take", self.pcp_depot_take),
            ("nr_depot", self.nr_depot),
            ("pgalloc_fallback_claim", self.pgalloc_fallback_claim),
            ("pgalloc_fallback_steal", self.pgalloc_fallback_steal),
            ("pgalloc_fallback_fragmenting", self.pgalloc_fallback_fragmenting),
            ("highatomic_reserve", self.highatomic_reserve),
            ("pgalloc_fail", self.pgalloc_fail),
            ("nr_reserved_highatomic", self.nr_reserved_highatomic),
            ("page_reporting_passes", self.page_reporting_passes),
            ("page_reporting_released", self.page_reporting_released),
            ("page_reporting_errors", self.page_reporting_errors),
            ("page_reporting_zero_skipped", self.page_reporting_zero_skipped),
            ("nr_free_reported", self.nr_free_reported),
            ("nr_free_resident", self.nr_free_resident),
            ("nr_resident_estimate", self.nr_resident_estimate),
            ("nolock_alloc", self.nolock_alloc),
            ("nolock_alloc_fail", self.nolock_alloc_fail),
            ("nolock_trylock_fail", self.nolock_trylock_fail),
            ("nolock_free", self.nolock_free),
            ("nolock_deferred_free", self.nolock_deferred_free),
        ]
    }

    /// The value of one key.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.items().into_iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
}

impl fmt::Display for PcpStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in self.items() {
            writeln!(f, "{k} {v}")?;
        }
        Ok(())
    }
}

// ------------------------------------------------------- building the values

impl Snapshot {
    /// /proc/buddyinfo from these counters.
    pub fn buddyinfo(&self) -> BuddyInfo {
        BuddyInfo {
            zones: self
                .zones
                .iter()
                .map(|z| BuddyInfoZone {
                    nid: z.nid,
                    zone: z.zone.name(),
                    free: std::array::from_fn(|o| z.free_blocks_of_order(o)),
                })
                .collect(),
        }
    }

    /// /proc/pagetypeinfo from these counters.
    pub fn pagetypeinfo(&self) -> PageTypeInfo {
        PageTypeInfo {
            pageblock_order: PAGEBLOCK_ORDER,
            pages_per_block: PAGEBLOCK_PAGES,
            zones: self.zones.iter().map(ptinfo_zone).collect(),
            walk_cap: None,
        }
    }
}

fn ptinfo_zone(z: &ZoneCounters) -> PageTypeInfoZone {
    PageTypeInfoZone {
        nid: z.nid,
        zone: z.zone.name(),
        free: std::array::from_fn(|t| std::array::from_fn(|o| z.free_blocks[o][t])),
        blocks: z.block_count,
    }
}

impl Mm {
    /// The per-CPU page lists of a zone, for zoneinfo's `pagesets` section.
    pub fn pcp_report(&self, z: &Zone) -> Vec<PcpReport> {
        (0..self.pcp.nr_cpus())
            .map(|cpu| {
                let p = self.pcp.get(z.idx, cpu);
                PcpReport {
                    zone: z.idx.get(),
                    cpu: cpu as u32,
                    count: p.count_racy.get_racy() as u32,
                    high: p.high_racy.get_racy() as u32,
                    batch: p.batch,
                    high_min: p.high_min,
                    high_max: p.high_max,
                }
            })
            .collect()
    }

    /// The old design (before per-migratetype counts): count every free list
    /// by walking it under the zone lock, at most [`PAGETYPEINFO_CAP`] entries per list, dropping and
    /// retaking the lock between orders. Pageblocks are counted by scanning each
    /// pageblock's type, as the kernel's block-count section does.
    #[cfg(feature = "seed-variants")]
    pub fn pagetypeinfo_walk_lists(&self) -> PageTypeInfo {
        let zones = self
            .zones
            .iter()
            .map(|z| {
                let mut free = [[0u64; NR_ORDERS]; MIGRATE_TYPES];
                for mt in MigrateType::ALL {
                    let mut g = z.lock(&self.mm);
                    for (o, slot) in free[mt.index()].iter_mut().enumerate() {
                        let mut n = 0u64;
                        for _ in g.area.lists[o][mt.index()].iter(&self.mm) {
                            n += 1;
                            if n >= PAGETYPEINFO_CAP {
                                break;
                            }
                        }
                        *slot = n;
                        drop(g);
                        g = z.lock(&self.mm);
                    }
                }
                let mut blocks = [0u64; MIGRATE_TYPES];
                for b in 0..z.nr_pageblocks() as u64 {
                    blocks[z.pageblock_mt_racy(z.start + b * PAGEBLOCK_PAGES).index()] += 1;
                }
                PageTypeInfoZone { nid: z.nid, zone: z.ztype.name(), free, blocks }
            })
            .collect();
        PageTypeInfo {
            pageblock_order: PAGEBLOCK_ORDER,
            pages_per_block: PAGEBLOCK_PAGES,
            zones,
            walk_cap: Some(PAGETYPEINFO_CAP),
        }
    }
}
