//! Tests of the core's paths through the whole allocator (they build a
//! `PageAllocator`, which the core crate cannot: it sits above it).

#[cfg(feature = "debug-checks")]
mod debug_checks;
mod nolock;
#[cfg(not(loom))]
pub(crate) mod pagelock;
