//! Compaction's paths on a core alone (`test_host`): isolation and its
//! refusals, contiguous ranges, and one migration with its owner's bytes.
//! The whole allocator's behaviour (kcompactd, the page cache's pages,
//! proactive compaction) is tested through `pagealloc` in its integration
//! tests.

use crate::migrate::{Moved, OwnerPanic};
use crate::movable::MovableOps;
use crate::test_host::TestAlloc;
use pagealloc_core::error::PageStateError;
use pagealloc_core::types::{Gfp, Pfn, PAGEBLOCK_PAGES};
use pagealloc_core::Config;
use std::sync::{Arc, Mutex};

fn small() -> TestAlloc {
    TestAlloc::new(Config::small(8 << 20).nr_cpus(Some(1)))
}

#[test]
fn isolation_takes_free_pages_out_and_gives_them_back() {
    let a = small();
    let c = a.compaction();
    a.drain_all_pages();
    let free0 = a.nr_free_pages();
    let b = Pfn::new(PAGEBLOCK_PAGES);
    c.isolate_range(b, PAGEBLOCK_PAGES).unwrap();
    assert_eq!(a.nr_free_pages(), free0 - PAGEBLOCK_PAGES, "an isolated block's pages are not free pages");
    assert!(c.test_pages_isolated(b, PAGEBLOCK_PAGES));
    assert_eq!(c.isolate_range(b, 1), Err(PageStateError::AlreadyIsolated { pfn: b }));
    a.check_invariants().unwrap();
    c.undo_isolate_range(b, PAGEBLOCK_PAGES).unwrap();
    assert_eq!(a.nr_free_pages(), free0);
    assert!(!c.test_pages_isolated(b, PAGEBLOCK_PAGES));
    assert_eq!(c.undo_isolate_range(b, 1), Err(PageStateError::NotIsolated { pfn: b }));
    // Bad ranges: empty, past the arena, overflowing; nothing changes.
    let end = Pfn::new(a.f.nr_pages());
    assert_eq!(c.isolate_range(b, 0), Err(PageStateError::BadRange { pfn: b }));
    assert_eq!(c.isolate_range(end, 1), Err(PageStateError::BadRange { pfn: end }));
    assert_eq!(c.isolate_range(b, u64::MAX), Err(PageStateError::BadRange { pfn: b }));
    assert_eq!(a.nr_free_pages(), free0);
    a.check_invariants().unwrap();
}

#[test]
fn a_contiguous_range_is_allocated_whole_and_freed_whole() {
    let a = small();
    let c = a.compaction();
    let n = PAGEBLOCK_PAGES + 88; // more than a block, not a power of two
    let p = OwnerPanic::resuming(|caught| c.alloc_contig_pages(n, Gfp::MOVABLE, caught)).unwrap();
    a.check_invariants().unwrap();
    assert_eq!(a.core_census_allocated(), n, "exactly the range is allocated");
    // Every page of the range is its own order-0 block: freed alone.
    a.free_pages(Pfn::new(p.as_u64() + n - 1), 0).unwrap();
    c.free_contig_range(p, n - 1).unwrap();
    assert!(c.free_contig_range(p, n - 1).is_err(), "a second free of the range is refused");
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.check_invariants().unwrap();
}

/// An owner with one movable page, whose bytes must follow it.
struct Owner(Mutex<Pfn>);

impl MovableOps for Owner {
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut g = self.0.lock().unwrap();
        assert_eq!(*g, from);
        *g = to;
        true
    }
}

#[test]
fn a_registered_page_moves_with_its_bytes() {
    let a = TestAlloc::new(Config::new().arena_bytes(4 << 20).nr_cpus(Some(1)));
    let c = a.compaction();
    let src = a.alloc_pages(Gfp::MOVABLE, 0).unwrap();
    let addr = a.page_address(src).unwrap();
    // SAFETY: the page is ours and nothing else uses it yet.
    unsafe { addr.as_ptr().add(7).write(0xC3) };
    let owner = Arc::new(Owner(Mutex::new(src)));
    let id = a.register_movable_ops(owner.clone());
    a.set_page_movable(src, id).unwrap();
    assert_eq!(a.mobility_census().movable, 1);
    let target = a.alloc_target();
    let moved = OwnerPanic::resuming(|caught| c.migrate_one(src.as_u64(), target.as_u64(), caught));
    assert_eq!(moved, Moved::Yes);
    let now = *owner.0.lock().unwrap();
    assert_eq!(now, target);
    // SAFETY: the owner's page now; nothing else uses it.
    assert_eq!(unsafe { a.page_address(now).unwrap().as_ptr().add(7).read() }, 0xC3, "the bytes moved");
    assert!(a.free_pages(src, 0).is_err(), "the source went back to the allocator");
    a.compaction().clear_page_movable(now).unwrap();
    a.free_pages(now, 0).unwrap();
    a.drain_all_pages();
    assert_eq!(a.nr_free_pages(), a.managed_pages());
    a.check_invariants().unwrap();
}
