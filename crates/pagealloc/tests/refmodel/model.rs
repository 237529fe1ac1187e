//! The model's state and its expected answers: every rule of the API's
//! meaning that the randomized tests check lives in this file.
//!
//! Where each rule is, for changes of meaning:
//! - what a free of one pfn answers (range, alignment, order, inside a block,
//!   locked, writeback, double free): [`Model::expect_free`]; bulk frees are
//!   its sequential loop (`ops.rs`, `simulate_bulk_free`). A new refusal (a
//!   block owned by a `Pages` handle, say: a `Block` flag set by the step
//!   that hands one out, cleared by `into_pfn`, refused as `FreeError::Owned`)
//!   is one more arm there.
//! - what `free_contig_range` frees when a page in the range cannot be
//!   freed: [`Model::expect_free_contig`] (today: the pages before it; all or
//!   nothing is `(Err(e), Vec::new())`).
//! - the page-state calls: [`Model::state_expect`];
//! - when an allocation may come back short: [`Model::failure_plausible`];
//! - which calls count pgalloc: [`Model::took`] and
//!   [`Model::CONTIG_COUNTS_PGALLOC`]; pgfree: [`Model::forget`].
//!
//! The model is sequential: what concurrent callers may see (two frees of
//! one pfn racing: exactly one succeeds) is tested by the threaded tests.

use super::checks::{events, Events};
use pagealloc::{
    Backing, Config, FreeError, Gfp, MigrateType, PageAllocator, PageStateError, Pfn, MAX_ORDER, PAGEBLOCK_PAGES,
    PAGE_SIZE,
};
use std::collections::{BTreeMap, BTreeSet};

/// What the model knows about one allocated block.
#[derive(Clone, Copy, Debug)]
pub struct Block {
    pub order: u32,
    /// The type it was allocated for (what its head's private word must say).
    pub mt: MigrateType,
    pub locked: bool,
    pub writeback: bool,
    pub uptodate: bool,
}

/// One zone of the layout, as `PageAllocator::new` lays it out.
#[derive(Clone, Copy, Debug)]
pub(super) struct ZoneSpan {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) nid: u32,
    pub(super) movable: bool,
}

/// When an allocation may come back short (an error, a hole left, a bulk list
/// shorter than asked), by how much memory is in use. Each randomized test
/// picks the strictest rule its configurations and operations allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shortage {
    /// Order-0 requests only with half of the memory they may use allocated
    /// or isolated (zones and nodes the request may not use left out);
    /// higher orders may fail to fragmentation. (Any configuration: watermarks,
    /// THISNODE, isolation.)
    Eligible,
    /// Order-0 requests only with more than half of all managed pages
    /// allocated; higher orders may fail to fragmentation.
    Half,
    /// Any request, of any order, only with more than a quarter of all
    /// managed pages allocated (default watermarks, orders up to 3).
    Quarter,
}

/// The model and the allocator under test.
pub struct Model {
    pub(super) a: PageAllocator,
    pub(super) cfg: Config,
    pub(super) zones: Vec<ZoneSpan>,
    pub(super) nr_pages: u64,
    pub(super) blocks: BTreeMap<u64, Block>,
    pub(super) isolated: BTreeSet<u64>,
    pub(super) recently_freed: Vec<u64>,
    pub(super) backed: bool,
    pub(super) shortage: Shortage,
    /// pgalloc and pgfree as they must read: the counts at creation plus every
    /// page the model saw handed out and freed.
    pub(super) events: Events,
    /// Print each step (set FUZZOPS_TRACE=1 to follow a failing input).
    pub(super) trace: bool,
    pub steps: usize,
}

