//! The thread-owned front cache: a few order-0 pages per pcp type, kept by each
//! thread for each allocator it uses, in front of the per-CPU lists. The owner
//! takes and returns pages with no atomic read-modify-write at all; a remote
//! drainer (`drain_all_pages`, isolation, `check_invariants`) can still empty it.
//!
//! # The protocol (an asymmetric Dekker handshake)
//!
//! Each slot has two words, `state` (written only by the owner thread: the
//! allocator's id between operations, `BUSY` during one) and `drain_req`
//! (written only by a drainer, who holds the allocator's drain lock, so there is
//! one at a time).
//!
//! ```text
//!   owner (every operation)                  drainer
//!   if state != id: bail   (relaxed load)     drain_req := true      (relaxed store)
//!   state := BUSY          (relaxed store)    membarrier(PRIVATE_EXPEDITED)
//!   compiler fence                            while state == BUSY (acquire load): yield
//!   if drain_req (acquire load):              ... the slot's stacks are the drainer's ...
//!       state := id (release); bail           drain_req := false     (release store)
//!   ... use the stacks ...
//!   state := id            (release store)
//! ```
//!
//! The first compare does three jobs on the inline order-0 paths, which reach
//! the thread's last slot without a lookup: it is this allocator's slot (ids
//! are unique; a placeholder slot, forever `BUSY`, stands for none), the
//! allocator lets that path use the cache (else it compares with a key no
//! state has), and the thread is not already inside an operation on it.
//!
//! This is the store-buffering pattern: each side stores its flag and then reads
//! the other's. The owner's side has only a compiler fence; the membarrier system
//! call makes every running thread of the process execute a full memory barrier,
//! which stands in for the missing fence on the owner's side at exactly the moment
//! the drainer needs it. Afterwards at least one side sees the other's store: either
//! the owner sees `drain_req` and backs off, or the drainer sees `BUSY` and waits
//! for the release store that ends the owner's operation. The release/acquire pairs
//! hand the stacks' contents across in both directions. The drainer never holds a
//! zone or pcp lock while it waits, and the owner never waits for the drainer, so
//! the handshake cannot deadlock.
//!
//! Without membarrier (old kernels, seccomp) the front cache is disabled and every
//! operation goes to the per-CPU lists. Under loom and Miri both sides use `SeqCst`
//! fences instead (the symmetric form of the same handshake, which is what the
//! membarrier provides), so the checkers run the cache with the same code; the
//! slot model is in `front::loom_tests`, whole-allocator models in `tests`.
//!
//! # The guards
//!
//! The protocol is owned by two RAII guards, so no caller writes it out:
//! [`FrontGuard`] (the owner's operation: `Owner::enter` .. drop) and [`Paused`]
//! (a drainer's hold on every slot: [`Fronts::pause_all`] .. drop, with the
//! allocator's drain lock held throughout). Only the guards hand out the stacks.
//! An owner's slot is reached only through [`Fronts::current`], which returns an
//! [`Owner`] that cannot leave its thread; `enter` refuses a nested operation on
//! the same thread (a signal handler interrupting one, say), so two guards never
//! alias one slot.
//!
//! Invariants: every pfn in a stack has `PCP` set with order 0 and the stack's type
//! in `private`, and belongs to zone `zone` (on node `nid`) of its stack; `len <= FRONT_CAP`. A slot
//! whose thread has exited is `orphaned`; the next `drain_all_pages` empties and
//! forgets it.

#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::{AtomicBool, AtomicU64, CellMut, Mutex, MutexGuard, Ordering, UnsafeCell};
use crate::types::MIGRATE_PCPTYPES;
use crate::vmevent::{EventCounters, VmEvent, NR_VM_EVENTS};
use alloc::sync::Arc;
use core::marker::PhantomData;

/// Pages per stack (three stacks per thread and allocator: at most 1.5 MiB of
/// pages, given back by any `drain_all_pages`). 128, the largest bulk size the
/// bulk benchmark (page_bench04_bulk) steps through, so a 128-page array
/// round trip is served by the thread's stack alone, as the kernel's
/// per-CPU list serves it there (its `high` is at least four batches: 252
/// pages on a zone of 1 GiB); at 64, half such an array went through the
/// per-CPU lists (figures: docs/results/, the fast-path file).
pub const FRONT_CAP: usize = 128;
/// How many allocations ahead `Config::prefetch_on_alloc` prefetches a
/// frame: far enough for the line to start its way before the caller writes
/// it, near enough that it is still in the cache then (page-fault1 touches
/// offset 0 of every page, which all fall in one L1 set). In page-fault1
/// with hugepage backing 2 and 4 ahead were fastest, 8 and 16 slower, and
/// all beat no prefetch (figures: docs/results/).
pub const PREFETCH_AHEAD: usize = 4;
/// Pages moved per refill from, or flush to, the per-CPU lists.
pub(crate) const FRONT_BATCH: usize = 32;

