//! Test support shared by the integration tests: for those that move
//! pages, a tracking owner and the checksummed page contents the moves must
//! keep; for those that end where they started, the free-page count check.
// Each test crate includes this module and uses part of it.
#![allow(dead_code)]

use pagealloc::{MovableOps, PageAllocator, Pfn, PAGE_SIZE};
use std::collections::HashMap;
use std::sync::Mutex;

/// An owner of movable pages that tracks each page's key and whether
/// migration has it isolated: pfn -> (key, isolated). Its user takes only
/// pages not isolated, under the map's lock, so isolation and the user
/// never share a page; a migration of a page not isolated panics.
#[derive(Default)]
pub struct TrackingOwner {
    pub pages: Mutex<HashMap<u64, (u64, bool)>>,
}

impl MovableOps for TrackingOwner {
    fn isolate(&self, pfn: Pfn) -> bool {
        match self.pages.lock().unwrap().get_mut(&pfn.as_u64()) {
            Some(e) if !e.1 => {
                e.1 = true;
                true
            }
            _ => false,
        }
    }
    fn migrate(&self, from: Pfn, to: Pfn) -> bool {
        let mut m = self.pages.lock().unwrap();
        let Some((k, iso)) = m.remove(&from.as_u64()) else { return false };
        assert!(iso, "migrate of a page not isolated");
        m.insert(to.as_u64(), (k, false));
        true
    }
    fn putback(&self, pfn: Pfn) {
        if let Some(e) = self.pages.lock().unwrap().get_mut(&pfn.as_u64()) {
            e.1 = false;
        }
    }
}

/// The first word of page `pfn` (the arena is backed).
pub fn base(a: &PageAllocator, pfn: u64) -> *mut u64 {
    a.page_address(Pfn::new(pfn)).expect("backed arena").as_ptr().cast::<u64>()
}

/// Word `i` of a page holding key `key`.
pub fn pattern(key: u64, i: usize) -> u64 {
    key.wrapping_mul(0x9e37_79b9) + i as u64
}

/// Write key `key`'s pattern into page `pfn`.
pub fn fill(a: &PageAllocator, pfn: u64, key: u64) {
    let b = base(a, pfn);
    for i in 0..PAGE_SIZE / 8 {
        // SAFETY: the frame is inside the arena and allocated to the calling
        // test's owner, which has not registered it yet: nothing else
        // touches it.
        unsafe { b.add(i).write(pattern(key, i)) };
    }
}

/// Whether page `pfn` still holds key `key`'s pattern.
pub fn intact(a: &PageAllocator, pfn: u64, key: u64) -> bool {
    let b = base(a, pfn);
    // SAFETY: the frame is inside the arena and allocated to an owner of the
    // calling test; the allocator at most reads it (copying) meanwhile.
    (0..PAGE_SIZE / 8).all(|i| unsafe { b.add(i).read() } == pattern(key, i))
}

/// Drain `a` and return its free page count: what [`ends_where_it_began`]
/// checks against.
pub fn drained_free_pages(a: &PageAllocator) -> u64 {
    a.drain_all_pages();
    a.nr_free_pages()
}

/// The invariants, before and after a drain, and the free page count of the
/// test's start (`free0`, from [`drained_free_pages`]): nothing lost or made up.
pub fn ends_where_it_began(a: &PageAllocator, free0: u64) {
    a.check_invariants().unwrap();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    assert_eq!(a.nr_free_pages(), free0, "pages lost or made up");
}

/// Everything is free again once a page cache, its mappings and its
/// handles are gone and the lists drained: nothing allocated, every
/// managed page free or on a per-CPU list, the invariants intact.
pub fn all_back(a: &PageAllocator) {
    a.reclaim().lru_add_drain_all();
    a.drain_all_pages();
    a.check_invariants().unwrap();
    let c = a.census();
    assert_eq!(c.allocated, 0, "{c:?}");
    assert_eq!(c.free + c.pcp, a.managed_pages(), "{c:?}");
}
