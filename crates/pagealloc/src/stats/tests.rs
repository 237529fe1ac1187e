//! Tests of the statistics and reports.
//!
//! The parsers here are written from the kernel's format strings (the widths in
//! the `report` module docs, checked against a real /proc), not from our
//! printer: each one consumes fixed-width columns and fails on any byte out of
//! place.

use super::*;
use crate::allocator::PageAllocator;
use crate::types::{Gfp, MigrateType, Pfn, ZoneIdx, MIGRATE_TYPES, NR_ORDERS, PAGEBLOCK_PAGES};
use crate::vmevent::VmEvent;
use crate::Config;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};

// ------------------------------------------------------------------ parsers

/// A cursor over one line that takes fixed-width columns.
struct Cols<'a> {
    line: &'a str,
    pos: usize,
}

impl<'a> Cols<'a> {
    fn new(line: &'a str) -> Self {
        Self { line, pos: 0 }
    }
    fn lit(&mut self, s: &str) {
        assert!(self.line[self.pos..].starts_with(s), "expected {s:?} at column {} of {:?}", self.pos, self.line);
        self.pos += s.len();
    }
    /// A `%Nd`/`%Ns` column: exactly `w` bytes (or more when the value is wider,
    /// as printf does), right aligned; returns the trimmed text.
    fn right(&mut self, w: usize) -> &'a str {
        let rest = &self.line[self.pos..];
        let lead = rest.bytes().take_while(|&b| b == b' ').count();
        let body = rest[lead..].bytes().take_while(|&b| b != b' ' && b != b',').count();
        assert!(lead + body >= w, "column narrower than {w} at {} of {:?}", self.pos, self.line);
        assert!(lead == 0 || lead + body == w, "column wider than {w} with padding at {} of {:?}", self.pos, self.line);
        self.pos += lead + body;
        &rest[lead..lead + body]
    }
    /// A `%-Ns` column: text padded on the right to `w` bytes.
    fn left(&mut self, w: usize) -> &'a str {
        let rest = &self.line[self.pos..];
        assert!(rest.len() >= w, "short line {:?}", self.line);
        let s = &rest[..w];
        self.pos += w;
        s.trim_end()
    }
    /// A `%d` column: digits up to the next non-digit.
    fn num(&mut self) -> u64 {
        let rest = &self.line[self.pos..];
        let n = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        assert!(n > 0, "expected a number at {} of {:?}", self.pos, self.line);
        self.pos += n;
        rest[..n].parse().unwrap()
    }
    fn end(&self) {
        assert_eq!(self.pos, self.line.len(), "trailing bytes in {:?}", self.line);
    }
}

