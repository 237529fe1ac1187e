//! A kernel's frame allocator on pagealloc-core, in the shape of Asterinas's
//! `GlobalFrameAllocator` (`alloc(Layout)`, `dealloc(addr, size)`,
//! `add_free_memory(addr, size)`). Only `core` is used here: this is the
//! code a `no_std` kernel would carry. Physical memory is abstract frames
//! (`Backing::None`); the arena spans the physical range and starts as one
//! hole, and boot gives each usable region of the firmware's map.

use core::alloc::Layout;
use pagealloc_core::{Backing, Config, FrameAllocator, Gfp, Pfn, PAGE_SIZE};

/// The interface a kernel's memory subsystem calls, as ostd defines it.
pub trait GlobalFrameAllocator {
    /// A physical address of `layout.size()` bytes aligned to
    /// `layout.align()`, or `None`.
    fn alloc(&self, layout: Layout) -> Option<usize>;
    /// Give back `size` bytes at `addr`: all or part of one earlier `alloc`.
    fn dealloc(&self, addr: usize, size: usize);
    /// Add `size` bytes of usable memory at `addr` (boot, hotplug).
    fn add_free_memory(&self, addr: usize, size: usize);
}

/// pagealloc-core behind [`GlobalFrameAllocator`].
pub struct Frames {
    f: FrameAllocator,
    /// The physical address of frame 0.
    base: usize,
}

impl Frames {
    /// An allocator for physical `[base, base + bytes)`, all of it a hole
    /// until [`GlobalFrameAllocator::add_free_memory`] gives it.
    pub fn new(base: usize, bytes: u64) -> Self {
        let pages = bytes / PAGE_SIZE as u64;
        let cfg = Config::new().arena_bytes(bytes).backing(Backing::None).holes(alloc::vec![(Pfn::new(0), pages)]);
        Frames { f: FrameAllocator::new(cfg).expect("a valid arena"), base }
    }

    /// The allocator, for its counts and checks.
    pub fn allocator(&self) -> &FrameAllocator {
        &self.f
    }

    fn pfn(&self, addr: usize) -> Pfn {
        Pfn::new(((addr - self.base) / PAGE_SIZE) as u64)
    }

    fn addr(&self, p: Pfn) -> usize {
        self.base + p.as_u64() as usize * PAGE_SIZE
    }
}

impl GlobalFrameAllocator for Frames {
    fn alloc(&self, layout: Layout) -> Option<usize> {
        let pages = layout.size().div_ceil(PAGE_SIZE).max(1);
        // A buddy block is aligned to its size: the order that covers both
        // the size and the alignment.
        let span = pages.max(layout.align().div_ceil(PAGE_SIZE)).next_power_of_two();
        let order = span.trailing_zeros();
        let p = self.f.alloc(Gfp::KERNEL, order).ok()?;
        if order > 0 {
            // Order-0 frames from here on, so that any part can go back
            // alone; the frames past the size go back now (the kernel's
            // `alloc_pages_exact`).
            self.f.split(p, order).expect("the block just allocated");
            for q in p.as_u64() + pages as u64..p.as_u64() + span as u64 {
                self.f.free(Pfn::new(q), 0).expect("a frame of the split block");
            }
        }
        Some(self.addr(p))
    }

    fn dealloc(&self, addr: usize, size: usize) {
        let first = self.pfn(addr).as_u64();
        for q in first..first + size.div_ceil(PAGE_SIZE) as u64 {
            self.f.free(Pfn::new(q), 0).expect("dealloc of frames this allocator gave");
        }
    }

    fn add_free_memory(&self, addr: usize, size: usize) {
        // The firmware's regions need not be page aligned: the whole pages
        // inside them.
        let start = addr.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let end = (addr + size) / PAGE_SIZE * PAGE_SIZE;
        if end > start {
            let r = self.f.add_free_memory(self.pfn(start), ((end - start) / PAGE_SIZE) as u64);
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