/// The zones `PageAllocator::new` builds for `cfg`.
fn layout(cfg: &Config) -> Vec<ZoneSpan> {
    let pages = (cfg.arena_bytes / PAGE_SIZE as u64) & !(PAGEBLOCK_PAGES - 1);
    let nblocks = pages / PAGEBLOCK_PAGES;
    let per_node = nblocks / cfg.nodes as u64;
    let movable_blocks = cfg.movable_zone_bytes.div_ceil(PAGE_SIZE as u64 * PAGEBLOCK_PAGES);
    let mut v = Vec::new();
    for nid in 0..cfg.nodes {
        let first = nid as u64 * per_node;
        let last = if nid + 1 == cfg.nodes { nblocks } else { first + per_node };
        let split = last - movable_blocks;
        v.push(ZoneSpan { start: first * PAGEBLOCK_PAGES, end: split * PAGEBLOCK_PAGES, nid, movable: false });
        if movable_blocks > 0 {
            v.push(ZoneSpan { start: split * PAGEBLOCK_PAGES, end: last * PAGEBLOCK_PAGES, nid, movable: true });
        }
    }
    v
}

impl Model {
    /// Whether `alloc_contig_pages` counts its pages in pgalloc: it does not
    /// (it takes free pages of isolated pageblocks, as the kernel's
    /// `alloc_contig_range`, which counts no PGALLOC either); their frees
    /// count pgfree like any other.
    pub const CONTIG_COUNTS_PGALLOC: bool = false;

    /// A fresh allocator of `cfg` (None if `cfg` is refused) and an empty model,
    /// with the [`Shortage::Eligible`] rule.
    pub fn new(cfg: Config) -> Option<Self> {
        let a = PageAllocator::new(cfg.clone()).ok()?;
        let zones = layout(&cfg);
        assert_eq!(zones.last().unwrap().end, a.nr_pages(), "layout model disagrees");
        let spans: Vec<(u64, u64)> =
            a.stats().zoneinfo().zones.iter().map(|z| (z.start_pfn, z.start_pfn + z.spanned)).collect();
        let modelled: Vec<(u64, u64)> = zones.iter().map(|z| (z.start, z.end)).collect();
        assert_eq!(spans, modelled, "layout model disagrees with zoneinfo");
        Some(Self {
            nr_pages: a.nr_pages(),
            backed: cfg.backing != Backing::None,
            events: events(&a),
            a,
            cfg,
            zones,
            blocks: BTreeMap::new(),
            isolated: BTreeSet::new(),
            recently_freed: Vec::new(),
            shortage: Shortage::Eligible,
            trace: std::env::var_os("FUZZOPS_TRACE").is_some(),
            steps: 0,
        })
    }

    /// The same model with another shortage rule.
    pub fn shortage(mut self, s: Shortage) -> Self {
        self.shortage = s;
        self
    }

    /// The allocator under test (a handle: clone it to keep one).
    pub fn a(&self) -> &PageAllocator {
        &self.a
    }

    pub fn nr_pages(&self) -> u64 {
        self.nr_pages
    }

    /// Allocated blocks by head.
    pub fn blocks(&self) -> &BTreeMap<u64, Block> {
        &self.blocks
    }

    /// Is `p` the head of an allocated block?
    pub fn holds(&self, p: Pfn) -> bool {
        self.blocks.contains_key(&p.as_u64())
    }

    /// The pfns of `pfns` that are heads the model holds, in `pfns` order.
    pub fn held_of(&self, pfns: &[Pfn]) -> Vec<Pfn> {
        pfns.iter().copied().filter(|p| self.holds(*p)).collect()
    }

    /// Allocated order-0 pages, in pfn order.
    pub fn order0_pages(&self) -> Vec<Pfn> {
        self.blocks.iter().filter(|(_, b)| b.order == 0).map(|(&p, _)| Pfn::new(p)).collect()
    }

    /// Is `p`'s pageblock isolated, by the model?
    pub fn isolated(&self, p: u64) -> bool {
        self.isolated.contains(&(p & !(PAGEBLOCK_PAGES - 1)))
    }

    /// The index of the zone holding `p` (in `zoneinfo()` order).
    pub fn zone_of(&self, p: u64) -> usize {
        self.zones.iter().position(|z| z.start <= p && p < z.end).expect("pfn in some zone")
    }