fn u(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// /proc/buddyinfo: `Node %d, zone %8s ` then `%6lu ` per order.
fn parse_buddyinfo(text: &str) -> Vec<(u64, String, Vec<u64>)> {
    assert!(text.ends_with('\n'));
    text.lines()
        .map(|l| {
            let mut c = Cols::new(l);
            c.lit("Node ");
            let nid = c.num();
            c.lit(", zone ");
            let zone = c.right(8).to_string();
            c.lit(" ");
            let mut v = Vec::new();
            for _ in 0..NR_ORDERS {
                v.push(u(c.right(6)));
                c.lit(" ");
            }
            c.end();
            (nid, zone, v)
        })
        .collect()
}

/// One zone of a parsed pagetypeinfo: counts per type and order (with the
/// overflow mark), and block counts per type.
#[derive(Debug, Default)]
struct PtZone {
    nid: u64,
    zone: String,
    free: Vec<Vec<(bool, u64)>>,
    blocks: Vec<u64>,
}

const TYPE_NAMES: [&str; MIGRATE_TYPES] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

/// /proc/pagetypeinfo, node after node.
fn parse_pagetypeinfo(text: &str, zones_per_node: usize) -> Vec<PtZone> {
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < lines.len() {
        assert_eq!(lines[i], "Page block order: 9");
        assert_eq!(lines[i + 1], "Pages per block:  512");
        assert_eq!(lines[i + 2], "");
        let mut c = Cols::new(lines[i + 3]);
        assert_eq!(c.left(43), "Free pages count per migrate type at order");
        c.lit(" ");
        for o in 0..NR_ORDERS {
            assert_eq!(u(c.right(6)), o as u64);
            c.lit(" ");
        }
        c.end();
        i += 4;
        let first = out.len();
        for _ in 0..zones_per_node {
            let mut z = PtZone::default();
            for name in TYPE_NAMES {
                let mut c = Cols::new(lines[i]);
                c.lit("Node ");
                let nid = u(c.right(4));
                c.lit(", zone ");
                let zone = c.right(8).to_string();
                c.lit(", type ");
                assert_eq!(c.right(12), name);
                c.lit(" ");
                let mut row = Vec::new();
                for _ in 0..NR_ORDERS {
                    let over = c.line[c.pos..].starts_with('>');
                    if over {
                        c.lit(">");
                    }
                    row.push((over, u(c.right(6))));
                    c.lit(" ");
                }
                c.end();
                z.nid = nid;
                z.zone = zone;
                z.free.push(row);
                i += 1;
            }
            out.push(z);
        }
        assert_eq!(lines[i], "");
        let mut c = Cols::new(lines[i + 1]);
        assert_eq!(c.left(23), "Number of blocks type");
        for name in TYPE_NAMES {
            assert_eq!(c.right(12), name);
            c.lit(" ");
        }
        c.end();
        i += 2;
        for z in &mut out[first..] {
            let mut c = Cols::new(lines[i]);
            c.lit("Node ");
            assert_eq!(c.num(), z.nid);
            c.lit(", zone ");
            assert_eq!(c.right(8), z.zone);
            c.lit(" ");
            for _ in TYPE_NAMES {
                z.blocks.push(u(c.right(12)));
                c.lit(" ");
            }
            c.end();
            i += 1;
        }
    }
    out
}

/// /proc/zoneinfo: per zone the named values, and per CPU (count, high, batch).
#[derive(Debug, Default)]
struct ZiZone {
    nid: u64,
    zone: String,
    vals: std::collections::BTreeMap<String, u64>,
    protection: Vec<u64>,
    cpus: Vec<(u64, u64, u64, u64)>,
}

fn parse_zoneinfo(text: &str) -> Vec<ZiZone> {
    assert!(text.ends_with('\n'));
    let mut out: Vec<ZiZone> = Vec::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("Node ") {
            let mut c = Cols::new(rest);
            let nid = c.num();
            c.lit(", zone ");
            let zone = c.right(8).to_string();
            c.end();
            out.push(ZiZone { nid, zone, ..Default::default() });
            continue;
        }
        let z = out.last_mut().expect("zone header first");
        if let Some(v) = l.strip_prefix("  pages free     ") {
            z.vals.insert("free".into(), u(v));
        } else if let Some(v) = l.strip_prefix("        protection: (") {
            let v = v.strip_suffix(')').unwrap();
            z.protection = v.split(", ").map(u).collect();
        } else if l.starts_with("        ") && !l.starts_with("         ") {
            let mut c = Cols::new(&l[8..]);
            let k = c.left(8).to_string();
            c.lit(" ");
            z.vals.insert(k, c.num());
            c.end();
        } else if l.starts_with("      ") && !l.starts_with("       ") {
            let mut c = Cols::new(&l[6..]);
            let name_len = l[6..].find(' ').unwrap().max(12);
            let k = c.left(name_len).to_string();
            c.lit(" ");
            z.vals.insert(k, c.num());
            c.end();
        } else if l == "  pagesets" || l == "  per-node stats" {
        } else if let Some(v) = l.strip_prefix("    cpu: ") {
            z.cpus.push((u(v), 0, 0, 0));
        } else if let Some(v) = l.strip_prefix("              count:    ") {
            z.cpus.last_mut().unwrap().1 = u(v);
        } else if let Some(v) = l.strip_prefix("              high:     ") {
            z.cpus.last_mut().unwrap().2 = u(v);
        } else if let Some(v) = l.strip_prefix("              batch:    ") {
            z.cpus.last_mut().unwrap().3 = u(v);
        } else if l.starts_with("              high_min: ")
            || l.starts_with("              high_max: ")
            || l.starts_with("  vm stats threshold: ")
        {
        } else if let Some(v) = l.strip_prefix("  node_unreclaimable:  ") {
            u(v);
        } else if let Some(v) = l.strip_prefix("  start_pfn:           ") {
            z.vals.insert("start_pfn".into(), u(v));
        } else {
            panic!("unexpected zoneinfo line {l:?}");
        }
    }
    out
}

/// /proc/vmstat: `name value`.
fn parse_vmstat(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            assert!(!k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            (k.to_string(), u(v))
        })
        .collect()
}

// ---------------------------------------------------------------- workloads

fn small(mb: u64) -> PageAllocator {
    PageAllocator::new(Config::small(mb << 20)).unwrap()
}

/// Random mixed-order, mixed-type allocations and frees; returns what is live.
fn churn(a: &PageAllocator, rng: &mut StdRng, ops: usize, live: &mut Vec<(Pfn, u32)>) {
    for _ in 0..ops {
        if live.is_empty() || rng.gen_bool(0.55) {
            let gfp = match rng.gen_range(0..10) {
                0..=5 => Gfp::MOVABLE,
                6..=8 => Gfp::KERNEL,
                _ => Gfp::RECLAIMABLE,
            };
            let gfp = if rng.gen_ratio(1, 50) { gfp | Gfp::ATOMIC } else { gfp };
            let order = match rng.gen_range(0..100) {
                0..=69 => 0,
                70..=84 => 1,
                85..=94 => rng.gen_range(2..5),
                _ => rng.gen_range(5..=10),
            };
            if let Ok(p) = a.alloc_pages(gfp, order) {
                live.push((p, order));
            }
        } else {
            let k = rng.gen_range(0..live.len());
            let (p, o) = live.swap_remove(k);
            a.free_pages(p, o).unwrap();
        }
    }
}

