//! The experiments of `pagealloc bench`, one file each.

pub mod buddy;
pub mod bulk;
pub mod burst_idle;
pub mod cold_seq;
pub mod contig;
pub mod dd;
pub mod hugepage;
pub mod hugepage_fault;
pub mod hugepage_filler;
pub mod lru_file_readonce;
pub mod lru_file_readtwice;
pub mod page_fault1;
pub mod page_lock;
pub mod pagealloc_micro;
pub mod pagecache_map;
pub mod pagetypeinfo;
pub mod pcp_flush;
pub mod proactive_compaction;
pub mod reporting_cost;
pub mod scaling;
mod scaling_model;
pub mod sqlite;
pub mod sqlite_small;
pub mod sqlite_speedtest;
pub mod stress_highalloc;

use crate::harness::Experiment;

/// Every experiment, in the order `pagealloc bench` runs them; page-fault1
/// with its command-line flags.
pub fn all(page_fault1: &page_fault1::Args) -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(buddy::Buddy),
        Box::new(page_fault1::PageFault1(page_fault1.clone())),
        Box::new(pcp_flush::PcpFlush),
        Box::new(bulk::Bulk),
        Box::new(page_lock::PageLock),
        Box::new(pagetypeinfo::PageTypeInfo),
        Box::new(pagealloc_micro::PageallocMicro),
        Box::new(stress_highalloc::StressHighalloc),
        Box::new(contig::Contig),
    ]
}

/// Experiments run only when named (`pagealloc bench burst-idle`): they idle
/// for seconds; scaling and sqlite with their command-line flags.
pub fn on_demand(scaling: &scaling::Args, sqlite: &sqlite::Args) -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(burst_idle::BurstIdle),
        Box::new(hugepage::Hugepage),
        Box::new(hugepage_fault::HugepageFault),
        Box::new(hugepage_filler::HugepageFiller),
        Box::new(reporting_cost::ReportingCost),
        Box::new(lru_file_readonce::LruFileReadonce),
        Box::new(lru_file_readtwice::LruFileReadtwice),
        Box::new(dd::Dd),
        Box::new(pagecache_map::PagecacheMap),
        Box::new(proactive_compaction::ProactiveCompaction),
        Box::new(sqlite::Sqlite(sqlite.clone())),
        Box::new(scaling::Scaling(scaling.clone())),
    ]
}
