//! Vocabulary types shared by every layer: page frame numbers, orders,
//! migratetypes, GFP flags and CPU ids.

use std::fmt;
use std::num::NonZeroU64;

/// log2 of the page size.
pub const PAGE_SHIFT: u32 = 12;
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
    pub(crate) const fn from_u32(pfn: u32) -> Self {
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
    pub(crate) const fn idx(self) -> usize {
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

/// A migratetype: what kind of allocation a pageblock serves.
///
/// Values and names are the kernel's without CMA (as this machine's
/// /proc/pagetypeinfo prints them).
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
    pub(crate) const fn fallbacks(self) -> [MigrateType; 2] {
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
        /// Never compact directly in the slow path (compaction, issue 17).
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
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct CpuId(pub u32);

/// Identifier of a (fake) NUMA node.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct NodeId(pub u32);

/// The zones a node may have, lowest first.
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
