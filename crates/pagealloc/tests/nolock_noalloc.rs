//! The no-lock paths allocate nothing on the heap: a counting global
//! allocator watches one thread that makes only no-lock calls (while another
//! thread churns through the normal API, so some locks are busy and some
//! frees are parked), and must count zero allocations there. It counts the
//! same thread's normal calls too, so the check can fail.
//!
//! Not with `debug-checks`: its zone check allocates at lock release.
#![cfg(not(feature = "debug-checks"))]

use pagealloc::{AllocError, Config, Gfp, PageAllocator};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Counting;
static COUNTED: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static WATCHED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; the count has no effect on it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if WATCHED.try_with(Cell::get).unwrap_or(false) {
            COUNTED.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn nolock_calls_allocate_nothing() {
    let a = PageAllocator::new(Config::small(32 << 20)).unwrap();
    let stop = AtomicBool::new(false);
    let (ok, held) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut v = Vec::with_capacity(256);
            while !stop.load(Ordering::Relaxed) {
                for o in 0..4 {
                    if let Ok(p) = a.alloc_pages(Gfp::KERNEL, o) {
                        v.push((p, o));
                    }
                }
                if v.len() > 200 {
                    for (p, o) in v.drain(..) {
                        a.free_pages(p, o).unwrap();
                    }
                }
            }
            for (p, o) in v {
                a.free_pages(p, o).unwrap();
            }
        });
        let r = s
            .spawn(|| {
                let mut held = [None; 64];
                let mut ok = 0u64;
                WATCHED.with(|w| w.set(true));
                // At least 20,000 calls, and on until one allocation got a
                // block (a busy machine can fail a long run of them).
                for i in 0..200_000usize {
                    if i >= 20_000 && ok > 0 {
                        break;
                    }
                    let slot = &mut held[i % 64];
                    if let Some((p, o)) = slot.take() {
                        a.free_pages_nolock(p, o).unwrap();
                    }
                    let o = (i % 4) as u32;
                    match a.alloc_pages_nolock(Gfp::KERNEL, o) {
                        Ok(p) => {
                            *slot = Some((p, o));
                            ok += 1;
                        }
                        Err(AllocError::WouldBlock { .. } | AllocError::NoMemory { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                    // Misuse is refused without allocating too.
                    assert!(a.free_pages_nolock(pagealloc::Pfn::new(u64::from(u32::MAX) - 1), 0).is_err());
                }
                WATCHED.with(|w| w.set(false));
                (ok, held)
            })
            .join()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        r
    });
    assert_eq!(COUNTED.load(Ordering::Relaxed), 0, "the no-lock paths allocated");
    assert!(ok > 0);
    // The counter works: a normal call that registers this thread's front
    // cache allocates.
    WATCHED.with(|w| w.set(true));
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    WATCHED.with(|w| w.set(false));
    assert!(COUNTED.load(Ordering::Relaxed) > 0, "the counting allocator counted nothing");
    a.free_pages(p, 0).unwrap();
    for (p, o) in held.into_iter().flatten() {
        a.free_pages(p, o).unwrap();
    }
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!((c.allocated, c.pcp, c.free), (0, 0, a.managed_pages()), "{c:?}");
}
