//! The façade of the no-lock paths (`page_alloc::nolock`): allocation and
//! free that never wait, for signal handlers and real-time threads.

use super::PageAllocator;
use pagealloc_core::error::{AllocError, FreeError};
use pagealloc_core::types::{Gfp, Pfn};

impl PageAllocator {
    /// Allocate `1 << order` contiguous pages without waiting on anything (the
    /// kernel's `alloc_pages_nolock`): async-signal-safe, so callable from a
    /// signal handler, including one that interrupted this allocator's own
    /// calls on the same thread. No heap allocation, no thread-local state
    /// (never the thread front cache), no slow path, and only `try_lock` on
    /// this CPU's per-CPU list and on zone locks. Zones must stay above their
    /// min watermark. With [`crate::Config::init_on_alloc`] the block is
    /// zeroed, as by every allocation path (unless it reads zero already).
    ///
    /// # Errors
    /// [`AllocError::WouldBlock`] when a lock it needed was taken (retry, or
    /// allocate from a context that may wait), [`AllocError::NoMemory`] when
    /// nothing was free, [`AllocError::InvalidOrder`] above [`crate::MAX_ORDER`].
    pub fn alloc_pages_nolock(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        self.core.frames().alloc_nolock(gfp, order)
    }

    /// Free a block allocated by any `alloc_pages*` without waiting on anything
    /// (the kernel's `free_pages_nolock`): async-signal-safe, as
    /// [`PageAllocator::alloc_pages_nolock`]. The checks and the claim are a
    /// locked free's; a block that cannot go to a list without waiting for a
    /// lock is parked on a lock-free deferred list, which the next locked
    /// free (not the inline order-0 one) or drain empties. Once the checks
    /// pass the free always succeeds.
    ///
    /// # Errors
    /// The [`FreeError`]s of [`PageAllocator::free_pages`], state unchanged.
    pub fn free_pages_nolock(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.core.frames().free_nolock(pfn, order)
    }

    /// Free the blocks the no-lock frees parked (may wait on zone locks). The
    /// next locked free and every drain do this too.
    pub fn drain_deferred_frees(&self) {
        self.core.drain_deferred();
    }
}
