//! Page lock, writeback and the waiters bit (the kernel's `folio_lock`,
//! `folio_unlock`, `folio_end_read`, `folio_wait_bit_common`, `folio_wake_bit`
//! and `folio_end_writeback`), on the descriptor's flags word and the hashed
//! wait queues of [`waitq`].
//!
//! A page is locked by setting `LOCKED` with a compare-and-swap that also
//! requires `HEAD` (the page is an allocated block's head), so a free page is
//! never marked. Unlock is one atomic bit-clear of `LOCKED` (which reports
//! whether it was set) and a plain load of the word; only if that load shows
//! `WAITERS` does the unlocker look up the wait queue. Waiters sleep in a
//! hashed table keyed by the flags word's address, so pages need no queue of
//! their own.
//!
//! The flags word as this protocol sees it (`HEAD` set throughout):
//!
//! ```text
//!  LOCKED WAITERS  meaning
//!    0      0      unlocked, nobody queued: lock is one CAS
//!    1      0      locked, nobody queued: unlock is one bit-clear and a load
//!    1      1      locked, someone may be queued: unlock looks up the bucket
//!    0      1      unlocked, someone may be queued (a waiter about to retry, a
//!                  writeback waiter, or a bit left by a hash-mate): harmless,
//!                  costs the next unlock one lookup, which clears it
//! ```
//!
//! The invariant that prevents lost wakeups: a waiter sets `WAITERS` with a
//! read-modify-write of the flags word while holding its bucket lock, and queues
//! itself only if that RMW saw `LOCKED` (or `WRITEBACK`) still set. The unlocker
//! clears `LOCKED` with one RMW of the same word. RMWs of one word are totally
//! ordered: if the waiter's came first, the unlocker's load after its own RMW
//! sees `WAITERS` (or a later value, written by whoever woke the waiter and
//! cleared it), and the unlocker then takes the bucket lock, which it can only
//! get once the waiter is queued; if the unlocker's came first, the waiter's
//! sees `LOCKED` clear and it does not sleep. `WAITERS` is cleared only under the bucket lock, by a waker
//! or an aborting waiter that found no other waiter for this page. No timeout is
//! involved anywhere. (The kernel's first version of the bit cleared it while
//! looking at the queue without its lock, and recovered from the race it
//! opened with a one-second sleep timeout.)
//!
//! Waits come in three kinds: exclusive (`lock_page`: one is woken per unlock),
//! shared (`wait_on_page_locked`: all are woken, and return, at an unlock) and
//! writeback (all are woken at `end_page_writeback` and re-check). Fairness: an
//! exclusive waiter woken without the lock retries with a CAS and may lose to a
//! newcomer; after `Config::page_lock_unfairness` such losses it asks for a
//! handoff, and the next unlocker sets `LOCKED` again on its behalf under the
//! bucket lock and wakes it as the owner. With 0, every queued waiter asks from
//! the start: strict FIFO handoff.
//!
//! Guards: `lock_page_guard` sets `GUARD` together with `LOCKED` (in the same
//! CAS, or in the handoff made for it), and only the guard's drop clears it,
//! with `LOCKED`, in one RMW. A raw `unlock_page` of a guarded lock is refused
//! with `HeldByGuard`: its RMW cleared `LOCKED`, so it sets it back, and in the
//! meantime `GUARD` alone keeps every locker (and every free) out. So a guard
//! is the lock's only releaser and can never release someone else's lock.
//!
//! In the old design without the bit (the `page-lock` experiment's variant,
//! `seed-variants` feature only) nobody sets `WAITERS`, and every unlock and
//! `end_page_writeback` looks up the bucket.
//!
//! Pages this applies to: the head pfn of an allocated block. A tail pfn, a free
//! page or a page on a per-CPU list is refused with `NotAllocated` (the block is
//! locked through its head, as a folio is). Freeing a locked or writeback page is
//! refused; freeing clears `WAITERS` and the other lock-state bits in the same
//! RMW that takes `HEAD` away, so a racing lock attempt fails cleanly.

