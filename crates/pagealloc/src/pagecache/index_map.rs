//! The map type of a mapping's shards: page index -> pfn, hashed with
//! multiply-shift under a random odd multiplier drawn per map.
//!
//! Why not the default hasher: SipHash of one `u64` costs more than the
//! rest of a lookup (the probe, the reference CAS) put together, and a
//! lookup is the page cache's hottest path. Why not a fixed fast hash:
//! indexes come from users, and a fixed function lets one pick indexes
//! that all collide. Multiply-shift with a random odd multiplier is a
//! universal family (two distinct keys collide with probability about
//! 2/2^bits whatever they are), one multiply per key. The high half of the
//! product is folded into the low half because the table takes its bucket
//! from the low bits, and a shard's indexes share their low bits (a shard
//! holds the indexes of one residue class).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// A shard's map.
pub(crate) type IndexMap = HashMap<u64, u32, IndexHash>;

/// A new, empty shard map with its own multiplier.
pub(crate) fn new_map() -> IndexMap {
    HashMap::with_hasher(IndexHash::new())
}

/// The hasher builder: the map's multiplier.
#[derive(Clone, Debug)]
pub(crate) struct IndexHash(u64);

impl IndexHash {
    fn new() -> Self {
        // The std's random keys, which every `RandomState::new` advances:
        // each map draws its own multiplier.
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Self(seed | 1)
    }
}

impl BuildHasher for IndexHash {
    type Hasher = IndexHasher;
    #[inline]
    fn build_hasher(&self) -> IndexHasher {
        IndexHasher { k: self.0, h: 0 }
    }
}

/// One key's hash: `k * x`, the high half folded into the low.
pub(crate) struct IndexHasher {
    k: u64,
    h: u64,
}

impl Hasher for IndexHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.h = (self.h ^ x).wrapping_mul(self.k);
    }
    /// Not used by `u64` keys; byte by byte, for completeness.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.h ^ (self.h >> 32)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A shard's indexes (one residue class mod 16) spread over the
    /// table's low bits, and two maps draw different multipliers.
    #[test]
    fn a_residue_class_spreads_over_the_buckets() {
        let b = IndexHash::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..4096u64 {
            seen.insert(b.hash_one(i * 16 + 3) & 255);
        }
        assert!(seen.len() > 200, "{} of 256 low-byte values", seen.len());
        assert_ne!(IndexHash::new().0, IndexHash::new().0);
        let mut m = new_map();
        m.insert(7, 1);
        assert_eq!(m.get(&7), Some(&1));
    }
}
