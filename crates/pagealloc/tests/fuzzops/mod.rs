//! Byte-driven operation sequences over the public API, checked step by step
//! against a reference model.
//!
//! Shared by the cargo-fuzz target (`fuzz/fuzz_targets/ops.rs`, through a
//! `#[path]` module) and the regression runner (`tests/fuzz_regressions.rs`), so
//! a crash the fuzzer minimises replays under `cargo test` exactly.
//!
//! Input layout: three bytes choose the configuration (arena size, nodes,
//! Movable zone, per-CPU lists and front caches on or off, backing, drain mode,
//! batch, watermarks), then each operation is one byte of opcode followed by the
//! bytes its decoder reads. Reading past the end yields zeros, so every input
//! decodes.
//!
//! The model knows, per allocated block: its head, order, and the lock,
//! writeback and uptodate bits; and which pageblocks are isolated. It predicts
//! every answer exactly where the allocator's contract fixes it (every error with
//! its pfn; successes; lock results) and checks the rest for plausibility (an
//! allocation may fail only when memory is short; a range may be refused as
//! HighAtomic, which the model does not track). After every step:
//! `check_invariants` holds, the census agrees with the model (allocated pages),
//! pages are conserved (free + per-CPU + allocated == managed), and
//! NR_FREE_PAGES equals the census's free pages outside isolated blocks.
//! At the end everything is given back and the arena must be whole again.

#![allow(dead_code)]

use pagealloc::{
    AllocError, Backing, CancelToken, Config, ConfigError, DrainMode, FreeError, Gfp, PageAllocator, PageStateError,
    Pfn, WaitError, MAX_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// At most this many operations per input (keeps each run short).
pub const MAX_STEPS: usize = 600;

/// Reads bytes; zeros after the end.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }
    pub fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0, |a, i| a | (self.u8() as u64) << (8 * i))
    }
}

/// What the model knows about one allocated block.
#[derive(Clone, Copy, Debug, Default)]
struct Block {
    order: u32,
    locked: bool,
    writeback: bool,
    uptodate: bool,
}

/// One zone of the layout, as `PageAllocator::new` lays it out.
#[derive(Clone, Copy, Debug)]
struct ZoneSpan {
    start: u64,
    end: u64,
    nid: u32,
    movable: bool,
}

/// The configuration an input chose, decoded from its first three bytes.
pub fn decode_config(b: &mut Bytes) -> Config {
    let b0 = b.u8();
    let b1 = b.u8();
    let b2 = b.u8();
    let nodes = 1 + ((b0 >> 2) & 1) as u32;
    let movable = (b0 >> 3) & 1 == 1;
    // At least two pageblocks per zone when a Movable zone is asked for.
    let min_mb = if movable { 8 * nodes as u64 } else { 4 * nodes as u64 };
    let mb = [4u64, 8, 12, 16][(b0 & 3) as usize].max(min_mb);
    let mut cfg = Config::small(mb << 20)
        .nodes(nodes)
        .movable_zone_bytes(if movable { 2 << 20 } else { 0 })
        .nr_cpus(Some(1 + (b2 & 3) as usize))
        .pcp_lists(b1 & 1 == 0)
        .front_cache(b1 & 2 == 0)
        .page_lock_waiters_bit(b1 & 4 == 0)
        .drain_mode(if b1 & 8 != 0 { DrainMode::TwoPass } else { DrainMode::SinglePass })
        .pcp_migratetype_cache(b1 & 16 != 0)
        .min_free_kbytes(if b1 & 32 != 0 { Some(0) } else { None });
    if b1 & 64 != 0 {
        cfg = cfg.pcp_batch(Some(1 + ((b2 >> 2) & 7) as u32));
    }
    if b1 & 128 != 0 {
        cfg = cfg.percpu_pagelist_high_fraction(8);
    }
    if (b0 >> 4) & 1 == 1 {
        cfg = cfg.backing(Backing::Anonymous);
    }
    cfg
}

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

/// What a free of one pfn should return, by the model.
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    Ok,
    Err(FreeError),
    /// The pfn is free: `DoubleFree` (or `NotAllocated`) naming it.
    Free(Pfn),
}

/// The model and the allocator under test.
pub struct Model {
    a: PageAllocator,
    cfg: Config,
    zones: Vec<ZoneSpan>,
    nr_pages: u64,
    blocks: BTreeMap<u64, Block>,
    isolated: BTreeSet<u64>,
    recently_freed: Vec<u64>,
    backed: bool,
    /// Print each step (set FUZZOPS_TRACE=1 to follow a failing input).
    trace: bool,
    pub steps: usize,
}

