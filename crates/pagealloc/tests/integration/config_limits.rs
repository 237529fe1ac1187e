//! Every `Config` value and every size argument gives a typed error or works:
//! never a panic, never an abort (issue 15, "sound by construction").

#[cfg(feature = "seed-variants")]
use pagealloc::DrainMode;
use pagealloc::{AllocError, Backing, BulkFreeError, Config, ConfigError, FreeError, Gfp, PageAllocator, Pfn};
use std::error::Error as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;
const PAGEBLOCK: u64 = 2 * MIB;

/// Build an allocator from `cfg`, turning a panic into a description of it.
fn build(what: &str, cfg: Config) -> Result<Result<PageAllocator, ConfigError>, String> {
    let shown = format!("{cfg:?}");
    catch_unwind(AssertUnwindSafe(|| PageAllocator::new(cfg))).map_err(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("{what} panicked: {msg}\n  config: {shown}")
    })
}

/// Sets one field of a config.
type Setter = fn(Config) -> Config;

/// Each setting alone at its extremes, from a few bases: `PageAllocator::new`
/// returns, and what it builds passes its own checks and can allocate and free.
#[test]
fn every_field_at_its_extremes_is_ok_or_a_typed_error() {
    let bases = [
        ("8 MiB", Config::small(8 * MIB)),
        ("two nodes with Movable zones", Config::small(16 * MIB).nodes(2).movable_zone_bytes(2 * MIB)),
        ("256 MiB", Config::small(256 * MIB)),
    ];
    let mut variants: Vec<(String, Setter)> = Vec::new();
    macro_rules! vary {
        ($field:ident: $($v:expr),* $(,)?) => {
            $( variants.push((format!("{} = {:?}", stringify!($field), $v), |c: Config| c.$field($v))); )*
        };
    }
    // Arena sizes: page and pageblock multiples and not, around every limit,
    // including the ones that used to be truncated or to pass validation and
    // abort (2^32 - 3 pages; the near-limit pageblock multiple is in its own test).
    vary!(arena_bytes: 0, 1, PAGE - 1, PAGE, PAGEBLOCK - PAGE, PAGEBLOCK, PAGEBLOCK + PAGE, 3 * MIB,
        u32::MAX as u64, ((1u64 << 32) - 3) * PAGE, ((1u64 << 32) - 2) * PAGE, (1u64 << 32) * PAGE,
        1u64 << 46, u64::MAX - (PAGE - 1), u64::MAX);
    vary!(nodes: 0, 1, 2, 4, 127, 128, u32::MAX);
    vary!(movable_zone_bytes: 0, 1, PAGE, PAGEBLOCK, 2 * PAGEBLOCK + 1, 6 * MIB, 8 * MIB, u32::MAX as u64,
        u64::MAX - 1, u64::MAX);
    vary!(backing: Backing::None, Backing::Anonymous, Backing::HugePages, Backing::Resident);
    vary!(min_free_kbytes: None::<u64>, Some(0), Some(1), Some(8 << 10), Some((8 << 10) + 1), Some(256 << 10),
        Some(u32::MAX as u64), Some(u64::MAX));
    vary!(watermark_scale_factor: 0, 1, 10, 3000, 3001, u32::MAX);
    vary!(lowmem_reserve_ratio: 0, 1, 32, u32::MAX);
    vary!(nr_cpus: None::<usize>, Some(0), Some(1), Some(8192), Some(8193), Some(1usize << 40), Some(usize::MAX));
    vary!(percpu_pagelist_high_fraction: 0, 1, 7, 8, u32::MAX);
    vary!(pcp_batch: None::<u32>, Some(0), Some(1), Some(4096), Some(4097), Some(u32::MAX));
    #[cfg(feature = "seed-variants")]
    vary!(drain_mode: DrainMode::SinglePass, DrainMode::TwoPass);
    #[cfg(feature = "seed-variants")]
    vary!(pcp_migratetype_cache: false, true);
    vary!(pcp_lists: false, true);
    vary!(front_cache: false, true);
    #[cfg(feature = "seed-variants")]
    vary!(page_lock_waiters_bit: false, true);
    vary!(page_lock_unfairness: 0, 1, u32::MAX);

    let mut panics = Vec::new();
    let (mut ok, mut err) = (0, 0);
    for (base_name, base) in &bases {
        for (name, set) in &variants {
            let what = format!("{base_name}, {name}");
            match build(&what, set(base.clone())) {
                Err(panic) => panics.push(panic),
                Ok(Err(e)) => {
                    err += 1;
                    // Every error explains itself.
                    assert!(!e.to_string().is_empty(), "{what}: empty message for {e:?}");
                }
                Ok(Ok(a)) => {
                    ok += 1;
                    let used = catch_unwind(AssertUnwindSafe(|| {
                        a.check_invariants().unwrap();
                        if let Ok(p) = a.alloc_pages(Gfp::KERNEL, 0) {
                            a.free_pages(p, 0).unwrap();
                        }
                        a.check_invariants().unwrap();
                    }));
                    if used.is_err() {
                        panics.push(format!("{what}: the allocator it built panicked in use"));
                    }
                }
            }
        }
    }
    assert!(
        panics.is_empty(),
        "{} of {} configs panicked:\n{}",
        panics.len(),
        ok + err + panics.len(),
        panics.join("\n")
    );
    assert!(ok > 0 && err > 0, "the sweep should see both outcomes ({ok} ok, {err} errors)");
}

