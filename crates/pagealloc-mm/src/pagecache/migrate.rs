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
//! 6. the source loses its owner word and dirty state (they moved) and is
//!    freed to the buddy lists still locked and frozen; the target is unlocked and put
//!    on the LRU list the source was on (`pgmigrate_success`).
//!
//! A concurrent `find_get` probes under the shard's read lock: before step 3
//! it takes a reference on `from` (and the freeze fails); between 3 and 5
//! its `try_get` on the frozen `from` fails and it looks again; after 5 it
//! finds `to`. `from` is freed only after 5, and a lookup that read `from`
//! from the map still holds the read lock while it tries, so no lookup ever
//! gets a freed frame (loom model in `loom_tests`). Readers of a page's
//! bytes hold its lock, which the target keeps until its bytes are in place.

use super::handle::CacheLock;
use super::CacheInner;
use pagealloc_compaction::movable::{LruMigrate, Moved};
use pagealloc_core::page::flags::{ACTIVE, DIRTY, GUARD, HEAD, LOCKED, REFERENCED, REF_ONE, UPTODATE, WRITEBACK};
use pagealloc_core::pageref;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::Pfn;
use pagealloc_core::vmevent::VmEvent;
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
    // Isolation's reference is put back with the page on every path but
    // success; the lock (when taken) is released before it.
    let Some(lock) = CacheLock::try_lock(&c.alloc, Pfn::new(from)) else {
        core.putback_lru(&[from]);
        return Moved::Busy;
    };
    let back = |lock: CacheLock<'_>, moved: Moved| {
        drop(lock);
        core.putback_lru(&[from]);
        moved
    };
    if d.flags() & WRITEBACK != 0 {
        return back(lock, Moved::Busy);
    }
    if c.owner_of(from).is_none() {
        // Truncated while we looked: isolation's may be the last reference.
        drop(lock);
        let _ = core.put_page(Pfn::new(from));
        return Moved::Busy;
    }
    let Some((m, index)) = c.owner(from) else { return back(lock, Moved::Busy) };
    let Some(old) = pageref::freeze(&d.flags, 2) else {
        core.events.count(VmEvent::PgmigrateFail, 1);
        return back(lock, Moved::Failed);
    };
    // Frozen: nobody reads, writes, marks or references `from` now. Its
    // state is the word the freeze replaced (which only we held locked).
    // The copy refuses a target that is not one (`MIGRATE_TARGET`): then
    // nothing moves, rather than the mapping pointing at a frame without
    // the page's bytes. Without backing there is nothing to copy.
    // Thawed with the word the freeze replaced: the page stays where it is.
    let thaw = |lock: CacheLock<'_>| {
        d.flags.store(old, Ordering::Release);
        core.events.count(VmEvent::PgmigrateFail, 1);
        back(lock, Moved::Failed)
    };
    if !core.mm.copy_to_target(Pfn::new(from), Pfn::new(to)) && core.mm.page_address(Pfn::new(from)).is_some() {
        return thaw(lock);
    }
    let keep = old & (UPTODATE | DIRTY | REFERENCED | ACTIVE);
    c.owners[to as usize].store(CacheInner::owner_word(m.slot, index), Ordering::Release);
    let td = core.mm.page(to);
    // Release: the bytes and owner word are visible to whoever gets a
    // reference (try_get's Acquire) after finding `to` in the map.
    td.flags.store(HEAD | LOCKED | GUARD | keep | (2 * REF_ONE), Ordering::Release);
    if !m.replace(index, from, to) {
        // Not mapped there any more (cannot happen with the page locked;
        // undone all the same): the target is the caller's again.
        td.flags.store(pagealloc_core::page::flags::MIGRATE_TARGET, Ordering::Release);
        c.owners[to as usize].store(0, Ordering::Release);
        return thaw(lock);
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
    // `from` is freed from its frozen word (its lock went with the freeze):
    // no stranger can take it between its replacement and its free.
    lock.into_frozen();
    core.free_frozen_to_buddy(&[(from, old)]);
    drop(CacheLock::adopt(&c.alloc, Pfn::new(to)));
    core.putback_lru(&[to]);
    core.events.count(VmEvent::PgmigrateSuccess, 1);
    Moved::Yes
}
