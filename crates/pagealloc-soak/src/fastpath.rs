//! `pagealloc fastpath MODE PAGES` (hidden): the loops whose instructions
//! `scripts/fastpath-budget` counts under callgrind, like tcmalloc's golden
//! files for its malloc/free fast paths.
//!
//! The command builds a small allocator without backing memory (frame numbers
//! only: the instruction count does not depend on page contents), pins itself to
//! CPU 0 as `pagealloc bench bulk` does, warms the path with a fixed number of
//! rounds, then runs rounds of one mode until about `PAGES` pages have been
//! allocated and freed, and prints
//! `fastpath: mode=<mode> rounds=<r> pages=<p>` with the exact page count. Every
//! run does the same setup and warm-up, so the script cancels them by counting
//! two runs of different lengths and dividing the difference:
//! `(Ir(run 2) - Ir(run 1)) / (pages 2 - pages 1)` instructions per page.
//!
//! Each loop has the shape of the matching loop in `bench bulk`, so the count
//! includes the caller's share (loop counter, result checks) too: a few
//! instructions per round, a fraction of one per page for the bulk modes.

use clap::ValueEnum;
use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn};
use std::hint::black_box;

/// The loop to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// `alloc_pages(KERNEL, 0)` then `free_pages(pfn, 0)`: the order-0 pair on a
    /// thread front cache hit.
    Pair,
    /// The same pair with the front cache off: the per-CPU lists' fast path.
    PcpPair,
    /// `alloc(KERNEL, 0)` then the `Pages` handle's drop: the owned order-0
    /// pair, whose free needs no claim.
    OwnedPair,
    /// `pcp-pair` with lock statistics off (`Config::lock_stats(false)`):
    /// what the statistics' switch costs when off, and (against `pcp-pair`)
    /// what counting costs.
    PcpPairNostats,
    /// `alloc_pages_bulk` filling 128 empty slots, then `free_pages_bulk_slots`
    /// on them (the array bulk form).
    Bulk128,
    /// `alloc_pages_bulk_list` of 128 pages into a `Vec`, then `free_pages_bulk`
    /// (the list bulk form).
    List128,
    /// A `PageArray` of 128 slots filled, then released (the owned array
    /// form).
    Owned128,
    /// The owned array form at bulk size 2.
    Owned2,
    /// The owned array form at bulk size 4.
    Owned4,
    /// The array form at bulk size 2: its per-call cost shows.
    Bulk2,
    /// The array form at bulk size 4.
    Bulk4,
    /// The order-0 pair with the per-CPU lists off (`bench buddy`'s hot pair):
    /// the zone lock and the buddy lists alone, one page kept allocated so
    /// the pair neither splits nor merges.
    BuddyPair,
    /// page-fault1's allocator side (no budget): 32768 single order-0
    /// allocations (128 MiB), then their bulk free in batches of 512, no
    /// writes (`bench hugepage-fault`'s loop without the page memory).
    Fault1,
}

impl Mode {
    /// Pages allocated and freed by one round.
    fn pages(self) -> u64 {
        match self {
            Mode::Pair | Mode::OwnedPair | Mode::PcpPair | Mode::PcpPairNostats | Mode::BuddyPair => 1,
            Mode::Bulk128 | Mode::List128 | Mode::Owned128 => BULK as u64,
            Mode::Bulk2 | Mode::Owned2 => 2,
            Mode::Bulk4 | Mode::Owned4 => 4,
            Mode::Fault1 => FAULT1 as u64,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Pair => "pair",
            Mode::OwnedPair => "owned-pair",
            Mode::PcpPair => "pcp-pair",
            Mode::PcpPairNostats => "pcp-pair-nostats",
            Mode::Bulk128 => "bulk128",
            Mode::List128 => "list128",
            Mode::Owned128 => "owned128",
            Mode::Owned2 => "owned2",
            Mode::Owned4 => "owned4",
            Mode::Bulk2 => "bulk2",
            Mode::Bulk4 => "bulk4",
            Mode::BuddyPair => "buddy-pair",
            Mode::Fault1 => "fault1",
        }
    }
}

/// Pages per bulk round.
const BULK: usize = 128;

/// Pages per page-fault1 round (its 128 MiB) and its gather batch.
const FAULT1: usize = 32768;
const FAULT1_BATCH: usize = 512;

/// Rounds run before the counted ones (per mode, whatever the iteration count).
const WARM_ROUNDS: u64 = 1000;

/// The pair loop; each caller passes a constant `gfp`, folded in.
#[inline(always)]
fn pair_loop(a: &PageAllocator, gfp: Gfp, rounds: u64) {
    for _ in 0..rounds {
        let p = a.alloc_pages(gfp, 0).expect("fastpath: alloc");
        a.free_pages(black_box(p), 0).expect("fastpath: free");
    }
}

#[inline(never)]
fn pairs(a: &PageAllocator, rounds: u64) {
    pair_loop(a, Gfp::KERNEL, rounds);
}

