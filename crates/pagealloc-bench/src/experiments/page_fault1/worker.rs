//! One thread's measured loop for each kind of run: the allocator, the
//! kernel's page faults, the system allocator and the allocation-free floor.
//! Each loop writes the same way to each page and counts every page written
//! as one iteration, so the kinds' counts compare directly.

use super::{Kind, GATHER_BATCH, MEMSIZE, NR_PAGES};
use pagealloc::{Gfp, PageAllocator, Pfn};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A per-thread iteration counter on its own cache line.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Counter(pub(super) AtomicU64);

/// What every loop does to a page: write one byte of it, or (`zero`) zero the
/// whole page, which is what the kernel's fault path does.
#[derive(Clone, Copy)]
struct Touch {
    zero: bool,
}

impl Touch {
    fn page(self, p: *mut u8) {
        if self.zero {
            // SAFETY: `p` is the start of a 4 KiB page this thread owns right now.
            unsafe { std::ptr::write_bytes(p, 0, 4096) }
        } else {
            // SAFETY: as above; one byte of it.
            unsafe { std::ptr::write_volatile(p, 0) }
        }
    }
}

/// One thread's measured work, in will-it-scale's units (pages written).
pub(super) fn worker(kind: Kind, alloc: Option<&PageAllocator>, zero: bool, counter: &AtomicU64, stop: &AtomicBool) {
    let touch = Touch { zero };
    match kind {
        Kind::Ours(_) => ours(alloc.expect("an allocator"), touch, counter, stop),
        Kind::Kernel => kernel(touch, counter, stop),
        Kind::Malloc => malloc(touch, counter, stop),
        Kind::Floor => floor(touch, counter, stop),
    }
}

/// The allocator: `NR_PAGES` order-0 allocations, each page written, then
/// freed in munmap's gather batches.
fn ours(a: &PageAllocator, touch: Touch, counter: &AtomicU64, stop: &AtomicBool) {
    let mut n = 0u64;
    let mut pfns: Vec<Pfn> = Vec::with_capacity(NR_PAGES);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..NR_PAGES {
            let p = a.alloc_pages(Gfp::USER, 0).expect("page_fault1: arena exhausted");
            touch.page(a.page_address(p).expect("a backed arena").as_ptr());
            pfns.push(p);
            n += 1;
            counter.store(n, Ordering::Relaxed);
        }
        for b in pfns.chunks(GATHER_BATCH) {
            a.free_pages_bulk(b).expect("page_fault1: bulk free");
        }
        pfns.clear();
    }
}

/// The real page_fault1 loop: mmap `MEMSIZE`, fault each page in, munmap.
fn kernel(touch: Touch, counter: &AtomicU64, stop: &AtomicBool) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let c = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEMSIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(c, libc::MAP_FAILED, "page_fault1: mmap failed");
        let c = c.cast::<u8>();
        for i in (0..MEMSIZE).step_by(4096) {
            // SAFETY: i < MEMSIZE, inside the mapping made above.
            touch.page(unsafe { c.add(i) });
            n += 1;
            counter.store(n, Ordering::Relaxed);
        }
        // SAFETY: unmaps exactly the mapping made above, no longer used.
        unsafe { libc::munmap(c.cast(), MEMSIZE) };
    }
}

/// The system allocator: 4 KiB-aligned 4 KiB blocks, written and freed one
/// by one.
fn malloc(touch: Touch, counter: &AtomicU64, stop: &AtomicBool) {
    let mut n = 0u64;
    let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
    let mut blocks: Vec<*mut u8> = Vec::with_capacity(NR_PAGES);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..NR_PAGES {
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { std::alloc::alloc(layout) };
            assert!(!p.is_null(), "page_fault1: malloc failed");
            touch.page(p);
            blocks.push(p);
            n += 1;
            counter.store(n, Ordering::Relaxed);
        }
        for p in blocks.drain(..) {
            // SAFETY: allocated above with this layout, freed once.
            unsafe { std::alloc::dealloc(p, layout) };
        }
    }
}

/// The floor: the same writes to an already-resident buffer, no allocation.
fn floor(touch: Touch, counter: &AtomicU64, stop: &AtomicBool) {
    let mut n = 0u64;
    let mut buf = vec![1u8; MEMSIZE]; // written in full: resident
    let c = buf.as_mut_ptr();
    while !stop.load(Ordering::Relaxed) {
        for i in (0..MEMSIZE).step_by(4096) {
            // SAFETY: i < MEMSIZE, inside `buf`.
            touch.page(unsafe { c.add(i) });
            n += 1;
            counter.store(n, Ordering::Relaxed);
        }
    }
    std::hint::black_box(&buf);
}
