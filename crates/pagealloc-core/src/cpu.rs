//! Which CPU we run on, and how many there may be: the platform's answer.
//! `possible_cpus` and `pin_to_cpu` are re-exported at the crate root for
//! benchmarks and tests.

#[cfg(feature = "std")]
pub use crate::platform::linux::{block_async_signals, pin_to_cpu};
pub use crate::platform::{current_cpu, possible_cpus};