/// A slot's state during an operation (no allocator has id 0).
const BUSY: u64 = 0;
/// An inline key no slot's state equals (ids count up from 1).
pub const NEVER: u64 = u64::MAX;
/// The state of a slot whose thread has exited: no key equals it, and a
/// drainer does not wait for it (the C API's thread caches may still point
/// to the slot; see [`raw`]).
#[cfg_attr(not(any(loom, feature = "std")), allow(dead_code))] // set by the thread slots, which need std
const DEAD: u64 = u64::MAX - 1;

/// A stack key no pageblock word matches (a stack that never adopted a zone).
pub const NO_KEY: u16 = u16::MAX;

/// One stack of order-0 pages of one pcp type, all from one zone. `repr(C)`:
/// the C API's header-inline fast path reads it (see [`raw`]).
#[derive(Debug)]
#[repr(C)]
pub struct FrontStack {
    pub pfns: [u32; FRONT_CAP],
    pub len: u32,
    pub nid: u32,
    /// The pageblock word bits every page in the stack shares: its zone's
    /// index (high byte) and the stack's type with the isolate bit clear
    /// (low bits), as `zone::pb_key` makes them; `NO_KEY` until adopted. A
    /// freed page whose word has this key belongs here, so one compare
    /// checks zone, type and isolation.
    pub key: u16,
    /// The event an allocation from this stack counts (the zone's pgalloc_*).
    pub alloc_ev: VmEvent,
}

impl FrontStack {
    /// Take pages whose pageblock key is `key` (zone on node `nid`, counting
    /// `alloc_ev`) from now on (the stack is empty).
    #[inline]
    pub fn adopt(&mut self, key: u16, nid: u32, alloc_ev: VmEvent) {
        debug_assert_eq!(self.len, 0);
        self.nid = nid;
        self.key = key;
        self.alloc_ev = alloc_ev;
    }

    /// Take the hottest page, if any.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<u32> {
        let (len, empty) = self.len.overflowing_sub(1);
        if empty {
            return None;
        }
        debug_assert!((len as usize) < FRONT_CAP);
        // SAFETY: `len <= FRONT_CAP` always (the module's invariant: every
        // push checks it), so `len - 1` indexes the array.
        let p = unsafe { *self.pfns.get_unchecked(len as usize) };
        self.len = len;
        Some(p)
    }

    /// The page the stack will hand out [`PREFETCH_AHEAD`] pops from now
    /// (with fewer on it, a page it held before: a hint's target, never
    /// handed out for it).
    #[inline(always)]
    pub fn ahead(&self) -> u32 {
        let i = (self.len as usize).wrapping_sub(PREFETCH_AHEAD) % FRONT_CAP;
        // SAFETY: i < FRONT_CAP, the array's length.
        unsafe { *self.pfns.get_unchecked(i) }
    }

    /// The pages on the stack, coldest first.
    #[inline(always)]
    pub fn pages(&self) -> &[u32] {
        &self.pfns[..self.len as usize]
    }
}

/// Stacks per slot: one per pcp type, indexed by the type (by the low two
/// bits of a pageblock word on free), and one for HighAtomic's index that
/// never adopts a zone, so a free of such a page misses without a branch of
/// its own.
pub const NR_STACKS: usize = MIGRATE_PCPTYPES + 1;

/// The stacks of one slot.
pub type Stacks = [FrontStack; NR_STACKS];

/// Stack `t` of `stacks` (`t < NR_STACKS`), reached through branches on `t`
/// rather than an address computed from it. On the free paths `t` comes
/// from the freed page's descriptor, a load that depends on the pfn; with
/// the address computed from it, the stack's `len` load waits for that load
/// (and a multiply), which puts both on the pair's loop-carried chain. A
/// branch is predicted, so the `len` load starts at once.
#[inline(always)]
pub fn stack_by_branch(stacks: &mut Stacks, t: usize) -> &mut FrontStack {
    debug_assert!(t < NR_STACKS);
    let [s0, s1, s2, s3] = stacks;
    match t {
        0 => s0,
        1 => s1,
        2 => s2,
        _ => s3,
    }
}

