//! The library's integration tests, one binary (one link) for all of them:
//! each module is one subject, run through the public API only. Tests that
//! change process-wide state (failure injection, a counting global
//! allocator, signal handlers, a count of its threads) stay in binaries of
//! their own beside this one.

#[path = "../common/mod.rs"]
mod common;
#[path = "../pcmodel/mod.rs"]
mod pcmodel;
#[path = "../refmodel/mod.rs"]
mod refmodel;

mod array_alloc_edges;
mod bulk_free_edges;
mod bulk_front_first;
mod bulk_linked;
mod bulk_sequences;
mod bulk_threads;
mod compaction;
mod config_limits;
mod depot;
mod front_cache_edges;
mod front_exit;
mod fuzz_regressions;
mod hotplug;
mod hugepage_filler;
mod hugepage_reporting;
mod init_on_free;
mod kcompactd;
mod kv_block_cache;
mod lockstat;
mod misuse;
mod mobility_grouping;
mod model;
mod page_array;
mod pagecache_migrate;
mod pagecache_model;
mod pagecache_promises;
mod pagecache_strangers;
mod pcp_bulk;
mod reporting;
mod soundness;
mod stress;
