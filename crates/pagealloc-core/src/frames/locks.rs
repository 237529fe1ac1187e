//! The page-lock API: lock, unlock, waits, writeback and uptodate, by pfn
//! ([`PageLocks`], made by [`FrameAllocator::page_locks`] and, over the same
//! core, by `pagealloc`'s `PageAllocator::page_locks`). Every call
//! range-checks the pfn and works only on the head page of an allocated
//! block (see the module docs of `pagelock`).

use super::FrameAllocator;
use crate::error::{PageStateError, WaitError};
use crate::page::flags::GUARD;
use crate::page_alloc::Core;
use crate::pagelock::waitq::page_wait_table;
use crate::pagelock::{CancelToken, LockPolicy, PageRef, PUBLIC_DENY};
use crate::platform::Instant;
use crate::types::Pfn;
use core::mem::ManuallyDrop;
use core::time::Duration;

impl Core {
    /// The protocol's view of one page, as the page cache needs it (it locks
    /// its pages as a guard, so no raw unlock releases them): no refusal of
    /// reference-counted pages.
    #[inline(always)]
    pub fn cache_page_ref(&self, pfn: Pfn) -> Result<PageRef<'_>, PageStateError> {
        let Some(d) = self.mm.descs().get(pfn.as_u64() as usize) else {
            return Err(PageStateError::OutOfRange { pfn });
        };
        let policy = LockPolicy { waiters_bit: self.cfg.waiters_bit(), unfairness: self.cfg.page_lock_unfairness };
        Ok(PageRef::new(&d.flags, pfn, policy, None))
    }

    /// The protocol's view of one page, for the public pfn API: a
    /// reference-counted page (the page cache's) is refused with
    /// `Referenced`, and an owning handle's block with `Owned`, by every
    /// call that would lock or mark it.
    #[inline(always)]
    pub fn page_ref(&self, pfn: Pfn) -> Result<PageRef<'_>, PageStateError> {
        Ok(self.cache_page_ref(pfn)?.denying(PUBLIC_DENY))
    }
}

/// The page lock, writeback and uptodate bits of allocated pages, by pfn
/// (the kernel's `folio_lock` family), made by
/// [`FrameAllocator::page_locks`] (and `pagealloc`'s
/// `PageAllocator::page_locks`).
///
/// # Examples
///
/// ```
/// use pagealloc_core::{Config, FrameAllocator, Gfp, PageStateError};
/// let f = FrameAllocator::new(Config::small(4 << 20)).unwrap();
/// let p = f.alloc(Gfp::KERNEL, 0).unwrap();
/// let locks = f.page_locks();
/// locks.lock_page(p).unwrap();
/// assert!(!locks.trylock_page(p)); // held
/// locks.unlock_page_uptodate(p).unwrap();
/// assert!(locks.page_uptodate(p));
/// assert_eq!(locks.unlock_page(p), Err(PageStateError::NotLocked { pfn: p }));
/// ```
#[derive(Clone, Copy)]
pub struct PageLocks<'a> {
    f: &'a FrameAllocator,
}

impl FrameAllocator {
    /// The page lock, writeback and uptodate bits, by pfn.
    #[inline]
    #[must_use]
    pub fn page_locks(&self) -> PageLocks<'_> {
        PageLocks { f: self }
    }
}

impl PageLocks<'_> {
    #[inline(always)]
    fn page_ref(&self, pfn: Pfn) -> Result<PageRef<'_>, PageStateError> {
        self.f.core.page_ref(pfn)
    }
}

fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(Duration::from_secs(u64::from(u32::MAX)))).unwrap_or(now)
}

fn untimed(e: WaitError) -> PageStateError {
    match e {
        WaitError::State(s) => s,
        WaitError::TimedOut | WaitError::Cancelled => unreachable!("an untimed, uncancellable wait"),
    }
}

/// A held page lock; dropping it unlocks the page.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator, PageStateError};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// let locks = a.page_locks();
/// let guard = locks.lock_page_guard(pfn).unwrap();
/// assert!(guard.pfn() == pfn && !locks.trylock_page(pfn)); // held
/// assert_eq!(locks.unlock_page(pfn), Err(PageStateError::HeldByGuard { pfn }));
/// guard.unlock_uptodate(); // unlock and mark up to date in one step
/// assert!(locks.page_uptodate(pfn) && locks.trylock_page(pfn));
/// ```
#[must_use = "dropping the guard unlocks the page at once"]
pub struct PageLockGuard<'a> {
    f: &'a FrameAllocator,
    pfn: Pfn,
}

