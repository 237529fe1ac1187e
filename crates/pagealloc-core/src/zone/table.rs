//! The zone table: every node's zones, node by node, lowest zone first,
//! indexed by [`ZoneIdx`] alone.
//!
//! Invariants: zone `i` of the table has `idx == ZoneIdx(i)`, the index its
//! pageblocks' words record; the table never changes after the allocator is
//! built.

use super::Zone;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::ZoneIdx;
use core::ops::Index;

/// Every zone of one allocator.
pub struct ZoneTable(Box<[Zone]>);

impl ZoneTable {
    /// The table of `zones`, each of which must carry its own position as
    /// its index.
    pub(crate) fn new(zones: Vec<Zone>) -> ZoneTable {
        debug_assert!(zones.iter().enumerate().all(|(i, z)| z.idx.get() == i));
        ZoneTable(zones.into_boxed_slice())
    }

    /// Zone `zi`, or None past the table.
    #[inline]
    pub fn get(&self, zi: ZoneIdx) -> Option<&Zone> {
        self.0.get(zi.get())
    }

    /// Every zone, in table order (each knows its index as `Zone::idx`).
    #[inline]
    pub fn iter(&self) -> core::slice::Iter<'_, Zone> {
        self.0.iter()
    }

    /// Number of zones.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the table has no zone (never, once built).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The zones as a slice, in table order.
    #[inline]
    pub fn as_slice(&self) -> &[Zone] {
        &self.0
    }
}

impl Index<ZoneIdx> for ZoneTable {
    type Output = Zone;

    #[inline(always)]
    fn index(&self, zi: ZoneIdx) -> &Zone {
        &self.0[zi.get()]
    }
}

impl<'a> IntoIterator for &'a ZoneTable {
    type Item = &'a Zone;
    type IntoIter = core::slice::Iter<'a, Zone>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
