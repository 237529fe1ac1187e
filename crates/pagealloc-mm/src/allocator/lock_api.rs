//! The page-lock API of [`PageAllocator`]: lock, unlock, waits, writeback and
//! uptodate, by pfn. Every call range-checks the pfn and works only on the head
//! page of an allocated block (see the module docs of `pagelock`).

use super::handles::PageLocks;
use super::PageAllocator;
use pagealloc_core::error::{PageStateError, WaitError};
use pagealloc_core::page::flags::GUARD;
use pagealloc_core::pagelock::waitq::page_wait_table;
use pagealloc_core::pagelock::{CancelToken, LockPolicy, PageRef, PUBLIC_DENY};
use pagealloc_core::types::Pfn;
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

impl PageAllocator {
    /// The protocol's view of one page, for the page cache (which locks its
    /// pages as a guard, so no raw unlock releases them).
    #[inline(always)]
    pub(crate) fn cache_page_ref(&self, pfn: Pfn) -> Result<PageRef<'_>, PageStateError> {
        let core = &*self.core;
        let Some(d) = core.mm.descs().get(pfn.as_u64() as usize) else {
            return Err(PageStateError::OutOfRange { pfn });
        };
        let policy = LockPolicy { waiters_bit: core.cfg.waiters_bit(), unfairness: core.cfg.page_lock_unfairness };
        Ok(PageRef::new(&d.flags, pfn, policy, None))
    }

    /// The protocol's view of one page, for the public pfn API: a
    /// reference-counted page (the page cache's) is refused with
    /// `Referenced`, and an owning handle's block with `Owned`, by every
    /// call that would lock or mark it.
    #[inline(always)]
    pub(crate) fn page_ref(&self, pfn: Pfn) -> Result<PageRef<'_>, PageStateError> {
        Ok(self.cache_page_ref(pfn)?.denying(PUBLIC_DENY))
    }
}

fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout).unwrap_or(now + Duration::from_secs(u32::MAX as u64))
}

