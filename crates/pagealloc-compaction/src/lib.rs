//! # pagealloc-compaction
//!
//! The layer of [pagealloc](https://docs.rs/pagealloc) that moves pages:
//! movable-page registration (`movable`), migration of one page to another
//! (`migrate`), pageblock isolation and contiguous ranges (`isolation`),
//! and compaction with its background thread kcompactd (`compaction`).
//! It sits on `pagealloc-core` and knows nothing of reclaim or the page
//! cache.
//!
//! Its paths run on any [`CompactionHost`]: the core (through `Deref`),
//! the compaction state ([`movable::Mobility`]), and what it needs from the
//! layers beside it. They are written as extension traits over that host,
//! with one blanket implementation each, so that `pagealloc`'s allocator
//! calls them as its own methods. Most programs want `pagealloc`, which
//! builds this layer; the modules are public for it, not a stable API.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use pagealloc_core::page_alloc::Core;

#[doc(hidden)]
pub mod compaction;
#[doc(hidden)]
pub mod isolation;
#[doc(hidden)]
pub mod migrate;
#[doc(hidden)]
pub mod movable;

/// What the compaction layer runs on: the core, its own state, and one
/// service of the reclaim layer beside it.
pub trait CompactionHost: core::ops::Deref<Target = Core> + Send + Sync {
    /// The movable-page registry and compaction state.
    fn mobility(&self) -> &movable::Mobility;
    /// Put every page waiting in an LRU add batch on its LRU list, so that
    /// isolation for migration finds it there.
    fn lru_add_drain_all(&self);
}

/// The extension traits, for `use pagealloc_compaction::prelude::*`.
pub mod prelude {
    pub use crate::compaction::contig::ContigExt;
    pub use crate::compaction::kcompactd::KcompactdExt;
    pub use crate::compaction::CompactionExt;
    pub use crate::isolation::{IsolationExt, IsolationExt2, IsolationExt3};
    pub use crate::migrate::{MigrationExt, MigrationExt2};
    pub use crate::CompactionHost;
}