/// Every counter of one zone, recounted from the lists and pageblocks. The
/// caller holds the zone lock (passes the guard's lists).
fn recount(a: &PageAllocator, zi: usize, area: &crate::zone::FreeArea) -> ZoneCounters {
    let z = &a.core.zones[ZoneIdx::new(zi).unwrap()];
    let mm = &a.core.mm;
    let mut free_blocks = [[0u64; MIGRATE_TYPES]; NR_ORDERS];
    let mut nr_free_pages = 0;
    for (o, row) in free_blocks.iter_mut().enumerate() {
        for mt in MigrateType::ALL {
            let n = area.lists[o][mt.index()].iter(mm).count() as u64;
            row[mt.index()] = n;
            if mt != MigrateType::Isolate {
                nr_free_pages += n << o;
            }
        }
    }
    let mut block_count = [0u64; MIGRATE_TYPES];
    for b in 0..z.nr_pageblocks() as u64 {
        block_count[z.pageblock_mt_racy(z.start + b * PAGEBLOCK_PAGES).index()] += 1;
    }
    ZoneCounters {
        nid: z.nid,
        zone: z.ztype,
        free_blocks,
        nr_free_pages,
        block_count,
        // No list holds this; it is checked against the reserved blocks instead.
        nr_reserved_highatomic: z.stats.nr_reserved_highatomic.get_racy(),
    }
}

fn lock_counts(a: &PageAllocator) -> Vec<u64> {
    a.core.zones.iter().map(|z| z.lock_count.load(Ordering::Relaxed)).collect()
}

// -------------------------------------------------------------------- tests

#[test]
fn every_report_parses_and_agrees_after_random_workloads() {
    for (seed, cfg) in [
        (1u64, Config::small(16 << 20)),
        (2, Config::small(32 << 20).nodes(2).movable_zone_bytes(4 << 20)),
        (3, Config::small(16 << 20).pagetypeinfo_walk_lists(true)),
    ] {
        let a = PageAllocator::new(cfg).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut live = Vec::new();
        churn(&a, &mut rng, 20_000, &mut live);
        a.check_invariants().unwrap();
        let nzones = a.core.zones.len();
        let per_node = nzones / a.nr_nodes() as usize;
        let snap = a.snapshot();

        let bi = parse_buddyinfo(&a.buddyinfo().to_string());
        assert_eq!(bi.len(), nzones);
        let pt = parse_pagetypeinfo(&a.pagetypeinfo().render(), per_node);
        let pt_exact = parse_pagetypeinfo(&a.pagetypeinfo().render_exact(), per_node);
        assert_eq!(pt.len(), nzones);
        for (zi, ((b, p), c)) in bi.iter().zip(&pt).zip(&snap.zones).enumerate() {
            assert_eq!((b.0, b.1.as_str()), (c.nid as u64, c.zone.name()));
            assert_eq!((p.nid, p.zone.as_str()), (c.nid as u64, c.zone.name()));
            for o in 0..NR_ORDERS {
                // Per order, the types sum to buddyinfo's count.
                let sum: u64 = p.free.iter().map(|row| row[o].1).sum();
                assert_eq!(sum, b.2[o], "zone {zi} order {o}");
                assert_eq!(b.2[o], c.free_blocks_of_order(o));
                for t in 0..MIGRATE_TYPES {
                    assert_eq!(p.free[t][o], (false, c.free_blocks[o][t]));
                    assert_eq!(pt_exact[zi].free[t][o], (false, c.free_blocks[o][t]));
                }
            }
            assert_eq!(p.blocks, c.block_count.to_vec());
            assert_eq!(p.blocks.iter().sum::<u64>(), a.core.zones[ZoneIdx::new(zi).unwrap()].nr_pageblocks() as u64);
        }

        let zi = parse_zoneinfo(&a.zoneinfo().to_string());
        assert_eq!(zi.len(), nzones);
        for (z, (c, zone)) in zi.iter().zip(snap.zones.iter().zip(a.core.zones.iter())) {
            assert_eq!((z.nid, z.zone.as_str()), (c.nid as u64, c.zone.name()));
            assert_eq!(z.vals["free"], c.nr_free_pages);
            assert_eq!(z.vals["nr_free_pages"], c.nr_free_pages);
            assert_eq!(z.vals["nr_free_pages_blocks"], c.free_pages_blocks());
            assert_eq!([z.vals["min"], z.vals["low"], z.vals["high"]], zone.wmark);
            assert_eq!(z.vals["spanned"], zone.spanned());
            assert_eq!(z.vals["present"], zone.spanned());
            assert_eq!(z.vals["managed"], zone.managed);
            assert_eq!(z.vals["start_pfn"], zone.start);
            assert_eq!(z.protection, zone.lowmem_reserve.to_vec());
            let pcp = a.core.pcp_report(zone);
            assert_eq!(
                z.cpus,
                pcp.iter().map(|p| (p.cpu as u64, p.count as u64, p.high as u64, p.batch as u64)).collect::<Vec<_>>()
            );
        }

        let vm = parse_vmstat(&a.vmstat().to_string());
        let get = |k: &str| vm.iter().find(|(n, _)| n == k).unwrap_or_else(|| panic!("no {k}")).1;
        assert_eq!(get("nr_free_pages"), a.nr_free_pages());
        // free pages, free pages in blocks, the four page-cache gauges,
        // nr_dirtied and nr_written, the two dirty thresholds, events
        assert_eq!(vm.len(), 2 + 4 + 2 + 2 + VmEvent::ALL.iter().filter(|e| e.in_vmstat()).count());
        let pcp = a.pcpstat();
        assert_eq!(
            pcp.nr_reserved_highatomic,
            a.core.zones.iter().map(|z| z.stats.nr_reserved_highatomic.get_racy()).sum::<u64>()
        );
        for e in VmEvent::ALL {
            let (in_vm, in_pcp) = (vm.iter().any(|(k, _)| k == e.name()), pcp.get(e.name()).is_some());
            assert!(in_vm != in_pcp, "{} in exactly one of vmstat and pcpstat", e.name());
        }
        let allocated: u64 = live.iter().map(|(_, o)| 1u64 << o).sum();
        assert_eq!(get("pgalloc_normal") + get("pgalloc_movable") - get("pgfree"), allocated);
        assert_eq!(a.census().allocated, allocated);
        for (p, o) in live {
            a.free_pages(p, o).unwrap();
        }
    }
}