impl PageLockGuard<'_> {
    /// The locked page.
    pub fn pfn(&self) -> Pfn {
        self.pfn
    }

    /// Unlock and mark up to date in one atomic operation.
    pub fn unlock_uptodate(self) {
        let this = ManuallyDrop::new(self);
        this.release(true);
    }

    fn release(&self, uptodate: bool) {
        // The guard holds the lock (GUARD set with LOCKED when it was made), so
        // the pfn is in range and an allocated head: page_ref cannot fail.
        if let Ok(r) = self.f.core.page_ref(self.pfn) {
            r.guard_unlock(uptodate);
        }
    }
}

impl Drop for PageLockGuard<'_> {
    fn drop(&mut self) {
        self.release(false);
    }
}

impl<'a> PageLocks<'a> {
    /// Lock a page, sleeping while another thread holds it (the kernel's
    /// `lock_page`). The page must be the head of an allocated block.
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], `NotAllocated` for a pfn that is not an
    /// allocated block's head, and the refusals named above.
    #[doc(alias = "folio_lock")]
    #[inline]
    pub fn lock_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.lock(None, None).map_err(untimed)
    }

    /// Lock a page if nobody holds it; never blocks. False also for a pfn that is
    /// not an allocated page (use [`PageLocks::lock_page`] to learn why).
    #[doc(alias = "folio_trylock")]
    #[inline]
    pub fn trylock_page(&self, pfn: Pfn) -> bool {
        self.page_ref(pfn).and_then(|r| r.try_lock()).unwrap_or(false)
    }

    /// Unlock a page. Unlocking a page that is not locked is an error naming the
    /// pfn, and changes nothing.
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], `NotAllocated` for a pfn that is not an
    /// allocated block's head, and the refusals named above.
    #[doc(alias = "folio_unlock")]
    #[inline]
    pub fn unlock_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.unlock()
    }

    /// Unlock a page and mark it up to date in one atomic operation (the
    /// kernel's `folio_end_read` after a successful read).
    #[doc(alias = "folio_end_read")]
    #[inline]
    pub fn unlock_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.unlock_uptodate()
    }

    /// Lock a page, giving up after `timeout`.
    ///
    /// # Errors
    /// `WaitError::State` as the untimed call reports it (out of range, not an
    /// allocated head), `TimedOut` or `Cancelled` when the wait gave up.
    pub fn lock_page_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        let r = self.page_ref(pfn)?;
        if r.try_lock()? {
            return Ok(());
        }
        r.lock(Some(deadline(timeout)), None)
    }

    /// Lock a page unless `cancel` is cancelled first (the kernel's
    /// `lock_page_killable`).
    #[doc(alias = "lock_page_killable")]
    pub fn lock_page_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_ref(pfn)?.lock(None, Some(cancel))
    }

    /// Lock a page and get a guard that unlocks it on drop. While the guard
    /// lives only it can release the lock: a raw [`PageLocks::unlock_page`]
    /// of the page is refused with [`PageStateError::HeldByGuard`].
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], or `NotAllocated` for a pfn that is not
    /// an allocated block's head.
    pub fn lock_page_guard(&self, pfn: Pfn) -> Result<PageLockGuard<'a>, PageStateError> {
        self.page_ref(pfn)?.lock_as(GUARD, None, None).map_err(untimed)?;
        Ok(PageLockGuard { f: self.f, pfn })
    }

    /// Lock a page for a guard if nobody holds it; never blocks.
    ///
    /// # Errors
    /// As [`PageLocks::lock_page_guard`]; `Ok(None)` when the page is locked.
    pub fn trylock_page_guard(&self, pfn: Pfn) -> Result<Option<PageLockGuard<'a>>, PageStateError> {
        Ok(self.page_ref(pfn)?.try_lock_as(GUARD)?.then(|| PageLockGuard { f: self.f, pfn }))
    }

    /// Wait until the page is unlocked (the kernel's `folio_wait_locked`): returns
    /// at once if it is, else at the next unlock. All such waiters wake together.
    #[doc(alias = "folio_wait_locked")]
    pub fn wait_on_page_locked(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.wait_locked(None, None).map_err(untimed)
    }

    /// [`PageLocks::wait_on_page_locked`], giving up after `timeout`.
    pub fn wait_on_page_locked_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_ref(pfn)?.wait_locked(Some(deadline(timeout)), None)
    }

    /// [`PageLocks::wait_on_page_locked`], unless `cancel` is cancelled first
    /// (the kernel's `folio_wait_locked_killable`).
    ///
    /// # Errors
    /// `WaitError::State` as the untimed call reports it (out of range, not an
    /// allocated head), `TimedOut` or `Cancelled` when the wait gave up.
    pub fn wait_on_page_locked_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_ref(pfn)?.wait_locked(None, Some(cancel))
    }

    /// Mark a page under writeback. `Ok(true)` if this call set it, `Ok(false)`
    /// if it already was (the kernel's `folio_start_writeback` would BUG).
    #[doc(alias = "folio_start_writeback")]
    pub fn set_page_writeback(&self, pfn: Pfn) -> Result<bool, PageStateError> {
        self.page_ref(pfn)?.set_writeback()
    }

    /// End writeback and wake whoever waits for it. An error if the page was not
    /// under writeback.
    #[doc(alias = "folio_end_writeback")]
    pub fn end_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.end_writeback()
    }

    /// Wait until the page is not under writeback.
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], `NotAllocated` for a pfn that is not an
    /// allocated block's head, and the refusals named above.
    #[doc(alias = "folio_wait_writeback")]
    pub fn wait_on_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.wait_writeback(None, None).map_err(untimed)
    }

    /// [`PageLocks::wait_on_page_writeback`], giving up after `timeout`.
    pub fn wait_on_page_writeback_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_ref(pfn)?.wait_writeback(Some(deadline(timeout)), None)
    }

    /// [`PageLocks::wait_on_page_writeback`], unless `cancel` is cancelled first.
    pub fn wait_on_page_writeback_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_ref(pfn)?.wait_writeback(None, Some(cancel))
    }

    /// Mark a page's contents valid.
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], `NotAllocated` for a pfn that is not an
    /// allocated block's head, and the refusals named above.
    #[doc(alias = "folio_mark_uptodate")]
    pub fn set_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.set_uptodate(true)
    }

    /// Mark a page's contents invalid (the kernel's `folio_clear_uptodate`).
    pub fn clear_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_ref(pfn)?.set_uptodate(false)
    }

    /// Whether a page is allocated and up to date. Pairs with the uptodate
    /// setters: contents written before them are visible after this says true.
    #[inline]
    pub fn page_uptodate(&self, pfn: Pfn) -> bool {
        self.page_ref(pfn).is_ok_and(|r| r.uptodate())
    }

    /// Whether a page is locked right now (racy: for assertions and reports).
    pub fn page_locked_racy(&self, pfn: Pfn) -> bool {
        self.page_ref(pfn).is_ok_and(|r| r.flags_racy() & crate::page::flags::LOCKED != 0)
    }

    /// Whether a page is the head of a block an owning handle holds
    /// (`pagealloc`'s `Pages`, `OwnedBlock`) right now (racy: the raw
    /// frees refuse such a block whatever this said).
    pub fn page_owned_racy(&self, pfn: Pfn) -> bool {
        self.page_ref(pfn).is_ok_and(|r| r.flags_racy() & crate::page::flags::OWNED != 0)
    }

    /// Whether a page is under writeback right now (racy).
    pub fn page_writeback_racy(&self, pfn: Pfn) -> bool {
        self.page_ref(pfn).is_ok_and(|r| r.flags_racy() & crate::page::flags::WRITEBACK != 0)
    }

    /// The wait-queue bucket a page hashes to (experiments use it to build pages
    /// that collide). `None` out of range.
    pub fn page_wait_bucket(&self, pfn: Pfn) -> Option<usize> {
        self.page_ref(pfn).ok().map(|r| page_wait_table().bucket_of(r.key()))
    }
}
