//! `pagealloc show`: build a default arena, run a workload, print a report in the
//! kernel's format.

use crate::harness::process_rss_pages;
use crate::workloads;
use clap::ValueEnum;
use pagealloc::{Config, PageAllocator};

/// Which report.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Report {
    /// /proc/buddyinfo.
    Buddyinfo,
    /// /proc/pagetypeinfo.
    Pagetypeinfo,
    /// /proc/zoneinfo.
    Zoneinfo,
    /// /proc/vmstat.
    Vmstat,
    /// pcpstat: this allocator's own counters (per-CPU list refills, drains
    /// and busy locks, fallbacks, the HighAtomic reserve, failures), which no
    /// /proc file has.
    Pcpstat,
    /// Resident memory by zone (ours, no kernel file): managed, free,
    /// released (reported) and free-but-resident pages, the resident estimate,
    /// and the process's resident set from /proc/self/statm.
    Residency,
    /// /sys/kernel/debug/extfrag/extfrag_index.
    Extfrag,
    /// /sys/kernel/debug/extfrag/unusable_index.
    Unusable,
    /// lockstat: zone-lock wait and hold histograms per zone, and the
    /// per-CPU drains' hold time per drain and per page.
    Lockstat,
}

/// Which workload runs before the report.
#[derive(Clone, Copy, Debug, ValueEnum, Default)]
pub enum Workload {
    /// Nothing: the arena as built.
    #[default]
    Fresh,
    /// Two million mixed-order, mixed-type operations, then page-cache-like
    /// order-0 churn (see `workloads::fragment_hard`).
    Fragment,
    /// will-it-scale page_fault1: each CPU takes 32768 pages, writes, frees.
    #[value(name = "page-fault1")]
    PageFault1,
}

/// Options of `pagealloc show`.
pub struct ShowArgs {
    /// The report.
    pub report: Report,
    /// The workload.
    pub workload: Workload,
    /// pagetypeinfo without the 100000 cap.
    pub exact: bool,
    /// Use the old list-walking pagetypeinfo.
    pub walk_lists: bool,
}

/// Run `pagealloc show` and return the text to print.
pub fn show(args: &ShowArgs) -> String {
    let a = PageAllocator::new(Config::new().pagetypeinfo_walk_lists(args.walk_lists)).expect("default arena");
    let live = match args.workload {
        Workload::Fresh => Vec::new(),
        Workload::Fragment => workloads::fragment_hard(&a, 2_000_000, 0x5eed),
        Workload::PageFault1 => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            workloads::page_fault1(&a, cpus, 32768);
            Vec::new()
        }
    };
    let text = match args.report {
        Report::Buddyinfo => a.stats().buddyinfo().to_string(),
        Report::Pagetypeinfo if args.exact => a.stats().pagetypeinfo().render_exact(),
        Report::Pagetypeinfo => a.stats().pagetypeinfo().render(),
        Report::Zoneinfo => a.stats().zoneinfo().to_string(),
        Report::Vmstat => a.stats().vmstat().to_string(),
        Report::Pcpstat => a.stats().pcpstat().to_string(),
        Report::Residency => residency(&a),
        Report::Extfrag => a.compaction().extfrag_index().to_string(),
        Report::Unusable => a.compaction().unusable_index().to_string(),
        Report::Lockstat => a.stats().lockstat().to_string(),
    };
    workloads::free_all(&a, live);
    text
}

/// The residency report: one line per zone, then the process's resident set.
fn residency(a: &PageAllocator) -> String {
    let mut out = String::new();
    for z in a.reporting().residency() {
        out += &format!(
            "Node {}, zone {:>8} managed {} free {} reported {} free_resident {} resident {}\n",
            z.nid, z.zone, z.managed, z.free, z.reported, z.free_resident, z.resident
        );
    }
    let st = a.reporting().page_reporting_stats();
    out += &format!(
        "reporting {} order {} delay_ms {} passes {} released {} errors {} zero_skipped {}\n",
        if st.enabled { "on" } else { "off" },
        st.order,
        st.delay_ms,
        st.passes,
        st.released_pages,
        st.errors,
        st.zeroing_skipped
    );
    if let Some(rss) = process_rss_pages() {
        out += &format!("process_rss_pages {rss}\n");
    }
    out
}