/// The owned pair: a `Pages` handle allocated and dropped.
#[inline(never)]
fn owned_pairs(a: &PageAllocator, rounds: u64) {
    for _ in 0..rounds {
        let p = a.alloc(Gfp::KERNEL, 0).expect("fastpath: alloc");
        drop(black_box(p));
    }
}

/// `pairs` for `Gfp::MOVABLE` (`bench buddy`'s pair).
#[inline(never)]
fn movable_pairs(a: &PageAllocator, rounds: u64) {
    pair_loop(a, Gfp::MOVABLE, rounds);
}

#[inline(never)]
fn array_rounds(a: &PageAllocator, slots: &mut [Option<Pfn>], rounds: u64) {
    for _ in 0..rounds {
        let n = a.alloc_pages_bulk(Gfp::KERNEL, slots);
        assert_eq!(n, slots.len(), "fastpath: array form came back short");
        a.free_pages_bulk_slots(slots).expect("fastpath: free");
    }
}

#[inline(never)]
fn owned_rounds(arr: &mut pagealloc::PageArray<'_>, rounds: u64) {
    for _ in 0..rounds {
        let n = arr.fill(Gfp::KERNEL);
        assert_eq!(n, arr.len(), "fastpath: owned array came back short");
        arr.release();
    }
}

#[inline(never)]
fn list_rounds(a: &PageAllocator, out: &mut Vec<Pfn>, rounds: u64) {
    for _ in 0..rounds {
        let n = a.alloc_pages_bulk_list(Gfp::KERNEL, BULK, out);
        assert_eq!(n, BULK, "fastpath: list form came back short");
        a.free_pages_bulk(out).expect("fastpath: free");
        out.clear();
    }
}

#[inline(never)]
fn fault1_rounds(a: &PageAllocator, out: &mut Vec<Pfn>, rounds: u64) {
    for _ in 0..rounds {
        for _ in 0..FAULT1 {
            out.push(a.alloc_pages(Gfp::USER, 0).expect("fastpath: alloc"));
        }
        for b in out.chunks(FAULT1_BATCH) {
            a.free_pages_bulk(b).expect("fastpath: free");
        }
        out.clear();
    }
}

/// Run `pages / mode.pages()` rounds (at least one) of `mode` after the
/// warm-up; the exit status.
pub fn run(mode: Mode, pages: u64) -> i32 {
    let rounds = (pages / mode.pages()).max(1);
    pagealloc::pin_to_cpu(0);
    let arena = if mode == Mode::Fault1 { 1 << 30 } else { 64 << 20 };
    let cfg = Config::new()
        .arena_bytes(arena)
        .backing(Backing::None)
        .front_cache(!matches!(mode, Mode::PcpPair | Mode::PcpPairNostats))
        .lock_stats(mode != Mode::PcpPairNostats)
        .pcp_lists(mode != Mode::BuddyPair);
    let a = match PageAllocator::new(cfg) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fastpath: cannot build the allocator: {e}");
            return 1;
        }
    };
    let a = black_box(&a);
    match mode {
        Mode::Pair | Mode::PcpPair | Mode::PcpPairNostats => {
            pairs(a, WARM_ROUNDS);
            pairs(a, rounds);
        }
        Mode::OwnedPair => {
            owned_pairs(a, WARM_ROUNDS);
            owned_pairs(a, rounds);
        }
        Mode::BuddyPair => {
            let pin = a.alloc_pages(Gfp::MOVABLE, 0).expect("fastpath: alloc");
            movable_pairs(a, WARM_ROUNDS);
            movable_pairs(a, rounds);
            a.free_pages(pin, 0).expect("fastpath: free");
        }
        Mode::Bulk128 | Mode::Bulk2 | Mode::Bulk4 => {
            let mut slots = vec![None; mode.pages() as usize];
            array_rounds(a, &mut slots, WARM_ROUNDS);
            array_rounds(a, &mut slots, rounds);
        }
        Mode::Owned128 | Mode::Owned2 | Mode::Owned4 => {
            let mut arr = a.page_array(mode.pages() as usize).expect("fastpath: page array");
            owned_rounds(&mut arr, WARM_ROUNDS);
            owned_rounds(&mut arr, rounds);
        }
        Mode::List128 => {
            let mut out = Vec::with_capacity(BULK);
            list_rounds(a, &mut out, WARM_ROUNDS);
            list_rounds(a, &mut out, rounds);
        }
        Mode::Fault1 => {
            let mut out = Vec::with_capacity(FAULT1);
            fault1_rounds(a, &mut out, 3);
            fault1_rounds(a, &mut out, rounds);
        }
    }
    a.drain_all_pages();
    if let Err(e) = a.check_invariants() {
        eprintln!("fastpath: invariants broken after the run: {e}");
        return 1;
    }
    println!("fastpath: mode={} rounds={rounds} pages={}", mode.name(), rounds * mode.pages());
    0
}