impl Model {
    pub fn new(cfg: Config) -> Option<Self> {
        let a = PageAllocator::new(cfg.clone()).ok()?;
        let zones = layout(&cfg);
        assert_eq!(zones.last().unwrap().end, a.nr_pages(), "layout model disagrees");
        Some(Self {
            nr_pages: a.nr_pages(),
            backed: cfg.backing != Backing::None,
            a,
            cfg,
            zones,
            blocks: BTreeMap::new(),
            isolated: BTreeSet::new(),
            recently_freed: Vec::new(),
            trace: std::env::var_os("FUZZOPS_TRACE").is_some(),
            steps: 0,
        })
    }

    fn zone_of(&self, p: u64) -> usize {
        self.zones.iter().position(|z| z.start <= p && p < z.end).expect("pfn in some zone")
    }

    fn allocated_pages(&self) -> u64 {
        self.blocks.values().map(|b| 1u64 << b.order).sum()
    }

    /// The model block containing `p`, if any: (head, block).
    fn block_containing(&self, p: u64) -> Option<(u64, Block)> {
        let (&h, &b) = self.blocks.range(..=p).next_back()?;
        (p < h + (1 << b.order)).then_some((h, b))
    }

    fn overlaps(&self, s: u64, n: u64) -> Option<u64> {
        if let Some((h, _)) = self.block_containing(s) {
            return Some(h);
        }
        self.blocks.range(s..s + n).next().map(|(&h, _)| h)
    }

    // ---- pfn and order selectors ----

    fn pick_head(&self, b: &mut Bytes) -> Option<u64> {
        let i = b.u16() as usize;
        (!self.blocks.is_empty()).then(|| *self.blocks.keys().nth(i % self.blocks.len()).unwrap())
    }

    fn pick_pfn(&self, b: &mut Bytes) -> u64 {
        let k = b.u8() % 16;
        match k {
            0..=7 => self.pick_head(b).unwrap_or(0),
            8 | 9 => match self.pick_head(b) {
                Some(h) => {
                    let o = self.blocks[&h].order;
                    h + 1 + (b.u16() as u64 % ((1u64 << o).max(2) - 1))
                }
                None => 1,
            },
            10 | 11 => b.u16() as u64 % self.nr_pages,
            12 => {
                let i = b.u8() as usize;
                if self.recently_freed.is_empty() {
                    0
                } else {
                    self.recently_freed[i % self.recently_freed.len()]
                }
            }
            13 => self.nr_pages + b.u8() as u64,
            14 => [u64::MAX - (1 << 20), 1 << 40, u32::MAX as u64, u32::MAX as u64 - 1][(b.u8() & 3) as usize],
            _ => (b.u8() as u64 % (self.nr_pages / PAGEBLOCK_PAGES)) * PAGEBLOCK_PAGES,
        }
    }

    fn pick_order(&self, b: &mut Bytes, pfn: u64) -> u32 {
        let o = self.blocks.get(&pfn).map_or(0, |bl| bl.order);
        match b.u8() % 8 {
            0..=4 => o,
            5 => (o + 1) % (MAX_ORDER + 1),
            6 => b.u8() as u32 % (MAX_ORDER + 1),
            _ => [MAX_ORDER + 1, MAX_ORDER + 2, 31, u32::MAX][(b.u8() & 3) as usize],
        }
    }

    fn gfp(b: &mut Bytes) -> Gfp {
        Gfp::from_bits_truncate(b.u8() as u32 & 0x1f)
    }

    // ---- predictions ----

    fn expect_free(&self, p: u64, order: u32) -> Expect {
        let pfn = Pfn::new(p);
        if order > MAX_ORDER {
            return Expect::Err(FreeError::InvalidOrder { pfn, order });
        }
        if p >= self.nr_pages {
            return Expect::Err(FreeError::OutOfRange { pfn, nr_pages: self.nr_pages });
        }
        if p & ((1 << order) - 1) != 0 {
            return Expect::Err(FreeError::Misaligned { pfn, order });
        }
        match self.block_containing(p) {
            Some((h, bl)) if h == p => {
                if bl.order != order {
                    Expect::Err(FreeError::WrongOrder { pfn, order, actual: bl.order })
                } else if bl.locked {
                    Expect::Err(FreeError::Locked { pfn })
                } else if bl.writeback {
                    Expect::Err(FreeError::Writeback { pfn })
                } else {
                    Expect::Ok
                }
            }
            Some((h, _)) => Expect::Err(FreeError::InsideBlock { pfn, head: Pfn::new(h) }),
            None => Expect::Free(pfn),
        }
    }

