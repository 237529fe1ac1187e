//! Without std: no thread-local storage, so no thread has a slot. The front
//! cache is off (`available` is false); these stand in for `tls` so that
//! its callers compile unchanged, and every lookup misses.
use super::FrontSlot;
use alloc::sync::Arc;

/// What a thread's last slot is without one: id 0, which no allocator has.
static PLACEHOLDER: FrontSlot = FrontSlot::placeholder();

/// No slot, ever.
///
/// # Safety
/// None needed; `unsafe` to match `tls::current`.
#[inline(always)]
pub(super) unsafe fn current<'a>(
    _id: u64,
    _register: impl FnOnce() -> Option<Arc<FrontSlot>>,
) -> Option<&'a FrontSlot> {
    None
}

/// The placeholder.
///
/// # Safety
/// None needed; `unsafe` to match `tls::last`.
#[inline(always)]
pub(super) unsafe fn last<'a>() -> &'a FrontSlot {
    &PLACEHOLDER
}

/// No slot, ever.
pub(super) fn current_shared(_id: u64, _register: impl FnOnce() -> Option<Arc<FrontSlot>>) -> Option<Arc<FrontSlot>> {
    None
}
