//! /proc/zoneinfo: the lines this allocator has, and the per-CPU list
//! settings of its `pagesets` section.

use std::fmt;

/// One CPU's per-CPU page list settings in a zone (the `pagesets` section).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let p = a.alloc_pages(pagealloc::Gfp::KERNEL, 0).unwrap();
/// a.free_pages(p, 0).unwrap();
/// let lists = a.stats().pcp_report();
/// assert!(lists.iter().all(|r| r.high_min <= r.high && r.high <= r.high_max));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcpReport {
    /// Zone index (node by node, Normal then Movable).
    pub zone: usize,
    /// CPU slot.
    pub cpu: u32,
    /// Pages on this CPU's lists for the zone.
    pub count: u32,
    /// Drain threshold.
    pub high: u32,
    /// Refill and drain batch.
    pub batch: u32,
    /// Lowest value `high` may auto-tune to.
    pub high_min: u32,
    /// Highest value `high` may auto-tune to.
    pub high_max: u32,
}

/// /proc/zoneinfo (the lines this allocator has).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let info = a.stats().zoneinfo();
/// assert_eq!(info.zones.len(), 1);
/// assert!(info.to_string().starts_with("Node 0, zone   Normal\n"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneInfo {
    /// One entry per zone.
    pub zones: Vec<ZoneInfoZone>,
}

/// One zone of /proc/zoneinfo.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let zone = &a.stats().zoneinfo().zones[0];
/// assert_eq!((zone.free, zone.managed), (1024, 1024));
/// assert!(zone.min <= zone.low && zone.low <= zone.high);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneInfoZone {
    /// Node.
    pub nid: u32,
    /// Zone name as the kernel prints it.
    pub zone: &'static str,
    /// Free pages (NR_FREE_PAGES).
    pub free: u64,
    /// Watermark boost (always 0: we have no boosting).
    pub boost: u64,
    /// Watermarks.
    pub min: u64,
    /// Low watermark.
    pub low: u64,
    /// High watermark.
    pub high: u64,
    /// Promotion watermark (high plus one watermark step, as the kernel sets it).
    pub promo: u64,
    /// Pages spanned.
    pub spanned: u64,
    /// Pages present (no holes: the span).
    pub present: u64,
    /// Pages managed by the allocator.
    pub managed: u64,
    /// CMA pages (always 0).
    pub cma: u64,
    /// lowmem_reserve per zone type (Normal, Movable).
    pub protection: Vec<u64>,
    /// The node's statistics as `name value` (the page cache's LRU sizes),
    /// on the node's first zone only and empty on the others, where the
    /// kernel prints its `per-node stats` section.
    pub node_stats: Vec<(&'static str, u64)>,
    /// Zone statistics as `name value`.
    pub stats: Vec<(&'static str, u64)>,
    /// Per-CPU page lists.
    pub pagesets: Vec<PcpReport>,
    /// First pfn.
    pub start_pfn: u64,
}

impl fmt::Display for ZoneInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for z in &self.zones {
            writeln!(f, "Node {}, zone {:>8}", z.nid, z.zone)?;
            if !z.node_stats.is_empty() {
                f.write_str("  per-node stats\n")?;
                for (k, v) in &z.node_stats {
                    writeln!(f, "      {k:<12} {v}")?;
                }
            }
            writeln!(f, "  pages free     {}", z.free)?;
            for (k, v) in [
                ("boost", z.boost),
                ("min", z.min),
                ("low", z.low),
                ("high", z.high),
                ("promo", z.promo),
                ("spanned", z.spanned),
                ("present", z.present),
                ("managed", z.managed),
                ("cma", z.cma),
            ] {
                writeln!(f, "        {k:<8} {v}")?;
            }
            f.write_str("        protection: (")?;
            for (i, p) in z.protection.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{p}")?;
            }
            f.write_str(")\n")?;
            for (k, v) in &z.stats {
                writeln!(f, "      {k:<12} {v}")?;
            }
            f.write_str("  pagesets\n")?;
            for p in &z.pagesets {
                writeln!(f, "    cpu: {}", p.cpu)?;
                writeln!(f, "              count:    {}", p.count)?;
                writeln!(f, "              high:     {}", p.high)?;
                writeln!(f, "              batch:    {}", p.batch)?;
                writeln!(f, "              high_min: {}", p.high_min)?;
                writeln!(f, "              high_max: {}", p.high_max)?;
                f.write_str("  vm stats threshold: 0\n")?;
            }
            writeln!(f, "  node_unreclaimable:  0\n  start_pfn:           {}", z.start_pfn)?;
        }
        Ok(())
    }
}