/// Every bound `validate` enforces names the field and the value given.
#[test]
fn bounds_are_reported_with_their_field() {
    let base = || Config::small(8 * MIB);
    let cases = [
        (base().nr_cpus(Some(usize::MAX)), "nr_cpus", usize::MAX.to_string()),
        (base().nr_cpus(Some(1 << 40)), "nr_cpus", (1u64 << 40).to_string()),
        (base().pcp_batch(Some(u32::MAX)), "pcp_batch", u32::MAX.to_string()),
        (base().min_free_kbytes(Some(u64::MAX)), "min_free_kbytes", u64::MAX.to_string()),
        (Config::small(256 * MIB).nodes(128), "nodes", "128".to_string()),
    ];
    for (cfg, field, value) in cases {
        match PageAllocator::new(cfg) {
            Err(e @ ConfigError::Invalid { field: f, .. }) => {
                assert_eq!(f, field);
                let msg = e.to_string();
                assert!(msg.contains(field) && msg.contains(&value), "{msg}");
            }
            other => panic!("{field} = {value}: expected Invalid, got {:?}", other.err()),
        }
    }
}

/// An arena that is not a whole number of pageblocks was silently cut down to
/// one; now it is refused, and the message says which sizes would work.
#[test]
fn arena_not_a_pageblock_multiple_is_refused_with_a_suggestion() {
    let bytes = 5 * MIB;
    match PageAllocator::new(Config::small(bytes)) {
        Err(e @ ConfigError::ArenaNotPageblockMultiple { bytes: b }) => {
            assert_eq!(b, bytes);
            let msg = e.to_string();
            assert!(msg.contains(&(4 * MIB).to_string()) && msg.contains(&(6 * MIB).to_string()), "{msg}");
        }
        other => panic!("expected ArenaNotPageblockMultiple, got {:?}", other.err()),
    }
    // 2^32 - 3 pages used to pass validation (and abort); it is past the
    // largest pageblock multiple that 32-bit pfn links can name.
    let near = ((1u64 << 32) - 3) * PAGE;
    assert!(matches!(PageAllocator::new(Config::small(near)), Err(ConfigError::ArenaTooLarge { .. })));
    // Just below that limit, the suggestion never names a size past it.
    let last = ((1u64 << 32) - 512) * PAGE;
    match PageAllocator::new(Config::small(last - PAGE)) {
        Err(e @ ConfigError::ArenaNotPageblockMultiple { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&(last - PAGEBLOCK).to_string()) && msg.contains(&last.to_string()), "{msg}");
        }
        other => panic!("expected ArenaNotPageblockMultiple, got {:?}", other.err()),
    }
}

/// Run the named test of this binary in a child process whose address space is
/// limited to `limit_mib`, so that a huge allocation fails whatever the
/// machine's memory and overcommit policy; returns whether the child passed.
fn run_limited(test: &str, limit_mib: u64) {
    let exe = std::env::current_exe().unwrap();
    // The test's name as the harness knows it: this module's path, less the
    // binary's own name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let test = if module.is_empty() { test.to_string() } else { format!("{module}::{test}") };
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", limit_mib << 10))
        .arg(exe)
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env("PAGEALLOC_LIMITED_CHILD", "1")
        .output()
        .expect("spawn the limited child");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "limited child failed ({:?}):\n{text}", out.status);
    assert!(text.contains("1 passed"), "the child did not run the test:\n{text}");
}

