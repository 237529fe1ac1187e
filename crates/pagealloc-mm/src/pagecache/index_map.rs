//! The map type of a mapping's shards: page index -> pfn, hashed with a
//! folded multiply under a random key drawn per map.
//!
//! Why not the default hasher: SipHash of one `u64` costs more than the
//! rest of a lookup (the probe, the reference CAS) put together, and a
//! lookup is the page cache's hottest path. Why not a fixed fast hash:
//! indexes come from users, and a fixed function lets one pick indexes
//! that all collide. Why not plain multiply-shift (`k * x` under a random
//! odd `k`): a shard's indexes are an arithmetic progression (one residue
//! class, often consecutive pages), and `k * x` maps a progression onto a
//! lattice whose top bits, for a few percent of the multipliers, fill a
//! quarter of the table's buckets. The folded multiply (the 128-bit
//! product of `x ^ key` and a fixed odd constant, its halves xored, as
//! hashbrown's default foldhash does) mixes every input bit into the low
//! bits the table indexes with and into the top bits it tags with, in one
//! multiply.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// A shard's map.
pub(crate) type IndexMap = HashMap<u64, u32, IndexHash>;

/// A new, empty shard map with its own multiplier.
pub(crate) fn new_map() -> IndexMap {
    HashMap::with_hasher(IndexHash::new())
}

/// The hasher builder: the map's key.
#[derive(Clone, Debug)]
pub(crate) struct IndexHash(u64);

impl IndexHash {
    fn new() -> Self {
        // The std's random keys, which every `RandomState::new` advances:
        // each map draws its own.
        Self(std::collections::hash_map::RandomState::new().build_hasher().finish())
    }
}

impl BuildHasher for IndexHash {
    type Hasher = IndexHasher;
    #[inline]
    fn build_hasher(&self) -> IndexHasher {
        IndexHasher { k: self.0, h: 0 }
    }
}

/// The fixed odd factor of the folded multiply (PCG's multiplier).
const FOLD: u64 = 0x5851_f42d_4c95_7f2d;

/// One key's hash: the halves of `(x ^ k) * FOLD` (128 bits) xored.
pub(crate) struct IndexHasher {
    k: u64,
    h: u64,
}

impl Hasher for IndexHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        let p = u128::from(self.h ^ x ^ self.k) * u128::from(FOLD);
        self.h = (p as u64) ^ ((p >> 64) as u64);
    }
    /// Not used by `u64` keys; byte by byte, for completeness.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.h
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A shard's indexes (one residue class mod 16) spread over the
    /// table's low bits and its tag bits whatever the multiplier (a
    /// multiplier is random: many are drawn), and two maps draw different
    /// multipliers.
    #[test]
    fn a_residue_class_spreads_over_the_buckets() {
        for _ in 0..500 {
            let b = IndexHash::new();
            let mut low = std::collections::HashSet::new();
            let mut tags = std::collections::HashSet::new();
            for i in 0..4096u64 {
                let h = b.hash_one(i * 16 + 3);
                low.insert(h & 255);
                tags.insert(h >> 57);
            }
            // 16 keys a bucket on average: every bucket should see some.
            assert!(low.len() > 240, "{} of 256 buckets, multiplier {:#x}", low.len(), b.0);
            assert!(tags.len() > 100, "{} of 128 tags, multiplier {:#x}", tags.len(), b.0);
        }
        assert_ne!(IndexHash::new().0, IndexHash::new().0);
        let mut m = new_map();
        m.insert(7, 1);
        assert_eq!(m.get(&7), Some(&1));
    }
}
