//! The fuzzer's input format: bytes to configuration and steps.
//!
//! Three bytes choose the configuration (arena size, nodes, Movable zone,
//! per-CPU lists and front caches on or off, backing, drain mode, batch,
//! watermarks), then each step is one byte of opcode followed by the bytes its
//! decoder reads. Reading past the end yields zeros, so every input decodes.
//! Pfns and orders are picked with the model's state in view (a held head, a
//! pfn inside a held block, a recently freed one, ...), so the bytes an input
//! consumes depend on the model: change a picker only together with the kept
//! inputs in `fuzz/regressions/`.

use super::model::Model;
use super::ops::Drain;
use super::pageops::LockHow;
#[cfg(feature = "seed-variants")]
use pagealloc::DrainMode;
use pagealloc::{Backing, Config, Gfp, MAX_ORDER, PAGEBLOCK_PAGES};

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
        .min_free_kbytes(if b1 & 32 != 0 { Some(0) } else { None });
    // Bits 2-4 pick the old designs; without them the input means today's.
    #[cfg(feature = "seed-variants")]
    {
        cfg = cfg
            .page_lock_waiters_bit(b1 & 4 == 0)
            .drain_mode(if b1 & 8 != 0 { DrainMode::TwoPass } else { DrainMode::SinglePass })
            .pcp_migratetype_cache(b1 & 16 != 0);
    }
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

// ---- pfn, order, range and gfp pickers ----

fn pick_head(m: &Model, b: &mut Bytes) -> Option<u64> {
    let i = b.u16() as usize;
    let blocks = m.blocks();
    (!blocks.is_empty()).then(|| *blocks.keys().nth(i % blocks.len()).unwrap())
}

fn pick_pfn(m: &Model, b: &mut Bytes) -> u64 {
    let nr_pages = m.nr_pages();
    match b.u8() % 16 {
        0..=7 => pick_head(m, b).unwrap_or(0),
        8 | 9 => match pick_head(m, b) {
            Some(h) => {
                let o = m.blocks()[&h].order;
                h + 1 + (b.u16() as u64 % ((1u64 << o).max(2) - 1))
            }
            None => 1,
        },
        10 | 11 => b.u16() as u64 % nr_pages,
        12 => {
            let i = b.u8() as usize;
            if m.recently_freed.is_empty() {
                0
            } else {
                m.recently_freed[i % m.recently_freed.len()]
            }
        }
        13 => nr_pages + b.u8() as u64,
        14 => [u64::MAX - (1 << 20), 1 << 40, u32::MAX as u64, u32::MAX as u64 - 1][(b.u8() & 3) as usize],
        _ => (b.u8() as u64 % (nr_pages / PAGEBLOCK_PAGES)) * PAGEBLOCK_PAGES,
    }
}

fn pick_order(m: &Model, b: &mut Bytes, pfn: u64) -> u32 {
    let o = m.blocks().get(&pfn).map_or(0, |bl| bl.order);
    match b.u8() % 8 {
        0..=4 => o,
        5 => (o + 1) % (MAX_ORDER + 1),
        6 => b.u8() as u32 % (MAX_ORDER + 1),
        _ => [MAX_ORDER + 1, MAX_ORDER + 2, 31, u32::MAX][(b.u8() & 3) as usize],
    }
}

fn pick_order0(m: &Model, b: &mut Bytes) -> Option<u64> {
    let i = b.u16() as usize;
    let v = m.order0_pages();
    (!v.is_empty()).then(|| v[i % v.len()].as_u64())
}

fn pick_range(m: &Model, b: &mut Bytes) -> (u64, u64) {
    let nr_pages = m.nr_pages();
    let s = match b.u8() % 4 {
        0 | 1 => (b.u8() as u64 % (nr_pages / PAGEBLOCK_PAGES)) * PAGEBLOCK_PAGES,
        2 => b.u16() as u64 % nr_pages,
        _ => pick_pfn(m, b),
    };
    let nr = match b.u8() % 6 {
        0 => 0,
        1 => u64::MAX - b.u8() as u64,
        2 | 3 => PAGEBLOCK_PAGES * (1 + (b.u8() % 3) as u64),
        _ => 1 + b.u16() as u64 % 1536,
    };
    (s, nr)
}

fn gfp(b: &mut Bytes) -> Gfp {
    Gfp::from_bits_truncate(b.u8() as u32 & 0x1f)
}

