//! Writeback on the page's flags word (the kernel's `folio_start_writeback`,
//! `folio_end_writeback` and `folio_wait_writeback`): the writeback half of
//! the protocol that `super` documents. `WRITEBACK` is set by a CAS that
//! requires `HEAD`; ending it is one RMW, and the wait queue is looked up only
//! if that RMW returned `WAITERS` (or the waiters bit is off by policy).
//! Writeback waiters are all woken and re-check, so a writeback started anew
//! is waited for too.

use super::waitq::{FilterOp, ParkResult};
use super::{kind, wake, CancelToken, PageRef};
use crate::error::{PageStateError, WaitError};
use crate::page::flags::{HEAD, WRITEBACK};
use crate::platform::Instant;
use crate::sync::Ordering;

impl PageRef<'_> {
    /// Mark the page under writeback; `Ok(false)` if it already was.
    pub fn set_writeback(&self) -> Result<bool, PageStateError> {
        let mut f = self.flags.load(Ordering::Relaxed);
        loop {
            self.markable(f)?;
            if f & WRITEBACK != 0 {
                return Ok(false);
            }
            match self.flags.compare_exchange(f, f | WRITEBACK, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(true),
                Err(cur) => f = cur,
            }
        }
    }

    /// End writeback (the kernel's `folio_end_writeback`): one RMW, then the
    /// queue only if it returned `WAITERS`.
    pub fn end_writeback(&self) -> Result<(), PageStateError> {
        // Release: pairs with the Acquire load in `wait_writeback`.
        let old = if self.deny == 0 {
            self.flags.fetch_and(!WRITEBACK, Ordering::Release)
        } else {
            self.end_writeback_denying()?
        };
        if old & WRITEBACK == 0 {
            return Err(self.bit_not_set(old, PageStateError::NotWriteback { pfn: self.pfn }));
        }
        if self.must_wake(old) {
            self.wake_writeback_waiters();
        }
        Ok(())
    }

    /// `end_writeback`'s RMW as a compare-and-swap that refuses a word with
    /// any `deny` bit (the public API's: a cache page's writeback is the
    /// cache's to end). Returns the old word, as the RMW does.
    fn end_writeback_denying(&self) -> Result<u32, PageStateError> {
        let mut f = self.flags.load(Ordering::Relaxed);
        loop {
            if f & HEAD != 0 && f & self.deny != 0 {
                return Err(self.referenced());
            }
            if f & WRITEBACK == 0 {
                return Ok(f);
            }
            match self.flags.compare_exchange(f, f & !WRITEBACK, Ordering::Release, Ordering::Relaxed) {
                Ok(old) => return Ok(old),
                Err(cur) => f = cur,
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_writeback_waiters(&self) {
        self.table().unpark_filter(
            self.key(),
            |tok| if tok & kind::MASK == kind::WRITEBACK { FilterOp::Unpark } else { FilterOp::Skip },
            |res| {
                self.clear_waiters_if_last(res);
                wake::WOKEN
            },
        );
    }

    /// Sleep until the page is not under writeback (the kernel's
    /// `folio_wait_writeback`: it re-checks, so a new writeback is waited for too).
    pub fn wait_writeback(&self, deadline: Option<Instant>, cancel: Option<&CancelToken>) -> Result<(), WaitError> {
        loop {
            let f = self.flags.load(Ordering::Acquire);
            if f & HEAD == 0 {
                return Err(self.not_allocated().into());
            }
            if f & WRITEBACK == 0 {
                return Ok(());
            }
            match self.park(kind::WRITEBACK, WRITEBACK, deadline, cancel) {
                ParkResult::Unparked(_) | ParkResult::Invalid => {}
                ParkResult::TimedOut => return Err(WaitError::TimedOut),
                ParkResult::Cancelled => return Err(WaitError::Cancelled),
            }
        }
    }
}
