//! Boot pagealloc-core without std on the platform of this crate, as a
//! kernel's frame allocator, and drive it: every frame a test owns carries
//! its owner's stamp, checked when it is freed, so two owners of one frame
//! are caught; conservation and list/count agreement are checked throughout.

mod common;

use common::Rng;
use pagealloc_core::{AllocError, Backing, Config, FrameAllocator, FreeError, Gfp, Pfn, PAGE_SIZE};
use pagealloc_kernel_test::{descriptor_region, ARENA, ARENA_PAGES, CPU_CALLS};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// The firmware's usable regions, in frames: with reserved areas and holes
/// between them, and the last one given late (hotplug).
const REGIONS: [(u64, u64); 4] = [(1, 158), (256, 744), (1024, 512), (1600, 448)];

fn config() -> Config {
    Config::new()
        .arena_bytes((ARENA_PAGES * PAGE_SIZE) as u64)
        .backing(Backing::None)
        .nr_cpus(Some(1))
        .holes(vec![(Pfn::new(0), ARENA_PAGES as u64)])
}

/// Boot with the descriptors from the heap.
fn boot() -> FrameAllocator {
    boot_on(FrameAllocator::new(config()).expect("a valid arena"))
}

/// Boot as a kernel does, the descriptors in the static region it set aside
/// (one test only: the region is handed out once).
fn boot_static() -> FrameAllocator {
    let region = descriptor_region().expect("the static descriptor region, once");
    boot_on(FrameAllocator::with_descriptors(config(), region).expect("a valid arena"))
}

fn boot_on(f: FrameAllocator) -> FrameAllocator {
    assert_eq!(f.nr_free_pages(), 0, "every frame starts in a hole");
    for &(start, n) in &REGIONS[..3] {
        f.add_free_memory(Pfn::new(start), n).expect("usable memory, given once");
    }
    f.check_invariants().expect("intact after boot");
    f
}

/// One allocator at a time writes the arena: each test boots its own over
/// the same frames, so the tests that stamp them take turns.
static ARENA_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn stamp(pfn: u64, owner: u64) {
    // SAFETY: the test owns frame `pfn` (allocated, not yet freed), and the
    // stamp fits in the frame.
    unsafe { ARENA.frame(pfn).cast::<u64>().write(owner) };
}

fn stamp_of(pfn: u64) -> u64 {
    // SAFETY: as in `stamp`.
    unsafe { ARENA.frame(pfn).cast::<u64>().read() }
}

/// Frames the test owns: first frame -> (order, owner stamp).
struct Owned(BTreeMap<u64, (u32, u64)>);

impl Owned {
    fn take(&mut self, pfn: Pfn, order: u32, owner: u64) {
        let p = pfn.as_u64();
        assert_eq!(p % (1 << order), 0, "a block is aligned to its size");
        let in_region = REGIONS.iter().any(|&(s, n)| p >= s && p + (1 << order) <= s + n);
        assert!(in_region, "block {p}/{order} is outside the usable memory");
        for q in p..p + (1 << order) {
            stamp(q, owner);
        }
        assert!(self.0.insert(p, (order, owner)).is_none(), "frame {p} handed out twice");
    }

    fn give(&mut self, f: &FrameAllocator, p: u64) {
        let (order, owner) = self.0.remove(&p).expect("owned");
        for q in p..p + (1 << order) {
            assert_eq!(stamp_of(q), owner, "frame {q} was written by another owner");
        }
        f.free(Pfn::new(p), order).expect("a block this test owns");
    }
}

#[test]
fn a_kernel_boots_allocates_splits_and_frees() {
    let _turn = ARENA_TURN.lock().unwrap_or_else(|e| e.into_inner());
    let f = boot_static();
    let managed: u64 = REGIONS[..3].iter().map(|r| r.1).sum();
    let mut owned = Owned(BTreeMap::new());
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for i in 0..20_000u64 {
        let r = rng.next();
        if !r.is_multiple_of(3) || owned.0.is_empty() {
            let order = (r >> 8) as u32 % 5;
            match f.alloc(Gfp::KERNEL, order) {
                Ok(p) => owned.take(p, order, i + 1),
                Err(AllocError::NoMemory { .. }) => {} // a normal result
                Err(e) => panic!("{e}"),
            }
        } else {
            let k = *owned.0.keys().nth((r >> 8) as usize % owned.0.len()).unwrap();
            let (order, owner) = owned.0[&k];
            if order > 0 && r & 1 == 0 {
                // Split, then keep the frames as order-0 blocks of the same owner.
                f.split(Pfn::new(k), order).expect("an owned block");
                owned.0.remove(&k);
                for q in k..k + (1 << order) {
                    owned.0.insert(q, (0, owner));
                }
            } else {
                owned.give(&f, k);
            }
        }
        if i % 1000 == 0 {
            f.check_invariants().expect("intact under the workload");
        }
    }
    // Hotplug the last region while blocks are held.
    f.add_free_memory(Pfn::new(REGIONS[3].0), REGIONS[3].1).expect("a hole");
    let keys: Vec<u64> = owned.0.keys().copied().collect();
    for k in keys {
        owned.give(&f, k);
    }
    f.check_invariants().expect("intact at the end");
    // Everything back: the free count may lag only by what sits on the
    // per-CPU list (at most its high mark), so take the whole memory in
    // the largest blocks until it runs out and count it.
    let mut got = 0;
    let mut held = Vec::new();
    while let Ok(p) = f.alloc(Gfp::KERNEL | Gfp::HIGH, 0) {
        held.push(p);
        got += 1;
    }
    assert!(got >= managed + REGIONS[3].1 - 64, "{got} frames of {} came back", managed + REGIONS[3].1);
    for p in held {
        f.free(p, 0).unwrap();
    }
    f.check_invariants().expect("intact after the drain");
}

