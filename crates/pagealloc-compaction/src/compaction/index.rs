//! The fragmentation index and the unusable free space index, and their
//! debugfs reports (`/sys/kernel/debug/extfrag/extfrag_index` and
//! `unusable_index`): one line per zone, `Node %d, zone %8s ` and then one
//! figure per order, thousandths printed as `%2d.%03d ` (extfrag) or
//! `%d.%03d ` (unusable), as the kernel prints them.

use pagealloc_core::types::NR_ORDERS;
use std::fmt;

/// The kernel's `contig_page_info` for one order.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FragInfo {
    pub order: u32,
    pub free_pages: u64,
    pub(crate) free_blocks_total: u64,
    pub(crate) free_blocks_suitable: u64,
}

impl FragInfo {
    /// From the free blocks per order of a zone, for a request of `order`.
    pub fn of(free: &[u64; NR_ORDERS], order: u32) -> Self {
        let mut i = FragInfo { order, ..Default::default() };
        for (o, &n) in free.iter().enumerate() {
            i.free_blocks_total += n;
            i.free_pages += n << o;
            if o as u32 >= order {
                i.free_blocks_suitable += n << (o as u32 - order);
            }
        }
        i
    }
}

/// The fragmentation index in thousandths: -1000 when a suitable block
/// exists, 0 with no free memory; towards 0 the failure is lack of memory,
/// towards 1000 it is fragmentation.
pub(crate) fn fragmentation_index(i: &FragInfo) -> i32 {
    if i.free_blocks_total == 0 {
        return 0;
    }
    if i.free_blocks_suitable != 0 {
        return -1000;
    }
    let requested = 1u64 << i.order;
    1000 - ((1000 + i.free_pages * 1000 / requested) / i.free_blocks_total) as i32
}

/// The unusable free space index in thousandths: the share of free memory
/// in blocks smaller than the order.
pub fn unusable_index(i: &FragInfo) -> i32 {
    if i.free_pages == 0 {
        return 0;
    }
    ((i.free_pages - (i.free_blocks_suitable << i.order)) * 1000 / i.free_pages) as i32
}

/// `extfrag_index` or `unusable_index`, per zone and order (thousandths).
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let (nid, zone, index) = a.compaction().extfrag_index().zones[0];
/// assert_eq!((nid, zone), (0, "Normal"));
/// assert_eq!(index[0], -1000); // -1000: an order-0 request would succeed
/// assert_eq!(a.compaction().unusable_index().zones[0].2[0], 0); // no free memory unusable at order 0
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragIndexReport {
    /// True for extfrag_index, false for unusable_index (the two print
    /// differently).
    pub extfrag: bool,
    /// (node, zone name, index per order).
    pub zones: Vec<(u32, &'static str, [i32; NR_ORDERS])>,
}

impl FragIndexReport {
    /// Build from each zone's free blocks per order.
    pub fn build(extfrag: bool, zones: impl Iterator<Item = (u32, &'static str, [u64; NR_ORDERS])>) -> Self {
        let zones = zones
            .map(|(nid, name, free)| {
                let idx = std::array::from_fn(|o| {
                    let i = FragInfo::of(&free, o as u32);
                    if extfrag {
                        fragmentation_index(&i)
                    } else {
                        unusable_index(&i)
                    }
                });
                (nid, name, idx)
            })
            .collect();
        Self { extfrag, zones }
    }
}

impl fmt::Display for FragIndexReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (nid, name, idx) in &self.zones {
            write!(f, "Node {nid}, zone {name:>8} ")?;
            for &x in idx {
                // C's `/` and `%` truncate towards zero, as Rust's do.
                if self.extfrag {
                    write!(f, "{:2}.{:03} ", x / 1000, x % 1000)?;
                } else {
                    write!(f, "{}.{:03} ", x / 1000, x % 1000)?;
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_match_the_kernel_formulas() {
        // 8 free order-0 pages, nothing larger.
        let mut free = [0u64; NR_ORDERS];
        free[0] = 8;
        // order 0: suitable blocks exist.
        assert_eq!(fragmentation_index(&FragInfo::of(&free, 0)), -1000);
        // order 3: 1000 - (1000 + 8*1000/8) / 8 = 1000 - 250 = 750.
        assert_eq!(fragmentation_index(&FragInfo::of(&free, 3)), 750);
        assert_eq!(unusable_index(&FragInfo::of(&free, 0)), 0);
        assert_eq!(unusable_index(&FragInfo::of(&free, 3)), 1000);
        assert_eq!(fragmentation_index(&FragInfo::of(&[0; NR_ORDERS], 3)), 0);
        let r = FragIndexReport { extfrag: true, zones: vec![(0, "Normal", [-1000, 750, 0, 0, 0, 0, 0, 0, 0, 0, 0])] };
        assert_eq!(
            r.to_string(),
            "Node 0, zone   Normal -1.000  0.750  0.000  0.000  0.000  0.000  0.000  0.000  0.000  0.000  0.000 \n"
        );
        let u = FragIndexReport { extfrag: false, zones: vec![(0, "Normal", [0, 500, 1000, 0, 0, 0, 0, 0, 0, 0, 0])] };
        assert!(u.to_string().starts_with("Node 0, zone   Normal 0.000 0.500 1.000 "));
    }
}
