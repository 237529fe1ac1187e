//! Everything the experiment measures, on one pinned thread: the single-page
//! pair, the four bulk forms and the floors at every step (alternating repeat
//! by repeat), then the pair without the front cache, the system allocator's
//! and tcmalloc's.

use super::rounds::{array_rounds, claim_floor_rounds, linked_rounds, list_rounds, owned_floor_rounds, owned_rounds};
use super::timing::{median_of, repeat, time, Rec};
use super::STEPS;
use crate::peers::DlAlloc;
use pagealloc::{Config, Gfp, PageAllocator, Pfn};
use std::sync::atomic::{AtomicU16, AtomicU32};

/// A measurement: its median repeat, and every repeat's cycles per element.
pub(super) type Median = (Rec, Vec<f64>);

/// The bulk forms, one entry per step, and the floors at the largest step.
pub(super) struct Forms {
    pub(super) list: Vec<Median>,
    /// The single-page pair again at each step, alternating with the forms
    /// (what the seed's "list faster than single pages" is judged on: the
    /// same drift hits both).
    pub(super) single_at: Vec<Median>,
    pub(super) linked: Vec<Median>,
    pub(super) array: Vec<Median>,
    /// The owned array form (`PageArray`), not in the seed.
    pub(super) owned: Vec<Median>,
    /// The mark-and-claim floor at the largest step, timed alternately
    /// with the four forms there.
    pub(super) floor: Median,
    /// The owned form's floor at the largest step, timed alike.
    pub(super) owned_floor: Median,
}

/// Everything measured on the pinned thread.
pub(super) struct Measured {
    pub(super) single: Median,
    /// The order-0 pair timed alternately with tcmalloc's (`single` again
    /// where tcmalloc is missing).
    pub(super) pair: Median,
    pub(super) forms: Forms,
    pub(super) no_front: Median,
    pub(super) malloc: Median,
    /// tcmalloc's pair, or why it was not run.
    pub(super) tcmalloc: Result<Median, String>,
    /// The owned pair (`Pages` alloc+drop), timed alternately with the
    /// pair and tcmalloc's.
    pub(super) owned_pair: Median,
}

/// `total` order-0 alloc+free pairs, timed.
fn single_run(a: &PageAllocator, total: u64) -> Rec {
    time(1, total, || {
        for _ in 0..total {
            let p = a.alloc_pages(Gfp::KERNEL, 0).expect("bulk: alloc");
            a.free_pages(crate::harness::opaque_pfn(p), 0).expect("bulk: free");
        }
    })
}

/// `total` order-0 `Pages` alloc+drop pairs (an owned page: its free needs
/// no claim), timed.
fn owned_run(a: &PageAllocator, total: u64) -> Rec {
    time(1, total, || {
        for _ in 0..total {
            let p = a.alloc(Gfp::KERNEL, 0).expect("bulk: alloc");
            drop(std::hint::black_box(p));
        }
    })
}

/// The floors' stand-ins for descriptors, the front cache's stack, the
/// pageblock words and the slots, at the largest step.
struct FloorState {
    descs: Vec<[AtomicU32; 4]>,
    stack: Vec<u32>,
    blocks: Vec<AtomicU16>,
    slots: Vec<Option<Pfn>>,
}

impl FloorState {
    fn new(step: usize) -> Self {
        Self {
            descs: (0..step).map(|_| Default::default()).collect(),
            stack: (0..step as u32).collect(),
            blocks: (0..1).map(|_| AtomicU16::new(0)).collect(),
            slots: vec![None; step],
        }
    }
}

/// The four bulk forms and the single pair at every step, alternating
/// repeat by repeat, and the floors beside them at the largest step.
fn measure_forms(a: &PageAllocator, repeats: usize, total: u64) -> Forms {
    let gfp = Gfp::KERNEL;
    let mut list_out: Vec<Pfn> = Vec::with_capacity(128);
    let mut slots: Vec<Option<Pfn>> = vec![None; 128];
    let (mut list, mut single_at, mut linked, mut array, mut owned) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The floor runs at the largest step, beside the four forms there.
    let floor_step = STEPS[STEPS.len() - 1];
    let mut fs = FloorState::new(floor_step);
    let (mut floor_recs, mut owned_floor_recs) = (Vec::new(), Vec::new());
    for &step in &STEPS {
        let loops = (total / step as u64).max(1);
        let s = &mut slots[..step];
        let mut list_run = || time(step, loops, || list_rounds(a, gfp, step, &mut list_out, loops));
        let mut array_run = || time(step, loops, || array_rounds(a, gfp, s, loops));
        let linked_run = || time(step, loops, || linked_rounds(a, gfp, step, loops));
        let mut parr = a.page_array(step).expect("bulk: page array");
        let mut owned_run = || time(step, loops, || owned_rounds(&mut parr, gfp, loops));
        // Warm all three, then alternate repeat by repeat (with the single
        // pair) so drift hits them alike.
        list_run();
        array_run();
        linked_run();
        owned_run();
        let (mut lr, mut ar, mut kr, mut sr, mut or) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // At the largest step (seed 3's claim) more rounds, up to three
        // times as many, while the claim's interval (linked list against
        // array, paired round by round) contains 0.
        let cyc = |v: &[Rec]| v.iter().map(Rec::cycles_per_elem).collect::<Vec<f64>>();
        while ar.len() < repeats
            || (step == floor_step
                && ar.len() < 3 * repeats
                && crate::report::verdict::unsettled(&cyc(&kr), &cyc(&ar), false))
        {
            sr.push(single_run(a, total));
            kr.push(linked_run());
            ar.push(array_run());
            lr.push(list_run());
            or.push(owned_run());
            if step == floor_step {
                floor_recs.push(time(step, loops, || claim_floor_rounds(&fs.descs, loops)));
                owned_floor_recs.push(time(step, loops, || {
                    owned_floor_rounds(&mut fs.stack, &fs.descs, &fs.blocks, &mut fs.slots, loops)
                }));
            }
        }
        list.push(median_of(lr));
        single_at.push(median_of(sr));
        linked.push(median_of(kr));
        array.push(median_of(ar));
        owned.push(median_of(or));
    }
    let (floor, owned_floor) = (median_of(floor_recs), median_of(owned_floor_recs));
    Forms { list, single_at, linked, array, owned, floor, owned_floor }
}