mod cancel;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, feature = "std", not(loom)))]
mod tests;
pub mod waitq;
mod writeback;

pub use cancel::CancelToken;

use crate::error::{PageStateError, WaitError};
use crate::page::flags::{GUARD, HEAD, LOCKED, OWNED, REF_MASK, UPTODATE, WAITERS};
use crate::platform::Instant;
use crate::sync::{AtomicU32, Ordering};
use crate::types::Pfn;
use core::cell::Cell;
use waitq::{page_wait_table, FilterOp, ParkResult, UnparkResult, WaitTable};

/// Park tokens: what kind of waiter is queued.
mod kind {
    pub(super) const MASK: usize = 3;
    /// `lock_page`: wants the lock; one is woken per unlock.
    pub(super) const EXCLUSIVE: usize = 1;
    /// `wait_on_page_locked`: returns at the next unlock; all are woken.
    pub(super) const SHARED: usize = 2;
    /// `wait_on_page_writeback`: all are woken at `end_page_writeback`.
    pub(super) const WRITEBACK: usize = 3;
    /// Or-ed into `EXCLUSIVE`: this waiter has lost often enough; hand it the lock.
    pub(super) const WANTS_HANDOFF: usize = 4;
    /// Or-ed into `EXCLUSIVE`: this waiter locks for a guard (a handoff sets `GUARD`).
    pub(super) const FOR_GUARD: usize = 8;
    /// Or-ed into `EXCLUSIVE`: this waiter may not lock a reference-counted
    /// page (it came through the public pfn API, which refuses the cache's
    /// pages): a handoff must never give it one. It started waiting while
    /// the pfn was a raw page, or being freed; the page may have been freed
    /// and reborn as a cache page since.
    pub(super) const DENY_REFS: usize = 16;
}

/// What a handoff attempt found.
enum Handoff {
    /// The lock is the waiter's now.
    Done,
    /// The page is not the waiter's to lock (freed, or reference-counted
    /// for a waiter that may not lock such pages): wake it to find out.
    Denied,
    /// Someone else holds the lock: the waiter stays queued.
    Taken,
}

/// Wake tokens: why a waiter was woken.
mod wake {
    /// The condition it waited for happened (unlock, end of writeback).
    pub(super) const WOKEN: usize = 1;
    /// The lock was set on the (exclusive) waiter's behalf: it owns it.
    pub(super) const HANDED_OFF: usize = 2;
    /// The page was freed: re-check, and report it.
    pub(super) const FREED: usize = 3;
}

/// How the lock protocol behaves, from the allocator's `Config`.
#[derive(Clone, Copy, Debug)]
pub struct LockPolicy {
    /// Use the waiters bit (today's design) or always look up the queue.
    pub waiters_bit: bool,
    /// Losses a queued exclusive waiter takes before it asks for a handoff.
    pub unfairness: u32,
}

/// One page's flags word, with what the protocol needs around it.
#[derive(Clone, Copy)]
pub struct PageRef<'a> {
    pub flags: &'a AtomicU32,
    pfn: Pfn,
    policy: LockPolicy,
    /// `None`: the process-wide page wait table.
    table: Option<&'a WaitTable>,
    /// Bits that make a word someone else's to lock and mark: the public
    /// pfn API sets [`PUBLIC_DENY`], the cache and the tests 0.
    deny: u32,
}

/// The bits that make a page someone else's to lock and mark, for the
/// public pfn API: `REF_MASK` (a reference-counted page is the page cache's,
/// whose lock, writeback and up-to-date state only it may change) and
/// `OWNED` (an owning handle's block is the handle's alone: nobody else may
/// write its flags word, which is what lets the handle free it with a plain
/// store, `Core::free_owned`).
pub const PUBLIC_DENY: u32 = REF_MASK | OWNED;

impl<'a> PageRef<'a> {
    #[inline(always)]
    pub fn new(flags: &'a AtomicU32, pfn: Pfn, policy: LockPolicy, table: Option<&'a WaitTable>) -> Self {
        Self { flags, pfn, policy, table, deny: 0 }
    }