    pub fn allocated_pages(&self) -> u64 {
        self.blocks.values().map(|b| 1u64 << b.order).sum()
    }

    /// The model block containing `p`, if any: (head, block).
    pub(super) fn block_containing(&self, p: u64) -> Option<(u64, Block)> {
        let (&h, &b) = self.blocks.range(..=p).next_back()?;
        (p < h + (1 << b.order)).then_some((h, b))
    }

    pub(super) fn overlaps(&self, s: u64, n: u64) -> Option<u64> {
        if let Some((h, _)) = self.block_containing(s) {
            return Some(h);
        }
        self.blocks.range(s..s + n).next().map(|(&h, _)| h)
    }

    // ---- expected answers ----

    /// What `free_pages(p, order)` must answer. A pfn in free memory (the
    /// buddy, a per-CPU list, a front cache) is a double free.
    pub fn expect_free(&self, p: u64, order: u32) -> Result<(), FreeError> {
        let pfn = Pfn::new(p);
        if order > MAX_ORDER {
            return Err(FreeError::InvalidOrder { pfn, order });
        }
        if p >= self.nr_pages {
            return Err(FreeError::OutOfRange { pfn, nr_pages: self.nr_pages });
        }
        if p & ((1 << order) - 1) != 0 {
            return Err(FreeError::Misaligned { pfn, order });
        }
        match self.block_containing(p) {
            Some((h, bl)) if h == p => {
                if bl.order != order {
                    Err(FreeError::WrongOrder { pfn, order, actual: bl.order })
                } else if bl.locked {
                    Err(FreeError::Locked { pfn })
                } else if bl.writeback {
                    Err(FreeError::Writeback { pfn })
                } else {
                    Ok(())
                }
            }
            Some((h, _)) => Err(FreeError::InsideBlock { pfn, head: Pfn::new(h) }),
            None => Err(FreeError::DoubleFree { pfn }),
        }
    }

    /// What `free_contig_range(s, nr)` must answer, and the pages it frees:
    /// page by page up to the first page that cannot be freed (the pages
    /// before it are freed, the rest are not).
    pub fn expect_free_contig(&self, s: u64, nr: u64) -> (Result<(), FreeError>, Vec<u64>) {
        let mut freed = Vec::new();
        for i in 0..nr {
            let p = s.wrapping_add(i);
            // All or nothing: the first page that cannot be freed is reported
            // and nothing is freed.
            if let Err(e) = self.expect_free(p, 0) {
                return (Err(e), Vec::new());
            }
            freed.push(p);
        }
        (Ok(()), freed)
    }

    /// The block the page-state calls (lock, writeback, uptodate) find at `p`.
    pub fn state_expect(&self, p: u64) -> Result<Block, PageStateError> {
        if p >= self.nr_pages {
            return Err(PageStateError::OutOfRange { pfn: Pfn::new(p) });
        }
        self.blocks.get(&p).copied().ok_or(PageStateError::NotAllocated { pfn: Pfn::new(p) })
    }

    /// With half of the memory an order-0 request with `gfp` (on `nid`, if
    /// THISNODE) may use allocated or isolated.
    pub(super) fn eligible_short(&self, gfp: Gfp, nid: Option<u32>) -> bool {
        let mut managed = 0u64;
        let mut used = 0u64;
        for z in &self.zones {
            if (z.movable && !gfp.contains(Gfp::MOVABLE)) || nid.is_some_and(|n| n != z.nid) {
                continue;
            }
            managed += z.end - z.start;
            used += self.blocks.range(z.start..z.end).map(|(_, b)| 1u64 << b.order).sum::<u64>();
            used += self.isolated.range(z.start..z.end).count() as u64 * PAGEBLOCK_PAGES;
        }
        used * 2 >= managed
    }