    fn agree_free(&self, what: &str, exp: &Expect, got: &Result<(), FreeError>) {
        let ok = match (exp, got) {
            (Expect::Ok, Ok(())) => true,
            (Expect::Err(e), Err(g)) => e == g,
            (Expect::Free(p), Err(FreeError::DoubleFree { pfn } | FreeError::NotAllocated { pfn })) => p == pfn,
            _ => false,
        };
        assert!(ok, "{what}: model expected {exp:?}, allocator said {got:?}");
    }

    fn state_expect(&self, p: u64) -> Result<Block, PageStateError> {
        if p >= self.nr_pages {
            return Err(PageStateError::OutOfRange { pfn: Pfn::new(p) });
        }
        self.blocks.get(&p).copied().ok_or(PageStateError::NotAllocated { pfn: Pfn::new(p) })
    }

    /// Checks on a block the allocator just handed out; then the model takes it.
    fn took(&mut self, what: &str, p: u64, order: u32, gfp: Gfp, nid: Option<u32>) {
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
        assert!(!self.a.page_locked_racy(pfn) && !self.a.page_writeback_racy(pfn) && !self.a.page_uptodate(pfn));
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
        self.blocks.insert(p, Block { order, ..Block::default() });
    }

    fn forget(&mut self, p: u64) {
        self.blocks.remove(&p);
        if self.recently_freed.len() >= 16 {
            self.recently_freed.remove(0);
        }
        self.recently_freed.push(p);
    }

