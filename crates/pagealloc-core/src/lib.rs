//! # pagealloc-core
//!
//! The core of [pagealloc](https://docs.rs/pagealloc): the Linux kernel's
//! page-frame allocator without the layers above it. It holds the memory
//! map and page descriptors (`memmap`, `page`), zones and the buddy
//! algorithm (`zone`, `buddy`), the per-CPU lists (`pcp`) and thread front
//! caches (`front`), the allocation, free and bulk paths (`page_alloc`), the
//! page lock (`pagelock`), page references (`pageref`) and the statistics
//! counters (`vmevent`, `lockstat`).
//!
//! It knows nothing of reclaim, the page cache, compaction or free page
//! reporting: the slow path reaches them only through [`SlowPathHooks`],
//! which the `pagealloc-mm` crate implements. Most programs want `pagealloc`,
//! whose `PageAllocator` builds the core with every layer; its
//! documentation describes the API.
//!
//! The hidden modules are the one internal interface of this crate's seam
//! with the crates of the pagealloc workspace above it: public because
//! those crates name their types, not an API. Safe code cannot misuse
//! them: no safe function outside this crate builds a core or its parts,
//! and the one door to a live core, `FrameAllocator::core`, is `unsafe`
//! (the `pagealloc` crate's compile-fail tests pin this).
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]

#[macro_use]
extern crate alloc;

/// What std's prelude gives and `core`'s lacks, for the no_std build.
mod prelude {
    pub use alloc::boxed::Box;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec::Vec;
}

mod buddy;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod cpu;
#[doc(hidden)]
pub mod error;
// Failure injection: public (for tests and the stress command) only with the
// `fail-inject` feature; without it only the constant hooks remain.
#[cfg(feature = "fail-inject")]
pub mod failinject;
#[cfg(not(feature = "fail-inject"))]
#[doc(hidden)]
pub mod failinject;
mod frames;
#[doc(hidden)]
pub mod front;
#[doc(hidden)]
pub mod invariants;
#[doc(hidden)]
pub mod list;
#[doc(hidden)]
pub mod lockstat;
#[doc(hidden)]
pub mod memmap;
#[doc(hidden)]
pub mod page;
#[doc(hidden)]
pub mod page_alloc;
#[doc(hidden)]
pub mod pagelock;
#[doc(hidden)]
pub mod pageref;
#[doc(hidden)]
pub mod pcp;
pub mod platform;
#[doc(hidden)]
pub mod sync;
#[doc(hidden)]
pub mod types;
#[doc(hidden)]
pub mod vmevent;
#[doc(hidden)]
pub mod zone;

#[cfg(feature = "seed-variants")]
pub use config::DrainMode;
pub use config::{Backing, Config, ConfigValues, ReportCallback, MAX_HOLES};
#[cfg(feature = "std")]
pub use cpu::pin_to_cpu;
pub use cpu::possible_cpus;
pub use error::{AllocError, BulkFreeError, ConfigError, FreeError, InvariantError, PageStateError, WaitError};
pub use frames::{FrameAllocator, PageLockGuard, PageLocks};
pub use invariants::{Fragmentation, ZoneCensus};
pub use lockstat::{
    tick_unit, LockStatReport, PcpLockStatReport, ZoneLockStat, LOCKSTAT_BUCKETS, LOCKSTAT_SAMPLE, PCP_HOLD_SAMPLE,
};
pub use memmap::DescStorage;
pub use page::PageDesc;
pub use page_alloc::hooks::SlowPathHooks;
pub use pagelock::CancelToken;
pub use platform::Platform;
pub use types::{
    CpuId, Gfp, MigrateType, NodeId, Pfn, ZoneType, MAX_ORDER, MIGRATE_PCPTYPES, MIGRATE_TYPES, NR_ORDERS,
    PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE,
};
/// Bytes in one page descriptor (at most 16).
pub const PAGE_DESC_SIZE: usize = core::mem::size_of::<page::PageDesc>();
