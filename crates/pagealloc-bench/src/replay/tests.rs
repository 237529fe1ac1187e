//! The reader and the replay on a real capture (`tests/data/build-3s.trace.gz`:
//! `scripts/capture-trace 3` on a 2-vCPU VM, Linux 6.18, building this
//! project), and on the inputs a hostile user would give.

use super::trace::{self, GfpZone, OpKind};
use super::{proc, replay_trace};
use std::io::Read;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/build-3s.trace.gz");

fn text() -> String {
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(DATA).unwrap()).read_to_string(&mut s).unwrap();
    s
}

/// Every event line of the capture is read: the counts agree with a plain
/// count of the lines, and nothing is bad input.
#[test]
fn parser_reads_every_event_of_the_capture() {
    let t = trace::open(std::path::Path::new(DATA)).unwrap();
    let s = text();
    let count = |name: &str| s.lines().filter(|l| l.contains(&format!(": {name}: "))).count() as u64;
    let k = &t.kernel;
    assert_eq!(k.allocs + k.alloc_failures, count("mm_page_alloc"));
    assert_eq!(k.frees, count("mm_page_free"));
    assert_eq!(k.free_batched, count("mm_page_free_batched"));
    assert_eq!(k.pcpu_drain, count("mm_page_pcpu_drain"));
    assert_eq!(k.zone_locked, count("mm_page_alloc_zone_locked"));
    assert_eq!(k.extfrag, count("mm_page_alloc_extfrag"));
    assert_eq!(t.ops.len() as u64, k.allocs + k.frees);
    assert_eq!(t.bad, trace::BadInput::default(), "a real capture is all good input");
    assert!(k.allocs > 10_000 && t.span_s > 0.1 && t.span_s < 4.0, "{k:?} {}", t.span_s);
    assert!(k.zone_lock_estimate > 0 && k.zone_lock_estimate <= k.pcpu_drain + k.zone_locked);
    // Times only grow (trace_pipe merges the CPUs' buffers in time order).
    assert!(t.ops.windows(2).all(|w| w[0].t_us <= w[1].t_us));
    let first = t.ops.iter().find(|o| matches!(o.kind, OpKind::Alloc { .. })).unwrap();
    assert!(first.pfn > 0 && first.order <= 10);
    assert!(t.ops.iter().all(|o| !matches!(o.kind, OpKind::Alloc { mt, .. } if mt > 2)));
}

/// The snapshots give each zone's free blocks, pageblocks and size, and
/// pagetypeinfo's totals agree with buddyinfo's.
#[test]
fn snapshots_describe_the_zones() {
    let t = trace::open(std::path::Path::new(DATA)).unwrap();
    let zones = proc::zones(&t.start["pagetypeinfo"], &t.start["zoneinfo"]);
    let normal = zones.iter().find(|z| z.name == "Normal").expect("a Normal zone");
    assert!(normal.managed > 0 && normal.min > 0 && normal.spanned >= normal.managed);
    assert!(normal.blocks.iter().sum::<u64>() > 0);
    for l in t.start["buddyinfo"].lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let z = zones.iter().find(|z| Some(&z.name.as_str()) == w.get(3)).expect("buddyinfo zone in pagetypeinfo");
        let per_order: Vec<u64> = w[4..].iter().map(|x| x.parse().unwrap()).collect();
        for (o, n) in per_order.iter().enumerate() {
            let ours: u64 = z.free.iter().map(|t| t[o]).sum();
            // pagetypeinfo omits HighAtomic, CMA and Isolate from ours.
            assert!(ours <= *n, "zone {} order {o}: {ours} > {n}", z.name);
        }
    }
}