    /// May an order-0 request with `gfp` (on `nid`, if THISNODE) fail now?
    fn shortage_plausible(&self, gfp: Gfp, nid: Option<u32>) -> bool {
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

    // ---- the operations ----

    pub fn step(&mut self, b: &mut Bytes) {
        self.steps += 1;
        let op = b.u8() % 24;
        if self.trace {
            eprintln!(
                "step {} op {op} (held {} blocks, {} isolated)",
                self.steps,
                self.blocks.len(),
                self.isolated.len()
            );
        }
        match op {
            0..=3 => self.op_alloc(b),
            4..=6 => self.op_free(b),
            7 => self.op_bulk_alloc(b),
            8 => self.op_bulk_list(b),
            9 => self.op_bulk_free(b),
            10 => self.op_isolate(b),
            11 => self.op_undo_isolate(b),
            12 => self.op_test_isolated(b),
            13 => self.op_contig(b),
            14 => self.op_free_contig(b),
            15 => self.op_drain(b),
            16 => self.op_trylock_lock(b),
            17 => self.op_unlock(b),
            18 => self.op_writeback(b),
            19 => self.op_wait(b),
            20 => self.op_uptodate(b),
            21 => self.op_reports(b),
            22 => self.op_bad_config(b),
            _ => self.op_free_owned(b),
        }
        self.check(op);
    }

    fn op_alloc(&mut self, b: &mut Bytes) {
        let gfp = Self::gfp(b);
        let order = match b.u8() {
            x @ 0..=199 => x as u32 % 4,
            x @ 200..=249 => x as u32 % (MAX_ORDER + 1),
            x => MAX_ORDER + 1 + (x as u32 & 3),
        };
        let node_sel = b.u8();
        let (res, nid) = if node_sel & 1 == 0 {
            (self.a.alloc_pages(gfp, order), None)
        } else {
            let nid = (node_sel >> 1) as u32 % (self.cfg.nodes + 1);
            (self.a.alloc_pages_node(nid, gfp, order), Some(nid))
        };
        let thisnode = |n: Option<u32>| {
            if gfp.contains(Gfp::THISNODE) {
                Some(n.unwrap_or(0))
            } else {
                None
            }
        };
        match res {
            Ok(p) => {
                assert!(order <= MAX_ORDER && nid.is_none_or(|n| n < self.cfg.nodes), "alloc {order} {nid:?}");
                // alloc_pages uses the calling CPU's node: check THISNODE only
                // for explicit node requests.
                let tn = if nid.is_some() { thisnode(nid) } else { None };
                self.took("alloc_pages", p.as_u64(), order, gfp, tn);
            }
            Err(AllocError::InvalidOrder { order: o }) => assert!(o == order && order > MAX_ORDER),
            Err(AllocError::InvalidNode { nid: n }) => {
                assert!(order <= MAX_ORDER && Some(n) == nid && n >= self.cfg.nodes)
            }
            Err(AllocError::NoMemory { order: o }) => {
                assert_eq!(o, order);
                assert!(nid.is_none_or(|n| n < self.cfg.nodes));
                if order == 0 {
                    let tn = if nid.is_some() { thisnode(nid) } else { gfp.contains(Gfp::THISNODE).then_some(0) };
                    let plausible =
                        self.shortage_plausible(gfp, tn) || (nid.is_none() && self.shortage_plausible(gfp, None));
                    assert!(
                        plausible || (nid.is_none() && gfp.contains(Gfp::THISNODE)),
                        "order-0 {gfp:?} allocation failed with {} of {} pages allocated and {} blocks isolated",
                        self.allocated_pages(),
                        self.nr_pages,
                        self.isolated.len()
                    );
                }
            }
            Err(e) => panic!("alloc_pages: unexpected {e:?}"),
        }
    }

    fn op_free(&mut self, b: &mut Bytes) {
        let p = self.pick_pfn(b);
        let order = self.pick_order(b, p);
        let exp = self.expect_free(p, order);
        let got = self.a.free_pages(Pfn::new(p), order);
        self.agree_free(&format!("free_pages({p:#x}, {order})"), &exp, &got);
        if got.is_ok() {
            self.forget(p);
        }
    }

    /// Free a block the model holds, making it freeable first.
    fn op_free_owned(&mut self, b: &mut Bytes) {
        let Some(h) = self.pick_head(b) else { return };
        let bl = self.blocks[&h];
        let pfn = Pfn::new(h);
        if bl.writeback {
            self.a.end_page_writeback(pfn).unwrap();
        }
        if bl.locked {
            self.a.unlock_page(pfn).unwrap();
        }
        self.a.free_pages(pfn, bl.order).unwrap_or_else(|e| panic!("free of held block {h:#x}: {e}"));
        self.forget(h);
    }

    fn op_bulk_alloc(&mut self, b: &mut Bytes) {
        let gfp = Self::gfp(b);
        let len = b.u8() as usize % 48;
        let mask = b.u64();
        const SENTINEL: u64 = 1 << 50;
        let mut slots: Vec<Option<Pfn>> =
            (0..len).map(|i| (mask >> (i % 64) & 1 == 1).then(|| Pfn::new(SENTINEL + i as u64))).collect();
        let before = slots.clone();
        let lead = self.a.alloc_pages_bulk(gfp, &mut slots);
        assert_eq!(lead, slots.iter().take_while(|s| s.is_some()).count(), "bulk: wrong leading count");
        for (i, (old, new)) in before.iter().zip(&slots).enumerate() {
            match (old, new) {
                (Some(o), n) => assert_eq!(Some(*o), *n, "bulk: populated slot {i} changed"),
                (None, Some(p)) => {
                    assert!(p.as_u64() < SENTINEL);
                    self.took("alloc_pages_bulk", p.as_u64(), 0, gfp, None);
                }
                (None, None) => assert!(i >= lead, "bulk: hole {i} left before the leading count"),
            }
        }
        // A hole left unfilled means memory ran short.
        if slots.iter().any(|s| s.is_none()) {
            assert!(
                self.shortage_plausible(gfp, None) || gfp.contains(Gfp::THISNODE),
                "bulk left holes with {} pages allocated",
                self.allocated_pages()
            );
        }
    }

    fn op_bulk_list(&mut self, b: &mut Bytes) {
        let gfp = Self::gfp(b);
        let nr = b.u8() as usize % 48;
        let pre = (b.u8() % 3) as usize;
        let mut out: Vec<Pfn> = (0..pre).map(|i| Pfn::new((1 << 50) + i as u64)).collect();
        let n = self.a.alloc_pages_bulk_list(gfp, nr, &mut out);
        assert!(n <= nr && out.len() == pre + n, "bulk list: {n} of {nr}, len {}", out.len());
        for (i, p) in out[..pre].iter().enumerate() {
            assert_eq!(p.as_u64(), (1 << 50) + i as u64, "bulk list touched existing entries");
        }
        for &p in &out[pre..] {
            self.took("alloc_pages_bulk_list", p.as_u64(), 0, gfp, None);
        }
    }

    fn op_bulk_free(&mut self, b: &mut Bytes) {
        let n = b.u8() as usize % 24;
        let mut pfns = Vec::with_capacity(n);
        for _ in 0..n {
            let p = if b.u8().is_multiple_of(4) { self.pick_pfn(b) } else { self.pick_order0(b).unwrap_or(0) };
            pfns.push(p);
        }
        let mut expected = Vec::new();
        for (i, &p) in pfns.iter().enumerate() {
            match self.expect_free(p, 0) {
                Expect::Ok => self.forget(p),
                e => expected.push((i, e)),
            }
        }
        let list: Vec<Pfn> = pfns.iter().map(|&p| Pfn::new(p)).collect();
        match self.a.free_pages_bulk(&list) {
            Ok(()) => assert!(expected.is_empty(), "bulk free of {pfns:x?} accepted everything, expected {expected:?}"),
            Err(e) => {
                assert_eq!(e.rejected.len(), expected.len(), "bulk free of {pfns:x?}: {e:?} vs {expected:?}");
                for ((gi, ge), (ei, ee)) in e.rejected.iter().zip(&expected) {
                    assert_eq!(gi, ei, "bulk free of {pfns:x?}: {e:?} vs {expected:?}");
                    self.agree_free("free_pages_bulk", ee, &Err(*ge));
                }
            }
        }
    }

    fn pick_order0(&self, b: &mut Bytes) -> Option<u64> {
        let i = b.u16() as usize;
        let v: Vec<u64> = self.blocks.iter().filter(|(_, bl)| bl.order == 0).map(|(&h, _)| h).collect();
        (!v.is_empty()).then(|| v[i % v.len()])
    }

    fn pick_range(&self, b: &mut Bytes) -> (u64, u64) {
        let s = match b.u8() % 4 {
            0 | 1 => (b.u8() as u64 % (self.nr_pages / PAGEBLOCK_PAGES)) * PAGEBLOCK_PAGES,
            2 => b.u16() as u64 % self.nr_pages,
            _ => self.pick_pfn(b),
        };
        let nr = match b.u8() % 6 {
            0 => 0,
            1 => u64::MAX - b.u8() as u64,
            2 | 3 => PAGEBLOCK_PAGES * (1 + (b.u8() % 3) as u64),
            _ => 1 + b.u16() as u64 % 1536,
        };
        (s, nr)
    }

    /// The pageblocks of `[s, s + nr)` if the range is good (one zone, in the arena).
    fn range_blocks(&self, s: u64, nr: u64) -> Option<Vec<u64>> {
        let e = s.checked_add(nr)?;
        if nr == 0 || e > self.nr_pages || self.zone_of(s) != self.zone_of(e - 1) {
            return None;
        }
        let bs = s & !(PAGEBLOCK_PAGES - 1);
        Some((bs..e).step_by(PAGEBLOCK_PAGES as usize).collect())
    }

    fn op_isolate(&mut self, b: &mut Bytes) {
        let (s, nr) = self.pick_range(b);
        let got = self.a.isolate_range(Pfn::new(s), nr);
        let Some(blocks) = self.range_blocks(s, nr) else {
            assert_eq!(got, Err(PageStateError::BadRange { pfn: Pfn::new(s) }), "isolate_range({s:#x}, {nr})");
            return;
        };
        let first_iso = blocks.iter().copied().find(|bl| self.isolated.contains(bl));
        match got {
            Ok(()) => {
                assert!(first_iso.is_none(), "isolate_range({s:#x}, {nr}) isolated {first_iso:?} twice");
                self.isolated.extend(blocks);
            }
            Err(PageStateError::AlreadyIsolated { pfn }) => {
                assert_eq!(Some(pfn.as_u64()), first_iso, "isolate_range({s:#x}, {nr})")
            }
            // The model does not track HighAtomic reserves: accept one before any
            // isolated block.
            Err(PageStateError::Unisolatable { pfn, .. }) => {
                assert!(blocks.contains(&pfn.as_u64()) && first_iso.is_none_or(|f| pfn.as_u64() < f))
            }
            Err(e) => panic!("isolate_range({s:#x}, {nr}): unexpected {e:?}"),
        }
    }

    fn op_undo_isolate(&mut self, b: &mut Bytes) {
        let (s, nr) = if b.u8().is_multiple_of(2) && !self.isolated.is_empty() {
            let i = b.u8() as usize % self.isolated.len();
            let bl = *self.isolated.iter().nth(i).unwrap();
            (bl, PAGEBLOCK_PAGES)
        } else {
            self.pick_range(b)
        };
        let got = self.a.undo_isolate_range(Pfn::new(s), nr);
        let exp = match self.range_blocks(s, nr) {
            None => Err(PageStateError::BadRange { pfn: Pfn::new(s) }),
            Some(blocks) => match blocks.iter().find(|bl| !self.isolated.contains(bl)) {
                Some(&bl) => Err(PageStateError::NotIsolated { pfn: Pfn::new(bl) }),
                None => {
                    for bl in &blocks {
                        self.isolated.remove(bl);
                    }
                    Ok(())
                }
            },
        };
        assert_eq!(got, exp, "undo_isolate_range({s:#x}, {nr})");
    }

    fn op_test_isolated(&mut self, b: &mut Bytes) {
        let (s, nr) = self.pick_range(b);
        let got = self.a.test_pages_isolated(Pfn::new(s), nr);
        let exp = self
            .range_blocks(s, nr)
            .is_some_and(|blocks| blocks.iter().all(|bl| self.isolated.contains(bl)) && self.overlaps(s, nr).is_none());
        assert_eq!(got, exp, "test_pages_isolated({s:#x}, {nr})");
    }

    fn op_contig(&mut self, b: &mut Bytes) {
        let gfp = Self::gfp(b);
        let nr = match b.u8() % 8 {
            0 => 0,
            1 => self.nr_pages + 1,
            2..=5 => 1 + b.u8() as u64 % 64,
            _ => 1 + b.u16() as u64 % 1100,
        };
        match self.a.alloc_contig_pages(nr, gfp) {
            Ok(p) => {
                assert!(nr > 0 && nr <= self.nr_pages);
                for q in p.as_u64()..p.as_u64() + nr {
                    self.took("alloc_contig_pages", q, 0, gfp, None);
                }
            }
            Err(AllocError::NoMemory { .. }) => {}
            Err(e) => panic!("alloc_contig_pages({nr}): unexpected {e:?}"),
        }
    }

    fn op_free_contig(&mut self, b: &mut Bytes) {
        let Some(s) = (if b.u8().is_multiple_of(4) { Some(self.pick_pfn(b)) } else { self.pick_order0(b) }) else {
            return;
        };
        let nr = b.u8() as u64 % 80;
        // All or nothing: the first page that cannot be freed is reported and
        // nothing is freed.
        let mut exp = Ok(());
        for i in 0..nr {
            match self.expect_free(s.wrapping_add(i), 0) {
                Expect::Ok => {}
                e => {
                    exp = Err(e);
                    break;
                }
            }
        }
        if exp.is_ok() {
            for i in 0..nr {
                self.forget(s.wrapping_add(i));
            }
        }
        let got = self.a.free_contig_range(Pfn::new(s), nr);
        match exp {
            Ok(()) => assert_eq!(got, Ok(()), "free_contig_range({s:#x}, {nr})"),
            Err(e) => self.agree_free(&format!("free_contig_range({s:#x}, {nr})"), &e, &got),
        }
    }

    fn op_drain(&mut self, b: &mut Bytes) {
        let k = b.u8();
        if k % 4 == 2 {
            // Move to another CPU (where the machine has it): other per-CPU lists.
            pagealloc::pin_to_cpu((k >> 2) as usize % 4);
        } else if k.is_multiple_of(2) {
            self.a.drain_local_pages();
        } else {
            self.a.drain_all_pages();
            assert_eq!(self.a.census().pcp, 0, "drain_all_pages left pages on per-CPU lists");
            assert!(self.a.pcp_report().iter().all(|r| r.count == 0));
        }
    }

    fn op_trylock_lock(&mut self, b: &mut Bytes) {
        let p = self.pick_pfn(b);
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        match b.u8() % 5 {
            0 | 1 => {
                let got = self.a.trylock_page(pfn);
                assert_eq!(got, exp.is_ok_and(|bl| !bl.locked), "trylock_page({p:#x})");
            }
            2 => match exp {
                Ok(bl) if bl.locked => {
                    let got = self.a.lock_page_timeout(pfn, Duration::ZERO);
                    assert_eq!(got, Err(WaitError::TimedOut), "lock_page_timeout({p:#x}) of a locked page");
                }
                Ok(_) => self.a.lock_page(pfn).unwrap(),
                Err(e) => assert_eq!(self.a.lock_page(pfn), Err(e), "lock_page({p:#x})"),
            },
            3 => {
                let t = CancelToken::new();
                t.cancel();
                let got = self.a.lock_page_cancellable(pfn, &t);
                let want = match exp {
                    Ok(bl) if bl.locked => Err(WaitError::Cancelled),
                    Ok(_) => Ok(()),
                    Err(e) => Err(WaitError::State(e)),
                };
                assert_eq!(got, want, "lock_page_cancellable({p:#x}) with a cancelled token");
            }
            _ => {
                // A guard: lock and unlock on drop; nothing changes.
                match exp {
                    Ok(bl) if !bl.locked => drop(self.a.lock_page_guard(pfn).unwrap()),
                    Ok(_) => {}
                    Err(e) => assert_eq!(self.a.lock_page_guard(pfn).err(), Some(e)),
                }
                return;
            }
        }
        if let Some(bl) = self.blocks.get_mut(&p) {
            bl.locked = true;
        }
    }

    fn op_unlock(&mut self, b: &mut Bytes) {
        let p = self.pick_pfn(b);
        let pfn = Pfn::new(p);
        let uptodate = b.u8().is_multiple_of(3);
        let got = if uptodate { self.a.unlock_page_uptodate(pfn) } else { self.a.unlock_page(pfn) };
        let exp = match self.state_expect(p) {
            Ok(bl) if bl.locked => {
                let bl = self.blocks.get_mut(&p).unwrap();
                bl.locked = false;
                bl.uptodate |= uptodate;
                Ok(())
            }
            Ok(_) => Err(PageStateError::NotLocked { pfn }),
            Err(e) => Err(e),
        };
        assert_eq!(got, exp, "unlock_page({p:#x}) uptodate={uptodate}");
    }

    fn op_writeback(&mut self, b: &mut Bytes) {
        let p = self.pick_pfn(b);
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        if b.u8().is_multiple_of(2) {
            let got = self.a.set_page_writeback(pfn);
            assert_eq!(got, exp.map(|bl| !bl.writeback), "set_page_writeback({p:#x})");
            if let Some(bl) = self.blocks.get_mut(&p) {
                bl.writeback = true;
            }
        } else {
            let got = self.a.end_page_writeback(pfn);
            let want = match exp {
                Ok(bl) if bl.writeback => Ok(()),
                Ok(_) => Err(PageStateError::NotWriteback { pfn }),
                Err(e) => Err(e),
            };
            assert_eq!(got, want, "end_page_writeback({p:#x})");
            if let Some(bl) = self.blocks.get_mut(&p) {
                bl.writeback = false;
            }
        }
    }

    fn op_wait(&mut self, b: &mut Bytes) {
        let p = self.pick_pfn(b);
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        if b.u8().is_multiple_of(2) {
            match exp {
                Ok(bl) if bl.locked => {
                    assert_eq!(self.a.wait_on_page_locked_timeout(pfn, Duration::ZERO), Err(WaitError::TimedOut))
                }
                Ok(_) => self.a.wait_on_page_locked(pfn).unwrap(),
                Err(e) => assert_eq!(self.a.wait_on_page_locked(pfn), Err(e)),
            }
        } else {
            match exp {
                Ok(bl) if bl.writeback => {
                    assert_eq!(self.a.wait_on_page_writeback_timeout(pfn, Duration::ZERO), Err(WaitError::TimedOut))
                }
                Ok(_) => self.a.wait_on_page_writeback(pfn).unwrap(),
                Err(e) => assert_eq!(self.a.wait_on_page_writeback(pfn), Err(e)),
            }
        }
    }

    fn op_uptodate(&mut self, b: &mut Bytes) {
        let p = self.pick_pfn(b);
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        match b.u8() % 3 {
            0 => {
                assert_eq!(self.a.set_page_uptodate(pfn), exp.map(|_| ()));
                if let Some(bl) = self.blocks.get_mut(&p) {
                    bl.uptodate = true;
                }
            }
            1 => {
                assert_eq!(self.a.clear_page_uptodate(pfn), exp.map(|_| ()));
                if let Some(bl) = self.blocks.get_mut(&p) {
                    bl.uptodate = false;
                }
            }
            _ => {}
        }
        let bl = self.blocks.get(&p).copied();
        assert_eq!(self.a.page_uptodate(pfn), bl.is_some_and(|b| b.uptodate), "page_uptodate({p:#x})");
        assert_eq!(self.a.page_locked_racy(pfn), bl.is_some_and(|b| b.locked), "page_locked_racy({p:#x})");
        assert_eq!(self.a.page_writeback_racy(pfn), bl.is_some_and(|b| b.writeback), "page_writeback_racy({p:#x})");
    }

    fn op_reports(&mut self, b: &mut Bytes) {
        match b.u8() % 6 {
            0 => assert!(self.a.buddyinfo().to_string().starts_with("Node 0, zone")),
            1 => assert!(self.a.pagetypeinfo().to_string().starts_with("Page block order: 9")),
            2 => assert!(!self.a.zoneinfo().to_string().is_empty()),
            3 => assert!(!self.a.vmstat().to_string().is_empty()),
            4 => {
                let s = self.a.snapshot_consistent();
                assert!(s.consistent);
                let free: u64 = s.zones.iter().map(|z| z.nr_free_pages).sum();
                assert_eq!(free, self.a.nr_free_pages(), "snapshot NR_FREE_PAGES disagrees");
            }
            _ => {
                let f = self.a.fragmentation();
                assert_eq!(f.pageblocks, self.nr_pages / PAGEBLOCK_PAGES);
            }
        }
    }

    fn op_bad_config(&mut self, b: &mut Bytes) {
        let base = Config::small(8 << 20);
        let (cfg, check): (Config, fn(&ConfigError) -> bool) = match b.u8() % 9 {
            0 => (base.arena_bytes((8 << 20) + 1), |e| matches!(e, ConfigError::ArenaNotPageMultiple { .. })),
            1 => (base.arena_bytes(1 << 20), |e| matches!(e, ConfigError::ArenaTooSmall { .. })),
            2 => (base.arena_bytes(1 << 46), |e| matches!(e, ConfigError::ArenaTooLarge { .. })),
            3 => (base.nodes(0), |e| matches!(e, ConfigError::TooManyNodes { .. })),
            4 => (base.nodes(5), |e| matches!(e, ConfigError::TooManyNodes { .. })),
            5 => (base.movable_zone_bytes(8 << 20), |e| matches!(e, ConfigError::EmptyZone { .. })),
            6 => (base.watermark_scale_factor(0), |e| matches!(e, ConfigError::Invalid { .. })),
            7 => (base.nr_cpus(Some(0)), |e| matches!(e, ConfigError::Invalid { .. })),
            _ => (base.percpu_pagelist_high_fraction(3), |e| matches!(e, ConfigError::Invalid { .. })),
        };
        match PageAllocator::new(cfg) {
            Ok(_) => panic!("a config that cannot work was accepted"),
            Err(e) => assert!(check(&e), "unexpected config error {e:?}"),
        }
    }

    // ---- the checks after every step ----

    fn check(&self, op: u8) {
        if let Err(e) = self.a.check_invariants() {
            panic!("after op {op} (step {}): {e}", self.steps);
        }
        let c = self.a.census();
        assert_eq!(c.allocated, self.allocated_pages(), "census disagrees with the model after op {op}");
        assert_eq!(c.free + c.pcp + c.allocated, self.a.managed_pages(), "pages not conserved after op {op}: {c:?}");
        assert!(c.isolated_free <= self.isolated.len() as u64 * PAGEBLOCK_PAGES, "{c:?}");
        assert_eq!(self.a.nr_free_pages(), c.free - c.isolated_free, "NR_FREE_PAGES disagrees with the census");
    }

    /// Give everything back and check the arena is whole.
    pub fn finish(mut self) {
        for (&h, bl) in &self.blocks {
            let pfn = Pfn::new(h);
            if bl.writeback {
                self.a.end_page_writeback(pfn).unwrap();
            }
            if bl.locked {
                self.a.unlock_page(pfn).unwrap();
            }
            self.a.free_pages(pfn, bl.order).unwrap_or_else(|e| panic!("final free of {h:#x}: {e}"));
        }
        self.blocks.clear();
        for &bl in &self.isolated {
            self.a.undo_isolate_range(Pfn::new(bl), PAGEBLOCK_PAGES).unwrap();
        }
        self.isolated.clear();
        self.a.drain_all_pages();
        self.check(255);
        let c = self.a.census();
        assert_eq!((c.allocated, c.pcp, c.isolated_free), (0, 0, 0), "{c:?}");
        assert_eq!(self.a.nr_free_pages(), self.a.managed_pages(), "pages leaked");
    }
}

/// Decode and run one input: the whole check. Panics on any disagreement.
pub fn run(data: &[u8]) {
    run_with(data, |c| c)
}

/// [`run`] with the decoded configuration changed by `tweak` first.
pub fn run_with(data: &[u8], tweak: impl FnOnce(Config) -> Config) {
    // One CPU unless the input moves us: the per-CPU lists used, and so every
    // answer, depend only on the input.
    pagealloc::pin_to_cpu(0);
    let mut b = Bytes::new(data);
    let cfg = tweak(decode_config(&mut b));
    let Some(mut m) = Model::new(cfg) else { return };
    while !b.done() && m.steps < MAX_STEPS {
        m.step(&mut b);
    }
    m.finish();
}
