//! Vocabulary types shared by every layer: page frame numbers, orders,
//! migratetypes, GFP flags and CPU ids.

#[allow(unused_imports)]
use crate::prelude::*;
use core::fmt;
use core::num::NonZeroU64;

/// log2 of the page size.
pub(crate) const PAGE_SHIFT: u32 = 12;
/// Bytes per page frame.
pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;
/// Largest order the buddy allocator hands out (the kernel's `MAX_PAGE_ORDER`).
pub const MAX_ORDER: u32 = 10;
/// Number of orders, 0..=MAX_ORDER (the kernel's `NR_PAGE_ORDERS`).
pub const NR_ORDERS: usize = MAX_ORDER as usize + 1;
/// Order of a pageblock: the unit that carries a migratetype.
pub const PAGEBLOCK_ORDER: u32 = 9;
/// Pages per pageblock.
pub const PAGEBLOCK_PAGES: u64 = 1 << PAGEBLOCK_ORDER;

/// Bytes in a pageblock (2 MiB): the arena is a whole number of them.
pub(crate) const PAGEBLOCK_BYTES: u64 = PAGEBLOCK_PAGES * PAGE_SIZE as u64;
/// The largest arena: the last pageblock multiple below 2^32 - 2 pages (pfn
/// links are 32 bits and two values are reserved).
pub(crate) const MAX_ARENA_BYTES: u64 = ((u32::MAX as u64 - 1) / PAGEBLOCK_PAGES * PAGEBLOCK_PAGES) * PAGE_SIZE as u64;

/// A page frame number: the index of a 4 KiB frame in the arena.
///
/// Pfns are plain numbers so users can do arithmetic over contiguous ranges.
/// Every value but `u64::MAX` is a pfn (`u64::MAX` is reserved, so that
/// `Option<Pfn>` is 8 bytes, like the kernel's page pointer array where NULL is
/// a hole: the bulk allocator's slots are `Option<Pfn>`).
/// `repr(transparent)`: laid out as its `NonZeroU64` (the number plus one).
///
/// # Examples
///
/// ```
/// use pagealloc::Pfn;
/// let p = Pfn::new(0x200);
/// assert_eq!(p.add(3).as_u64(), 0x203);
/// assert_eq!(p.checked_sub(0x201), None);
/// assert_eq!(std::mem::size_of::<Option<Pfn>>(), 8);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Pfn(NonZeroU64);

impl Pfn {
    /// The largest pfn (`u64::MAX - 1`).
    pub const MAX: Pfn = Pfn::new(u64::MAX - 1);

    /// Wrap a raw frame number.
    ///
    /// # Panics
    /// If `pfn` is `u64::MAX`, the one value that is not a pfn.
    #[inline]
    #[must_use]
    pub const fn new(pfn: u64) -> Self {
        // Stored plus one: order and equality are the numbers'.
        match NonZeroU64::new(pfn.wrapping_add(1)) {
            Some(v) => Self(v),
            None => panic!("u64::MAX is not a pfn"),
        }
    }
    /// A pfn from a 32-bit frame number (how lists store them): no
    /// `u64::MAX` check, so copies of many vectorise.
    #[inline(always)]
    pub const fn from_u32(pfn: u32) -> Self {
        Self(NonZeroU64::MIN.saturating_add(pfn as u64))
    }

    /// The raw frame number.
    #[inline]
    #[must_use]
    pub const fn as_u64(self) -> u64 {
        self.0.get() - 1
    }
    /// The frame `n` pages after this one.
    ///
    /// Arithmetic is checked in every build profile: it never wraps.
    /// [`Pfn::checked_add`] is the non-panicking form.
    ///
    /// # Panics
    /// If the result would pass [`Pfn::MAX`].
    #[inline]
    #[must_use]
    #[track_caller]
    pub const fn add(self, n: u64) -> Self {
        match self.checked_add(n) {
            Some(p) => p,
            None => panic!("pfn arithmetic overflow: the result would pass Pfn::MAX"),
        }
    }
    /// The frame `n` pages after this one, or `None` past [`Pfn::MAX`].
    #[inline]
    #[must_use]
    pub const fn checked_add(self, n: u64) -> Option<Self> {
        match self.as_u64().checked_add(n) {
            Some(v) if v <= Pfn::MAX.as_u64() => Some(Self::new(v)),
            _ => None,
        }
    }
    /// The frame `n` pages before this one, or `None` below pfn 0.
    #[inline]
    #[must_use]
    pub const fn checked_sub(self, n: u64) -> Option<Self> {
        match self.as_u64().checked_sub(n) {
            Some(v) => Some(Self::new(v)),
            None => None,
        }
    }
    #[inline]
    pub const fn idx(self) -> usize {
        self.as_u64() as usize
    }
}