    /// May a request of `order` with `gfp` come back short now? `node` is the
    /// node of an explicit node request (`alloc_pages_node`), None for the
    /// calling CPU's node.
    pub fn failure_plausible(&self, gfp: Gfp, node: Option<u32>, order: u32) -> bool {
        let managed = self.a.managed_pages();
        match self.shortage {
            Shortage::Eligible => {
                if order > 0 {
                    return true;
                }
                let thisnode = gfp.contains(Gfp::THISNODE);
                let tn = if node.is_some() { node.filter(|_| thisnode) } else { thisnode.then_some(0) };
                // alloc_pages uses the calling CPU's node, which the model does
                // not know: THISNODE without a node may fail on any node.
                self.eligible_short(gfp, tn)
                    || (node.is_none() && self.eligible_short(gfp, None))
                    || (node.is_none() && thisnode)
            }
            Shortage::Half => order > 0 || self.allocated_pages() * 2 > managed,
            Shortage::Quarter => self.allocated_pages() * 4 > managed,
        }
    }

    // ---- model updates ----

    /// Checks on a block the allocator just handed out (`what` names the call;
    /// `nid`: the node a THISNODE request asked for); then the model takes it.
    pub fn took(&mut self, what: &str, p: u64, order: u32, gfp: Gfp, nid: Option<u32>) {
        let n = 1u64 << order;
        assert_eq!(p & (n - 1), 0, "{what}: pfn {p:#x} misaligned for order {order}");
        assert!(p + n <= self.nr_pages, "{what}: block {p:#x} order {order} runs past the arena");
        if let Some(h) = self.overlaps(p, n) {
            panic!("{what}: block {p:#x} order {order} overlaps the allocated block at {h:#x}");
        }
        let z = self.zones[self.zone_of(p)];
        assert!(p + n <= z.end, "{what}: block {p:#x} order {order} crosses a zone end");
        assert!(!z.movable || gfp.contains(Gfp::MOVABLE), "{what}: {gfp:?} got {p:#x} from a Movable zone");
        if let Some(nid) = nid {
            assert_eq!(z.nid, nid, "{what}: THISNODE request for node {nid} got {p:#x}");
        }
        let mut bl = p & !(PAGEBLOCK_PAGES - 1);
        while bl < p + n {
            assert!(!self.isolated.contains(&bl), "{what}: {p:#x} handed out from isolated block {bl:#x}");
            bl += PAGEBLOCK_PAGES;
        }
        let pfn = Pfn::new(p);
        assert!(
            !self.a.page_locks().page_locked_racy(pfn)
                && !self.a.page_locks().page_writeback_racy(pfn)
                && !self.a.page_locks().page_uptodate(pfn)
        );
        if self.backed {
            let base = self.a.page_address(pfn).expect("backed arena has addresses").as_ptr();
            if gfp.contains(Gfp::ZERO) {
                for off in [0, (n as usize * PAGE_SIZE) - 1] {
                    // SAFETY: the block is ours (just allocated), `n` pages long and
                    // mapped read-write; `off` is inside it.
                    let v = unsafe { base.add(off).read() };
                    assert_eq!(v, 0, "{what}: Gfp::ZERO block {p:#x} has {v:#x} at byte {off}");
                }
            }
            for off in [0, (n as usize * PAGE_SIZE) - 1] {
                // SAFETY: as above; we own the block until we free it.
                unsafe { base.add(off).write(0xa5) };
            }
        }
        let mt = gfp.migratetype();
        self.blocks.insert(p, Block { order, mt, locked: false, writeback: false, uptodate: false });
        self.events.alloc += n;
    }

    /// Order-0 pages the test took from the allocator itself (not through a
    /// step function), with `gfp`: checked and taken as [`Model::took`] does.
    pub fn add_fresh(&mut self, pages: &[Pfn], gfp: Gfp) {
        for p in pages {
            self.took("handed out", p.as_u64(), 0, gfp, None);
        }
    }

    /// The block at head `p` was freed.
    pub(super) fn forget(&mut self, p: u64) {
        let bl = self.blocks.remove(&p).expect("forget a held block");
        self.events.free += 1u64 << bl.order;
        if self.recently_freed.len() >= 16 {
            self.recently_freed.remove(0);
        }
        self.recently_freed.push(p);
    }
}