/// Decode one step from `b` and run it on `m`, then the after-step checks.
pub fn step(m: &mut Model, b: &mut Bytes) {
    m.steps += 1;
    let op = b.u8() % 24;
    if m.trace {
        eprintln!("step {} op {op} (held {} blocks, {} isolated)", m.steps, m.blocks().len(), m.isolated.len());
    }
    match op {
        0..=3 => {
            let g = gfp(b);
            let order = match b.u8() {
                x @ 0..=199 => x as u32 % 4,
                x @ 200..=249 => x as u32 % (MAX_ORDER + 1),
                x => MAX_ORDER + 1 + (x as u32 & 3),
            };
            let node_sel = b.u8();
            let node = (node_sel & 1 == 1).then(|| (node_sel >> 1) as u32 % (m.cfg.nodes + 1));
            // Without a node, one in four through a `Pages` handle (no new
            // byte, so kept inputs read the same bytes).
            match node_sel & 7 {
                2 => m.alloc_handle(g, order, true),
                6 => m.alloc_handle(g, order, false),
                _ => {
                    m.alloc(g, order, node);
                }
            }
        }
        4..=6 => {
            let p = pick_pfn(m, b);
            let order = pick_order(m, b, p);
            let _ = m.free(p, order);
        }
        7 => {
            let g = gfp(b);
            let len = b.u8() as usize % 48;
            let mask = b.u64();
            const SENTINEL: u64 = 1 << 50;
            // Bits 48..64 of the mask name no slot: with bit 62, a
            // `PageArray` of `len` slots instead (no new byte, so kept
            // inputs read the same bytes).
            if mask >> 62 & 1 == 1 {
                m.page_array(g, len, mask >> 1);
            } else {
                let mut slots: Vec<Option<pagealloc::Pfn>> = (0..len)
                    .map(|i| (mask >> (i % 64) & 1 == 1).then(|| pagealloc::Pfn::new(SENTINEL + i as u64)))
                    .collect();
                m.bulk_alloc(g, &mut slots);
            }
        }
        8 => {
            let g = gfp(b);
            let nr = b.u8() as usize % 48;
            let pre = (b.u8() % 3) as usize;
            let mut out: Vec<pagealloc::Pfn> = (0..pre).map(|i| pagealloc::Pfn::new((1 << 50) + i as u64)).collect();
            m.bulk_list(g, nr, &mut out);
        }
        9 => {
            let n = b.u8() as usize % 24;
            let mut pfns = Vec::with_capacity(n);
            for _ in 0..n {
                let p = if b.u8().is_multiple_of(4) { pick_pfn(m, b) } else { pick_order0(m, b).unwrap_or(0) };
                pfns.push(pagealloc::Pfn::new(p));
            }
            m.bulk_free(&pfns);
        }
        10 => {
            let (s, nr) = pick_range(m, b);
            let _ = m.isolate(s, nr);
        }
        11 => {
            let (s, nr) = if b.u8().is_multiple_of(2) && !m.isolated.is_empty() {
                let i = b.u8() as usize % m.isolated.len();
                (*m.isolated.iter().nth(i).unwrap(), PAGEBLOCK_PAGES)
            } else {
                pick_range(m, b)
            };
            let _ = m.undo_isolate(s, nr);
        }
        12 => {
            let (s, nr) = pick_range(m, b);
            m.test_isolated(s, nr);
        }
        13 => {
            let g = gfp(b);
            let nr = match b.u8() % 8 {
                0 => 0,
                1 => m.nr_pages() + 1,
                2..=5 => 1 + b.u8() as u64 % 64,
                _ => 1 + b.u16() as u64 % 1100,
            };
            m.contig(g, nr);
        }
        14 => {
            let s = if b.u8().is_multiple_of(4) { Some(pick_pfn(m, b)) } else { pick_order0(m, b) };
            if let Some(s) = s {
                let nr = b.u8() as u64 % 80;
                let _ = m.free_contig(s, nr);
            }
        }
        15 => {
            let k = b.u8();
            m.drain(if k % 4 == 2 {
                Drain::PinTo((k >> 2) as usize % 4)
            } else if k.is_multiple_of(2) {
                Drain::Local
            } else {
                Drain::All
            });
        }
        16 => {
            let p = pick_pfn(m, b);
            let how = match b.u8() % 5 {
                0 | 1 => LockHow::Try,
                2 => LockHow::Lock,
                3 => LockHow::Cancelled,
                _ => LockHow::Guard,
            };
            m.lock(p, how);
        }
        17 => {
            let p = pick_pfn(m, b);
            let uptodate = b.u8().is_multiple_of(3);
            let _ = m.unlock(p, uptodate);
        }
        18 => {
            let p = pick_pfn(m, b);
            let set = b.u8().is_multiple_of(2);
            m.writeback(p, set);
        }
        19 => {
            let p = pick_pfn(m, b);
            let writeback = !b.u8().is_multiple_of(2);
            m.wait(p, writeback);
        }
        20 => {
            let p = pick_pfn(m, b);
            let set = match b.u8() % 3 {
                0 => Some(true),
                1 => Some(false),
                _ => None,
            };
            m.uptodate(p, set);
        }
        21 => {
            let k = b.u8();
            m.report(k);
        }
        22 => {
            let k = b.u8();
            m.bad_config(k);
        }
        _ => {
            if let Some(h) = pick_head(m, b) {
                m.free_held(h);
            }
        }
    }
    m.check(&format!("op {op}"));
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
        step(&mut m, &mut b);
    }
    m.finish();
}
