//! The thread-owned front cache: a few order-0 pages per pcp type, kept by each
//! thread for each allocator it uses, in front of the per-CPU lists. The owner
//! takes and returns pages with no atomic read-modify-write at all; a remote
//! drainer (`drain_all_pages`, isolation, `check_invariants`) can still empty it.
//!
//! # The protocol (an asymmetric Dekker handshake)
//!
//! Each slot has two flags, `active` (written only by the owner thread) and
//! `drain_req` (written only by a drainer, who holds the allocator's drain lock,
//! so there is one at a time).
//!
//! ```text
//!   owner (every operation)                 drainer
//!   active := true        (relaxed store)    drain_req := true      (relaxed store)
//!   compiler fence                           membarrier(PRIVATE_EXPEDITED)
//!   if drain_req (acquire load):             while active (acquire load): yield
//!       active := false (release); bail      ... the slot's stacks are the drainer's ...
//!   ... use the stacks ...                   drain_req := false     (release store)
//!   active := false       (release store)
//! ```
//!
//! This is the store-buffering pattern: each side stores its flag and then reads
//! the other's. The owner's side has only a compiler fence; the membarrier system
//! call makes every running thread of the process execute a full memory barrier,
//! which stands in for the missing fence on the owner's side at exactly the moment
//! the drainer needs it. Afterwards at least one side sees the other's store: either
//! the owner sees `drain_req` and backs off, or the drainer sees `active` and waits
//! for the release store that ends the owner's operation. The release/acquire pairs
//! hand the stacks' contents across in both directions. The drainer never holds a
//! zone or pcp lock while it waits, and the owner never waits for the drainer, so
//! the handshake cannot deadlock.
//!
//! Without membarrier (old kernels, seccomp, Miri) the front cache is disabled and
//! every operation goes to the per-CPU lists. Under loom both sides use `SeqCst`
//! fences, which is what the membarrier provides; the model is in `front::loom_tests`.
//!
//! Invariants: every pfn in a stack has `PCP` set with order 0 and the stack's type
//! in `private`, and belongs to zone `zone` (on node `nid`) of its stack; `len <= FRONT_CAP`. A slot
//! whose thread has exited is `orphaned`; the next `drain_all_pages` empties and
//! forgets it.

use crate::stats::events::{EventCounters, VmEvent};
use crate::sync::{AtomicBool, Ordering, UnsafeCell};
use crate::types::MIGRATE_PCPTYPES;
use crate::zone::Zone;

/// Pages per stack (three stacks per thread and allocator: at most 768 KiB of pages).
pub(crate) const FRONT_CAP: usize = 64;
/// Pages moved per refill from, or flush to, the per-CPU lists.
pub(crate) const FRONT_BATCH: usize = 32;

/// One stack of order-0 pages of one pcp type, all from one node.
#[derive(Debug)]
pub(crate) struct FrontStack {
    pub(crate) nid: u32,
    /// The zone every page in the stack belongs to (index into the allocator's zones).
    pub(crate) zone: u32,
    /// The event an allocation from this stack counts (the zone's pgalloc_*).
    pub(crate) alloc_ev: VmEvent,
    pub(crate) len: u32,
    pub(crate) pfns: [u32; FRONT_CAP],
}

impl FrontStack {
    /// Take pages of zone `z` from now on (the stack is empty).
    #[inline]
    pub(crate) fn adopt(&mut self, z: &Zone) {
        debug_assert_eq!(self.len, 0);
        self.nid = z.nid;
        self.zone = z.idx as u32;
        self.alloc_ev = crate::fastpath::alloc_event(z);
    }
}

/// A thread's front cache for one allocator.
pub(crate) struct FrontSlot {
    active: AtomicBool,
    drain_req: AtomicBool,
    /// The owner thread has exited: drain and forget.
    pub(crate) orphaned: AtomicBool,
    /// The allocator is gone: the thread may forget the slot.
    pub(crate) detached: AtomicBool,
    stacks: UnsafeCell<[FrontStack; MIGRATE_PCPTYPES]>,
    /// Event counters written only by the owner (inside enter/exit).
    pub(crate) events: EventCounters,
}

// SAFETY: the stacks are reached only by the owner between `enter` and `exit`, or
// by the one drainer between `pause` and `resume`; the protocol above makes those
// mutually exclusive and ordered. Everything else is atomic.
unsafe impl Sync for FrontSlot {}
// SAFETY: as above; the slot holds only integers and atomics.
unsafe impl Send for FrontSlot {}