/// A thread's front cache for one allocator. `repr(C)`: the C API's
/// header-inline fast path reaches the protocol words, stacks and counters
/// from the slot's address (see [`raw`]).
#[repr(C)]
pub struct FrontSlot {
    /// Written only by the owner thread: `id` between its operations,
    /// [`BUSY`] during one. Comparing it with the
    /// allocator's id checks at once that the thread's last slot is this
    /// allocator's and that the thread is not inside an operation on it.
    state: AtomicU64,
    drain_req: AtomicBool,
    /// The owner thread has exited: drain and forget.
    orphaned: AtomicBool,
    /// The allocator is gone: the thread may forget the slot.
    detached: AtomicBool,
    /// The allocator's id (0 in [`tls`]'s placeholder, which no allocator has).
    id: u64,
    stacks: UnsafeCell<Stacks>,
    /// Event counters written only by the owner (inside a guard).
    events: EventCounters,
}

// SAFETY: the stacks are reached only through a `FrontGuard` (the owner, between
// enter and exit) or a `Paused` (the one drainer, holding the drain lock); the
// protocol above makes those mutually exclusive and ordered. Everything else is
// atomic.
unsafe impl Sync for FrontSlot {}
// SAFETY: as above; the slot holds only integers and atomics.
unsafe impl Send for FrontSlot {}

impl FrontSlot {
    fn new(id: u64) -> Self {
        Self {
            id,
            state: AtomicU64::new(id),
            drain_req: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
            detached: AtomicBool::new(false),
            stacks: UnsafeCell::new(core::array::from_fn(|_| FrontStack {
                nid: 0,
                key: NO_KEY,
                alloc_ev: VmEvent::PgallocNormal,
                len: 0,
                pfns: [0; FRONT_CAP],
            })),
            events: EventCounters::default(),
        }
    }

    /// [`tls`]'s placeholder: id 0 and forever [`BUSY`], so nobody enters it.
    #[cfg(not(loom))]
    const fn placeholder() -> Self {
        const EMPTY: FrontStack =
            FrontStack { nid: 0, key: NO_KEY, alloc_ev: VmEvent::PgallocNormal, len: 0, pfns: [0; FRONT_CAP] };
        Self {
            id: 0,
            state: AtomicU64::new(BUSY),
            drain_req: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
            detached: AtomicBool::new(false),
            stacks: UnsafeCell::new_const([EMPTY; NR_STACKS]),
            events: EventCounters::new_const(),
        }
    }

    /// Drainer (holding the drain lock): take the slot from its owner.
    fn pause(&self) {
        self.drain_req.store(true, Ordering::Relaxed);
        heavy_fence();
        while self.state.load(Ordering::Acquire) == BUSY {
            crate::sync::spin_yield();
        }
    }

    /// Drainer: give the slot back.
    fn resume(&self) {
        self.drain_req.store(false, Ordering::Release);
    }
}

/// The calling thread's slot, as [`Fronts::current`] found it. Not `Send`: only
/// the owner thread may enter.
#[derive(Clone, Copy)]
pub struct Owner<'a> {
    slot: &'a FrontSlot,
    _not_send: PhantomData<*const ()>,
}

impl<'a> Owner<'a> {
    /// Begin an operation. None when a drainer holds the slot right now, or
    /// when this thread is already inside an operation on it.
    #[inline(always)]
    pub fn enter(self) -> Option<FrontGuard<'a>> {
        enter_keyed(self.slot, self.slot.id)
    }
}

/// Begin an operation on `slot` if its state is `key` (its allocator's id:
/// idle); otherwise None, changing nothing. The caller is the slot's owner
/// thread, or `slot` is one whose state can never be `key` (another
/// allocator's, the placeholder, or `key` is [`NEVER`]).
#[inline(always)]
fn enter_keyed(slot: &FrontSlot, key: u64) -> Option<FrontGuard<'_>> {
    // Only the owner writes `state`: BUSY is our own operation, interrupted
    // (a signal handler) or nesting; another id is another allocator's slot.
    let idle = slot.state.load(Ordering::Relaxed);
    if idle != key {
        return None;
    }
    slot.state.store(BUSY, Ordering::Relaxed);
    light_fence();
    // Acquire: pairs with the drainer's Release in `resume`: what it did
    // to the stacks is visible to us.
    if slot.drain_req.load(Ordering::Acquire) {
        slot.state.store(idle, Ordering::Release);
        return None;
    }
    // SAFETY: `state` is BUSY and no drainer holds the slot; a drainer
    // arriving now waits for it to change (the handshake), and this thread
    // cannot enter again until the guard drops. So the guard's access is
    // the only one.
    let stacks = unsafe { slot.stacks.borrow_mut() };
    Some(FrontGuard { slot, stacks, idle, _not_send: PhantomData })
}

