//! The soak's command-line options, shared by its three soaks.

use clap::Args;

/// Options of `pagealloc-soak stress`.
#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Seconds to run the mix for.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seed of every random choice (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Arena size in MiB (two nodes, each with a small Movable zone).
    #[arg(long, default_value_t = 128)]
    pub arena_mb: u64,
    /// Seconds one operation may take before the run is declared hung.
    #[arg(long, default_value_t = 20.0)]
    pub hang_timeout: f64,
    /// Inject allocation failures at this rate, in parts per million (needs the
    /// `fail-inject` feature).
    #[arg(long, default_value_t = 0)]
    pub fail_rate_ppm: u32,
    /// Force per-CPU trylock failures at this rate, in parts per million (needs
    /// the `fail-inject` feature).
    #[arg(long, default_value_t = 0)]
    pub trylock_fail_ppm: u32,
    /// The signal soak instead of the mix: SIGUSR1 every 50 us to the
    /// workers, whose handler allocates and frees with the no-lock API (see
    /// the `nolock` module).
    #[arg(long)]
    pub nolock_signal: bool,
    /// The page-cache soak instead of the mix: lookups, reads, writes,
    /// fsync and deletes of a file-backed mapping twice the arena, with
    /// reclaim, shrinker calls and compaction running, and churn mappings
    /// removed under their users, some over failing sources (see
    /// the `pagecache` module).
    #[arg(long)]
    pub pagecache: bool,
    /// With `--pagecache`: no churn mappings (no removals, no faulty
    /// sources, no cache drop under held mappings).
    #[arg(long)]
    pub no_churn: bool,
    /// With `--pagecache`: churn mappings' sources never panic or fail.
    #[arg(long)]
    pub no_source_faults: bool,
}
