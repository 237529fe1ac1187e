//! Each thread's slots, one per allocator it has used, and (outside loom) a
//! one-entry cache of the last one so the fast path is a thread-local load
//! and a compare.
use super::FrontSlot;
#[allow(unused_imports)]
use crate::prelude::*;
use alloc::sync::Arc;
use core::cell::RefCell;
#[cfg(not(loom))]
use core::ptr::NonNull;

struct ThreadSlots(Vec<(u64, Arc<FrontSlot>)>);

impl Drop for ThreadSlots {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        LAST.set(placeholder());
        for (_, s) in self.0.drain(..) {
            // The thread's last write of `state` (it is the only writer): a
            // C thread cache left pointing here misses from now on.
            s.state.store(super::DEAD, crate::sync::Ordering::Release);
            s.orphaned.store(true, crate::sync::Ordering::Release);
        }
    }
}

/// What `LAST` points to when the thread has no slot in its cache: id and
/// tags 0, which no allocator has, so the compares fail without a null
/// test. Nothing ever enters it.
#[cfg(not(loom))]
static PLACEHOLDER: FrontSlot = FrontSlot::placeholder();

/// A pointer to [`PLACEHOLDER`].
#[cfg(not(loom))]
const fn placeholder() -> NonNull<FrontSlot> {
    NonNull::from_ref(&PLACEHOLDER)
}

#[cfg(not(loom))]
thread_local! {
    /// The slot this thread used last (or the placeholder): a slot held
    /// by this thread's SLOTS, which resets this before letting one go.
    /// No destructor, so it stays readable while the thread exits.
    static LAST: core::cell::Cell<NonNull<FrontSlot>> = const { core::cell::Cell::new(placeholder()) };
    static SLOTS: RefCell<ThreadSlots> = const { RefCell::new(ThreadSlots(Vec::new())) };
}
#[cfg(loom)]
loom::thread_local! {
    static SLOTS: RefCell<ThreadSlots> = RefCell::new(ThreadSlots(Vec::new()));
}

/// This thread's slot for allocator `id`, registering one with `register`
/// on first use. None when the thread is exiting or registration declined.
/// A reference rather than a closure, so the caller's fast path is inlined
/// whole into its caller whatever that caller is.
///
/// # Safety
/// `'a` must not outlive the allocator `id`: the allocator's registry holds
/// every slot it registered until the slot's thread has exited, and this
/// thread's SLOTS holds it until the allocator is gone, so while both live
/// (this thread is running, the allocator is borrowed for `'a`) so does the slot.
#[inline(always)]
pub(super) unsafe fn current<'a>(id: u64, register: impl FnOnce() -> Option<Arc<FrontSlot>>) -> Option<&'a FrontSlot> {
    #[cfg(not(loom))]
    let ptr = {
        let last = LAST.get();
        // SAFETY: LAST points to the placeholder or to a slot this
        // thread's SLOTS holds (see LAST).
        if unsafe { last.as_ref() }.id == id {
            last.as_ptr().cast_const()
        } else {
            lookup(id, register)?
        }
    };
    #[cfg(loom)]
    let ptr = lookup(id, register)?;
    // SAFETY: the pointer is LAST's (or `lookup` just found it): it points
    // into an Arc held by this thread's SLOTS, and by the allocator's registry
    // for `'a` (this function's contract).
    Some(unsafe { &*ptr })
}

/// This thread's last slot, or the placeholder.
///
/// # Safety
/// The reference may be kept past this thread's next lookup only if the
/// slot is registered with an allocator that outlives `'a` (as
/// [`current`]'s).
#[cfg(not(loom))]
#[inline(always)]
pub(super) unsafe fn last<'a>() -> &'a FrontSlot {
    // SAFETY: LAST points to the placeholder (static) or to a slot this
    // thread's SLOTS holds; the rest is this function's contract.
    unsafe { LAST.get().as_ref() }
}

/// This thread's slot for allocator `id` as a shared handle, registering
/// one on first use (see [`current`]). None while the thread is exiting.
#[cfg(not(loom))]
pub(super) fn current_shared(id: u64, register: impl FnOnce() -> Option<Arc<FrontSlot>>) -> Option<Arc<FrontSlot>> {
    lookup(id, register)?;
    SLOTS.try_with(|s| s.borrow().0.iter().find(|(i, _)| *i == id).map(|(_, s)| s.clone())).ok().flatten()
}

#[cold]
#[inline(never)]
fn lookup(id: u64, register: impl FnOnce() -> Option<Arc<FrontSlot>>) -> Option<*const FrontSlot> {
    SLOTS
        .try_with(|s| {
            let mut s = s.borrow_mut();
            #[cfg(not(loom))]
            LAST.set(placeholder());
            s.0.retain(|(_, slot)| !slot.detached.load(crate::sync::Ordering::Acquire));
            let p = match s.0.iter().find(|(i, _)| *i == id) {
                Some((_, slot)) => Arc::as_ptr(slot),
                None => {
                    let slot = register()?;
                    let p = Arc::as_ptr(&slot);
                    s.0.push((id, slot));
                    p
                }
            };
            #[cfg(not(loom))]
            if let Some(p) = NonNull::new(p.cast_mut()) {
                LAST.set(p);
            }
            Some(p)
        })
        .ok()
        .flatten()
}
