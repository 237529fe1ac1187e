//! The five seed threads and the figures each one reported, quoted so the
//! report can set them beside ours.
//!
//! Figures are copied from the threads in `shared/seeds/` as printed there;
//! `change` is computed from them the mmtests way (positive = the new design is
//! better), so a reader can check the quote against the thread.

/// One figure pair a thread reported, old design against new.
#[derive(Clone, Copy, Debug)]
pub struct Quoted {
    /// What was measured, in the thread's words.
    pub what: &'static str,
    /// Value before the patch.
    pub old: f64,
    /// Value with the patch.
    pub new: f64,
    /// Unit.
    pub unit: &'static str,
    /// Whether larger is better.
    pub higher_is_better: bool,
}

impl Quoted {
    /// Relative change, positive when the new design is better.
    pub fn change(&self) -> f64 {
        change(self.old, self.new, self.higher_is_better)
    }
}

/// Relative change from `old` to `new`, signed so that positive is better.
pub fn change(old: f64, new: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        (new - old) / old.abs()
    } else {
        (old - new) / old.abs()
    }
}

/// A seed thread.
#[derive(Clone, Copy, Debug)]
pub struct Seed {
    /// 1..=5, as numbered in `shared/seeds/`.
    pub n: u32,
    /// Short title of the change.
    pub title: &'static str,
    /// Who posted the figures, and when.
    pub thread: &'static str,
    /// The experiments of `pagealloc bench` that test it.
    pub experiments: &'static [&'static str],
    /// The claim in one sentence, with its headline numbers.
    pub claim: &'static str,
    /// The figures, as the thread printed them.
    pub figures: &'static [Quoted],
}

const fn q(what: &'static str, old: f64, new: f64, unit: &'static str, higher_is_better: bool) -> Quoted {
    Quoted { what, old, new, unit, higher_is_better }
}

/// The five seeds.
pub const SEEDS: [Seed; 5] = [
    Seed {
        n: 1,
        title: "Free PCP pages in bulk: pick them outside the zone lock",
        thread: "Aaron Lu, March 2018",
        experiments: &["page-fault1"],
        claim: "will-it-scale page_fault1 at full load: +3.0% to +6.4% iterations \
                (Broadwell 2S 9034215 -> 9536374, +5.6%).",
        figures: &[
            q("page_fault1 iterations, Broadwell 2S", 9034215.0, 9536374.0, "iterations", true),
            q("page_fault1 iterations, Skylake 2S", 7971818.0, 8314710.0, "iterations", true),
            q("page_fault1 iterations, Broadwell 4S", 13667135.0, 14070408.0, "iterations", true),
            q("page_fault1 iterations, Skylake 4S", 15677465.0, 16675866.0, "iterations", true),
        ],
    },
    Seed {
        n: 2,
        title: "Remove the PCP migratetype cache; read the pageblock type at drain",
        thread: "Johannes Weiner, September 2023",
        experiments: &["pcp-flush"],
        claim: "Batches of 10,000 pages allocated and freed: about 2.6% fewer cycles \
                (41,758,692,473 -> 40,616,738,355).",
        figures: &[
            q("cycles, 10,000-page batches", 41_758_692_473.0, 40_616_738_355.0, "cycles", false),
            q("time elapsed", 0.0869148, 0.0846799, "s", false),
            q("page_fault1, 1 process, pcp only (before the follow-up fix)", 618364.3, 616512.0, "iterations", true),
        ],
    },
    Seed {
        n: 3,
        title: "Bulk allocator: an array-based interface",
        thread: "Jesper Dangaard Brouer on Mel Gorman's patch, March 2021",
        experiments: &["bulk"],
        claim: "page_bench04_bulk, alloc+free per page: array 94 cycles at bulk 128 \
                against list 189 and single-page 207.",
        figures: &[
            q("per page at bulk 128, list -> array", 189.0, 94.0, "cycles", false),
            q("per page at bulk 1, list -> array", 294.0, 195.0, "cycles", false),
            q("per page, single page -> array at 128", 207.0, 94.0, "cycles", false),
        ],
    },
    Seed {
        n: 4,
        title: "Page lock: a waiters bit skips the wait-queue lookup on unlock",
        thread: "Mel Gorman, May 2014",
        experiments: &["page-lock"],
        claim: "Fewer cycles in unlock and wake paths: ext3 profile samples \
                unlock_page 47529 -> 37376, page_waitqueue 61716 -> 107, __wake_up_bit 90049 -> 11856.",
        figures: &[
            q("unlock_page profile samples (ext3 dd)", 47529.0, 37376.0, "samples", false),
            q("page_waitqueue profile samples (ext3 dd)", 61716.0, 107.0, "samples", false),
            q("__wake_up_bit profile samples (ext3 dd)", 90049.0, 11856.0, "samples", false),
        ],
    },
    Seed {
        n: 5,
        title: "Per-migratetype free counts: pagetypeinfo without walking free lists",
        thread: "Hongru Zhang, 2025",
        experiments: &["pagetypeinfo", "pagealloc-micro"],
        claim: "/proc/pagetypeinfo read 700.9 us -> 268.6 us fresh and 28.7 ms -> 269.8 us \
                fragmented; a 10 ms monitor costs order-4 allocations up to 17.74% before, within ~5% after.",
        figures: &[
            q("pagetypeinfo read, just after boot", 700.9, 268.6, "us", false),
            q("pagetypeinfo read, after building a kernel", 28_700.0, 269.8, "us", false),
            q("monitor cost, Min alloc-odr4-512 (vanilla -> patched)", 17.74, 1.03, "%", false),
        ],
    },
];

/// The seed numbered `n`.
pub fn seed(n: u32) -> Option<&'static Seed> {
    SEEDS.iter().find(|s| s.n == n)
}