fn in_limited_child() -> bool {
    std::env::var_os("PAGEALLOC_LIMITED_CHILD").is_some()
}

/// The largest arena validation accepts (2^32 - 512 pages, 16 TiB less a
/// pageblock) needs 64 GiB of descriptors. Without them, construction returns
/// `OutOfMemory` instead of aborting the process. The address-space limit makes
/// the failure certain (a machine with that much memory, or overcommit set to
/// always, would otherwise hand the 64 GiB out).
#[test]
fn descriptors_that_cannot_be_had_are_an_error() {
    if !in_limited_child() {
        return run_limited("descriptors_that_cannot_be_had_are_an_error", 4096);
    }
    let pages = (1u64 << 32) - 512;
    match PageAllocator::new(Config::small(pages * PAGE)) {
        Err(e @ ConfigError::OutOfMemory { bytes }) => {
            assert_eq!(bytes, pages * pagealloc::PAGE_DESC_SIZE as u64);
            assert!(e.to_string().contains(&bytes.to_string()), "{e}");
        }
        other => panic!("expected OutOfMemory, got {:?}", other.err()),
    }
    // The same limit, a small arena: everything still works afterwards.
    let a = PageAllocator::new(Config::small(8 * MIB)).unwrap();
    a.free_pages(a.alloc_pages(Gfp::KERNEL, 3).unwrap(), 3).unwrap();
    a.check_invariants().unwrap();
}

/// A mapping the kernel refuses is `ConfigError::Mmap`, whose source is the
/// operating system's error.
#[test]
fn a_refused_mapping_keeps_the_os_error_as_its_source() {
    if !in_limited_child() {
        return run_limited("a_refused_mapping_keeps_the_os_error_as_its_source", 4096);
    }
    for backing in [Backing::Anonymous, Backing::HugePages, Backing::Resident] {
        let e = match PageAllocator::new(Config::new().arena_bytes(8 << 30).backing(backing)) {
            Err(e) => e,
            Ok(_) => panic!("{backing:?}: an 8 GiB mapping under a 4 GiB address-space limit was accepted"),
        };
        assert!(matches!(e, ConfigError::Mmap(_)), "{backing:?}: {e:?}");
        let src = e.source().expect("Mmap has a source");
        let io = src.downcast_ref::<std::io::Error>().expect("the source is an io::Error");
        assert_eq!(io.raw_os_error(), Some(12), "{backing:?}: ENOMEM expected, got {io}");
        // Clone keeps the same error.
        let again = e.clone();
        assert_eq!(again.source().unwrap().to_string(), src.to_string());
    }
}

/// A bulk request far larger than the arena used to reserve room for all of it
/// first (capacity overflow for `usize::MAX`, an abort for `1 << 40`); it now
/// hands out what the arena has.
#[test]
fn huge_bulk_list_requests_take_what_there_is() {
    let a = PageAllocator::new(Config::small(8 * MIB).min_free_kbytes(Some(0))).unwrap();
    for nr in [usize::MAX, 1 << 40, (1 << 32) + 1] {
        let mut out = Vec::new();
        let got = a.alloc_pages_bulk_list(Gfp::KERNEL, nr, &mut out);
        assert_eq!(got, out.len());
        assert!(got > 0 && got as u64 <= a.nr_pages(), "{nr}: got {got}");
        assert!(out.capacity() as u64 <= 2 * a.nr_pages(), "{nr}: reserved {}", out.capacity());
        a.free_pages_bulk(&out).unwrap();
        a.check_invariants().unwrap();
    }
    // Into a list that already holds pages.
    let mut out = vec![a.alloc_pages(Gfp::KERNEL, 0).unwrap()];
    let got = a.alloc_pages_bulk_list(Gfp::KERNEL, usize::MAX, &mut out);
    assert_eq!(got + 1, out.len());
    a.free_pages_bulk(&out).unwrap();
    a.check_invariants().unwrap();
}

/// `BulkFreeError` is a public struct, so an empty one can exist: printing it
/// must not panic.
#[test]
fn bulk_free_error_always_prints() {
    assert_eq!(BulkFreeError { rejected: Vec::new() }.to_string(), "bulk free skipped no entries");
    let one = BulkFreeError { rejected: vec![(3, FreeError::DoubleFree { pfn: Pfn::new(7) })] };
    let msg = one.to_string();
    assert!(msg.contains("1 invalid") && msg.contains("index 3"), "{msg}");
}