fn untimed(e: WaitError) -> PageStateError {
    match e {
        WaitError::State(s) => s,
        WaitError::TimedOut | WaitError::Cancelled => unreachable!("an untimed, uncancellable wait"),
        e => unreachable!("an untimed, uncancellable wait failed: {e}"),
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
/// let guard = a.lock_page_guard(pfn).unwrap();
/// assert!(guard.pfn() == pfn && !a.trylock_page(pfn)); // held
/// assert_eq!(a.unlock_page(pfn), Err(PageStateError::HeldByGuard { pfn }));
/// guard.unlock_uptodate(); // unlock and mark up to date in one step
/// assert!(a.page_uptodate(pfn) && a.trylock_page(pfn));
/// ```
#[must_use = "dropping the guard unlocks the page at once"]
pub struct PageLockGuard<'a> {
    alloc: &'a PageAllocator,
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
        if let Ok(r) = self.alloc.page_ref(self.pfn) {
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
        self.a.page_ref(pfn)?.lock(None, None).map_err(untimed)
    }

    /// Lock a page if nobody holds it; never blocks. False also for a pfn that is
    /// not an allocated page (use [`PageAllocator::lock_page`] to learn why).
    #[doc(alias = "folio_trylock")]
    #[inline]
    pub fn trylock_page(&self, pfn: Pfn) -> bool {
        self.a.page_ref(pfn).and_then(|r| r.try_lock()).unwrap_or(false)
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
        self.a.page_ref(pfn)?.unlock()
    }

    /// Unlock a page and mark it up to date in one atomic operation (the
    /// kernel's `folio_end_read` after a successful read).
    #[doc(alias = "folio_end_read")]
    #[inline]
    pub fn unlock_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.page_ref(pfn)?.unlock_uptodate()
    }

    /// Lock a page, giving up after `timeout`.
    ///
    /// # Errors
    /// `WaitError::State` as the untimed call reports it (out of range, not an
    /// allocated head), `TimedOut` or `Cancelled` when the wait gave up.
    pub fn lock_page_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        let r = self.a.page_ref(pfn)?;
        if r.try_lock()? {
            return Ok(());
        }
        r.lock(Some(deadline(timeout)), None)
    }

    /// Lock a page unless `cancel` is cancelled first (the kernel's
    /// `lock_page_killable`).
    #[doc(alias = "lock_page_killable")]
    pub fn lock_page_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.a.page_ref(pfn)?.lock(None, Some(cancel))
    }

    /// Lock a page and get a guard that unlocks it on drop. While the guard
    /// lives only it can release the lock: a raw [`PageAllocator::unlock_page`]
    /// of the page is refused with [`PageStateError::HeldByGuard`].
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], or `NotAllocated` for a pfn that is not
    /// an allocated block's head.
    pub fn lock_page_guard(&self, pfn: Pfn) -> Result<PageLockGuard<'a>, PageStateError> {
        self.a.page_ref(pfn)?.lock_as(GUARD, None, None).map_err(untimed)?;
        Ok(PageLockGuard { alloc: self.a, pfn })
    }

    /// Lock a page for a guard if nobody holds it; never blocks.
    ///
    /// # Errors
    /// As [`PageAllocator::lock_page_guard`]; `Ok(None)` when the page is locked.
    pub fn trylock_page_guard(&self, pfn: Pfn) -> Result<Option<PageLockGuard<'a>>, PageStateError> {
        Ok(self.a.page_ref(pfn)?.try_lock_as(GUARD)?.then(|| PageLockGuard { alloc: self.a, pfn }))
    }

    /// Wait until the page is unlocked (the kernel's `folio_wait_locked`): returns
    /// at once if it is, else at the next unlock. All such waiters wake together.
    #[doc(alias = "folio_wait_locked")]
    pub fn wait_on_page_locked(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.page_ref(pfn)?.wait_locked(None, None).map_err(untimed)
    }

    /// [`PageAllocator::wait_on_page_locked`], giving up after `timeout`.
    pub fn wait_on_page_locked_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.a.page_ref(pfn)?.wait_locked(Some(deadline(timeout)), None)
    }

    /// [`PageAllocator::wait_on_page_locked`], unless `cancel` is cancelled first
    /// (the kernel's `folio_wait_locked_killable`).
    ///
    /// # Errors
    /// `WaitError::State` as the untimed call reports it (out of range, not an
    /// allocated head), `TimedOut` or `Cancelled` when the wait gave up.
    pub fn wait_on_page_locked_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.a.page_ref(pfn)?.wait_locked(None, Some(cancel))
    }

    /// Mark a page under writeback. `Ok(true)` if this call set it, `Ok(false)`
    /// if it already was (the kernel's `folio_start_writeback` would BUG).
    #[doc(alias = "folio_start_writeback")]
    pub fn set_page_writeback(&self, pfn: Pfn) -> Result<bool, PageStateError> {
        self.a.page_ref(pfn)?.set_writeback()
    }

    /// End writeback and wake whoever waits for it. An error if the page was not
    /// under writeback.
    #[doc(alias = "folio_end_writeback")]
    pub fn end_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.page_ref(pfn)?.end_writeback()
    }

    /// Wait until the page is not under writeback.
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], `NotAllocated` for a pfn that is not an
    /// allocated block's head, and the refusals named above.
    #[doc(alias = "folio_wait_writeback")]
    pub fn wait_on_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.page_ref(pfn)?.wait_writeback(None, None).map_err(untimed)
    }

    /// [`PageAllocator::wait_on_page_writeback`], giving up after `timeout`.
    pub fn wait_on_page_writeback_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.a.page_ref(pfn)?.wait_writeback(Some(deadline(timeout)), None)
    }

    /// [`PageAllocator::wait_on_page_writeback`], unless `cancel` is cancelled first.
    pub fn wait_on_page_writeback_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.a.page_ref(pfn)?.wait_writeback(None, Some(cancel))
    }

    /// Mark a page's contents valid.
    ///
    /// # Errors
    /// [`PageStateError::OutOfRange`], `NotAllocated` for a pfn that is not an
    /// allocated block's head, and the refusals named above.
    #[doc(alias = "folio_mark_uptodate")]
    pub fn set_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.page_ref(pfn)?.set_uptodate(true)
    }

    /// Mark a page's contents invalid (the kernel's `folio_clear_uptodate`).
    pub fn clear_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.a.page_ref(pfn)?.set_uptodate(false)
    }

    /// Whether a page is allocated and up to date. Pairs with the uptodate
    /// setters: contents written before them are visible after this says true.
    #[inline]
    pub fn page_uptodate(&self, pfn: Pfn) -> bool {
        self.a.page_ref(pfn).is_ok_and(|r| r.uptodate())
    }

    /// Whether a page is locked right now (racy: for assertions and reports).
    pub fn page_locked_racy(&self, pfn: Pfn) -> bool {
        self.a.page_ref(pfn).is_ok_and(|r| r.flags_racy() & pagealloc_core::page::flags::LOCKED != 0)
    }

    /// Whether a page is the head of a block an owning handle holds
    /// ([`crate::Pages`], [`crate::OwnedBlock`]) right now (racy: the raw
    /// frees refuse such a block whatever this said).
    pub fn page_owned_racy(&self, pfn: Pfn) -> bool {
        self.a.page_ref(pfn).is_ok_and(|r| r.flags_racy() & pagealloc_core::page::flags::OWNED != 0)
    }

    /// Whether a page is under writeback right now (racy).
    pub fn page_writeback_racy(&self, pfn: Pfn) -> bool {
        self.a.page_ref(pfn).is_ok_and(|r| r.flags_racy() & pagealloc_core::page::flags::WRITEBACK != 0)
    }

    /// The wait-queue bucket a page hashes to (experiments use it to build pages
    /// that collide). `None` out of range.
    pub fn page_wait_bucket(&self, pfn: Pfn) -> Option<usize> {
        self.a.page_ref(pfn).ok().map(|r| page_wait_table().bucket_of(r.key()))
    }
}
