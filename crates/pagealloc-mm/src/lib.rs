//! # pagealloc-mm
//!
//! [pagealloc](https://docs.rs/pagealloc)'s allocator assembled:
//! [`PageAllocator`], the core of `pagealloc-core` with the layers above it
//! wired in: reclaim (`mm::vmscan`), compaction from
//! `pagealloc-compaction`, free page reporting from `pagealloc-reporting`,
//! their background threads, the page cache ([`PageCache`], which lives with
//! reclaim because reclaim's LRU lists hold its pages), and the /proc
//! statistics ([`stats`]). The core reaches reclaim and compaction only
//! through its slow-path hooks, which this crate implements (`mm`).
//!
//! Programs use the `pagealloc` crate, which re-exports this one's public
//! API.
#![warn(missing_docs)]

#[doc(hidden)]
pub mod allocator;
use pagealloc_compaction::compaction;
use pagealloc_core::config;
use pagealloc_core::cpu;
use pagealloc_core::error;
// Failure injection: public (for tests and the stress command) only with the
// `fail-inject` feature; without it only the constant hooks remain.
use pagealloc_compaction::migrate;
#[cfg(feature = "fail-inject")]
pub use pagealloc_core::failinject;
#[cfg(not(loom))]
use pagealloc_core::front;
use pagealloc_core::invariants;
use pagealloc_core::lockstat;
#[doc(hidden)]
pub mod mm;
use pagealloc_compaction::movable;
use pagealloc_core::page;
use pagealloc_core::page_alloc;
mod page_array;
use pagealloc_core::pagelock;
use pagealloc_core::pageref;
mod pagecache;
mod pages;
use pagealloc_reporting as reporting;
pub mod stats;
use pagealloc_core::sync;
use pagealloc_core::types;
use pagealloc_core::vmevent;
use pagealloc_core::zone;

#[cfg(not(loom))]
#[doc(hidden)]
pub use allocator::{front_abi, FrontView, ThreadFront};
pub use allocator::{PageAllocator, ReportingStats, ZoneResidency};
pub use allocator::{PageLockGuard, PageReference};
pub use compaction::{CompactOutcome, FragIndexReport};
#[cfg(feature = "seed-variants")]
pub use config::DrainMode;
pub use config::{Backing, Config, ReportCallback, MAX_HOLES};
pub use cpu::{pin_to_cpu, possible_cpus};
pub use error::{AllocError, BulkFreeError, ConfigError, FreeError, InvariantError, PageStateError, WaitError};
pub use invariants::{Fragmentation, ZoneCensus};
pub use lockstat::{
    tick_unit, LockStatReport, PcpLockStatReport, ZoneLockStat, LOCKSTAT_BUCKETS, LOCKSTAT_SAMPLE, PCP_HOLD_SAMPLE,
};
pub use mm::vmscan::dirty::{DirtyThresholds, DEFAULT_DIRTY_BACKGROUND_RATIO, DEFAULT_DIRTY_RATIO};
pub use mm::vmscan::{ShrinkControl, Shrinker, LRU_BATCH};
pub use movable::{MobilityCensus, MovableId, MovableOps};
#[cfg(feature = "seed-variants")]
pub use page_alloc::bulk_linked::{ChainIter, PageChain};
pub use page_array::PageArray;
pub use pagealloc_core::PAGE_DESC_SIZE;
pub use pagecache::{
    DirectFileSource, FileSource, FillFn, IoMode, Mapping, PageCache, PageCacheConfig, PageCacheError, PageHandle,
    PageIndex, PageSource, Readahead, WritebackStats, MAX_FILE_BYTES, MAX_INDEX, MAX_MAPPINGS, RA_MAX_LIMIT,
    RA_MAX_PAGES,
};
pub use pagelock::CancelToken;
pub use pages::{OwnedBlock, Pages};
pub use reporting::ReportPass;
pub use types::{
    CpuId, Gfp, MigrateType, NodeId, Pfn, ZoneType, MAX_ORDER, MIGRATE_PCPTYPES, MIGRATE_TYPES, NR_ORDERS,
    PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE,
};

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
mod core_tests;
#[cfg(test)]
mod tests;
