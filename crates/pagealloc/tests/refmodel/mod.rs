//! The reference model: one model of what the public API must answer, shared
//! by every randomized test. The property tests (`tests/integration/model.rs`,
//! `tests/integration/bulk_sequences.rs`) call its step functions with operations proptest
//! generates; the fuzz target (`fuzz/fuzz_targets/ops.rs`, through a `#[path]`
//! module) and the regression runner (`tests/integration/fuzz_regressions.rs`) decode
//! bytes into the same step functions; the scenario tests of the fast paths
//! (`tests/integration/bulk_free_edges.rs`, `tests/integration/front_cache_edges.rs`,
//! `tests/integration/array_alloc_edges.rs`) build their scenarios on it too.
//!
//! - [`model`](model.rs): the state (each allocated block by head: order,
//!   migratetype, lock, writeback and uptodate bits; the isolated pageblocks)
//!   and every expected answer (`expect_free`, `expect_free_contig`,
//!   `state_expect`, `failure_plausible`). A change of the API's meaning is a
//!   change there (what a free of a locked block answers, whether a contiguous
//!   free is all or nothing, ...).
//! - [`ops`](ops.rs): the step functions for allocation, frees, bulk calls,
//!   isolation and contiguous ranges; [`pageops`](pageops.rs): page lock,
//!   writeback, uptodate, reports and configuration errors. Each calls the
//!   allocator, compares the answer with the model's, then updates the model.
//! - [`checks`](checks.rs): what must hold after every step
//!   (`check_invariants`; the census against the model's allocated pages;
//!   conservation; NR_FREE_PAGES; mixed pageblocks against the model's types;
//!   pgalloc and pgfree against the pages the model saw handed out and freed)
//!   and at the end (everything given back, drained, coalesced, whole).
//! - [`decoder`](decoder.rs): the fuzzer's input format (bytes to steps).

#![allow(dead_code, unused_imports)]

mod checks;
mod decoder;
mod model;
mod ops;
mod pageops;

pub use checks::{events, Events};
pub use decoder::{decode_config, run, run_with, Bytes, MAX_STEPS};
pub use model::{Block, Model, Shortage};
pub use ops::Drain;
pub use pageops::LockHow;
