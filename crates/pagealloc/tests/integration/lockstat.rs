//! Zone-lock statistics: every acquisition counted once in the wait
//! histogram, holds sampled (every drain and contended hold timed, one
//! uncontended hold in `LOCKSTAT_SAMPLE`), per-CPU drains counted with their
//! pages, nothing counted when off; the per-CPU list locks likewise (one
//! try-lock hold in `PCP_HOLD_SAMPLE` timed, every blocking one).

#[cfg(feature = "seed-variants")]
use pagealloc::DrainMode;
use pagealloc::{Config, Gfp, PageAllocator, LOCKSTAT_BUCKETS, LOCKSTAT_SAMPLE, PCP_HOLD_SAMPLE};

fn churn(a: &PageAllocator) -> u64 {
    let mut held = Vec::new();
    for round in 0..4 {
        for _ in 0..3000 {
            held.push(a.alloc_pages(Gfp::KERNEL, 0).unwrap());
        }
        for p in held.drain(..) {
            a.free_pages(p, 0).unwrap();
        }
        let big = a.alloc_pages(Gfp::KERNEL, 3 + round).unwrap();
        a.free_pages(big, 3 + round).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    a.stats().pcpstat().pcp_drain
}

#[test]
fn every_acquisition_counted_every_drain_timed_with_its_pages() {
    let base = Config::small(16 << 20).percpu_pagelist_high_fraction(8);
    let designs = [
        ("default", base.clone()),
        #[cfg(feature = "seed-variants")]
        ("single-pass", base.clone().drain_mode(DrainMode::SinglePass)),
        #[cfg(feature = "seed-variants")]
        ("two-pass", base.clone().drain_mode(DrainMode::TwoPass)),
    ];
    for (mode, cfg) in designs {
        let a = PageAllocator::new(cfg).unwrap();
        let pcp_drains = churn(&a);
        let r = a.stats().lockstat();
        let z = &r.zones[0];
        assert!(z.enabled);
        assert_eq!(z.wait_hist.len(), LOCKSTAT_BUCKETS);
        assert!(z.acquisitions > 0);
        assert_eq!(z.hold_hist.iter().sum::<u64>(), z.hold_samples, "{mode}");
        assert_eq!(z.wait_hist.iter().sum::<u64>(), z.acquisitions, "{mode}");
        assert!(z.hold_ticks > 0 && z.drain_hold_ticks <= z.hold_ticks);
        // Every per-CPU drain that gave pages back is one counted (timed)
        // drain, every refill one counted (timed) refill.
        let batches = z.drains + z.refills;
        assert!(z.drains > 0 && z.refills > 0 && batches <= z.hold_samples, "{mode}");
        assert!(z.drain_hold_ticks + z.refill_hold_ticks <= z.hold_ticks, "{mode}");
        // Single-threaded: nothing waited, so the sampled holds are the
        // batches plus one uncontended hold in LOCKSTAT_SAMPLE.
        assert_eq!(z.wait_hist[0], z.acquisitions, "{mode}");
        let sampled = z.acquisitions.div_ceil(LOCKSTAT_SAMPLE);
        assert!(z.hold_samples <= sampled + batches, "{mode}: {} timed of {}", z.hold_samples, z.acquisitions);
        assert!(z.hold_samples >= batches.max(sampled / 2), "{mode}: {} timed of {}", z.hold_samples, z.acquisitions);
        assert!(z.drains <= pcp_drains, "{} drains counted, {pcp_drains} pcp_drain events", z.drains);
        assert!(z.drain_pages >= z.drains && z.refill_pages >= z.refills, "{mode}");
        let est = z.hold_ticks_estimate();
        assert!(est >= (z.drain_hold_ticks + z.refill_hold_ticks) as f64, "{mode}: estimate {est}");
        let text = r.to_string();
        assert!(text.contains("drain_hold_page") && text.contains("refill_hold_page"), "{text}");
    }
}

#[test]
fn nothing_is_counted_when_off() {
    let a = PageAllocator::new(Config::small(16 << 20).lock_stats(false)).unwrap();
    churn(&a);
    for z in a.stats().lockstat().zones {
        assert!(!z.enabled);
        assert_eq!((z.acquisitions, z.hold_ticks, z.drains), (0, 0, 0));
        assert!(z.hold_hist.iter().all(|&n| n == 0));
    }
}

#[test]
fn switching_at_run_time_keeps_the_sums() {
    let a = PageAllocator::new(Config::small(16 << 20).percpu_pagelist_high_fraction(8)).unwrap();
    churn(&a);
    let before = a.stats().lockstat().zones[0].acquisitions;
    a.stats().set_lock_stats(false);
    churn(&a);
    let z = &a.stats().lockstat().zones[0];
    assert!(!z.enabled);
    assert_eq!(z.acquisitions, before, "counted while off");
    a.stats().set_lock_stats(true);
    churn(&a);
    let z = &a.stats().lockstat().zones[0];
    assert!(z.enabled && z.acquisitions > before);
    assert_eq!(z.hold_hist.iter().sum::<u64>(), z.hold_samples);
    assert_eq!(z.wait_hist.iter().sum::<u64>(), z.acquisitions);
}

/// Per-CPU list locks: sums over every (zone, CPU) set.
fn pcp_totals(a: &PageAllocator) -> (u64, u64, u64) {
    let r = a.stats().lockstat();
    for p in &r.pcp {
        assert_eq!(p.hold_hist.len(), LOCKSTAT_BUCKETS);
        assert_eq!(p.hold_hist.iter().sum::<u64>(), p.timed, "zone {} cpu {}", p.zone, p.cpu);
        assert_eq!(p.wait_hist.iter().sum::<u64>(), p.acquisitions, "zone {} cpu {}", p.zone, p.cpu);
        assert!(p.blocking <= p.timed && p.timed <= p.acquisitions);
        assert_eq!(p.timed == 0, p.hold_ticks == 0, "zone {} cpu {}", p.zone, p.cpu);
    }
    assert_eq!(r.pcp.len(), r.zones.len() * a.stats().pcp_report().iter().filter(|p| p.zone == 0).count());
    r.pcp.iter().fold((0, 0, 0), |(n, b, t), p| (n + p.acquisitions, b + p.blocking, t + p.timed))
}

#[test]
fn pcp_locks_count_every_hold_once() {
    // Front cache off: every order-0 allocation and free takes its CPU's
    // list lock once (try-lock, no wait); drain_all_pages takes every set's
    // lock once, waiting for it (blocking).
    let a = PageAllocator::new(Config::small(16 << 20).percpu_pagelist_high_fraction(8).front_cache(false)).unwrap();
    let sets = a.stats().pcp_report().len() as u64;
    let (n0, b0, _) = pcp_totals(&a);
    assert_eq!((n0, b0), (0, 0));
    churn(&a);
    let (n, b, t) = pcp_totals(&a);
    // 4 rounds of 3000 allocations and 3000 frees, then one order-3 pair
    // (the lists keep order 3; orders 4..6 go to the buddy).
    assert_eq!(b, sets, "one blocking acquisition per set per drain_all_pages");
    assert_eq!(n - b, 4 * 3000 * 2 + 2, "try-lock acquisitions");
    // Every blocking hold and about one try-lock hold in PCP_HOLD_SAMPLE timed.
    let expect = (n - b) / PCP_HOLD_SAMPLE as u64;
    assert!(t >= b + expect * 2 / 3 && t <= b + expect * 3 / 2, "{t} holds timed of {n}");
    let text = a.stats().lockstat().to_string();
    assert!(text.contains("pcp lock"), "{text}");
}

#[test]
fn pcp_locks_with_the_front_cache_and_the_switch() {
    let a = PageAllocator::new(Config::small(16 << 20).percpu_pagelist_high_fraction(8)).unwrap();
    churn(&a);
    let (n, b, _) = pcp_totals(&a);
    assert!(n > b && b > 0, "the front cache's refills and flushes take the lists' locks ({n}, {b})");
    a.stats().set_lock_stats(false);
    churn(&a);
    assert_eq!(pcp_totals(&a).0, n, "counted while off");
    assert!(a.stats().lockstat().pcp.iter().all(|p| !p.enabled));
    a.stats().set_lock_stats(true);
    churn(&a);
    assert!(pcp_totals(&a).0 > n);

    let off = PageAllocator::new(Config::small(16 << 20).lock_stats(false).front_cache(false)).unwrap();
    churn(&off);
    assert_eq!(pcp_totals(&off), (0, 0, 0));
}