#[test]
fn formats_match_the_kernel_byte_for_byte() {
    // Lines shaped exactly like this machine's /proc files.
    let a = small(16);
    assert_eq!(
        a.buddyinfo().to_string(),
        "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0      4 \n"
    );
    let pt = a.pagetypeinfo().render();
    let lines: Vec<&str> = pt.lines().collect();
    assert_eq!(lines[0], "Page block order: 9");
    assert_eq!(lines[1], "Pages per block:  512");
    assert_eq!(lines[2], "");
    assert_eq!(
        lines[3],
        "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 "
    );
    assert_eq!(
        lines[5],
        "Node    0, zone   Normal, type      Movable      0      0      0      0      0      0      0      0      0      0      4 "
    );
    assert_eq!(lines[9], "");
    assert_eq!(lines[10], "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate ");
    assert_eq!(lines[11], "Node 0, zone   Normal            0            8            0            0            0 ");
    assert_eq!(lines.len(), 12);
    let zi = a.zoneinfo().to_string();
    assert!(
        zi.starts_with(
            "Node 0, zone   Normal\n  per-node stats\n      nr_inactive_file 0\n      nr_active_file 0\n      \
             nr_dirty     0\n      nr_writeback 0\n  pages free     4096\n        boost    0\n        min      "
        ),
        "{zi}"
    );
    assert!(zi.contains("\n        spanned  4096\n        present  4096\n        managed  4096\n        cma      0\n"));
    assert!(zi.contains("\n        protection: (0, 0)\n      nr_free_pages 4096\n"), "{zi}");
    assert!(zi.contains("  pagesets\n    cpu: 0\n              count:    0\n              high:     "), "{zi}");
    assert!(zi.ends_with("  vm stats threshold: 0\n  node_unreclaimable:  0\n  start_pfn:           0\n"), "{zi}");
}

#[test]
fn pagetypeinfo_caps_at_100000_and_has_an_exact_mode() {
    let mut pt = small(16).pagetypeinfo();
    pt.zones[0].free[MigrateType::Movable.index()][0] = 123_456;
    pt.zones[0].free[MigrateType::Movable.index()][1] = 100_000;
    pt.zones[0].free[MigrateType::Movable.index()][2] = 99_999;
    let line = |s: &str| s.lines().nth(5).unwrap().to_string();
    assert!(line(&pt.render()).contains(", type      Movable >100000 >100000  99999      0 "), "{}", pt.render());
    assert!(line(&pt.render_exact()).contains(", type      Movable 123456 100000  99999      0 "));
    let parsed = parse_pagetypeinfo(&pt.render(), 1);
    assert_eq!(parsed[0].free[1][0], (true, 100_000));
    // A capped walk (the old design) keeps its `>` even in exact mode.
    pt.walk_cap = Some(PAGETYPEINFO_CAP);
    pt.zones[0].free[MigrateType::Movable.index()][0] = 100_000;
    assert!(line(&pt.render_exact()).contains(", type      Movable >100000 >100000  99999 "));
}

#[test]
fn counters_equal_a_recount_from_the_lists() {
    let a = PageAllocator::new(Config::small(32 << 20).nodes(2).movable_zone_bytes(4 << 20)).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut live = Vec::new();
    for round in 0..6 {
        churn(&a, &mut rng, 5_000, &mut live);
        if round == 3 {
            // Isolate a pageblock so the Isolate rows are exercised.
            let z = &a.core.zones[ZoneIdx::FIRST];
            let mut g = z.lock(&a.core.mm);
            let start = z.start + PAGEBLOCK_PAGES;
            g.move_freepages_block_locked(start, MigrateType::Isolate);
            g.set_pageblock_isolate_locked(start, true);
        }
        for (zi, z) in a.core.zones.iter().enumerate() {
            let g = z.lock(&a.core.mm);
            let counted = snapshot::read_zone(z);
            assert_eq!(counted, recount(&a, zi, &g.area), "zone {zi} round {round}");
            drop(g);
        }
        let snap = a.snapshot_consistent();
        for c in &snap.zones {
            let nonisolated: u64 = (0..NR_ORDERS)
                .map(|o| (c.free_blocks_of_order(o) - c.free_blocks[o][MigrateType::Isolate.index()]) << o)
                .sum();
            assert_eq!(c.nr_free_pages, nonisolated);
        }
    }
    assert!(a.snapshot().zones[0].block_count[MigrateType::Isolate.index()] == 1);
}

