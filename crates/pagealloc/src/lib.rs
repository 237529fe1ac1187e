//! # pagealloc
//!
//! The Linux kernel's page-frame allocator, rebuilt as a user-space library: a
//! zoned buddy allocator (orders 0..=10) with migratetypes and pageblocks,
//! fallback with claim and steal, watermarks and a HighAtomic reserve, over a
//! real memory arena (or abstract frames).
//!
//! ```
//! use pagealloc::{Config, Gfp, PageAllocator};
//! let a = PageAllocator::new(Config::small(16 << 20)).unwrap();
//! let pfn = a.alloc_pages(Gfp::MOVABLE, 2).unwrap();
//! a.free_pages(pfn, 2).unwrap();
//! assert!(a.free_pages(pfn, 2).is_err()); // double free: a typed error, no harm done
//! a.check_invariants().unwrap();
//! ```
//!
//! The layers, from the façade ([`PageAllocator`]) down: the allocation paths
//! (`page_alloc`), the thread front caches (`front`) and per-CPU lists
//! (`pcp`), zones and the buddy algorithm (`zone`, `buddy`), and the memory
//! map (`memmap`: arena, descriptors, pageblock table); reclaim, compaction,
//! reporting and the page cache sit beside the façade. The repository's
//! `docs/design.md` draws them and follows one request through them.
#![warn(missing_docs)]

mod allocator;
mod buddy;
mod compaction;
mod config;
mod cpu;
mod error;
// Failure injection: public (for tests and the stress command) only with the
// `fail-inject` feature; without it only the constant hooks remain.
#[cfg(feature = "fail-inject")]
pub mod failinject;
#[cfg(not(feature = "fail-inject"))]
mod failinject;
mod front;
mod invariants;
mod isolation;
mod list;
mod lockstat;
mod memmap;
mod migrate;
mod mm;
mod movable;
mod page;
mod page_alloc;
mod page_array;
mod pagecache;
mod pagelock;
mod pageref;
mod pages;
mod pcp;
mod reporting;
pub mod stats;
mod sync;
mod types;
mod vmevent;
mod vmscan;
mod zone;

#[cfg(not(loom))]
#[doc(hidden)]
pub use allocator::{front_abi, FrontView, ThreadFront};
pub use allocator::{PageAllocator, ReportingStats, ZoneResidency};
#[cfg(feature = "seed-variants")]
pub use config::DrainMode;
pub use config::{Backing, Config, ReportCallback, MAX_HOLES};
pub use cpu::{pin_to_cpu, possible_cpus};
pub use error::{AllocError, BulkFreeError, ConfigError, FreeError, InvariantError, PageStateError, WaitError};
pub use invariants::{Fragmentation, ZoneCensus};
pub use lockstat::{
    tick_unit, LockStatReport, PcpLockStatReport, ZoneLockStat, LOCKSTAT_BUCKETS, LOCKSTAT_SAMPLE, PCP_HOLD_SAMPLE,
};
#[cfg(feature = "seed-variants")]
pub use page_alloc::bulk_linked::{ChainIter, PageChain};
pub use reporting::ReportPass;
/// Bytes in one page descriptor (at most 16).
pub const PAGE_DESC_SIZE: usize = std::mem::size_of::<page::PageDesc>();
pub use allocator::{PageLockGuard, PageReference};
pub use compaction::{CompactOutcome, FragIndexReport};
pub use movable::{MobilityCensus, MovableId, MovableOps};
pub use page_array::PageArray;
pub use pagecache::{
    DirectFileSource, FileSource, FillFn, IoMode, Mapping, PageCache, PageCacheConfig, PageCacheError, PageHandle,
    PageIndex, PageSource, Readahead, WritebackStats, MAX_FILE_BYTES, MAX_INDEX, MAX_MAPPINGS, RA_MAX_LIMIT,
    RA_MAX_PAGES,
};
pub use pagelock::CancelToken;
pub use pages::{OwnedBlock, Pages};
pub use types::{
    CpuId, Gfp, MigrateType, NodeId, Pfn, ZoneType, MAX_ORDER, MIGRATE_PCPTYPES, MIGRATE_TYPES, NR_ORDERS,
    PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE,
};
pub use vmscan::dirty::{DirtyThresholds, DEFAULT_DIRTY_BACKGROUND_RATIO, DEFAULT_DIRTY_RATIO};
pub use vmscan::{ShrinkControl, Shrinker, LRU_BATCH};

// The allocator is shared between threads (it is meant to sit in an `Arc` or a
// static), and an owned block may move to, or be looked at from, another thread:
// its drop frees through `&PageAllocator`, which is fine from any thread.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PageAllocator>();
    assert_send_sync::<Pages<'static>>();
    assert_send_sync::<PageArray<'static>>();
    assert_send_sync::<Config>();
    assert_send_sync::<ConfigError>();
};

#[cfg(test)]
mod tests;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