/// Pfn arithmetic never wraps: the checked forms say `None` at the edges.
#[test]
fn pfn_arithmetic_stops_at_the_edges() {
    assert_eq!(Pfn::MAX.checked_add(1), None);
    assert_eq!(Pfn::new(u64::MAX - 2).checked_add(1), Some(Pfn::MAX));
    assert_eq!(Pfn::new(0).checked_sub(1), None);
    assert!(catch_unwind(|| Pfn::MAX.add(1)).is_err());
    assert!(catch_unwind(|| Pfn::new(3).add(u64::MAX)).is_err());
}

/// Movable ops that refuse every move (the extremes below register them so
/// that the calls taking an ops id get a valid one).
struct Refuses;

impl pagealloc::MovableOps for Refuses {
    fn isolate(&self, _pfn: Pfn) -> bool {
        false
    }
    fn migrate(&self, _from: Pfn, _to: Pfn) -> bool {
        false
    }
}

/// An allocator, the positions and sizes to try on it, and the calls that
/// panicked.
struct Extremes {
    a: PageAllocator,
    n: u64,
    pfns: [Pfn; 5],
    sizes: [u64; 9],
    panics: Vec<String>,
}

impl Extremes {
    fn new() -> Self {
        let a = PageAllocator::new(Config::small(8 * MIB).min_free_kbytes(Some(0))).unwrap();
        let n = a.nr_pages();
        let pfns = [Pfn::new(0), Pfn::new(n - 1), Pfn::new(n), Pfn::new(u32::MAX as u64), Pfn::MAX];
        // Past 2^63 a count has no next power of two in a u64.
        let sizes = [0, 1, PAGEBLOCK, n, n + 1, 1 << 40, (1 << 63) + 1, u64::MAX - 1, u64::MAX];
        Self { a, n, pfns, sizes, panics: Vec::new() }
    }

    /// Run `f`, recording `what` when it panics.
    fn check(&mut self, what: String, f: impl FnOnce(&PageAllocator)) {
        if catch_unwind(AssertUnwindSafe(|| f(&self.a))).is_err() {
            self.panics.push(what);
        }
    }

    /// Nothing panicked, and nothing is left allocated.
    fn finish(self) {
        assert!(self.panics.is_empty(), "panicked: {:#?}", self.panics);
        self.a.check_invariants().unwrap();
        assert_eq!(self.a.census().allocated, 0);
    }
}

/// Every size and position argument of the public API at its extremes gives a
/// typed error (or works), never a panic or an overflow.
#[test]
fn size_arguments_at_their_extremes_are_errors() {
    let mut x = Extremes::new();
    let (pfns, sizes) = (x.pfns, x.sizes);
    for order in [11, 12, 31, 32, 63, 64, u32::MAX] {
        x.check(format!("alloc_pages order {order}"), |a| assert!(a.alloc_pages(Gfp::KERNEL, order).is_err()));
        for p in pfns {
            x.check(format!("free_pages({p:?}, {order})"), |a| assert!(a.free_pages(p, order).is_err()));
        }
    }
    for nid in [1, 2, u32::MAX] {
        x.check(format!("alloc_pages_node({nid})"), |a| {
            assert!(a.alloc_pages_node(pagealloc::NodeId(nid), Gfp::KERNEL, 0).is_err())
        });
    }
    for p in pfns {
        x.check(format!("page_address({p:?})"), |a| assert!(a.page_address(p).is_none()));
        x.check(format!("lock_page({p:?})"), |a| assert!(a.page_locks().lock_page(p).is_err()));
        for nr in sizes {
            x.check(format!("isolate_range({p:?}, {nr})"), |a| {
                if a.contig().isolate_range(p, nr).is_ok() {
                    a.contig().undo_isolate_range(p, nr).unwrap();
                }
            });
            x.check(format!("undo_isolate_range({p:?}, {nr})"), |a| {
                assert!(a.contig().undo_isolate_range(p, nr).is_err())
            });
            x.check(format!("test_pages_isolated({p:?}, {nr})"), |a| assert!(!a.contig().test_pages_isolated(p, nr)));
            x.check(format!("free_contig_range({p:?}, {nr})"), |a| {
                // Nothing is allocated: the first page, if any, is refused.
                assert_eq!(a.contig().free_contig_range(p, nr).is_ok(), nr == 0);
            });
        }
    }
    for nr in sizes {
        x.check(format!("alloc_contig_pages({nr})"), |a| {
            if let Ok(p) = a.contig().alloc_contig_pages(nr, Gfp::MOVABLE) {
                a.contig().free_contig_range(p, nr).unwrap();
            }
        });
    }
    x.check("free_pages_bulk(all of them)".into(), |a| assert!(a.free_pages_bulk(&pfns).is_err()));
    x.finish();
}