    /// The same page, refusing to lock or mark a word with any of `deny`
    /// set (`PageStateError::Referenced`), in the same compare-and-swap that
    /// would change it.
    #[inline(always)]
    pub fn denying(self, deny: u32) -> Self {
        Self { deny, ..self }
    }

    /// The refusal of a word with a `deny` bit: `Owned` for an owning
    /// handle's block, else `Referenced` (a page-cache page).
    #[cold]
    fn referenced(&self) -> PageStateError {
        if self.flags.load(Ordering::Relaxed) & self.deny & OWNED != 0 {
            PageStateError::Owned { pfn: self.pfn }
        } else {
            PageStateError::Referenced { pfn: self.pfn }
        }
    }

    #[inline]
    fn table(&self) -> &'a WaitTable {
        match self.table {
            Some(t) => t,
            None => page_wait_table(),
        }
    }

    /// The wait-queue key: the flags word's address.
    #[inline]
    pub fn key(&self) -> usize {
        self.flags as *const AtomicU32 as usize
    }

    fn not_allocated(&self) -> PageStateError {
        PageStateError::NotAllocated { pfn: self.pfn }
    }

    /// `Ok` if a word `f` may be marked (locked, put under writeback, made
    /// up to date): an allocated head with no `deny` bit set.
    #[inline(always)]
    fn markable(&self, f: u32) -> Result<(), PageStateError> {
        if f & HEAD == 0 {
            Err(self.not_allocated())
        } else if f & self.deny != 0 {
            Err(self.referenced())
        } else {
            Ok(())
        }
    }

    /// The error of an unlock or end of writeback whose RMW found its bit
    /// clear in `old`: `NotAllocated` if the page is not an allocated head,
    /// else `unset` (`NotLocked`, `NotWriteback`).
    fn bit_not_set(&self, old: u32, unset: PageStateError) -> PageStateError {
        if old & HEAD == 0 {
            self.not_allocated()
        } else {
            unset
        }
    }

    /// Whether a release whose RMW returned `old` must look up the wait
    /// queue: someone may wait (`WAITERS`), or the policy has no waiters bit.
    #[inline(always)]
    fn must_wake(&self, old: u32) -> bool {
        old & WAITERS != 0 || !self.policy.waiters_bit
    }

    /// Racy read of the flags.
    #[inline]
    pub fn flags_racy(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Take the lock if it is free (the kernel's `folio_trylock`). Never blocks.
    #[inline]
    pub fn try_lock(&self) -> Result<bool, PageStateError> {
        self.try_lock_as(0)
    }

    /// [`PageRef::try_lock`], setting `extra` (`GUARD` or 0) with `LOCKED` in
    /// the same CAS. A word with `GUARD` set counts as locked even in the
    /// instant a misused raw unlock has cleared `LOCKED` (see `unlock`).
    #[inline]
    pub fn try_lock_as(&self, extra: u32) -> Result<bool, PageStateError> {
        let mut f = self.flags.load(Ordering::Relaxed);
        loop {
            if f & (HEAD | LOCKED | GUARD) != HEAD || f & self.deny != 0 {
                // Not markable: the error; else locked already.
                return self.markable(f).map(|()| false);
            }
            // Acquire: pairs with the Release of the unlock that cleared LOCKED.
            match self.flags.compare_exchange(f, f | LOCKED | extra, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(true),
                Err(cur) => f = cur,
            }
        }
    }

    /// Take the lock, sleeping while another holds it (the kernel's `folio_lock`).
    #[inline]
    pub fn lock(&self, deadline: Option<Instant>, cancel: Option<&CancelToken>) -> Result<(), WaitError> {
        self.lock_as(0, deadline, cancel)
    }

    /// [`PageRef::lock`], setting `extra` (`GUARD` or 0) with `LOCKED`, also
    /// when the lock is handed off to this waiter.
    #[inline]
    pub fn lock_as(
        &self,
        extra: u32,
        deadline: Option<Instant>,
        cancel: Option<&CancelToken>,
    ) -> Result<(), WaitError> {
        if self.try_lock_as(extra)? {
            return Ok(());
        }
        self.lock_slow(extra, deadline, cancel)
    }

    /// The contended lock: queue as an exclusive waiter, retry when woken, ask
    /// for a handoff after `unfairness` lost retries.
    #[cold]
    #[inline(never)]
    fn lock_slow(self, extra: u32, deadline: Option<Instant>, cancel: Option<&CancelToken>) -> Result<(), WaitError> {
        let mut lost = 0u32;
        loop {
            // A woken waiter always retries before it may give up: the wake it
            // took was meant for one exclusive waiter, and if the lock is free now
            // nobody else would pass it on.
            if self.try_lock_as(extra)? {
                return Ok(());
            }
            let mut token = kind::EXCLUSIVE;
            if lost >= self.policy.unfairness {
                token |= kind::WANTS_HANDOFF;
            }
            if extra & GUARD != 0 {
                token |= kind::FOR_GUARD;
            }
            if self.deny & PUBLIC_DENY != 0 {
                token |= kind::DENY_REFS;
            }
            match self.park(token, LOCKED | GUARD, deadline, cancel) {
                ParkResult::Unparked(wake::HANDED_OFF) => return Ok(()),
                ParkResult::Unparked(wake::FREED) | ParkResult::Invalid => {}
                ParkResult::Unparked(_) => lost = lost.saturating_add(1),
                ParkResult::TimedOut => return Err(WaitError::TimedOut),
                ParkResult::Cancelled => return Err(WaitError::Cancelled),
            }
        }
    }

    /// Release the lock (the kernel's `folio_unlock`): one RMW; the wait queue
    /// only if it returned `WAITERS` (or always, in the old design).
    #[inline]
    pub fn unlock(&self) -> Result<(), PageStateError> {
        // Release: pairs with the Acquire of the next locker's CAS. Only the
        // old LOCKED bit is asked of the RMW, so it is one `lock btr` on x86
        // (asking for the whole old word costs a load and a CAS loop).
        if self.flags.fetch_and(!LOCKED, Ordering::Release) & LOCKED == 0 {
            return self.unlock_slow(self.flags.load(Ordering::Relaxed) & !LOCKED);
        }
        // A load after our RMW reads its value or a later one (coherence), so
        // it sees WAITERS from any waiter whose RMW came before ours; a waiter
        // whose RMW comes after ours sees LOCKED clear and does not sleep.
        // `GUARD` in the same test: a guard's lock is not ours to release
        // (the slow path puts it back).
        let now = self.flags.load(Ordering::Relaxed);
        if now & (WAITERS | GUARD) == 0 && self.policy.waiters_bit {
            return Ok(());
        }
        self.unlock_slow(now | LOCKED)
    }

    #[cold]
    #[inline(never)]
    fn unlock_slow(self, old: u32) -> Result<(), PageStateError> {
        if old & GUARD != 0 {
            return Err(self.restore_guard_lock());
        }
        if old & LOCKED == 0 {
            // Nothing changed: clearing a clear bit. A free page never has LOCKED.
            return Err(self.bit_not_set(old, PageStateError::NotLocked { pfn: self.pfn }));
        }
        if self.must_wake(old) {
            self.wake_lock_waiters();
        }
        Ok(())
    }

    /// A raw unlock cleared `LOCKED` of a lock a guard holds: set it back.
    /// Nobody can have taken the lock in between (`GUARD` still set counts as
    /// locked), and if the guard released it meanwhile (`GUARD` clear) there
    /// is nothing to restore. Wakes nobody: the lock never changed hands.
    #[cold]
    fn restore_guard_lock(&self) -> PageStateError {
        let mut f = self.flags.load(Ordering::Relaxed);
        while f & (GUARD | LOCKED) == GUARD {
            match self.flags.compare_exchange(f, f | LOCKED, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(cur) => f = cur,
            }
        }
        PageStateError::HeldByGuard { pfn: self.pfn }
    }

    /// A guard's unlock: clear `LOCKED` and `GUARD` (and set `UPTODATE` if
    /// asked) in one RMW, then wake as `unlock` does. Cannot fail: only the
    /// guard clears `GUARD`, and a set `GUARD` keeps the page from being
    /// freed or locked by anyone else.
    pub fn guard_unlock(&self, uptodate: bool) {
        let set = if uptodate { UPTODATE } else { 0 };
        let mut f = self.flags.load(Ordering::Relaxed);
        let old = loop {
            // Release: pairs with the Acquire of the next locker.
            match self.flags.compare_exchange(f, (f & !(LOCKED | GUARD)) | set, Ordering::Release, Ordering::Relaxed) {
                Ok(old) => break old,
                Err(cur) => f = cur,
            }
        };
        debug_assert!(old & GUARD != 0, "guard unlock of {:?} without GUARD: {old:#x}", self.pfn);
        if self.must_wake(old) {
            self.wake_lock_waiters();
        }
    }

    /// Clear `LOCKED` and set `UPTODATE` in one RMW (the kernel's
    /// `folio_end_read` after a successful read), then wake as `unlock` does.
    #[inline]
    pub fn unlock_uptodate(&self) -> Result<(), PageStateError> {
        let mut f = self.flags.load(Ordering::Relaxed);
        let old = loop {
            if f & self.deny != 0 && f & HEAD != 0 {
                return Err(self.referenced());
            }
            if f & (LOCKED | GUARD) != LOCKED {
                return self.unlock_slow(f);
            }
            // Release: pairs with the Acquire of the next locker and of
            // `uptodate` readers: the page's contents are published here.
            match self.flags.compare_exchange(f, (f & !LOCKED) | UPTODATE, Ordering::Release, Ordering::Relaxed) {
                Ok(old) => break old,
                Err(cur) => f = cur,
            }
        };
        if self.must_wake(old) {
            self.wake_lock_waiters();
        }
        Ok(())
    }

    /// Wake after an unlock: every shared waiter, and the first exclusive one,
    /// handing it the lock if it asked and the lock is still free.
    #[cold]
    #[inline(never)]
    fn wake_lock_waiters(&self) {
        let handed = Cell::new(false);
        let mut exclusive_seen = false;
        self.table().unpark_filter(
            self.key(),
            |tok| match tok & kind::MASK {
                kind::SHARED => FilterOp::Unpark,
                kind::EXCLUSIVE if !exclusive_seen => {
                    exclusive_seen = true;
                    if tok & kind::WANTS_HANDOFF == 0 {
                        return FilterOp::Unpark;
                    }
                    let extra = if tok & kind::FOR_GUARD != 0 { GUARD } else { 0 };
                    let deny = if tok & kind::DENY_REFS != 0 { PUBLIC_DENY } else { 0 };
                    match self.lock_for_handoff(extra, deny) {
                        Handoff::Done => {
                            handed.set(true);
                            FilterOp::Unpark
                        }
                        // Not this waiter's to lock: woken without the lock,
                        // its retry reports why.
                        Handoff::Denied => FilterOp::Unpark,
                        // A newcomer took the lock in the gap since our unlock;
                        // its unlock will see WAITERS (this waiter stays) and
                        // try the handoff again.
                        Handoff::Taken => FilterOp::Skip,
                    }
                }
                _ => FilterOp::Skip,
            },
            |res| {
                self.clear_waiters_if_last(res);
                if handed.get() {
                    wake::HANDED_OFF
                } else {
                    wake::WOKEN
                }
            },
        );
    }

    /// Under the bucket lock: set `LOCKED` (and `extra`) for a waiter that
    /// asked for a handoff, unless the word has a bit of the waiter's `deny`.
    fn lock_for_handoff(&self, extra: u32, deny: u32) -> Handoff {
        let mut f = self.flags.load(Ordering::Relaxed);
        loop {
            if f & HEAD == 0 || f & deny != 0 {
                return Handoff::Denied;
            }
            if f & (LOCKED | GUARD) != 0 {
                return Handoff::Taken;
            }
            // Acquire: pairs with the Release of the unlock that cleared LOCKED
            // (ours, or a newcomer's); the waiter acquires from our wake store.
            match self.flags.compare_exchange(f, f | LOCKED | extra, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Handoff::Done,
                Err(cur) => f = cur,
            }
        }
    }

    /// Under the bucket lock: nobody for this page is left queued, so clear
    /// `WAITERS` (a waiter that comes later sets it again under the same lock).
    fn clear_waiters_if_last(&self, res: UnparkResult) {
        if self.policy.waiters_bit && !res.have_more_threads {
            self.flags.fetch_and(!WAITERS, Ordering::Relaxed);
        }
    }

    /// Queue as a waiter of `kind` until `cond` (LOCKED or WRITEBACK) clears.
    fn park(&self, token: usize, cond: u32, deadline: Option<Instant>, cancel: Option<&CancelToken>) -> ParkResult {
        let waiters_bit = self.policy.waiters_bit;
        self.table().park(
            self.key(),
            token,
            || self.prepare_to_sleep(cond),
            |last| {
                if last && waiters_bit {
                    self.flags.fetch_and(!WAITERS, Ordering::Relaxed);
                }
            },
            deadline,
            cancel,
        )
    }

    /// Under the bucket lock, before queueing: announce the waiter with an RMW
    /// that sets `WAITERS` and sleep only if that RMW saw `cond` still set on an
    /// allocated page. In the old design there is no bit: a plain load suffices,
    /// because every unlock takes this bucket lock after its RMW.
    fn prepare_to_sleep(&self, cond: u32) -> bool {
        let mut f = self.flags.load(Ordering::Relaxed);
        loop {
            if f & HEAD == 0 || f & cond == 0 {
                return false;
            }
            if !self.policy.waiters_bit {
                return true;
            }
            match self.flags.compare_exchange(f, f | WAITERS, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(cur) => f = cur,
            }
        }
    }

    /// Sleep until the page is unlocked (the kernel's `folio_wait_locked`).
    /// Returns at once if it is unlocked; otherwise at the next unlock, even if a
    /// handoff re-locked the page for a queued locker at that moment.
    pub fn wait_locked(&self, deadline: Option<Instant>, cancel: Option<&CancelToken>) -> Result<(), WaitError> {
        loop {
            // Acquire: pairs with the unlock's Release, for what it published.
            let f = self.flags.load(Ordering::Acquire);
            if f & HEAD == 0 {
                return Err(self.not_allocated().into());
            }
            if f & (LOCKED | GUARD) == 0 {
                return Ok(());
            }
            match self.park(kind::SHARED, LOCKED | GUARD, deadline, cancel) {
                ParkResult::Unparked(wake::FREED) | ParkResult::Invalid => {}
                ParkResult::Unparked(_) => return Ok(()),
                ParkResult::TimedOut => return Err(WaitError::TimedOut),
                ParkResult::Cancelled => return Err(WaitError::Cancelled),
            }
        }
    }

    /// Set or clear `UPTODATE` on an allocated page.
    pub fn set_uptodate(&self, on: bool) -> Result<(), PageStateError> {
        let mut f = self.flags.load(Ordering::Relaxed);
        loop {
            self.markable(f)?;
            let new = if on { f | UPTODATE } else { f & !UPTODATE };
            if new == f {
                return Ok(());
            }
            // Release: pairs with the Acquire in `uptodate`: contents published.
            match self.flags.compare_exchange(f, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(cur) => f = cur,
            }
        }
    }

    /// Whether the page is allocated and up to date.
    #[inline]
    pub fn uptodate(&self) -> bool {
        self.flags.load(Ordering::Acquire) & (HEAD | UPTODATE) == HEAD | UPTODATE
    }
}

/// A page was freed while someone might wait on it: wake them all, so they
/// re-check and report `NotAllocated` (or find the pfn allocated anew).
#[cold]
pub fn wake_freed(flags: &AtomicU32) {
    page_wait_table().unpark_filter(flags as *const AtomicU32 as usize, |_| FilterOp::Unpark, |_| wake::FREED);
}
