//! Page migration (the kernel's `migrate_pages` for pages with movable
//! operations): move an order-0 page whose owner registered
//! `MovableOps` to a target page, and tell the owner.
//!
//! One page's states (its flags word):
//! ```text
//!   HEAD|MOVABLE_OPS                    registered, in use by its owner
//!     -- CAS (exact word) -->           anything else (locked, writeback,
//!                                       uptodate, owned...) is skipped: busy
//!   HEAD|MOVABLE_OPS|ISOLATED_MIGRATE   isolated: raw frees refused; a lock
//!                                       may still be taken, and then the
//!                                       move is abandoned at the next step
//!     -- bytes copied, CAS (exact) -->
//!   ISOLATED_MIGRATE                    frozen for the hand-over: no HEAD,
//!                                       so locks and frees are refused
//!     -- owner accepts -->              freed to the buddy; target becomes
//!                                       HEAD|MOVABLE_OPS
//!     -- owner refuses -->              back to HEAD|MOVABLE_OPS, putback
//! ```
//! Every failure puts the source back exactly as it was (bytes untouched:
//! only the target was written) and leaves the target with the caller.
//! Counters: `pgmigrate_success`, `pgmigrate_fail` (a failure after
//! isolation; a page that could not be isolated is merely busy).
//!
//! Owners' panics: every call of an owner's [`MovableOps`] goes through one
//! unwind guard (`owner_call`). A panic there is a failed migration (a
//! panicking `isolate` as a refusal with no `putback`, a panicking `migrate`
//! as a refusal: the source back, `putback`, the target still the
//! caller's), counted in `pgmigrate_fail`; the payload waits in an
//! [`OwnerPanic`] that the caller carries up to the public call that started
//! the migration. That call first stops and restores its own state (targets
//! back to the buddy lists, isolated pageblocks undone), then resumes the
//! unwind in its caller's thread; a background thread (kcompactd, the page
//! reporter) drops each panic instead and goes on, so that one owner's bug
//! does not end the thread.

#[cfg(all(test, loom))]
#[allow(unsafe_code)]
mod loom_tests;
use crate::movable::MovableOps;
use crate::{Compaction, CompactionHost};
use pagealloc_core::page::flags;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{Order, Pfn};
use pagealloc_core::vmevent::VmEvent;
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

pub use crate::movable::Moved;

/// What happens to a panic caught in an owner's [`MovableOps`] call (see
/// the module doc). In a call that a thread makes for itself
/// ([`OwnerPanic::default`]) the first one is kept: whoever sees
/// [`OwnerPanic::is_set`] stops migrating, restores its own state and
/// returns, and the public call ends with [`OwnerPanic::resume`]. In a
/// background thread ([`OwnerPanic::background`]) each is dropped as it is
/// caught (the failed migration is counted in `pgmigrate_fail`, and the
/// panic hook has printed its message), and the work goes on.
#[derive(Default)]
pub struct OwnerPanic {
    caught: Option<Box<dyn Any + Send>>,
    background: bool,
}

impl OwnerPanic {
    /// For kcompactd's and the page reporter's threads: panics are dropped.
    pub fn background() -> Self {
        Self { caught: None, background: true }
    }

    /// Whether a panic waits to be resumed: stop migrating.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.caught.is_some()
    }

    /// Run `f` with a fresh `OwnerPanic`, then go on unwinding with the
    /// panic it caught, if any: the shape of every public call that
    /// migrates in the caller's thread.
    pub fn resuming<R>(f: impl FnOnce(&mut OwnerPanic) -> R) -> R {
        let mut caught = Self::default();
        let r = f(&mut caught);
        caught.resume();
        r
    }

    /// Go on unwinding with the caught panic, if any, in the calling thread
    /// (the state it left has been restored by then).
    pub fn resume(self) {
        if let Some(p) = self.caught {
            resume_unwind(p);
        }
    }

    /// Keep `p` unless a panic is kept already (a `putback` panicking after
    /// a `migrate` did adds nothing) or this is a background thread's.
    fn keep(&mut self, p: Box<dyn Any + Send>) {
        if !self.background {
            self.caught.get_or_insert(p);
        }
    }
}

