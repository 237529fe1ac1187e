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

mod allocator;
#[cfg(not(loom))]
pub mod ffi;
#[cfg(feature = "fail-inject")]
pub use pagealloc_core::failinject;
mod mm;
mod page_array;
mod pagecache;
mod pages;
pub mod stats;

pub use allocator::{Compactor, Contig, PageReporting, Reclaim, Stats};
pub use allocator::{PageAllocator, PageReference, ReportingStats, ZoneResidency};
pub use mm::vmscan::dirty::{DirtyThresholds, DEFAULT_DIRTY_BACKGROUND_RATIO, DEFAULT_DIRTY_RATIO};
pub use mm::vmscan::{ShrinkControl, Shrinker, LRU_BATCH};
pub use page_array::PageArray;
pub use pagealloc_compaction::compaction::{CompactOutcome, FragIndexReport};
pub use pagealloc_compaction::movable::{MobilityCensus, MovableId, MovableOps};
#[cfg(feature = "seed-variants")]
pub use pagealloc_core::config::DrainMode;
pub use pagealloc_core::config::{Backing, Config, ConfigValues, ReportCallback, MAX_HOLES};
pub use pagealloc_core::cpu::{pin_to_cpu, possible_cpus};
pub use pagealloc_core::error::{
    AllocError, BulkFreeError, ConfigError, FreeError, InvariantError, PageStateError, WaitError,
};
pub use pagealloc_core::invariants::{Fragmentation, ZoneCensus};
pub use pagealloc_core::lockstat::{
    tick_unit, LockStatReport, PcpLockStatReport, ZoneLockStat, LOCKSTAT_BUCKETS, LOCKSTAT_SAMPLE, PCP_HOLD_SAMPLE,
};
#[cfg(feature = "seed-variants")]
pub use pagealloc_core::page_alloc::bulk_linked::{ChainIter, PageChain};
pub use pagealloc_core::pagelock::CancelToken;
pub use pagealloc_core::types::{
    CpuId, Gfp, MigrateType, NodeId, Pfn, ZoneType, MAX_ORDER, MIGRATE_PCPTYPES, MIGRATE_TYPES, NR_ORDERS,
    PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE,
};
pub use pagealloc_core::PAGE_DESC_SIZE;
pub use pagealloc_core::{PageLockGuard, PageLocks};
pub use pagealloc_reporting::ReportPass;
pub use pagecache::{
    DirectFileSource, FileSource, FillFn, IoMode, Mapping, PageCache, PageCacheConfig, PageCacheError, PageHandle,
    PageIndex, PageSource, Readahead, WritebackStats, MAX_FILE_BYTES, MAX_INDEX, MAX_MAPPINGS, RA_MAX_LIMIT,
    RA_MAX_PAGES,
};
pub use pages::{OwnedBlock, Pages};

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
