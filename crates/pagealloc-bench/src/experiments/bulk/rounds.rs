//! The timed loops, one function per form and floor. Each is
//! `#[inline(never)]`, so that no form's code generation depends on another's
//! or on the timing around it.

use pagealloc::{Gfp, PageAllocator, PageArray, Pfn};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

/// `loops` rounds of the list form: allocate `step` pages onto `out`, free
/// them, clear. Each form's loop is a function of its own, so neither's code
/// generation depends on the other's.
#[inline(never)]
pub(super) fn list_rounds(a: &PageAllocator, gfp: Gfp, step: usize, out: &mut Vec<Pfn>, loops: u64) {
    for _ in 0..loops {
        let n = a.alloc_pages_bulk_list(gfp, step, out);
        assert_eq!(n, step, "bulk: list form came back short");
        a.free_pages_bulk(out).expect("bulk: free");
        out.clear();
    }
}

/// `loops` rounds of seed 3's old design, the list form as the kernel had it:
/// allocate `step` pages threaded through their descriptors, then walk the
/// chain and free each page as page_bench04_bulk's list variant does
/// (`list_for_each_entry_safe` ... `__free_page`), reading each page's link
/// before freeing it.
#[inline(never)]
pub(super) fn linked_rounds(a: &PageAllocator, gfp: Gfp, step: usize, loops: u64) {
    for _ in 0..loops {
        let c = a.alloc_pages_bulk_linked(gfp, step);
        assert_eq!(c.len(), step, "bulk: linked form came back short");
        for p in a.chain_iter(&c) {
            a.free_pages(p, 0).expect("bulk: free");
        }
        // Every page freed by the walk: nothing left to leak.
        drop(c);
    }
}

/// `loops` rounds of the array form over `slots` (all empty): fill, then
/// hand the array back as it is (the kernel's release_pages on the array),
/// emptied for the next round.
#[inline(never)]
pub(super) fn array_rounds(a: &PageAllocator, gfp: Gfp, slots: &mut [Option<Pfn>], loops: u64) {
    for _ in 0..loops {
        let n = a.alloc_pages_bulk(gfp, slots);
        assert_eq!(n, slots.len(), "bulk: array form came back short");
        a.free_pages_bulk_slots(slots).expect("bulk: free");
    }
}

/// `loops` rounds of the owned array form: fill `arr` (all its slots
/// empty), then release it (every page back, the slots emptied). Its pages
/// are the array's alone (no pfn-taking call acts on them), so the release
/// takes each with a plain store where a free claims with a CAS.
#[inline(never)]
pub(super) fn owned_rounds(arr: &mut PageArray<'_>, gfp: Gfp, loops: u64) {
    for _ in 0..loops {
        let n = arr.fill(gfp);
        assert_eq!(n, arr.len(), "bulk: owned array came back short");
        arr.release();
    }
}

/// `loops` rounds of the floor under any array form whose pages any thread
/// may name by pfn (the slots form's): `descs`
/// stands for a bulk's page descriptors (16 bytes each, the flags word
/// first, as the arena's), and each round marks every page allocated with a
/// release store, as an allocation does, then claims every one back with
/// one compare-and-swap from exactly "allocated", as a free does (the one
/// locked instruction per freed page that a safe free needs: two frees of
/// one pfn may race, and exactly one must win). No list, no checks, no
/// slots: what is left when everything else costs nothing.
#[inline(never)]
pub(super) fn claim_floor_rounds(descs: &[[AtomicU32; 4]], loops: u64) {
    const ALLOCATED: u32 = 1 << 9;
    const FREE: u32 = 1 << 10;
    for _ in 0..loops {
        for d in descs {
            d[0].store(ALLOCATED, Ordering::Release);
        }
        for d in descs {
            let won = d[0].compare_exchange(ALLOCATED, FREE, Ordering::Acquire, Ordering::Relaxed);
            assert!(won.is_ok(), "bulk: floor claim lost");
        }
    }
}

/// `loops` rounds of the floor under the owned array form: the work each
/// page needs with nothing around it. `stack` (as long as `slots`, so it
/// alone serves every page) stands for the front cache, `descs` for the
/// pages' descriptors (16 bytes each, flags then private word), `blocks`
/// for their pageblock words. A round fills every slot from the stack back
/// to front, marking each page's flags (one store), then releases them in
/// slot order: per page the slot read, the private and pageblock words
/// read and checked, the flags stored, the pfn pushed; the slots emptied.
/// No per-CPU list, no per-call entry, no statistics.
#[inline(never)]
pub(super) fn owned_floor_rounds(
    stack: &mut [u32],
    descs: &[[AtomicU32; 4]],
    blocks: &[AtomicU16],
    slots: &mut [Option<Pfn>],
    loops: u64,
) {
    const HELD: u32 = 3 << 10;
    const FREE: u32 = 1 << 10;
    let mut len = stack.len();
    for _ in 0..loops {
        for s in slots.iter_mut().rev() {
            len -= 1;
            let p = stack[len];
            *s = Some(Pfn::new(u64::from(p)));
            descs[p as usize][0].store(HELD, Ordering::Release);
        }
        for s in slots.iter_mut() {
            let p = s.take().expect("bulk: floor slot").as_u64() as usize;
            let (d, w) = (&descs[p], blocks[p >> 9].load(Ordering::Relaxed));
            assert!(d[1].load(Ordering::Relaxed) == 0 && w == 0, "bulk: floor page of another type");
            d[0].store(FREE, Ordering::Release);
            stack[len] = p as u32;
            len += 1;
        }
    }
}