#[test]
fn descriptor_storage_too_small_is_a_typed_error() {
    let small = Box::leak(Box::<[pagealloc_core::PageDesc]>::new_uninit_slice(ARENA_PAGES - 1));
    let r = FrameAllocator::with_descriptors(config(), small);
    assert!(matches!(r, Err(pagealloc_core::ConfigError::Invalid { field: "descriptor storage", .. })));
    // Enough of it, past the end of a larger region: only the first slots are used.
    let big = Box::leak(Box::<[pagealloc_core::PageDesc]>::new_uninit_slice(ARENA_PAGES + 7));
    let f = FrameAllocator::with_descriptors(config(), big).unwrap();
    f.add_free_memory(Pfn::new(REGIONS[0].0), REGIONS[0].1).unwrap();
    let p = f.alloc(Gfp::KERNEL, 3).unwrap();
    f.free(p, 3).unwrap();
    f.check_invariants().unwrap();
}

#[test]
fn bad_calls_are_typed_errors_and_change_nothing() {
    let f = boot();
    let p = f.alloc(Gfp::KERNEL, 2).unwrap();
    assert!(matches!(f.free(Pfn::new(p.as_u64() + 1), 0), Err(FreeError::InsideBlock { .. })));
    assert!(matches!(f.split(p, 3), Err(FreeError::WrongOrder { .. } | FreeError::Misaligned { .. })));
    assert!(matches!(f.split(p, 11), Err(FreeError::InvalidOrder { .. })));
    assert!(f.add_free_memory(Pfn::new(REGIONS[0].0), 1).is_err(), "memory given twice");
    assert!(f.add_free_memory(Pfn::new(ARENA_PAGES as u64), 1).is_err(), "past the arena");
    f.free(p, 2).unwrap();
    assert!(matches!(f.free(p, 2), Err(FreeError::DoubleFree { .. } | FreeError::NotAllocated { .. })));
    f.check_invariants().unwrap();
}

/// The core runs on this crate's platform (not std's) when cargo builds it
/// without `std`, as `cargo test -p pagealloc-kernel-test` alone does; CI
/// sets `PAGEALLOC_EXPECT_NO_STD=1` there so that a build that quietly
/// gained `std` fails here.
#[test]
fn the_core_runs_on_this_platform_without_std() {
    if std::env::var_os("PAGEALLOC_EXPECT_NO_STD").is_some() {
        assert!(!pagealloc_core::platform::built_with_std(), "the core was built with std");
    }
    if pagealloc_core::platform::built_with_std() {
        return;
    }
    let before = CPU_CALLS.load(Ordering::Relaxed);
    let f = boot();
    let p = f.alloc(Gfp::KERNEL, 0).unwrap();
    f.free(p, 0).unwrap();
    assert!(CPU_CALLS.load(Ordering::Relaxed) > before, "the core never asked this platform for its CPU");
}

/// Interrupt context: allocations and frees that never wait, interleaved
/// with ordinary ones; parked frees come back at the next drain.
#[test]
fn nolock_calls_for_interrupt_context_keep_every_frame() {
    let _turn = ARENA_TURN.lock().unwrap_or_else(|e| e.into_inner());
    let f = boot();
    let mut owned = Owned(BTreeMap::new());
    for i in 0..200u64 {
        let order = (i % 3) as u32;
        let p = if i % 2 == 0 { f.alloc_nolock(Gfp::KERNEL, order) } else { f.alloc(Gfp::KERNEL, order) };
        match p {
            Ok(p) => owned.take(p, order, 1_000_000 + i),
            Err(AllocError::NoMemory { .. } | AllocError::WouldBlock { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        if i % 3 == 2 {
            let (&k, &(order, owner)) = owned.0.iter().next().unwrap();
            owned.0.remove(&k);
            for q in k..k + (1 << order) {
                assert_eq!(stamp_of(q), owner, "frame {q} was written by another owner");
            }
            f.free_nolock(Pfn::new(k), order).expect("an owned block");
        }
    }
    f.check_invariants().expect("intact with frees parked");
    let keys: Vec<u64> = owned.0.keys().copied().collect();
    for k in keys {
        owned.give(&f, k);
    }
    f.drain();
    f.check_invariants().expect("intact after the drain");
    assert_eq!(f.nr_free_pages(), f.managed_pages(), "every frame back");
}
