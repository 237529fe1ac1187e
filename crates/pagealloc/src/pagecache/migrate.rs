//! Migration of page-cache pages (the kernel's `filemap_migrate_folio` /
//! `migrate_folio` path): compaction and `alloc_contig_range` reach it
//! through the [`LruMigrate`] hook the page cache registers.
//!
//! Moving page `from` to the target `to` (an allocated order-0 page the
//! caller owns), each step undone on failure:
//! 1. isolate `from` from its LRU list (a reference, `LRU` cleared); a page
//!    in a per-CPU batch or being freed is busy;
//! 2. try-lock it: locked (by a reader, writer, filler or reclaim) or under
//!    writeback: busy, put back, retried by a later pass;
//! 3. freeze its count from exactly 2 (the cache's and isolation's) to 0:
//!    any other reference (a handle, a lookup in flight) fails the move
//!    (`pgmigrate_fail`), the page goes back untouched;
//! 4. copy the bytes; the target is published locked, with the source's
//!    `UPTODATE`/`DIRTY`/`REFERENCED`/`ACTIVE` state and the counts of the
//!    cache and isolation, its owner word set;
//! 5. replace the mapping's entry `index -> from` by `index -> to` under the
//!    shard's write lock;
//! 6. the source loses its owner word and dirty state (they moved), is
//!    unlocked and freed to the buddy lists; the target is unlocked and put
//!    on the LRU list the source was on (`pgmigrate_success`).
//!
//! A concurrent `find_get` probes under the shard's read lock: before step 3
//! it takes a reference on `from` (and the freeze fails); between 3 and 5
//! its `try_get` on the frozen `from` fails and it looks again; after 5 it
//! finds `to`. `from` is freed only after 5, and a lookup that read `from`
//! from the map still holds the read lock while it tries, so no lookup ever
//! gets a freed frame (loom model in `loom_tests`). Readers of a page's
//! bytes hold its lock, which the target keeps until its bytes are in place.

use super::CacheInner;
use crate::movable::{LruMigrate, Moved};
use crate::page::flags::{ACTIVE, DIRTY, GUARD, HEAD, LOCKED, REFERENCED, REF_ONE, UPTODATE, WRITEBACK};
use crate::pageref;
use crate::sync::Ordering;
use crate::types::Pfn;
use crate::vmevent::VmEvent;
use std::sync::Weak;

/// The page cache as the allocator's LRU migrator.
pub(crate) struct CacheMigrator(pub(crate) Weak<CacheInner>);

impl LruMigrate for CacheMigrator {
    fn migrate_lru(&self, from: u64, to: u64) -> Moved {
        match self.0.upgrade() {
            Some(c) => migrate(&c, from, to),
            None => Moved::Busy,
        }
    }
}

/// See the module doc.
pub(crate) fn migrate(c: &CacheInner, from: u64, to: u64) -> Moved {
    let core = &c.alloc.core;
    let d = core.mm.page(from);
    if d.order() != 0 || !core.vmscan.lrus[core.nid_of(from)].lock().isolate_one(&core.mm, from) {
        return Moved::Busy;
    }
    let Ok(r) = c.alloc.cache_page_ref(Pfn::new(from)) else {
        core.putback_lru(&[from]);
        return Moved::Busy;
    };
    if !r.try_lock_as(GUARD).unwrap_or(false) {
        core.putback_lru(&[from]);
        return Moved::Busy;
    }
    let back = |r: &crate::pagelock::PageRef<'_>| {
        r.guard_unlock(false);
        core.putback_lru(&[from]);
    };
    if d.flags() & WRITEBACK != 0 {
        back(&r);
        return Moved::Busy;
    }
    let Some((slot, index)) = c.owner_of(from) else {
        // Truncated while we looked: isolation's may be the last reference.
        r.guard_unlock(false);
        let _ = core.put_page(Pfn::new(from));
        return Moved::Busy;
    };
    let Some(m) = c.mapping_at(slot) else {
        back(&r);
        return Moved::Busy;
    };
    if !pageref::freeze(&d.flags, 2) {
        back(&r);
        core.events.count(VmEvent::PgmigrateFail, 1);
        return Moved::Failed;
    }
    // Frozen and locked: nobody reads, writes or references `from` now.
    core.copy_frame(from, to);
    let keep = d.flags() & (UPTODATE | DIRTY | REFERENCED | ACTIVE);
    c.owners[to as usize].store(CacheInner::owner_word(slot, index), Ordering::Release);
    let td = core.mm.page(to);
    // Release: the bytes and owner word are visible to whoever gets a
    // reference (try_get's Acquire) after finding `to` in the map.
    td.flags.store(HEAD | LOCKED | GUARD | keep | (2 * REF_ONE), Ordering::Release);
    if !m.replace(index, from, to) {
        // Not mapped there any more (cannot happen with the page locked;
        // undone all the same): the target is the caller's again.
        td.flags.store(crate::page::flags::MIGRATE_TARGET, Ordering::Release);
        c.owners[to as usize].store(0, Ordering::Release);
        d.flags.fetch_add(2 * REF_ONE, Ordering::Relaxed);
        back(&r);
        core.events.count(VmEvent::PgmigrateFail, 1);
        return Moved::Failed;
    }
    c.owners[from as usize].store(0, Ordering::Release);
    // The dirty, active and referenced state moved with the data (the
    // `nr_dirty` gauge counts the page once, now `to`, in `to`'s zone).
    if d.flags.fetch_and(!(DIRTY | ACTIVE | REFERENCED), Ordering::Relaxed) & DIRTY != 0 {
        let (zf, zt) = (core.zone_of(from).idx.get(), core.zone_of(to).idx.get());
        if zf != zt {
            core.vmscan.gauges.dirty(zf, false);
            core.vmscan.gauges.dirty(zt, true);
        }
    }
    r.guard_unlock(false);
    core.free_unreferenced_to_buddy(&[from]);
    if let Ok(tr) = c.alloc.cache_page_ref(Pfn::new(to)) {
        tr.guard_unlock(false);
    }
    core.putback_lru(&[to]);
    core.events.count(VmEvent::PgmigrateSuccess, 1);
    Moved::Yes
}
