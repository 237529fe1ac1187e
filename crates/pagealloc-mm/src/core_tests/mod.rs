//! Tests of the layers below the façade (the core, compaction) through
//! the whole allocator: they build a `PageAllocator`, which those crates
//! cannot (it sits above them).

#[cfg(feature = "debug-checks")]
mod debug_checks;
#[cfg(loom)]
mod migrate_loom;
mod nolock;
#[cfg(not(loom))]
pub mod pagelock;