/// The system allocator's 4 KiB-aligned 4 KiB pair.
fn measure_malloc(repeats: usize, total: u64) -> Median {
    let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
    let malloc_run = || {
        time(1, total, || {
            for _ in 0..total {
                // SAFETY: the layout has a non-zero size.
                let p = unsafe { std::alloc::alloc(layout) };
                assert!(!p.is_null(), "bulk: malloc failed");
                // SAFETY: allocated just above with this layout, freed once.
                unsafe { std::alloc::dealloc(crate::harness::opaque_ptr(p), layout) };
            }
        })
    };
    malloc_run();
    repeat(repeats, malloc_run)
}

/// Our raw pair and owned pair, on an allocator of their own, alternating
/// repeat by repeat with `peer` when there is one (tcmalloc), so that drift
/// on a shared machine hits every figure of a ratio alike: (raw, owned,
/// peer's).
fn measure_ours_with(repeats: usize, total: u64, peer: Option<&dyn Fn() -> Rec>) -> (Median, Median, Option<Median>) {
    let pa = PageAllocator::new(Config::new()).expect("bulk arena");
    single_run(&pa, total);
    owned_run(&pa, total);
    if let Some(p) = peer {
        p();
    }
    let (mut raw, mut owned, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        raw.push(single_run(&pa, total));
        owned.push(owned_run(&pa, total));
        if let Some(p) = peer {
            theirs.push(p());
        }
    }
    let theirs = peer.map(|_| median_of(theirs));
    (median_of(raw), median_of(owned), theirs)
}

/// tcmalloc's 4 KiB-aligned pair and ours (raw and owned), timed
/// alternately: (ours, owned, theirs), or why tcmalloc could not be loaded.
fn measure_tcmalloc(repeats: usize, total: u64) -> Result<(Median, Median, Median), String> {
    DlAlloc::tcmalloc().map(|tc| {
        let DlAlloc { alloc: memalign, free } = tc;
        let tc_run = || {
            time(1, total, || {
                for _ in 0..total {
                    // SAFETY: a power-of-two alignment and a non-zero size.
                    let p = unsafe { memalign(4096, 4096) };
                    assert!(!p.is_null(), "bulk: tc_memalign failed");
                    // SAFETY: allocated just above by tcmalloc, freed once, to tcmalloc.
                    unsafe { free(crate::harness::opaque_ptr(p)) };
                }
            })
        };
        let (ours, owned, theirs) = measure_ours_with(repeats, total, Some(&tc_run));
        (ours, owned, theirs.expect("a peer was given"))
    })
}

/// Everything, in order: the pair and the forms on one default allocator,
/// the pair without the front cache, then the peers.
pub(super) fn measure(repeats: usize, total: u64) -> Measured {
    let a = PageAllocator::new(Config::new()).expect("bulk arena");
    // Warm the arena, the lists and the front cache.
    single_run(&a, total);
    let single = repeat(repeats, || single_run(&a, total));
    let forms = measure_forms(&a, repeats, total);
    a.drain_all_pages();
    a.check_invariants().expect("bulk: invariants");
    drop(a);

    let nf = PageAllocator::new(Config::new().front_cache(false)).expect("bulk arena");
    single_run(&nf, total);
    let no_front = repeat(repeats, || single_run(&nf, total));
    drop(nf);

    let malloc = measure_malloc(repeats, total);
    let (pair, owned_pair, tcmalloc) = match measure_tcmalloc(repeats, total) {
        Ok((ours, owned, theirs)) => (ours, owned, Ok(theirs)),
        Err(e) => {
            let (_, owned, _) = measure_ours_with(repeats, total, None);
            (single.clone(), owned, Err(e))
        }
    };
    Measured { single, pair, forms, no_front, malloc, tcmalloc, owned_pair }
}
