//! Zeroing policy: init_on_alloc, init_on_free, and whether a block whose
//! memory free page reporting released reads zero (then an allocation that
//! asks for zeroed memory skips the work).

use crate::config::Config;
use crate::sync::AtomicU64;
use crate::types::Gfp;

/// How and when the core zeroes blocks, and what it counted.
pub struct Zeroing {
    /// Whether a released block reads zero (`MADV_DONTNEED`, or no memory).
    pub(crate) zero_ok: bool,
    /// What every allocation adds to its flags: `Gfp::ZERO` with
    /// init_on_alloc.
    pub(crate) alloc_extra: Gfp,
    /// init_on_free: every block is zeroed when freed, so every free page
    /// reads zero.
    pub zero_on_free: bool,
    /// Pages zeroed by init_on_free.
    pub zeroed_on_free: AtomicU64,
    /// `Gfp::ZERO` (or init_on_alloc) allocations whose zeroing was skipped
    /// because the block was released.
    pub zeroing_skipped: AtomicU64,
}

impl Zeroing {
    pub(crate) fn new(cfg: &Config) -> Self {
        Self {
            zero_ok: !cfg.page_reporting_madv_free,
            alloc_extra: if cfg.init_on_alloc { Gfp::ZERO } else { Gfp::empty() },
            zero_on_free: cfg.init_on_free,
            zeroed_on_free: AtomicU64::new(0),
            zeroing_skipped: AtomicU64::new(0),
        }
    }
}