/// The one unwind guard around an owner's callback: its value, or None
/// after a panic, whose payload goes to `caught`.
///
/// `AssertUnwindSafe`: what the closure borrows of ours is pfns and the
/// ops; the descriptors it leaves inconsistent (an isolated source, a
/// half-made target) are restored by the caller before anything else runs,
/// and the owner's own state after its panic is the owner's to know.
fn owner_call<T>(caught: &mut OwnerPanic, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(p) => {
            caught.keep(p);
            None
        }
    }
}

const REGISTERED: u32 = flags::HEAD | flags::MOVABLE_OPS;
const ISOLATED: u32 = REGISTERED | flags::ISOLATED_MIGRATE;

/// Why flags word `f` of `pfn` may not be marked movable, if it may not:
/// not an allocated head; a page-cache page, which the cache migrates
/// itself (`Referenced`; marked, its `MOVABLE_OPS` would send migration to
/// ops that do not own it, and the page would block every contiguous range);
/// held by a lock guard, as the cache holds a page it is freeing
/// (`HeldByGuard`); owned by a `Pages` handle or isolated for migration.
fn unmarkable(pfn: Pfn, f: u32) -> Result<(), pagealloc_core::PageStateError> {
    use pagealloc_core::PageStateError as E;
    if f & flags::HEAD == 0 {
        Err(E::NotAllocated { pfn })
    } else if flags::cache_owned(f) {
        Err(E::Referenced { pfn })
    } else if f & flags::GUARD != 0 {
        Err(E::HeldByGuard { pfn })
    } else if f & (flags::OWNED | flags::ISOLATED_MIGRATE) != 0 {
        Err(E::NotMovable { pfn })
    } else {
        Ok(())
    }
}

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// Is `p` a page migration can try now (racy): a registered movable
    /// page, or, with a page cache attached, an order-0 page on an LRU list
    /// (a page-cache page; the page cache's migrator decides the rest).
    #[inline]
    pub fn is_migratable_racy(&self, p: u64) -> bool {
        let d = self.mm.page(p);
        let f = d.flags();
        if d.order() != 0 {
            return false;
        }
        f == REGISTERED
            || (f & (flags::HEAD | flags::LRU | flags::ISOLATED_MIGRATE | flags::OWNED) == flags::HEAD | flags::LRU
                && self.mobility().lru_ops().is_some())
    }

    /// Migrate page `p` to `target` whoever owns it: registered movable
    /// pages through [`Core::migrate_one`], LRU pages through the page
    /// cache's migrator. On anything but [`Moved::Yes`] the target is still
    /// the caller's.
    /// An owner's panic is a failure, its payload in `caught`.
    pub(crate) fn migrate_page(&self, p: u64, target: u64, caught: &mut OwnerPanic) -> Moved {
        let f = self.mm.page(p).flags();
        if f & flags::MOVABLE_OPS != 0 {
            return self.migrate_one(p, target, caught);
        }
        if f & flags::LRU != 0 {
            if let Some(m) = self.mobility().lru_ops() {
                return m.migrate_lru(p, target);
            }
        }
        Moved::Busy
    }

    /// Mark the order-0 page `pfn`, allocated through the raw API, movable
    /// with the ops `id`.
    pub fn set_page_movable(
        &self,
        pfn: Pfn,
        id: crate::movable::MovableId,
    ) -> Result<(), pagealloc_core::PageStateError> {
        use pagealloc_core::PageStateError as E;
        let p = pfn.as_u64();
        if p >= self.mm.nr_pages() {
            return Err(E::OutOfRange { pfn });
        }
        if !self.mobility().valid(id) {
            return Err(E::NotMovable { pfn });
        }
        let d = self.mm.page(p);
        let f = d.flags();
        unmarkable(pfn, f)?;
        if d.order() != 0 {
            return Err(E::NotMovable { pfn });
        }
        self.mobility().set_page(p, id.0);
        let mut cur = f;
        loop {
            // Again on the word the CAS replaces: the page may have become
            // the cache's (or been locked) since the first look.
            unmarkable(pfn, cur)?;
            pagealloc_core::failinject::claim_window();
            // Release: the id recorded above is seen by whoever isolates.
            // Acquire: the private word read below is the one the block's
            // allocation stored before its release store of HEAD.
            match d.flags.compare_exchange(cur, cur | flags::MOVABLE_OPS, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(c) => cur = c,
            }
        }
        // The order was read before the CAS, which compares the flags word
        // only: a pfn freed and handed out again meanwhile as a larger block
        // reads HEAD again (as in `page_alloc::claim`). Such a block is not
        // marked: the mark comes off again (unless the word moved on, when
        // the compactor's own check after its CAS refuses the block).
        if d.order() != 0 {
            let marked = cur | flags::MOVABLE_OPS;
            let _ = d.flags.compare_exchange(marked, cur, Ordering::Relaxed, Ordering::Relaxed);
            return Err(E::NotMovable { pfn });
        }
        Ok(())
    }

    /// Unmark a movable page (it becomes pinned). Refused while it is being
    /// migrated.
    pub fn clear_page_movable(&self, pfn: Pfn) -> Result<(), pagealloc_core::PageStateError> {
        use pagealloc_core::PageStateError as E;
        let p = pfn.as_u64();
        if p >= self.mm.nr_pages() {
            return Err(E::OutOfRange { pfn });
        }
        let d = self.mm.page(p);
        let mut cur = d.flags();
        loop {
            if cur & flags::HEAD == 0 {
                return Err(E::NotAllocated { pfn });
            }
            if cur & flags::ISOLATED_MIGRATE != 0 {
                return Err(E::NotMovable { pfn });
            }
            match d.flags.compare_exchange(cur, cur & !flags::MOVABLE_OPS, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(c) => cur = c,
            }
        }
    }

    /// Migrate the registered page `p` to `target`, an allocated order-0
    /// page (`HEAD`, no other bit) that the caller owns. See the module doc.
    /// On anything but [`Moved::Yes`] the target is still the caller's; an
    /// owner's panic is [`Moved::Failed`], its payload in `caught`.
    pub fn migrate_one(&self, p: u64, target: u64, caught: &mut OwnerPanic) -> Moved {
        let d = self.mm.page(p);
        if d.order() != 0 {
            return Moved::Busy;
        }
        pagealloc_core::failinject::claim_window();
        // Acquire: pairs with the Release of set_page_movable (the ops id).
        if d.flags.compare_exchange(REGISTERED, ISOLATED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return Moved::Busy;
        }
        // Isolated: the order again, as a claim reads it after its CAS (see
        // `page_alloc::claim`): the page may have been freed and handed out
        // again as a larger block, marked by a stale `set_page_movable`,
        // since the check above. Not this order-0 move's to make.
        if d.order() != 0 {
            self.unisolate(p);
            return Moved::Busy;
        }
        let Some(id) = self.mobility().page_id(p) else {
            self.unisolate(p);
            return Moved::Busy;
        };
        let Some(ops) = self.mobility().ops(id) else {
            self.unisolate(p);
            return Moved::Busy;
        };
        let from = Pfn::new(p);
        match owner_call(caught, || ops.isolate(from)) {
            Some(true) => {}
            Some(false) => {
                self.unisolate(p);
                return Moved::Busy;
            }
            // Whether the owner stopped using the page is unknown: no
            // `putback`, as after a refusal, but a failure all the same.
            None => {
                self.unisolate(p);
                self.events.count(VmEvent::PgmigrateFail, 1);
                return Moved::Failed;
            }
        }
        // The owner has isolated the page: every failure from here on tells
        // it to use the page again. Unless the owner copies the data itself,
        // we copy it (`target` is our private target; the core checks that
        // one, and a refused copy moves nothing); then the freeze, which
        // fails if a lock, writeback or anything else came meanwhile.
        let copied = owner_call(caught, || ops.copies_data()).is_some_and(|copies| {
            copies || self.mm.copy_to_target(from, Pfn::new(target)) || self.mm.page_address(from).is_none()
        });
        if !copied
            || d.flags.compare_exchange(ISOLATED, flags::ISOLATED_MIGRATE, Ordering::AcqRel, Ordering::Relaxed).is_err()
        {
            self.unisolate(p);
            return self.putback_failed(&*ops, from, caught);
        }
        self.hand_over(p, target, id, &*ops, caught)
    }

    /// The frozen page `p` (`ISOLATED_MIGRATE` alone) goes to `target` if its
    /// owner's `migrate` takes it; a refusal or a panic puts it back.
    pub(crate) fn hand_over(
        &self,
        p: u64,
        target: u64,
        id: u32,
        ops: &dyn MovableOps,
        caught: &mut OwnerPanic,
    ) -> Moved {
        let (from, to) = (Pfn::new(p), Pfn::new(target));
        self.mobility().set_page(target, id);
        let td = self.mm.page(target);
        td.set_private(Order::ZERO, pagealloc_core::MigrateType::Movable);
        // The target is born registered and isolated: the owner may free it
        // as soon as `migrate` has told it (refused with `Migrating` until
        // the isolation ends below), and no compactor isolates it meanwhile.
        // (Adding MOVABLE_OPS after `migrate` returned, as before, could land
        // on the frame after the owner freed it and someone allocated it
        // again: a stranger's page marked movable. loom model in
        // `migrate::loom_tests`.)
        td.set_flags(ISOLATED);
        if owner_call(caught, || ops.migrate(from, to)) != Some(true) {
            // Nobody changes a word without HEAD: a plain store restores it.
            self.mm.page(p).flags.store(REGISTERED, Ordering::Release);
            // The owner refused (or panicked) and must not use the target:
            // the caller's again, still a target.
            td.set_flags(flags::MIGRATE_TARGET);
            return self.putback_failed(ops, from, caught);
        }
        // The target is the owner's now (a lock it took meanwhile stays).
        td.flags.fetch_and(!flags::ISOLATED_MIGRATE, Ordering::Release);
        self.mobility().forget(p);
        self.init_on_free(p, Order::ZERO);
        self.zone_of(p).free_to_buddy(&self.mm, p, Order::ZERO, false, false);
        self.events.count(VmEvent::PgmigrateSuccess, 1);
        Moved::Yes
    }

    /// A migration failed after the owner isolated `from`, whose word is
    /// restored already: the owner uses it again (`putback`); counted.
    pub(crate) fn putback_failed(&self, ops: &dyn MovableOps, from: Pfn, caught: &mut OwnerPanic) -> Moved {
        // A panic here leaves nothing of ours to restore.
        let _ = owner_call(caught, || ops.putback(from));
        self.events.count(VmEvent::PgmigrateFail, 1);
        Moved::Failed
    }

    /// Free a migration target the caller holds and did not use
    /// (`MIGRATE_TARGET`, order 0): a plain store of `PCP` takes it (nobody
    /// else writes a target's word), then the ordinary way to the lists.
    pub(crate) fn free_target(&self, p: u64) {
        let d = self.mm.page(p);
        debug_assert_eq!(d.flags(), flags::MIGRATE_TARGET, "migration target {p:#x} lost its mark");
        d.set_flags(flags::PCP);
        self.free_as_is(p, flags::PCP);
    }

    /// Take `ISOLATED_MIGRATE` off an isolated page (a lock may have been
    /// added meanwhile: keep it).
    pub(crate) fn unisolate(&self, p: u64) {
        self.mm.page(p).flags.fetch_and(!flags::ISOLATED_MIGRATE, Ordering::Release);
    }
}

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// Allocated pages by mobility, from a racy walk of the descriptors.
    pub fn mobility_census(&self) -> crate::movable::MobilityCensus {
        let mut c = crate::movable::MobilityCensus::default();
        let mut p = 0;
        while p < self.mm.nr_pages() {
            let d = self.mm.page(p);
            let f = d.flags();
            let n = if f & (flags::BUDDY | flags::HEAD | flags::PCP) != 0 { 1u64 << d.order().min(10) } else { 1 };
            if f & flags::ISOLATED_MIGRATE != 0 {
                c.isolated += 1;
            } else if flags::array_held(f) {
                // A `PageArray`'s page: allocated, and never moved.
                c.pinned += 1;
            } else if f & flags::HEAD != 0 {
                if f & flags::MOVABLE_OPS != 0 || (f & flags::LRU != 0 && d.order() == 0) {
                    c.movable += n;
                } else {
                    c.pinned += n;
                }
            }
            p += n;
        }
        c
    }
}