impl FrontSlot {
    pub(crate) fn new() -> Self {
        Self {
            active: AtomicBool::new(false),
            drain_req: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
            detached: AtomicBool::new(false),
            stacks: UnsafeCell::new(std::array::from_fn(|_| FrontStack {
                nid: 0,
                zone: 0,
                alloc_ev: VmEvent::PgallocNormal,
                len: 0,
                pfns: [0; FRONT_CAP],
            })),
            events: EventCounters::default(),
        }
    }

    /// Owner: begin an operation. False when a drainer owns the slot right now.
    #[inline(always)]
    pub(crate) fn enter(&self) -> bool {
        self.active.store(true, Ordering::Relaxed);
        light_fence();
        if self.drain_req.load(Ordering::Acquire) {
            self.active.store(false, Ordering::Release);
            return false;
        }
        true
    }

    /// Owner: end the operation begun by a successful `enter`.
    #[inline(always)]
    pub(crate) fn exit(&self) {
        self.active.store(false, Ordering::Release);
    }

    /// The stacks, to the owner inside enter/exit or the drainer inside pause/resume.
    ///
    /// # Safety
    /// The caller is the owner thread between a successful `enter` and `exit`, or
    /// the drainer between `pause` and `resume`, and does not call this again
    /// while the reference lives.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn stacks(&self) -> &mut [FrontStack; MIGRATE_PCPTYPES] {
        // SAFETY: the caller holds the slot by the protocol (see the module doc),
        // so no other reference to the stacks exists.
        unsafe { &mut *self.stacks.get_mut_ptr() }
    }

    /// Empty every stack into `out`.
    ///
    /// # Safety
    /// As for [`FrontSlot::stacks`]: the caller holds the slot (owner inside
    /// enter/exit, or drainer inside pause/resume).
    pub(crate) unsafe fn take_all(&self, out: &mut Vec<u64>) {
        // SAFETY: the caller holds the slot (this function's contract).
        for st in unsafe { self.stacks() }.iter_mut() {
            out.extend(st.pfns[..st.len as usize].iter().map(|&p| p as u64));
            st.len = 0;
        }
    }

    /// Drainer (holding the allocator's drain lock): take the slot from its owner.
    pub(crate) fn pause(&self) {
        self.drain_req.store(true, Ordering::Relaxed);
        heavy_fence();
        while self.active.load(Ordering::Acquire) {
            crate::sync::spin_yield();
        }
    }

    /// Drainer: give the slot back.
    pub(crate) fn resume(&self) {
        self.drain_req.store(false, Ordering::Release);
    }
}