#[test]
fn readers_take_the_zone_lock_zero_times() {
    let a = PageAllocator::new(Config::small(32 << 20).nodes(2)).unwrap();
    let mut live = Vec::new();
    churn(&a, &mut StdRng::seed_from_u64(3), 5_000, &mut live);
    let before = lock_counts(&a);
    for _ in 0..10 {
        let _ = a.buddyinfo().to_string();
        let _ = a.pagetypeinfo().render();
        let _ = a.zoneinfo().to_string();
        let _ = a.vmstat().to_string();
        let _ = a.snapshot();
        let _ = a.snapshot_consistent();
        let _ = a.nr_free_pages();
        let _ = a.event_count(VmEvent::Pgfree);
    }
    assert_eq!(lock_counts(&a), before);

    // The old design does take it: once per (type, order) per zone, plus one.
    let old = PageAllocator::new(Config::small(32 << 20).nodes(2).pagetypeinfo_walk_lists(true)).unwrap();
    let before = lock_counts(&old);
    let _ = old.pagetypeinfo();
    let after = lock_counts(&old);
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a - b, (MIGRATE_TYPES * (NR_ORDERS + 1)) as u64);
    }
}

#[test]
fn readers_finish_while_a_writer_holds_the_zone_lock() {
    let a = small(16);
    let z = &a.core.zones[ZoneIdx::FIRST];
    let g = z.lock(&a.core.mm);
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = a.buddyinfo().to_string();
            let _ = a.pagetypeinfo().render();
            let _ = a.zoneinfo().to_string();
            let _ = a.vmstat().to_string();
            assert!(!a.snapshot().consistent);
        })
        .join()
        .unwrap();
    });
    drop(g);
    assert!(a.snapshot_consistent().consistent);
}

/// Sets a stop flag when dropped: a test's main thread holds one, so a failed
/// assertion there still stops its helper threads (the scope would otherwise
/// wait for them forever, turning the failure into a hang).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn consistent_snapshot_equals_a_recount_at_the_same_instant() {
    let a = PageAllocator::new(Config::small(16 << 20).min_free_kbytes(Some(128))).unwrap();
    let stop = AtomicBool::new(false);
    let mut matched = 0;
    std::thread::scope(|s| {
        for t in 0..2 {
            let (a, stop) = (&a, &stop);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                let mut live = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    churn(a, &mut rng, 200, &mut live);
                    std::thread::yield_now();
                }
                for (p, o) in live {
                    a.free_pages(p, o).unwrap();
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        let z = &a.core.zones[ZoneIdx::FIRST];
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1500);
        while matched < 20 && std::time::Instant::now() < deadline {
            // The sequence before the snapshot, not after it: a writer may run
            // between the snapshot's return and any later read.
            let seq_before = z.stats.seq.load(Ordering::Acquire);
            let snap = a.snapshot_consistent();
            assert!(snap.consistent);
            let g = z.lock(&a.core.mm);
            // Our own section made the sequence odd: if it is exactly one past
            // the one read before the snapshot, no writer ran from then to now,
            // so the lists are as the snapshot, taken in between, saw them.
            let now = z.stats.seq.load(Ordering::Relaxed);
            let c = recount(&a, 0, &g.area);
            drop(g);
            if now == seq_before + 1 && seq_before.is_multiple_of(2) {
                assert_eq!(snap.zones[0], c);
                matched += 1;
            }
        }
    });
    assert!(matched > 0, "never caught a quiet instant");
    a.check_invariants().unwrap();
}

