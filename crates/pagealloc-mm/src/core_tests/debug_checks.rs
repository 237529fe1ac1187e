//! The zone-lock identities, broken on purpose under the lock: the
//! `debug-checks` feature must catch each at the lock's release.

use crate::{Config, MigrateType, PageAllocator};

#[test]
#[should_panic(expected = "debug-checks: zone Normal node 0 pfn 0x0: NR_FREE_PAGES")]
fn a_counter_broken_under_the_zone_lock_panics_at_its_release() {
    let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
    let z = &a.core.zones[pagealloc_core::types::ZoneIdx::FIRST];
    let g = z.lock(&a.core.mm);
    z.stats.nr_free_pages.add_locked(1);
    drop(g);
}

#[test]
#[should_panic(expected = "free_blocks[0][Movable] = 1 but the list")]
fn a_list_count_off_by_one_panics_at_the_release() {
    let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
    let z = &a.core.zones[pagealloc_core::types::ZoneIdx::FIRST];
    let g = z.lock(&a.core.mm);
    z.stats.free_blocks[0][MigrateType::Movable.index()].add_locked(1);
    z.stats.nr_free_pages.add_locked(1);
    drop(g);
}
