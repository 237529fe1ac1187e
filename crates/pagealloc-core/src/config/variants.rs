//! The old designs' switches as the paths read them (see the `config`
//! module doc): constants without the `seed-variants` feature.

use super::Config;
#[cfg(feature = "seed-variants")]
use super::DrainMode;

/// The variant switches as the paths read them. Without `seed-variants` each
/// is today's design as a constant, and `#[inline(always)]` lets the branches
/// on it fold away.
impl Config {
    /// Unlock and free test the page's waiters bit before the wait queue.
    #[inline(always)]
    pub fn waiters_bit(&self) -> bool {
        #[cfg(feature = "seed-variants")]
        return self.page_lock_waiters_bit;
        #[cfg(not(feature = "seed-variants"))]
        return true;
    }

    /// A per-CPU drain trusts the migratetype cached on each page.
    #[inline(always)]
    pub(crate) fn pcp_mt_cache(&self) -> bool {
        #[cfg(feature = "seed-variants")]
        return self.pcp_migratetype_cache;
        #[cfg(not(feature = "seed-variants"))]
        return false;
    }

    /// A per-CPU drain picks its pages before it takes the zone lock and
    /// merges only runs in pick order (seed 1's patch).
    #[inline(always)]
    pub(crate) fn two_pass_drain(&self) -> bool {
        #[cfg(feature = "seed-variants")]
        return self.drain_mode == DrainMode::TwoPass;
        #[cfg(not(feature = "seed-variants"))]
        return false;
    }

    /// Drains park batches in the depot and refills take them from it:
    /// with today's drain only (the old designs had no depot).
    #[inline(always)]
    pub fn depot_on(&self) -> bool {
        self.depot_fraction != 0 && !self.two_pass_drain() && !self.single_pass_drain()
    }

    /// A per-CPU drain picks and merges its pages under the zone lock (the
    /// kernel's today).
    #[inline(always)]
    pub(crate) fn single_pass_drain(&self) -> bool {
        #[cfg(feature = "seed-variants")]
        return self.drain_mode == DrainMode::SinglePass;
        #[cfg(not(feature = "seed-variants"))]
        return false;
    }
}