#[test]
fn readers_during_an_oversubscribed_stress_see_sane_counts() {
    let a = PageAllocator::new(Config::small(32 << 20).nodes(2).min_free_kbytes(Some(256))).unwrap();
    let managed = a.managed_pages();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let writers = cores * 2 + 1;
    let stop = AtomicBool::new(false);
    let reads = std::sync::atomic::AtomicU64::new(0);
    let consistent_reads = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let mut hs = Vec::new();
        for t in 0..writers {
            let a = &a;
            hs.push(s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(1000 + t as u64);
                let mut live = Vec::new();
                churn(a, &mut rng, 15_000, &mut live);
                for (p, o) in live {
                    a.free_pages(p, o).unwrap();
                }
            }));
        }
        for r in 0..2 {
            let (a, stop, reads, consistent_reads) = (&a, &stop, &reads, &consistent_reads);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let snap = if r == 0 { a.snapshot() } else { a.snapshot_consistent() };
                    for c in &snap.zones {
                        for o in 0..NR_ORDERS {
                            for t in 0..MIGRATE_TYPES {
                                // A wrapped (negative) or runaway count shows up here.
                                assert!(c.free_blocks[o][t] << o <= managed, "{c:?}");
                            }
                        }
                        assert!(c.nr_free_pages <= managed);
                        assert!(
                            c.block_count.iter().sum::<u64>() as usize
                                <= a.core.zones.iter().map(|z| z.nr_pageblocks()).sum()
                        );
                        if snap.consistent {
                            let sum: u64 = (0..NR_ORDERS)
                                .map(|o| {
                                    (c.free_blocks_of_order(o) - c.free_blocks[o][MigrateType::Isolate.index()]) << o
                                })
                                .sum();
                            assert_eq!(sum, c.nr_free_pages);
                        }
                    }
                    let pt = parse_pagetypeinfo(&a.pagetypeinfo().render(), 1);
                    assert!(pt.iter().all(|z| z.free.iter().flatten().all(|&(_, n)| n <= managed)));
                    let vm = a.vmstat();
                    assert!(
                        vm.get("pgfree").unwrap()
                            <= vm.get("pgalloc_normal").unwrap() + vm.get("pgalloc_movable").unwrap() + managed
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                    if snap.consistent {
                        consistent_reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        for h in hs {
            h.join().unwrap();
        }
    });
    assert!(reads.load(Ordering::Relaxed) > 0 && consistent_reads.load(Ordering::Relaxed) > 0);
    a.check_invariants().unwrap();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), managed);
    let vm = a.vmstat();
    assert_eq!(vm.get("pgalloc_normal").unwrap() + vm.get("pgalloc_movable").unwrap(), vm.get("pgfree").unwrap());
}

// ------------------------------------------------ against Linux 6.18's /proc

/// /proc/{buddyinfo,pagetypeinfo,zoneinfo,vmstat} of Linux 6.18, captured on
/// this project's machine (the version is in `uname-r` beside them).
mod proc618 {
    pub const UNAME: &str = include_str!("../../tests/fixtures/proc-6.18/uname-r");
    pub const BUDDYINFO: &str = include_str!("../../tests/fixtures/proc-6.18/buddyinfo");
    pub const PAGETYPEINFO: &str = include_str!("../../tests/fixtures/proc-6.18/pagetypeinfo");
    pub const ZONEINFO: &str = include_str!("../../tests/fixtures/proc-6.18/zoneinfo");
    pub const VMSTAT: &str = include_str!("../../tests/fixtures/proc-6.18/vmstat");
}

/// Match `line` against a line shape; returns the words the shape captures.
/// Shapes are literal text with fields: `{n}` a decimal number; `{rN}` a
/// number right-aligned in N columns (`%Nlu`: spaces then digits, exactly N
/// wide, or wider digits); `{>rN}` the same after an optional `>`; `{sN}` a
/// word right-aligned in N columns (`%Ns`); `{lN}` a word left-aligned in N
/// columns (`%-Ns`); `{w}` a word; `{list}` numbers joined by `, `. A word is
/// letters, digits and `_`. A `*` right after a field's closing brace lets the
/// field repeat (at least once), each repeat after the literal text that
/// follows the field (up to the next field or the end).
fn shape(line: &str, pat: &str) -> Option<Vec<String>> {
    fn word_len(s: &str) -> usize {
        s.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count()
    }
    fn digits(s: &str) -> usize {
        s.bytes().take_while(u8::is_ascii_digit).count()
    }
    // One field at the start of `s`: (bytes consumed, captured word).
    fn field(s: &str, f: &str) -> Option<(usize, Option<String>)> {
        let width = |p: &str| p.parse::<usize>().ok();
        match f {
            "n" => Some((digits(s), None)).filter(|(n, _)| *n > 0),
            "w" => Some((word_len(s), Some(s[..word_len(s)].to_string()))).filter(|(n, _)| *n > 0),
            "list" => {
                let mut i = 0;
                loop {
                    let d = digits(&s[i..]);
                    if d == 0 {
                        return None;
                    }
                    i += d;
                    if !s[i..].starts_with(", ") {
                        return Some((i, None));
                    }
                    i += 2;
                }
            }
            _ if f.starts_with(">r") => {
                let skip = usize::from(s.starts_with('>'));
                field(&s[skip..], &f[1..]).map(|(n, c)| (n + skip, c))
            }
            _ if f.starts_with('r') || f.starts_with('s') => {
                let w = width(&f[1..])?;
                let pad = s.bytes().take_while(|b| *b == b' ').count();
                let body = if f.starts_with('r') { digits(&s[pad..]) } else { word_len(&s[pad..]) };
                let ok = body > 0 && (pad + body == w || (pad == 0 && body > w));
                ok.then(|| (pad + body, (f.starts_with('s')).then(|| s[pad..pad + body].to_string())))
            }
            _ if f.starts_with('l') => {
                let w = width(&f[1..])?;
                let body = word_len(s);
                let pad = s[body..].bytes().take_while(|b| *b == b' ').count().min(w.saturating_sub(body));
                (body > 0 && (body + pad == w || body >= w)).then(|| (body + pad, Some(s[..body].to_string())))
            }
            _ => panic!("bad field {f}"),
        }
    }
    // Split the shape into (literal, field, repeat) parts.
    let mut parts: Vec<(String, Option<String>, bool)> = Vec::new();
    let mut rest = pat;
    while let Some(i) = rest.find('{') {
        let j = rest[i..].find('}').unwrap() + i;
        let rep = rest[j + 1..].starts_with('*');
        parts.push((rest[..i].to_string(), Some(rest[i + 1..j].to_string()), rep));
        rest = &rest[j + 1 + usize::from(rep)..];
    }
    parts.push((rest.to_string(), None, false));
    let mut caps = Vec::new();
    let mut s = line;
    let mut k = 0;
    while k < parts.len() {
        let (lit, f, rep) = &parts[k];
        s = s.strip_prefix(lit.as_str())?;
        if let Some(f) = f {
            let (n, c) = field(s, f)?;
            caps.extend(c);
            s = &s[n..];
            if *rep {
                // The literal after this field, then the field again, while they match.
                let next_lit = parts.get(k + 1).map_or("", |p| p.0.as_str());
                while let Some(t) = s.strip_prefix(next_lit) {
                    match field(t, f) {
                        Some((n, c)) if !t.is_empty() => {
                            caps.extend(c);
                            s = &t[n..];
                        }
                        _ => break,
                    }
                }
            }
        }
        k += 1;
    }
    s.is_empty().then_some(caps)
}

