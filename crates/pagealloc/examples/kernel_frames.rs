//! A kernel's frame allocator on pagealloc, in the shape of Asterinas's
//! `GlobalFrameAllocator` (`alloc(Layout)`, `dealloc(addr, size)`,
//! `add_free_memory(addr, size)`): physical memory is abstract frames
//! (`Backing::None`), the arena spans the physical range, every byte of it
//! starts as a hole, and boot gives each usable region of the firmware's
//! memory map as it reads it.
//!
//! Run: `cargo run -p pagealloc --example kernel_frames`.
//! (The library needs `std` today; this shows the interface a kernel would
//! program against.)

use pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn, PAGE_SIZE};
use std::alloc::Layout;

/// The interface a kernel's memory subsystem calls, as ostd defines it.
pub trait FrameAllocator {
    /// A physical address of `layout.size()` bytes aligned to
    /// `layout.align()`, or `None`.
    fn alloc(&self, layout: Layout) -> Option<usize>;
    /// Give back `size` bytes at `addr`: all or part of one earlier `alloc`.
    fn dealloc(&self, addr: usize, size: usize);
    /// Add `size` bytes of usable memory at `addr` (boot, hotplug).
    fn add_free_memory(&self, addr: usize, size: usize);
}

/// pagealloc behind [`FrameAllocator`].
pub struct Frames {
    a: PageAllocator,
    /// The physical address of frame 0.
    base: usize,
}

impl Frames {
    /// An allocator for physical `[base, base + bytes)`, all of it a hole
    /// until [`FrameAllocator::add_free_memory`] gives it.
    pub fn new(base: usize, bytes: u64) -> Self {
        let pages = bytes / PAGE_SIZE as u64;
        let cfg = Config::new().arena_bytes(bytes).backing(Backing::None).holes(vec![(Pfn::new(0), pages)]);
        Frames { a: PageAllocator::new(cfg).expect("a valid arena"), base }
    }

    /// The allocator, for its reports and checks.
    pub fn allocator(&self) -> &PageAllocator {
        &self.a
    }

    fn pfn(&self, addr: usize) -> Pfn {
        Pfn::new(((addr - self.base) / PAGE_SIZE) as u64)
    }

    fn addr(&self, p: Pfn) -> usize {
        self.base + p.as_u64() as usize * PAGE_SIZE
    }
}

impl FrameAllocator for Frames {
    fn alloc(&self, layout: Layout) -> Option<usize> {
        let pages = layout.size().div_ceil(PAGE_SIZE).max(1) as u64;
        if pages == 1 && layout.align() <= PAGE_SIZE {
            // The hot case: the per-CPU lists and the thread's front cache.
            return self.a.alloc_pages(Gfp::KERNEL, 0).ok().map(|p| self.addr(p));
        }
        // Order-0 frames in one run, so that any part can go back alone;
        // the run is aligned to its size rounded up to a power of two (at
        // most a pageblock).
        let run_align = pages.next_power_of_two().min(512) as usize * PAGE_SIZE;
        if layout.align() > run_align {
            return None;
        }
        self.a.alloc_contig_pages(pages, Gfp::KERNEL).ok().map(|p| self.addr(p))
    }

    fn dealloc(&self, addr: usize, size: usize) {
        let pages = size.div_ceil(PAGE_SIZE) as u64;
        self.a.free_contig_range(self.pfn(addr), pages).expect("dealloc of frames this allocator gave");
    }

    fn add_free_memory(&self, addr: usize, size: usize) {
        // The firmware's regions need not be page aligned: the whole pages
        // inside them.
        let start = addr.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let end = (addr + size) / PAGE_SIZE * PAGE_SIZE;
        if end > start {
            let r = self.a.add_free_memory(self.pfn(start), ((end - start) / PAGE_SIZE) as u64);
            r.expect("usable memory is given once");
        }
    }
}

/// Boot on a made-up memory map: usable regions with firmware areas and
/// holes between them, one region given late (hotplug).
pub fn boot() -> Frames {
    let base = 0x8000_0000usize;
    let f = Frames::new(base, 64 << 20);
    let usable: [(usize, usize); 4] =
        [(0x0000_1000, 0x9_e000), (0x0010_0000, 0x1f0_0000), (0x0200_0800, 0x0ff_f000), (0x0300_0000, 0x100_0000)];
    for (off, len) in usable {
        f.add_free_memory(base + off, len);
    }
    f
}

fn main() {
    let f = boot();
    let a = f.allocator();
    println!("after boot: {} pages usable of {}", a.managed_pages(), a.nr_pages());
    let page = f.alloc(Layout::from_size_align(4096, 4096).unwrap()).expect("a frame");
    let big = f.alloc(Layout::from_size_align(64 << 10, 64 << 10).unwrap()).expect("64 KiB aligned");
    assert_eq!(big % (64 << 10), 0);
    f.dealloc(big + (16 << 10), 32 << 10); // the middle half goes back alone
    f.dealloc(big, 16 << 10);
    f.dealloc(big + (48 << 10), 16 << 10);
    f.dealloc(page, 4096);
    a.check_invariants().expect("intact");
    println!("{}", a.buddyinfo());
}
