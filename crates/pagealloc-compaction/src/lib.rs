//! # pagealloc-compaction
//!
//! The layer of [pagealloc](https://docs.rs/pagealloc) that moves pages:
//! movable-page registration (`movable`), migration of one page to another
//! (`migrate`), pageblock isolation and contiguous ranges (`isolation`),
//! and compaction with its background thread kcompactd (`compaction`).
//! It sits on `pagealloc-core` and knows nothing of reclaim or the page
//! cache.
//!
//! Its paths are the methods of [`Compaction`], which runs on any
//! [`CompactionHost`]: the core (through `Deref`), the compaction state
//! ([`movable::Mobility`]), and what it needs from the layers beside it. Most programs want `pagealloc`, which
//! builds this layer; the modules are public for it, not a stable API.
// No unsafe code: the library forbids it. Its loom model (migrate::loom_tests)
// reads the frames it moves and opens the core's door, each block allowed there.
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]
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
#[cfg(test)]
#[allow(unsafe_code)]
mod test_host;
#[cfg(all(test, not(loom)))]
#[allow(unsafe_code)]
mod tests;

/// What the compaction layer runs on: the core, its own state, and one
/// service of the reclaim layer beside it.
pub trait CompactionHost: core::ops::Deref<Target = Core> + Send + Sync {
    /// The movable-page registry and compaction state.
    fn mobility(&self) -> &movable::Mobility;
    /// Put every page waiting in an LRU add batch on its LRU list, so that
    /// isolation for migration finds it there.
    fn lru_add_drain_all(&self);
}

/// The compaction layer's operations on one host: pageblock isolation and
/// contiguous ranges (`isolation`, `compaction::contig`), migration
/// (`migrate`), compaction (`compaction`) and kcompactd's work
/// (`compaction::kcompactd`). It dereferences to its host, so the paths
/// read the core's state as `self.mm`, `self.zones`.
pub struct Compaction<'h, H: CompactionHost + ?Sized> {
    host: &'h H,
}

impl<'h, H: CompactionHost + ?Sized> Compaction<'h, H> {
    /// The compaction layer over `host`.
    #[inline]
    pub fn new(host: &'h H) -> Self {
        Self { host }
    }
}

impl<H: CompactionHost + ?Sized> Clone for Compaction<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: CompactionHost + ?Sized> Copy for Compaction<'_, H> {}

impl<H: CompactionHost + ?Sized> core::ops::Deref for Compaction<'_, H> {
    type Target = H;
    #[inline(always)]
    fn deref(&self) -> &H {
        self.host
    }
}