/// The shape of each line of a report, by name: the first that matches.
fn classify<'a>(line: &str, shapes: &[(&'a str, &str)]) -> Option<(&'a str, Vec<String>)> {
    shapes.iter().find_map(|(name, pat)| shape(line, pat).map(|c| (*name, c)))
}

/// Every line of `ours` and of the kernel's `theirs` has one of `shapes`; each
/// of our lines has a shape the kernel's text has; and our (shape, key) pairs
/// are, block by block (a block starts at a line of shape `block`), a
/// subsequence of a kernel block's: the same keys, in the same order, as far
/// as we have them. Lines of the shapes in `once` count only the first time in
/// a block (per-CPU groups: the machines' CPU counts differ).
fn holds_against(report: &str, ours: &str, theirs: &str, shapes: &[(&str, &str)], block: &str, once: &[&str]) {
    let lines = |text: &str, who: &str| -> Vec<Vec<(String, Vec<String>)>> {
        let mut blocks: Vec<Vec<(String, Vec<String>)>> = vec![Vec::new()];
        for l in text.lines() {
            let (name, caps) =
                classify(l, shapes).unwrap_or_else(|| panic!("{report}: {who}'s line {l:?} has no known shape"));
            if name == block && !blocks.last().unwrap().is_empty() {
                blocks.push(Vec::new());
            }
            blocks.last_mut().unwrap().push((name.to_string(), caps));
        }
        blocks
    };
    let kernel = lines(theirs, "Linux 6.18");
    let mine = lines(ours, "our");
    let key = |(n, c): &(String, Vec<String>)| -> String {
        // Zone and node names vary; the key is the shape and its fixed words.
        match n.as_str() {
            "zone" | "node-zone" => n.clone(),
            "node-zone-type" => format!("{n} {}", c.last().cloned().unwrap_or_default()),
            _ => format!("{n} {}", c.join(" ")),
        }
    };
    for b in &mine {
        let keys = |b: &Vec<(String, Vec<String>)>| -> Vec<String> {
            let mut seen = std::collections::HashSet::new();
            b.iter().filter(|l| !once.contains(&l.0.as_str()) || seen.insert(l.0.clone())).map(key).collect()
        };
        let ks = keys(b);
        let fits = kernel.iter().any(|kb| {
            let kk = keys(kb);
            let mut it = kk.iter();
            ks.iter().all(|k| it.any(|x| x == k))
        });
        assert!(fits, "{report}: our block {ks:?} is not a subsequence of any Linux 6.18 block");
    }
}