/// The owner's operation on its slot: the stacks are its own until the drop.
pub struct FrontGuard<'a> {
    slot: &'a FrontSlot,
    stacks: CellMut<'a, Stacks>,
    /// The slot's idle state, restored by the drop.
    idle: u64,
    _not_send: PhantomData<*const ()>,
}

impl FrontGuard<'_> {
    /// The slot's stacks.
    #[inline(always)]
    pub fn stacks(&mut self) -> &mut Stacks {
        self.stacks.get()
    }

    /// The slot's stacks and its event counters (this guard is their only
    /// writer), borrowed together.
    #[inline(always)]
    pub fn split(&mut self) -> (&mut Stacks, &EventCounters) {
        let slot = self.slot;
        (self.stacks.get(), &slot.events)
    }
}

impl Drop for FrontGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: pairs with the drainer's Acquire load of `state`: our
        // changes to the stacks are visible to it.
        self.slot.state.store(self.idle, Ordering::Release);
    }
}

/// Every thread's front cache for one allocator, and the lock that makes
/// drainers take turns.
pub struct Fronts {
    /// The allocator's id (the key of this thread's slot in its TLS).
    id: u64,
    /// What the inline order-0 allocation and free compare a slot's state
    /// with: `id` where they may use the front cache, [`NEVER`] where not.
    inline_keys: (u64, u64),
    slots: Mutex<Vec<Arc<FrontSlot>>>,
    drain_lock: Mutex<()>,
}

impl Fronts {
    /// The registry of allocator `id` (at least 1), whose inline order-0
    /// allocation and free may use the front cache as `inline` says.
    pub(crate) fn new(id: u64, inline: (bool, bool)) -> Self {
        debug_assert_ne!(id, 0, "0 is the placeholder slot's id");
        let key = |on: bool| if on { id } else { NEVER };
        Self {
            id,
            inline_keys: (key(inline.0), key(inline.1)),
            slots: Mutex::new(Vec::new()),
            drain_lock: Mutex::new(()),
        }
    }

    /// Begin an operation on the thread's last slot if it is this
    /// allocator's, idle, and the inline order-0 allocation may use it; None
    /// sends the caller to the full path (which registers, looks up, refills
    /// and counts the nesting). A thread-local load, and the handshake with
    /// one compare for the checks.
    #[inline(always)]
    pub(crate) fn enter_inline_alloc(&self) -> Option<FrontGuard<'_>> {
        self.enter_last(self.inline_keys.0)
    }

    /// The same for the inline order-0 free.
    #[inline(always)]
    pub(crate) fn enter_inline_free(&self) -> Option<FrontGuard<'_>> {
        self.enter_last(self.inline_keys.1)
    }

    /// The keys the inline order-0 allocation and free compare a slot's
    /// state with (the allocator's id, or [`NEVER`] where that path is off).
    #[cfg(not(loom))]
    pub fn inline_keys(&self) -> (u64, u64) {
        self.inline_keys
    }

    /// The calling thread's slot, registered on first use, held for as long
    /// as the caller keeps it (the C API's thread caches; see [`raw`]).
    #[cfg(not(loom))]
    pub fn current_shared(&self) -> Option<Arc<FrontSlot>> {
        tls::current_shared(self.id, || self.register())
    }

    #[inline(always)]
    fn enter_last(&self, key: u64) -> Option<FrontGuard<'_>> {
        #[cfg(not(loom))]
        // SAFETY: the slot is alive while we look (the placeholder, or a slot
        // this thread's SLOTS holds); `enter_keyed` keeps it only when its
        // state is our id, that is when it is our own registered slot, which
        // lives as long as `self` (as in `current`).
        return enter_keyed(unsafe { tls::last() }, key);
        #[cfg(loom)]
        return self.current().and_then(|o| enter_keyed(o.slot, key));
    }

    /// The calling thread's slot, registered on first use. None while the
    /// thread is exiting.
    #[inline(always)]
    pub fn current(&self) -> Option<Owner<'_>> {
        // SAFETY: the reference borrows `self`, so it cannot outlive the
        // registry, which holds every slot it registered until that slot's
        // thread has exited (see `tls::current`).
        let slot = unsafe { tls::current(self.id, || self.register()) }?;
        Some(Owner { slot, _not_send: PhantomData })
    }

    #[cold]
    fn register(&self) -> Option<Arc<FrontSlot>> {
        let s = Arc::new(FrontSlot::new(self.id));
        self.slots.lock().push(s.clone());
        Some(s)
    }

    /// Take every slot from its owner, holding the drain lock, until the
    /// returned value drops (the drainer's side of the handshake).
    pub fn pause_all(&self) -> Paused<'_> {
        let drain = self.drain_lock.lock();
        let slots: Vec<_> = self.slots.lock().clone();
        for s in &slots {
            s.pause();
        }
        Paused { fronts: self, _drain: drain, slots }
    }

    /// Threads registered so far (tests: the no-lock paths must register none).
    #[cfg(any(test, feature = "testing"))]
    pub fn nr_slots(&self) -> usize {
        self.slots.lock().len()
    }

    /// Serialise with drainers without pausing anyone (callers that drain
    /// other things under the same lock).
    pub(crate) fn drain_lock(&self) -> MutexGuard<'_, ()> {
        self.drain_lock.lock()
    }

    /// Add every slot's event counters into `sum` (lock-free reads).
    pub fn sum_events(&self, sum: &mut [u64; NR_VM_EVENTS]) {
        for s in self.slots.lock().iter() {
            s.events.sum_into(sum);
        }
    }
}