/// The replay of the capture: every allocation and free accounted for,
/// the arenas intact, fallbacks and lock acquisitions counted.
#[test]
fn replay_of_the_capture_accounts_for_every_event() {
    let t = trace::open(std::path::Path::new(DATA)).unwrap();
    let (allocs, frees) = (t.kernel.allocs, t.kernel.frees);
    let r = replay_trace(t, true).expect("replay");
    let o = &r.runs[0].outcome;
    assert_eq!(o.allocs, allocs);
    assert_eq!(o.frees + o.frees_seeded + o.frees_unknown, frees);
    assert!(o.frees > 0 && o.frees_seeded > 0, "{o:?}");
    assert!(o.alloc_failures * 100 < o.allocs, "the seeded zones serve the trace: {o:?}");
    assert!(o.lock_acquisitions > 0);
    assert!(o.timeline.len() > 10);
    // Seeding reached the snapshot's free pages within a few percent.
    let want: u64 = r.zones.iter().filter(|z| z.managed >= 1024).map(|z| z.free_pages().iter().sum::<u64>()).sum();
    let got: u64 = o.seeded_free.iter().sum();
    assert!((got as f64 - want as f64).abs() <= 0.05 * want as f64, "seeded {got} pages free, snapshot {want}");
    let txt = super::report::text(&r);
    assert!(txt.contains("frag/1000") && txt.contains("kernel, end snapshot"), "{txt}");
}

/// Cut short, garbled, unknown events, frees of pfns never allocated, a
/// file of nothing: counted or refused, never a panic.
#[test]
fn bad_input_is_counted_never_a_panic() {
    let s = text();
    // Cut in the middle of the events.
    let cut = &s[..s.len() / 2];
    let t = trace::read(cut.as_bytes());
    assert!(t.bad.truncated && !t.ops.is_empty());
    assert!(replay_trace(t, true).is_ok(), "a cut trace still replays what it has");
    // A cut compressed stream.
    let gz = std::fs::read(DATA).unwrap();
    let dir = std::env::temp_dir().join(format!("pagealloc-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("cut.gz");
    std::fs::write(&p, &gz[..gz.len() / 3]).unwrap();
    assert!(trace::open(&p).unwrap().bad.truncated);
    // Garbage and unknown events among good lines.
    let start = s.find("## trace\n").unwrap() + "## trace\n".len();
    let mut bad = s[..start].to_string();
    bad.push_str("cc1-1 [000] ..... 10.0: mm_page_alloc: pfn=zz order=0 migratetype=0 gfp_flags=GFP_KERNEL\n");
    bad.push_str("cc1-1 [000] ..... 10.0: mm_page_alloc: pfn=0x10 order=99 migratetype=0 gfp_flags=GFP_KERNEL\n");
    bad.push_str("cc1-1 [000] ..... 10.1: sched_switch: prev_comm=a\n");
    bad.push_str("\u{0}\u{1}garbage without structure\n");
    bad.push_str("cc1-1 [000] ..... 10.2: mm_page_free: page=0 pfn=0x123456789 order=0\n");
    bad.push_str("cc1-1 [000] ..... 10.3: mm_page_alloc: page=0 pfn=0x77 order=9 migratetype=1 gfp_flags=GFP_DMA\n");
    bad.push_str("cc1-1 [000] ..... 10.4: mm_page_free: page=0 pfn=0x77 order=9\n");
    bad.push_str(&s[s.find("## end").unwrap()..]);
    let t = trace::read(bad.as_bytes());
    assert_eq!((t.bad.malformed, t.bad.unknown_event), (3, 1), "{:?}", t.bad);
    assert!(matches!(t.ops[0].kind, OpKind::Free));
    assert!(matches!(t.ops[1].kind, OpKind::Alloc { zone: GfpZone::Dma, .. }));
    let r = replay_trace(t, false).expect("replay");
    assert_eq!(r.runs.len(), 3);
    for d in &r.runs {
        assert_eq!(d.outcome.frees_seeded + d.outcome.frees_unknown + d.outcome.frees, 2);
    }
    // Nothing to seed from: an error, not a panic.
    assert!(replay_trace(trace::read(&b"## trace\nnothing\n"[..]), true).is_err());
    assert!(replay_trace(trace::read(&b""[..]), true).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
