//! Tests of the statistics and reports.
//!
//! The parsers here are written from the kernel's format strings (the widths in
//! the `report` module docs, checked against a real /proc), not from our
//! printer: each one consumes fixed-width columns and fails on any byte out of
//! place.

mod parse;
mod proc618;

use super::*;
use crate::allocator::PageAllocator;
use crate::Config;
use pagealloc_core::types::{Gfp, MigrateType, Pfn, ZoneIdx, MIGRATE_TYPES, NR_ORDERS, PAGEBLOCK_PAGES};
use pagealloc_core::vmevent::VmEvent;
use parse::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};

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
fn recount(a: &PageAllocator, zi: usize, area: &pagealloc_core::zone::FreeArea) -> ZoneCounters {
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
    // The depot's pages are free order-0 pages of their type.
    let mut depot_pages = 0;
    z.depot.for_each(|t, _| {
        free_blocks[0][t] += 1;
        depot_pages += 1;
    });
    nr_free_pages += depot_pages;
    let mut block_count = [0u64; MIGRATE_TYPES];
    for b in 0..z.nr_pageblocks() as u64 {
        block_count[z.pageblock_mt_racy(z.start + b * PAGEBLOCK_PAGES).index()] += 1;
    }
    ZoneCounters {
        nid: z.nid,
        zone: z.ztype,
        free_blocks,
        nr_free_pages,
        depot_pages,
        block_count,
        // No list holds this; it is checked against the reserved blocks instead.
        nr_reserved_highatomic: z.stats.nr_reserved_highatomic.get_racy(),
    }
}

fn lock_counts(a: &PageAllocator) -> Vec<u64> {
    // Each lock and each unlock advance the zone's sequence count by one.
    a.core.zones.iter().map(|z| z.stats.seq.load(Ordering::Relaxed) / 2).collect()
}

// -------------------------------------------------------------------- tests

#[test]
fn every_report_parses_and_agrees_after_random_workloads() {
    let configs = [
        (1u64, Config::small(16 << 20)),
        (2, Config::small(32 << 20).nodes(2).movable_zone_bytes(4 << 20)),
        #[cfg(feature = "seed-variants")]
        (3, Config::small(16 << 20).pagetypeinfo_walk_lists(true)),
    ];
    for (seed, cfg) in configs {
        let a = PageAllocator::new(cfg).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut live = Vec::new();
        churn(&a, &mut rng, 20_000, &mut live);
        a.check_invariants().unwrap();
        let nzones = a.core.zones.len();
        let per_node = nzones / a.nr_nodes() as usize;
        let snap = a.stats().snapshot();

        let bi = parse_buddyinfo(&a.stats().buddyinfo().to_string());
        assert_eq!(bi.len(), nzones);
        let pt = parse_pagetypeinfo(&a.stats().pagetypeinfo().render(), per_node);
        let pt_exact = parse_pagetypeinfo(&a.stats().pagetypeinfo().render_exact(), per_node);
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

        zoneinfo_agrees(&a, &snap);

        let vm = parse_vmstat(&a.stats().vmstat().to_string());
        let get = |k: &str| vm.iter().find(|(n, _)| n == k).unwrap_or_else(|| panic!("no {k}")).1;
        assert_eq!(get("nr_free_pages"), a.nr_free_pages());
        // free pages, free pages in blocks, the four page-cache gauges,
        // nr_dirtied and nr_written, the two dirty thresholds, events
        assert_eq!(vm.len(), 2 + 4 + 2 + 2 + VmEvent::ALL.iter().filter(|e| e.in_vmstat()).count());
        let pcp = a.stats().pcpstat();
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

/// zoneinfo's zones parse and agree with the snapshot and the zones.
fn zoneinfo_agrees(a: &PageAllocator, snap: &Snapshot) {
    let zi = parse_zoneinfo(&a.stats().zoneinfo().to_string());
    assert_eq!(zi.len(), a.core.zones.len());
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
}

#[test]
fn formats_match_the_kernel_byte_for_byte() {
    // Lines shaped exactly like this machine's /proc files.
    let a = small(16);
    assert_eq!(
        a.stats().buddyinfo().to_string(),
        "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0      4 \n"
    );
    let pt = a.stats().pagetypeinfo().render();
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
    let zi = a.stats().zoneinfo().to_string();
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
    let mut pt = small(16).stats().pagetypeinfo();
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
        let snap = a.stats().snapshot_consistent();
        for c in &snap.zones {
            let nonisolated: u64 = (0..NR_ORDERS)
                .map(|o| (c.free_blocks_of_order(o) - c.free_blocks[o][MigrateType::Isolate.index()]) << o)
                .sum();
            assert_eq!(c.nr_free_pages, nonisolated);
        }
    }
    assert!(a.stats().snapshot().zones[0].block_count[MigrateType::Isolate.index()] == 1);
}

#[test]
fn readers_take_the_zone_lock_zero_times() {
    let a = PageAllocator::new(Config::small(32 << 20).nodes(2)).unwrap();
    let mut live = Vec::new();
    churn(&a, &mut StdRng::seed_from_u64(3), 5_000, &mut live);
    let before = lock_counts(&a);
    for _ in 0..10 {
        let _ = a.stats().buddyinfo().to_string();
        let _ = a.stats().pagetypeinfo().render();
        let _ = a.stats().zoneinfo().to_string();
        let _ = a.stats().vmstat().to_string();
        let _ = a.stats().snapshot();
        let _ = a.stats().snapshot_consistent();
        let _ = a.nr_free_pages();
        let _ = a.stats().event_count(VmEvent::Pgfree);
    }
    assert_eq!(lock_counts(&a), before);
}

#[cfg(feature = "seed-variants")]
#[test]
fn the_old_pagetypeinfo_takes_the_zone_lock_per_list() {
    // Once per (type, order) per zone, plus one for the block counts.
    let old = PageAllocator::new(Config::small(32 << 20).nodes(2).pagetypeinfo_walk_lists(true)).unwrap();
    let before = lock_counts(&old);
    let _ = old.stats().pagetypeinfo();
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
            let _ = a.stats().buddyinfo().to_string();
            let _ = a.stats().pagetypeinfo().render();
            let _ = a.stats().zoneinfo().to_string();
            let _ = a.stats().vmstat().to_string();
            assert!(!a.stats().snapshot().consistent);
        })
        .join()
        .unwrap();
    });
    drop(g);
    assert!(a.stats().snapshot_consistent().consistent);
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
            let snap = a.stats().snapshot_consistent();
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
                    let snap = if r == 0 { a.stats().snapshot() } else { a.stats().snapshot_consistent() };
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
                    let pt = parse_pagetypeinfo(&a.stats().pagetypeinfo().render(), 1);
                    assert!(pt.iter().all(|z| z.free.iter().flatten().all(|&(_, n)| n <= managed)));
                    let vm = a.stats().vmstat();
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
    let vm = a.stats().vmstat();
    assert_eq!(vm.get("pgalloc_normal").unwrap() + vm.get("pgalloc_movable").unwrap(), vm.get("pgfree").unwrap());
}
