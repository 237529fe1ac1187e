//! A platform a kernel would give pagealloc-core: one CPU whose id is fixed,
//! a clock that only counts the calls to it, waiting by spinning, and a
//! static arena of frames; and, in [`frames`], a kernel's frame allocator
//! over the core in the shape of Asterinas's `GlobalFrameAllocator`. The
//! tests in `tests/` boot the core on them.
//!
//! Run: `cargo test -p pagealloc-kernel-test` (alone, so that cargo builds
//! the core without `std`; see Cargo.toml).

extern crate alloc;

pub mod frames;

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use pagealloc_core::{DescStorage, PageDesc, PAGE_SIZE};

/// The platform: CPU 0 of 1, a counting clock, spinning.
pub struct Kernel;

static TICKS: AtomicU64 = AtomicU64::new(0);

/// Calls of [`Kernel::current_cpu`]: the core asks on its per-CPU paths,
/// so a core that runs on this platform makes this grow.
pub static CPU_CALLS: AtomicU64 = AtomicU64::new(0);

impl pagealloc_core::Platform for Kernel {
    fn current_cpu() -> u32 {
        CPU_CALLS.fetch_add(1, Ordering::Relaxed);
        0
    }
    fn possible_cpus() -> usize {
        1
    }
    fn relax() {
        core::hint::spin_loop();
    }
    fn now_ns() -> u64 {
        TICKS.fetch_add(1_000, Ordering::Relaxed)
    }
}

pagealloc_core::set_platform!(Kernel);

/// Frames in the static arena: 8 MiB.
pub const ARENA_PAGES: usize = 2048;

/// The "physical memory": a static, page-aligned array the allocator never
/// touches (it runs with `Backing::None`); the tests write each frame they
/// own to prove no two owners share one.
#[repr(C, align(4096))]
pub struct Arena(UnsafeCell<[u8; ARENA_PAGES * PAGE_SIZE]>);

// SAFETY: the tests write a frame only while they own it (the allocator gave
// it to them and they have not freed it), so no two writers share a byte.
unsafe impl Sync for Arena {}

/// The arena.
pub static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_PAGES * PAGE_SIZE]));

/// The descriptors' memory, set aside statically as a kernel reserves its
/// memmap at boot: one slot per frame of the arena.
struct DescRegion(UnsafeCell<[MaybeUninit<PageDesc>; ARENA_PAGES]>);

// SAFETY: handed out once (`descriptor_region`), then only the allocator
// touches it.
unsafe impl Sync for DescRegion {}

static DESCS: DescRegion = DescRegion(UnsafeCell::new([const { MaybeUninit::uninit() }; ARENA_PAGES]));
static DESCS_TAKEN: AtomicBool = AtomicBool::new(false);

/// The static descriptor region, to the first caller only (`None` after).
pub fn descriptor_region() -> Option<DescStorage> {
    if DESCS_TAKEN.swap(true, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: the flag lets exactly one caller past, so this is the only
    // reference to the region ever made, and the region is static.
    Some(unsafe { &mut *DESCS.0.get() })
}

impl Arena {
    /// The address of frame `pfn` (below [`ARENA_PAGES`]).
    pub fn frame(&self, pfn: u64) -> *mut u8 {
        assert!((pfn as usize) < ARENA_PAGES, "pfn {pfn} is outside the arena");
        // SAFETY: in bounds (checked above).
        unsafe { self.0.get().cast::<u8>().add(pfn as usize * PAGE_SIZE) }
    }
}