/// The owner's half of the handshake's fence.
#[inline(always)]
fn light_fence() {
    #[cfg(loom)]
    crate::sync::fence(Ordering::SeqCst);
    #[cfg(not(loom))]
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// The drainer's half: a barrier on every running thread of the process.
fn heavy_fence() {
    #[cfg(loom)]
    crate::sync::fence(Ordering::SeqCst);
    #[cfg(not(loom))]
    {
        std::sync::atomic::fence(Ordering::SeqCst);
        membarrier::expedited();
    }
}

#[cfg(not(loom))]
pub(crate) mod membarrier {
    //! `membarrier(2)` with MEMBARRIER_CMD_PRIVATE_EXPEDITED.
    #![cfg_attr(miri, allow(dead_code))]
    use std::sync::OnceLock;

    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    static AVAILABLE: OnceLock<bool> = OnceLock::new();

    /// Register this process for expedited private barriers; false if the kernel
    /// cannot (then the front cache stays off).
    pub(crate) fn available() -> bool {
        *AVAILABLE.get_or_init(|| {
            #[cfg(miri)]
            {
                false
            }
            #[cfg(not(miri))]
            {
                // SAFETY: membarrier takes integer arguments and touches no memory.
                let mask = unsafe { libc::syscall(libc::SYS_membarrier, CMD_QUERY, 0, 0) };
                if mask < 0 || mask & CMD_PRIVATE_EXPEDITED == 0 {
                    return false;
                }
                // SAFETY: as above.
                unsafe { libc::syscall(libc::SYS_membarrier, CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
            }
        })
    }

    /// A full barrier on every running thread of this process.
    pub(crate) fn expedited() {
        #[cfg(not(miri))]
        {
            debug_assert!(available());
            // SAFETY: as in `available`; registration happened before any slot existed.
            let r = unsafe { libc::syscall(libc::SYS_membarrier, CMD_PRIVATE_EXPEDITED, 0, 0) };
            assert_eq!(r, 0, "membarrier failed after registration");
        }
    }
}

#[cfg(not(loom))]
pub(crate) mod tls {
    //! Each thread's slots, one per allocator it has used, and a one-entry cache
    //! of the last one so the fast path is a thread-local load and a compare.
    use super::FrontSlot;
    use std::cell::{Cell, RefCell};
    use std::sync::Arc;

    struct ThreadSlots(Vec<(u64, Arc<FrontSlot>)>);

    impl Drop for ThreadSlots {
        fn drop(&mut self) {
            let _ = LAST.try_with(|c| c.set((0, std::ptr::null())));
            for (_, s) in self.0.drain(..) {
                s.orphaned.store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }

    thread_local! {
        static LAST: Cell<(u64, *const FrontSlot)> = const { Cell::new((0, std::ptr::null())) };
        static SLOTS: RefCell<ThreadSlots> = const { RefCell::new(ThreadSlots(Vec::new())) };
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
    pub(crate) unsafe fn current<'a>(
        id: u64,
        register: impl FnOnce() -> Option<Arc<FrontSlot>>,
    ) -> Option<&'a FrontSlot> {
        let (last, ptr) = LAST.try_with(|c| c.get()).ok()?;
        let ptr = if last == id { ptr } else { lookup(id, register)? };
        // SAFETY: the pointer is LAST's (or `lookup` just put it there): it points
        // into an Arc held by this thread's SLOTS, and by the allocator's registry
        // for `'a` (this function's contract).
        Some(unsafe { &*ptr })
    }

    #[cold]
    #[inline(never)]
    fn lookup(id: u64, register: impl FnOnce() -> Option<Arc<FrontSlot>>) -> Option<*const FrontSlot> {
        SLOTS
            .try_with(|s| {
                let mut s = s.borrow_mut();
                LAST.with(|c| c.set((0, std::ptr::null())));
                s.0.retain(|(_, slot)| !slot.detached.load(std::sync::atomic::Ordering::Acquire));
                let p = match s.0.iter().find(|(i, _)| *i == id) {
                    Some((_, slot)) => Arc::as_ptr(slot),
                    None => {
                        let slot = register()?;
                        let p = Arc::as_ptr(&slot);
                        s.0.push((id, slot));
                        p
                    }
                };
                LAST.with(|c| c.set((id, p)));
                Some(p)
            })
            .ok()
            .flatten()
    }
}

#[cfg(loom)]
pub(crate) mod tls {
    //! Under loom the front cache is off: no thread ever has a slot.
    use super::FrontSlot;
    use std::sync::Arc;

    /// # Safety
    /// None to uphold; the signature matches the real one.
    pub(crate) unsafe fn current<'a>(
        _id: u64,
        _register: impl FnOnce() -> Option<Arc<FrontSlot>>,
    ) -> Option<&'a FrontSlot> {
        None
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// An owner pushing and popping pages races a drainer emptying the slot:
    /// every page ends up exactly once either in the slot or with the drainer,
    /// and the stacks are never touched by both at once (loom's UnsafeCell checks).
    #[test]
    fn owner_ops_race_a_drain() {
        loom::model(|| {
            let slot = Arc::new(FrontSlot::new());
            let s2 = slot.clone();
            let owner = loom::thread::spawn(move || {
                let mut pushed = 0u32;
                for pfn in 1..=2u32 {
                    if s2.enter() {
                        // SAFETY: entered on the owner thread.
                        let st = unsafe { s2.stacks() };
                        let s = &mut st[0];
                        s.pfns[s.len as usize] = pfn;
                        s.len += 1;
                        s2.exit();
                        pushed += 1;
                    }
                }
                pushed
            });
            slot.pause();
            // SAFETY: paused: the drainer holds the slot.
            let drained = unsafe { slot.stacks() }[0].len;
            // SAFETY: as above.
            let st = unsafe { slot.stacks() };
            st[0].len = 0;
            slot.resume();
            let pushed = owner.join().unwrap();
            assert!(slot.enter());
            // SAFETY: entered; the owner thread has finished.
            let left = unsafe { slot.stacks() }[0].len;
            slot.exit();
            assert_eq!(drained + left, pushed);
        });
    }
}