impl Default for Pfn {
    /// Pfn 0.
    fn default() -> Self {
        Pfn::new(0)
    }
}

impl fmt::Debug for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pfn {:#x}", self.as_u64())
    }
}
impl fmt::Display for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.as_u64())
    }
}

/// A buddy order known to be at most [`MAX_ORDER`]: a block of
/// `1 << order` pages.
///
/// The public API takes orders as plain `u32` (as the kernel's does); the
/// façade checks each once and every layer below takes an `Order`, so an
/// order cannot be confused with a pfn, a count or a list index, and every
/// per-order array indexed by one is in bounds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(transparent)]
pub struct Order(u32);

impl Order {
    /// Order 0: one page.
    pub const ZERO: Order = Order(0);
    /// The largest order, [`MAX_ORDER`].
    pub const MAX: Order = Order(MAX_ORDER);
    /// The pageblock's order, [`PAGEBLOCK_ORDER`].
    pub const PAGEBLOCK: Order = Order(PAGEBLOCK_ORDER);
    /// Every order, lowest first.
    pub const ALL: [Order; NR_ORDERS] = {
        let mut all = [Order(0); NR_ORDERS];
        let mut i = 0;
        while i < NR_ORDERS {
            all[i] = Order(i as u32);
            i += 1;
        }
        all
    };

    /// `order` when it is at most [`MAX_ORDER`].
    #[inline(always)]
    pub const fn new(order: u32) -> Option<Order> {
        if order <= MAX_ORDER {
            Some(Order(order))
        } else {
            None
        }
    }
    /// The order as a number.
    #[inline(always)]
    pub const fn get(self) -> u32 {
        self.0
    }
    /// The order as an index into per-order arrays (always `< NR_ORDERS`).
    #[inline(always)]
    pub const fn idx(self) -> usize {
        self.0 as usize
    }
    /// Pages in a block of this order.
    #[inline(always)]
    pub const fn pages(self) -> u64 {
        1 << self.0
    }
    /// Pages in a block of this order, as the per-CPU lists count them.
    #[inline(always)]
    pub(crate) const fn pages_u32(self) -> u32 {
        1 << self.0
    }
    /// The next order up, or None at [`MAX_ORDER`].
    #[inline(always)]
    pub const fn next(self) -> Option<Order> {
        Order::new(self.0 + 1)
    }
    /// The order `n` above this one, or None past [`MAX_ORDER`].
    #[inline(always)]
    pub const fn raised(self, n: u32) -> Option<Order> {
        match self.0.checked_add(n) {
            Some(o) => Order::new(o),
            None => None,
        }
    }
    /// This order and every one above it, lowest first.
    #[inline]
    pub fn and_above(self) -> impl DoubleEndedIterator<Item = Order> {
        Order::ALL[self.idx()..].iter().copied()
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Index of a zone in the allocator's zone table (every node's zones, node
/// by node, lowest zone first), as pageblock words and zonelists record it:
/// at most 255 zones (the pageblock word's zone field is 8 bits).
///
/// A newtype so that a zone index is never taken for a node id, an order or
/// a count; the zone table (`zone::ZoneTable`) is indexed by it alone.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(transparent)]
pub struct ZoneIdx(u8);

impl ZoneIdx {
    /// The table's first zone (node 0's lowest).
    pub const FIRST: ZoneIdx = ZoneIdx(0);

    /// Zone `i`, or None past the 8-bit zone field.
    #[inline]
    pub const fn new(i: usize) -> Option<ZoneIdx> {
        if i <= u8::MAX as usize {
            Some(ZoneIdx(i as u8))
        } else {
            None
        }
    }
    /// Zone `i` from a pageblock word's 8-bit field.
    #[inline(always)]
    pub(crate) const fn from_u8(i: u8) -> ZoneIdx {
        ZoneIdx(i)
    }
    /// The index as a number.
    #[inline(always)]
    pub const fn get(self) -> usize {
        self.0 as usize
    }
    /// The index as the pageblock word's zone field stores it.
    #[inline(always)]
    pub(crate) const fn as_u8(self) -> u8 {
        self.0
    }
}

impl fmt::Display for ZoneIdx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A migratetype: what kind of allocation a pageblock serves.
///
/// Values and names are the kernel's without CMA (as this machine's
/// /proc/pagetypeinfo prints them).
///
/// # Examples
///
/// ```
/// use pagealloc::{Gfp, MigrateType};
/// assert_eq!(Gfp::MOVABLE.migratetype(), MigrateType::Movable);
/// assert_eq!(MigrateType::Reclaimable.name(), "Reclaimable");
/// assert_eq!(MigrateType::from_index(MigrateType::HighAtomic.index()), MigrateType::HighAtomic);
/// assert!(!MigrateType::Isolate.is_pcptype()); // no per-CPU list, no fallback
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(u8)]
pub enum MigrateType {
    /// Kernel allocations that never move.
    Unmovable = 0,
    /// User pages that could be migrated.
    Movable = 1,
    /// Caches that can be reclaimed.
    Reclaimable = 2,
    /// Reserve for high-order atomic allocations.
    HighAtomic = 3,
    /// Blocks taken out of the allocator by isolation.
    Isolate = 4,
}

/// Number of migratetypes (free lists per order).
pub const MIGRATE_TYPES: usize = 5;
/// The three types that have fallbacks and per-CPU lists.
pub const MIGRATE_PCPTYPES: usize = 3;

impl MigrateType {
    /// All types in index order.
    pub const ALL: [MigrateType; MIGRATE_TYPES] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
        MigrateType::HighAtomic,
        MigrateType::Isolate,
    ];

