//! `pagealloc-soak`: the correctness soaks CI runs and the fast-path driver of
//! the instruction budget. Both check the library as users get it, so this
//! crate builds pagealloc without the seed experiments' old designs (the
//! benchmark command, `pagealloc`, turns them on).
//!
//! - `pagealloc-soak stress`: every allocator operation from many threads at
//!   once, each result checked, with stop-the-world checkpoints;
//!   `--nolock-signal`: the no-lock API from a signal handler; `--pagecache`:
//!   the page cache against reclaim, compaction, removals and faulty sources.
//!   The last line is always `stress: N passed, M failed`; a violation exits 1.
//! - `pagealloc-soak fastpath MODE PAGES`: one fast-path loop, for
//!   `scripts/fastpath-budget` to count instructions under callgrind.

mod args;
mod fastpath;
mod mix;
mod nolock;
mod pagecache;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "pagealloc-soak", version, about = "pagealloc's soaks and fast-path loops")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Soak test: every operation from many threads at once, each result checked;
    /// prints `stress: N passed, M failed` and exits non-zero on a violation or hang.
    Stress(args::StressArgs),
    /// Run one fast-path loop over about PAGES pages after a fixed warm-up, for
    /// `scripts/fastpath-budget` to count instructions under callgrind.
    Fastpath {
        /// The loop.
        #[arg(value_enum)]
        mode: fastpath::Mode,
        /// Pages to allocate and free after the warm-up.
        pages: u64,
    },
}

fn main() {
    let status = match Cli::parse().cmd {
        Cmd::Stress(args) if args.nolock_signal => nolock::run(args.threads, args.duration, args.arena_mb),
        Cmd::Stress(args) if args.pagecache => pagecache::run(&args),
        Cmd::Stress(args) => mix::run(&args),
        Cmd::Fastpath { mode, pages } => fastpath::run(mode, pages),
    };
    std::process::exit(status)
}
