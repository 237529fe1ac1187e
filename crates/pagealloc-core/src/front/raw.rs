//! The front cache's protocol as raw memory, for a fast path outside Rust:
//! the C API's header-inline order-0 allocation and free (`pagealloc_inline.h`).
//!
//! What such a path may do is exactly what `enter_keyed` and the
//! guard's drop do, on the words the offsets below locate from the slot's
//! address ([`FrontSlot::base`]), from the slot's owner thread only:
//!
//! ```text
//!   if load_relaxed(state) != key: miss
//!   store_relaxed(state, BUSY); compiler fence
//!   if load_acquire(drain_req): store_release(state, key); miss
//!   ... the stacks (repr(C) `FrontStack`s) and the event counters ...
//!   store_release(state, key)
//! ```
//!
//! The drainer's side is unchanged (the membarrier stands in for the owner's
//! missing fence whatever language the owner runs). The layouts the outside
//! code relies on are asserted below; the caller keeps the slot alive by
//! holding the `Arc` it was given (a slot outlives its thread that way, and
//! its state reads `DEAD` once the thread has exited, so a stale cache
//! misses instead of feeding a slot no drain will visit).

use super::{FrontSlot, FrontStack, BUSY, FRONT_CAP, NR_STACKS};
use crate::vmevent::VmEvent;
use core::mem::{align_of, offset_of, size_of};

impl FrontSlot {
    /// The slot's address, from which the layout constants below reach its
    /// words (valid as long as the slot is).
    pub fn base(&self) -> *mut u8 {
        core::ptr::from_ref(self).cast_mut().cast()
    }
}

/// A slot's state during an operation.
pub const STATE_BUSY: u64 = BUSY;
/// The slot's words: the state (`u64`), the drainer's flag (`bool`), the
/// stacks ([`STACKS`] in a row), the event counters (`u64` each, indexed by
/// `VmEvent as usize`).
pub const SLOT_STATE: usize = offset_of!(FrontSlot, state);
pub const SLOT_DRAIN_REQ: usize = offset_of!(FrontSlot, drain_req);
pub const SLOT_STACKS: usize = offset_of!(FrontSlot, stacks);
pub const SLOT_EVENTS: usize = offset_of!(FrontSlot, events);
pub const SLOT_SIZE: usize = size_of::<FrontSlot>();
/// Event counters per slot.
pub const NR_EVENTS: usize = crate::vmevent::NR_VM_EVENTS;
/// Pages per stack.
pub const STACK_CAP: usize = FRONT_CAP;
/// Stacks per slot.
pub const STACKS: usize = NR_STACKS;
/// Size of a stack, and the offsets of its fields.
pub const STACK_SIZE: usize = size_of::<FrontStack>();
pub const STACK_PFNS: usize = offset_of!(FrontStack, pfns);
pub const STACK_LEN: usize = offset_of!(FrontStack, len);
pub const STACK_KEY: usize = offset_of!(FrontStack, key);
pub const STACK_ALLOC_EV: usize = offset_of!(FrontStack, alloc_ev);
/// The event a free onto a stack counts.
pub const EV_PGFREE: usize = VmEvent::Pgfree as usize;

const _: () = {
    assert!(size_of::<VmEvent>() == 1 && size_of::<bool>() == 1);
    assert!(SLOT_STATE == 0 && align_of::<FrontSlot>() == 8);
    // The stacks and counters are plain data inside their cells.
    assert!(size_of::<crate::sync::UnsafeCell<super::Stacks>>() == NR_STACKS * STACK_SIZE);
    assert!(size_of::<crate::vmevent::EventCounters>() == NR_EVENTS * 8);
    assert!(align_of::<FrontStack>() == 4 && STACK_PFNS == 0);
};