#[test]
fn reports_hold_linux_6_18s_line_shapes_and_key_order() {
    assert!(proc618::UNAME.starts_with("6.18."), "{}", proc618::UNAME);
    let a = PageAllocator::new(Config::small(32 << 20).nodes(2).movable_zone_bytes(4 << 20)).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut live = Vec::new();
    churn(&a, &mut rng, 5_000, &mut live);

    let buddy = [("zone", "Node {n}, zone {s8} {r6}* ")];
    holds_against("buddyinfo", &a.buddyinfo().to_string(), proc618::BUDDYINFO, &buddy, "zone", &[]);

    let pt = [
        ("pageblock-order", "Page block order: {n}"),
        ("pages-per-block", "Pages per block:  {n}"),
        ("blank", ""),
        ("free-header", "Free pages count per migrate type at order  {r6}* "),
        ("node-zone-type", "Node {r4}, zone {s8}, type {s12} {>r6}* "),
        ("blocks-header", "Number of blocks type  {s12}* "),
        ("node-zone", "Node {n}, zone {s8} {r12}* "),
    ];
    holds_against("pagetypeinfo", &a.pagetypeinfo().render(), proc618::PAGETYPEINFO, &pt, "pageblock-order", &[]);
    // The types, in the kernel's order.
    let types = |t: &str| -> Vec<String> { t.lines().filter_map(|l| shape(l, pt[5].1)).next().unwrap() };
    assert_eq!(types(&a.pagetypeinfo().render()), types(proc618::PAGETYPEINFO));

    let zi = [
        ("zone", "Node {n}, zone {s8}"),
        ("per-node", "  per-node stats"),
        ("pages-free", "  pages free     {n}"),
        ("protection", "        protection: ({list})"),
        ("watermark", "        {l8} {n}"),
        ("stat", "      {l12} {n}"),
        ("pagesets", "  pagesets"),
        ("cpu", "    cpu: {n}"),
        ("count", "              count:    {n}"),
        ("high", "              high:     {n}"),
        ("batch", "              batch:    {n}"),
        ("high_min", "              high_min: {n}"),
        ("high_max", "              high_max: {n}"),
        ("threshold", "  vm stats threshold: {n}"),
        ("unreclaimable", "  node_unreclaimable:  {n}"),
        ("start-pfn", "  start_pfn:           {n}"),
    ];
    let zoneinfo = a.zoneinfo().to_string();
    let cpu_group = ["cpu", "count", "high", "batch", "high_min", "high_max", "threshold"];
    holds_against("zoneinfo", &zoneinfo, proc618::ZONEINFO, &zi, "zone", &cpu_group);
    // Our zone statistics are the kernel's first two and its per-zone file
    // LRU and write-pending counts, our per-node ones its LRU sizes, dirty
    // and writeback pages, and nothing of ours.
    let stats: Vec<String> = zoneinfo.lines().filter_map(|l| shape(l, zi[5].1)).flatten().collect();
    let ours = [
        "nr_free_pages",
        "nr_free_pages_blocks",
        "nr_inactive_file",
        "nr_active_file",
        "nr_dirty",
        "nr_writeback",
        "nr_zone_inactive_file",
        "nr_zone_active_file",
        "nr_zone_write_pending",
    ];
    assert!(!stats.is_empty() && stats.iter().all(|k| ours.contains(&k.as_str())), "{stats:?}");
    // The per-node section once per node, on its first zone, before `pages free`.
    let zones: Vec<&str> = zoneinfo.split("Node ").skip(1).collect();
    let mut nodes_seen = std::collections::HashSet::new();
    for z in &zones {
        let nid = z.split(',').next().unwrap();
        let has = z.contains("\n  per-node stats\n      nr_inactive_file ");
        assert_eq!(has, nodes_seen.insert(nid.to_string()), "node {nid}: the section on the first zone only");
        if has {
            assert!(z.find("per-node stats") < z.find("pages free"));
        }
    }

    let vm = [("item", "{w} {n}")];
    holds_against("vmstat", &a.vmstat().to_string(), proc618::VMSTAT, &vm, "none", &[]);
    for (k, _) in a.vmstat().items {
        assert!(proc618::VMSTAT.lines().any(|l| l.split(' ').next() == Some(k)), "{k} is not in Linux 6.18's vmstat");
    }
    // pcpstat holds what vmstat and zoneinfo no longer do, none of it the kernel's.
    let pcp = a.pcpstat().to_string();
    for l in pcp.lines() {
        let k = l.split(' ').next().unwrap();
        assert!(shape(l, vm[0].1).is_some(), "{l:?}");
        assert!(!proc618::VMSTAT.contains(&format!("\n{k} ")) && !proc618::ZONEINFO.contains(&format!(" {k} ")), "{k}");
    }
    for k in [
        "pcp_refill",
        "pcp_drain",
        "pcp_trylock_fail",
        "pgalloc_fallback_claim",
        "pgalloc_fallback_steal",
        "highatomic_reserve",
        "pgalloc_fail",
        "nr_reserved_highatomic",
        "nolock_alloc",
        "nolock_alloc_fail",
        "nolock_trylock_fail",
        "nolock_free",
        "nolock_deferred_free",
    ] {
        assert!(pcp.contains(&format!("{k} ")), "{k}");
        assert!(!a.vmstat().to_string().contains(k) && !zoneinfo.contains(k), "{k}");
    }
    for (p, o) in live {
        a.free_pages(p, o).unwrap();
    }
}

#[test]
fn shapes_match_what_they_say() {
    assert_eq!(
        shape("Node 0, zone   Normal      0     12 ", "Node {n}, zone {s8} {r6}* "),
        Some(vec!["Normal".into()])
    );
    // One column too wide, or too narrow, is caught.
    assert!(shape("Node 0, zone   Normal       0 ", "Node {n}, zone {s8} {r6}* ").is_none());
    assert!(shape("Node 0, zone  Normal      0 ", "Node {n}, zone {s8} {r6}* ").is_none());
    assert!(shape("x >100000 1234567 ", "x {>r6}* ").is_some());
    assert_eq!(shape("        min      10509", "        {l8} {n}"), Some(vec!["min".into()]));
    assert!(shape("        min     10509", "        {l8} {n}").is_none());
    assert_eq!(shape("      nr_free_pages_blocks 17408", "      {l12} {n}"), Some(vec!["nr_free_pages_blocks".into()]));
    assert!(shape("      nr_mlock 2958", "      {l12} {n}").is_none());
    assert!(shape("        protection: (0, 3018, 8010)", "        protection: ({list})").is_some());
}