/// The same for the calls of migration, compaction and the no-lock paths:
/// `alloc_contig_range` with a count past 2^63 used to overflow computing
/// its error's order.
#[test]
fn migration_and_nolock_arguments_at_their_extremes_are_errors() {
    let mut x = Extremes::new();
    let (n, pfns, sizes) = (x.n, x.pfns, x.sizes);
    let id = x.a.compaction().register_movable_ops(Arc::new(Refuses));
    for order in [0, 11, 12, 31, 32, 63, 64, u32::MAX] {
        x.check(format!("alloc_pages_nolock order {order}"), |a| {
            if let Ok(p) = a.alloc_pages_nolock(Gfp::KERNEL, order) {
                a.free_pages_nolock(p, order).unwrap();
            }
        });
        x.check(format!("compact_zone(0, {order})"), |a| assert!(a.compaction().compact_zone(0, order).is_some()));
        for p in pfns {
            x.check(format!("free_pages_nolock({p:?}, {order})"), |a| assert!(a.free_pages_nolock(p, order).is_err()));
        }
    }
    for p in pfns {
        x.check(format!("set_page_movable({p:?})"), |a| assert!(a.compaction().set_page_movable(p, id).is_err()));
        x.check(format!("clear_page_movable({p:?})"), |a| assert!(a.compaction().clear_page_movable(p).is_err()));
        x.check(format!("get_page({p:?})"), |a| assert!(a.get_page(p).is_err()));
        x.check(format!("page_count({p:?})"), |a| assert_eq!(a.page_count(p), 0));
        x.check(format!("pfn_to_nid({p:?})"), |a| assert_eq!(a.pfn_to_nid(p).is_some(), p.as_u64() < n));
        x.check(format!("page_uptodate({p:?})"), |a| assert!(!a.page_locks().page_uptodate(p)));
        x.check(format!("set_page_uptodate({p:?})"), |a| assert!(a.page_locks().set_page_uptodate(p).is_err()));
        x.check(format!("set_page_writeback({p:?})"), |a| assert!(a.page_locks().set_page_writeback(p).is_err()));
        x.check(format!("wait_on_page_locked({p:?})"), |a| assert!(a.page_locks().wait_on_page_locked(p).is_err()));
        x.check(format!("page_wait_bucket({p:?})"), |a| {
            let _ = a.page_locks().page_wait_bucket(p);
        });
        for nr in sizes {
            x.check(format!("alloc_contig_range({p:?}, {nr})"), |a| {
                if a.contig().alloc_contig_range(p, nr, Gfp::MOVABLE).is_ok() {
                    a.contig().free_contig_range(p, nr).unwrap();
                }
            });
        }
    }
    x.check("alloc_contig_range's typed error".into(), |a| {
        // A count past the largest power of two: the order saturates at 64.
        for (p, nr, order) in [(0, u64::MAX, 64), (n - 1, 2, 1), (u64::MAX - 1, 2, 1), (1, 1 << 63, 63)] {
            let r = a.contig().alloc_contig_range(Pfn::new(p), nr, Gfp::MOVABLE);
            assert_eq!(r, Err(AllocError::NoMemory { order }), "alloc_contig_range({p:#x}, {nr})");
        }
    });
    x.finish();
}

/// Settings each in range, together at their largest: per-CPU lists must not
/// reserve memory for every CPU's `high` up front (8192 CPUs, batch 4096 used
/// to need gigabytes before the first allocation).
#[test]
fn largest_cpu_and_batch_settings_together_build() {
    let a = PageAllocator::new(Config::small(8 << 20).nr_cpus(Some(8192)).pcp_batch(Some(4096))).unwrap();
    let p = a.alloc_pages(pagealloc::Gfp::KERNEL, 0).unwrap();
    a.free_pages(p, 0).unwrap();
    a.check_invariants().unwrap();
}