impl Drop for Fronts {
    fn drop(&mut self) {
        for s in self.slots.lock().iter() {
            s.detached.store(true, Ordering::Release);
        }
    }
}

/// Empty the calling thread's own slot into `out` (`drain_local_pages`).
pub(crate) fn take_own(owner: Owner<'_>, out: &mut Vec<u64>) {
    if let Some(mut g) = owner.enter() {
        for st in g.stacks().iter_mut() {
            out.extend(st.pages().iter().map(|&p| p as u64));
            st.len = 0;
        }
    }
}

/// The owner's half of the handshake's fence.
#[inline(always)]
fn light_fence() {
    #[cfg(any(loom, miri))]
    crate::sync::fence(Ordering::SeqCst);
    #[cfg(not(any(loom, miri)))]
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// The drainer's half: a barrier on every running thread of the process.
fn heavy_fence() {
    #[cfg(any(loom, miri))]
    crate::sync::fence(Ordering::SeqCst);
    #[cfg(not(any(loom, miri)))]
    {
        core::sync::atomic::fence(Ordering::SeqCst);
        membarrier::expedited();
    }
}

/// Whether the front cache can run here: membarrier is available (or the
/// checkers' symmetric fences stand in for it). Never without std: the
/// cache lives in thread-local storage.
pub fn available() -> bool {
    #[cfg(any(loom, miri))]
    return true;
    #[cfg(all(not(any(loom, miri)), feature = "std"))]
    return membarrier::available();
    #[cfg(all(not(any(loom, miri)), not(feature = "std")))]
    return false;
}

#[cfg(all(not(any(loom, miri)), feature = "std"))]
mod membarrier;
/// Without std there is no front cache (`available` is false), so no
/// drainer ever needs the barrier.
#[cfg(all(not(any(loom, miri)), not(feature = "std")))]
mod membarrier {
    pub(super) fn expedited() {
        unreachable!("no front cache without std");
    }
}

mod paused;
pub use paused::Paused;
#[cfg(not(loom))]
pub mod raw;

#[cfg(any(loom, feature = "std"))]
mod tls;
#[cfg(not(any(loom, feature = "std")))]
#[path = "tls_none.rs"]
mod tls;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// An owner pushing pages races a drainer emptying every slot: every page
    /// ends up exactly once either in the slot or with the drainer, and the
    /// stacks are never touched by both at once (loom's cell tracking covers
    /// the guards' whole lives).
    #[test]
    fn owner_ops_race_a_drain() {
        loom::model(|| {
            let fronts = loom::sync::Arc::new(Fronts::new(1, (true, true)));
            let f2 = fronts.clone();
            let owner = loom::thread::spawn(move || {
                let mut pushed = 0u32;
                for pfn in 1..=2u32 {
                    if let Some(mut g) = f2.current().and_then(Owner::enter) {
                        let s = &mut g.stacks()[0];
                        s.pfns[s.len as usize] = pfn;
                        s.len += 1;
                        pushed += 1;
                    }
                }
                let mut left = Vec::new();
                if let Some(o) = f2.current() {
                    take_own(o, &mut left);
                }
                (pushed, left.len() as u32)
            });
            let mut drained = Vec::new();
            let mut kept = [0; NR_VM_EVENTS];
            fronts.pause_all().take_all(&mut drained, &mut kept);
            let (pushed, left) = owner.join().unwrap();
            let mut rest = Vec::new();
            fronts.pause_all().take_all(&mut rest, &mut kept);
            assert_eq!(drained.len() as u32 + left + rest.len() as u32, pushed);
        });
    }
}
