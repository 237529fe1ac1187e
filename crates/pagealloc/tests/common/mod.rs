//! Test support shared by the integration tests that move pages.

use pagealloc::{MovableOps, Pfn};
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