    /// The name the kernel prints.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
            MigrateType::HighAtomic => "HighAtomic",
            MigrateType::Isolate => "Isolate",
        }
    }

    /// Index into per-type arrays.
    #[inline]
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Inverse of [`MigrateType::index`]; out-of-range values read as Unmovable.
    #[inline]
    #[must_use]
    pub const fn from_index(i: usize) -> Self {
        match i {
            1 => MigrateType::Movable,
            2 => MigrateType::Reclaimable,
            3 => MigrateType::HighAtomic,
            4 => MigrateType::Isolate,
            _ => MigrateType::Unmovable,
        }
    }

    /// One of the three types with fallbacks (blocks of these may merge).
    #[inline]
    #[must_use]
    pub const fn is_pcptype(self) -> bool {
        (self as u8) < MIGRATE_PCPTYPES as u8
    }

    /// Where a request of this type looks when its own lists are empty.
    pub const fn fallbacks(self) -> [MigrateType; 2] {
        match self {
            MigrateType::Unmovable => [MigrateType::Reclaimable, MigrateType::Movable],
            MigrateType::Movable => [MigrateType::Reclaimable, MigrateType::Unmovable],
            _ => [MigrateType::Unmovable, MigrateType::Movable],
        }
    }
}

impl fmt::Display for MigrateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

bitflags::bitflags! {
    /// Allocation flags (the kernel's gfp_t, reduced to what user space needs).
    ///
    /// # Examples
    ///
    /// ```
    /// use pagealloc::{Config, Gfp, MigrateType, PageAllocator};
    /// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
    /// let gfp = Gfp::RECLAIMABLE | Gfp::ZERO; // flags combine as bits
    /// assert_eq!(gfp.migratetype(), MigrateType::Reclaimable);
    /// let pfn = a.alloc_pages(gfp, 0).unwrap();
    /// a.free_pages(pfn, 0).unwrap();
    /// assert_eq!(Gfp::KERNEL, Gfp::empty()); // unmovable: no type bit
    /// ```
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
    pub struct Gfp: u32 {
        /// Memory that may be moved (pageblocks of type Movable; may use the Movable zone).
        const MOVABLE = 1 << 0;
        /// Memory that can be reclaimed (pageblocks of type Reclaimable).
        const RECLAIMABLE = 1 << 1;
        /// High priority: may dip below the min watermark, may use the HighAtomic reserve.
        const HIGH = 1 << 2;
        /// Zero the returned memory (a no-op without backing).
        const ZERO = 1 << 3;
        /// Never leave the requested node.
        const THISNODE = 1 << 4;
        /// Never compact directly in the slow path (see `compaction`).
        const NO_COMPACT = 1 << 8;
        /// Unmovable kernel-style allocation: no type bits (the kernel's GFP_KERNEL).
        const KERNEL = 0;
        /// Same as [`Gfp::KERNEL`], named for readers of kernel code.
        const UNMOVABLE = 0;
        /// High priority and never blocks (the kernel's GFP_ATOMIC).
        const ATOMIC = Self::HIGH.bits();
        /// User pages: movable (the kernel's GFP_HIGHUSER_MOVABLE).
        const USER = Self::MOVABLE.bits();
    }
}

impl Gfp {
    /// The migratetype a request with these flags asks for.
    #[inline]
    #[must_use]
    pub const fn migratetype(self) -> MigrateType {
        if self.contains(Gfp::MOVABLE) {
            MigrateType::Movable
        } else if self.contains(Gfp::RECLAIMABLE) {
            MigrateType::Reclaimable
        } else {
            MigrateType::Unmovable
        }
    }
}

/// Identifier of a CPU as the scheduler numbers it.
///
/// # Examples
///
/// ```
/// use pagealloc::{possible_cpus, CpuId};
/// let first = CpuId(0); // CPUs are numbered from 0 up to possible_cpus()
/// assert!((first.0 as usize) < possible_cpus());
/// assert!(first < CpuId(1));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct CpuId(pub u32);

