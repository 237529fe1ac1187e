//! A drainer's hold on every thread's slot: the stacks it may empty while
//! their owners are kept out.

use super::{FrontSlot, FrontStack, Fronts};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{MutexGuard, Ordering};
use crate::vmevent::NR_VM_EVENTS;
use alloc::sync::Arc;

/// Every slot held by one drainer (see [`Fronts::pause_all`]).
pub struct Paused<'a> {
    pub(super) fronts: &'a Fronts,
    pub(super) _drain: MutexGuard<'a, ()>,
    pub(super) slots: Vec<Arc<FrontSlot>>,
}

impl Paused<'_> {
    /// Every paused slot's stacks, in turn.
    pub(crate) fn for_each_stack(&mut self, mut f: impl FnMut(&mut FrontStack)) {
        for s in &self.slots {
            // SAFETY: the slot is paused and we hold the drain lock: its owner
            // cannot enter, no other drainer exists, and this borrow ends
            // before the next one begins.
            let mut st = unsafe { s.stacks.borrow_mut() };
            st.get().iter_mut().for_each(&mut f);
        }
    }

    /// Empty every stack into `out`, and forget the slots whose thread had
    /// exited before they were emptied, keeping their event counts in
    /// `kept` (the caller adds them to the allocator's own counters). A
    /// thread that exits after its slot was emptied may have freed pages
    /// into it meanwhile: the next drain takes them (and the slot).
    pub fn take_all(&mut self, out: &mut Vec<u64>, kept: &mut [u64; NR_VM_EVENTS]) {
        // Acquire: pairs with the Release store at thread exit, after the
        // owner's last operation: it adds nothing to the slot after this.
        let dead: Vec<*const FrontSlot> =
            self.slots.iter().filter(|s| s.orphaned.load(Ordering::Acquire)).map(Arc::as_ptr).collect();
        self.for_each_stack(|st| {
            out.extend(st.pages().iter().map(|&p| p as u64));
            st.len = 0;
        });
        if dead.is_empty() {
            return;
        }
        self.fronts.slots.lock().retain(|s| {
            let gone = dead.contains(&Arc::as_ptr(s));
            if gone {
                s.events.sum_into(kept);
            }
            !gone
        });
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        for s in &self.slots {
            s.resume();
        }
    }
}
