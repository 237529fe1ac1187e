//! # pagealloc
//!
//! The Linux kernel's page-frame allocator, rebuilt as a user-space library: a
//! zoned buddy allocator (orders 0..=10) with migratetypes and pageblocks,
//! fallback with claim and steal, watermarks and a HighAtomic reserve, over a
//! real memory arena (or abstract frames), with per-CPU lists, reclaim,
//! compaction, free page reporting and a page cache.
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
//! This crate is the façade over the crates that hold the layers, and their
//! whole public API:
//! - `pagealloc-core`: the memory map, zones and buddy, per-CPU lists, front
//!   caches, the allocation paths, the page lock and the counters (without
//!   `std` too, for kernels);
//! - `pagealloc-compaction`, `pagealloc-reporting`: layers on the core
//!   alone, which the allocator wires into the core's slow path;
//! - `pagealloc-mm`: [`PageAllocator`], the core with reclaim and those
//!   layers wired in, the page cache ([`PageCache`]) and the /proc
//!   statistics ([`stats`]).
//!
//! The repository's `docs/design.md` draws the layers and follows one
//! request through them.
#![warn(missing_docs)]

pub use pagealloc_mm::*;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