/// Identifier of a (fake) NUMA node.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, NodeId, PageAllocator};
/// let a = PageAllocator::new(Config::small(8 << 20).nodes(2)).unwrap();
/// let pfn = a.alloc_pages_node(NodeId(1), Gfp::THISNODE, 0).unwrap();
/// assert_eq!(a.pfn_to_nid(pfn), Some(NodeId(1)));
/// a.free_pages(pfn, 0).unwrap();
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct NodeId(pub u32);

/// The zones a node may have, lowest first.
///
/// # Examples
///
/// ```
/// use pagealloc::ZoneType;
/// assert!(ZoneType::Normal < ZoneType::Movable); // lowest first
/// assert_eq!(ZoneType::Movable.name(), "Movable"); // as zoneinfo prints it
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum ZoneType {
    /// Any allocation may use it.
    Normal = 0,
    /// Only movable allocations may use it.
    Movable = 1,
}

impl ZoneType {
    /// The name the kernel prints.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            ZoneType::Normal => "Normal",
            ZoneType::Movable => "Movable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfp_maps_to_migratetype() {
        assert_eq!(Gfp::KERNEL.migratetype(), MigrateType::Unmovable);
        assert_eq!(Gfp::ATOMIC.migratetype(), MigrateType::Unmovable);
        assert_eq!(Gfp::MOVABLE.migratetype(), MigrateType::Movable);
        assert_eq!((Gfp::RECLAIMABLE | Gfp::ZERO).migratetype(), MigrateType::Reclaimable);
    }

    #[test]
    fn pfn_arithmetic_is_checked_at_the_edges() {
        assert_eq!(Pfn::new(5).checked_add(3), Some(Pfn::new(8)));
        assert_eq!(Pfn::MAX.checked_add(0), Some(Pfn::MAX));
        assert_eq!(Pfn::MAX.checked_add(1), None, "u64::MAX is not a pfn");
        assert_eq!(Pfn::new(1).checked_add(u64::MAX), None);
        assert_eq!(Pfn::new(0).checked_add(u64::MAX - 1), Some(Pfn::MAX));
        assert_eq!(Pfn::new(8).checked_sub(8), Some(Pfn::new(0)));
        assert_eq!(Pfn::new(0).checked_sub(1), None);
        assert_eq!(Pfn::new(7).add(1), Pfn::new(8));
    }

    #[test]
    #[should_panic(expected = "pfn arithmetic overflow")]
    fn pfn_add_panics_instead_of_wrapping() {
        let _ = Pfn::new(2).add(u64::MAX - 1);
    }

    #[test]
    fn orders_stay_within_max_order() {
        assert_eq!(Order::new(0), Some(Order::ZERO));
        assert_eq!(Order::new(MAX_ORDER), Some(Order::MAX));
        assert_eq!(Order::new(MAX_ORDER + 1), None);
        assert_eq!(Order::new(u32::MAX), None);
        assert_eq!(Order::MAX.next(), None);
        assert_eq!(Order::ZERO.next().map(Order::get), Some(1));
        assert_eq!(Order::PAGEBLOCK.raised(1), Order::new(PAGEBLOCK_ORDER + 1));
        assert_eq!(Order::ZERO.raised(u32::MAX), None, "raising never wraps");
        assert_eq!(Order::PAGEBLOCK.pages(), PAGEBLOCK_PAGES);
        assert_eq!(Order::MAX.pages_u32(), 1 << MAX_ORDER);
        for (i, o) in Order::ALL.iter().enumerate() {
            assert_eq!(o.idx(), i);
            assert_eq!(Order::new(i as u32), Some(*o));
            let above: Vec<u32> = o.and_above().map(Order::get).collect();
            assert_eq!(above, (i as u32..=MAX_ORDER).collect::<Vec<_>>());
        }
        assert_eq!(Order::ZERO.and_above().next_back(), Some(Order::MAX));
    }

    #[test]
    fn zone_indices_fit_the_pageblock_field() {
        assert_eq!(ZoneIdx::new(255).map(ZoneIdx::as_u8), Some(255));
        assert_eq!(ZoneIdx::new(256), None);
        assert_eq!(ZoneIdx::from_u8(7).get(), 7);
        assert_eq!(ZoneIdx::FIRST.get(), 0);
    }

    #[test]
    fn fallbacks_never_name_self_or_reserved_types() {
        for mt in &MigrateType::ALL[..MIGRATE_PCPTYPES] {
            for f in mt.fallbacks() {
                assert_ne!(f, *mt);
                assert!(f.is_pcptype());
            }
        }
        for (i, mt) in MigrateType::ALL.iter().enumerate() {
            assert_eq!(MigrateType::from_index(i), *mt);
        }
    }
}
