//! The synchronisation shim: every atomic and lock the concurrent protocols use
//! comes from here, so the same code runs under [loom] with `--cfg loom`.
//!
//! Two families live here:
//! - protocol atomics ([`AtomicU32`], [`AtomicU64`], [`AtomicBool`], [`fence`]):
//!   the words whose orderings carry a protocol (page lock bits, pcp ownership,
//!   seqcounts). Under loom they are loom's, so loom explores their interleavings.
//! - [`LockedU32`]: a cell that is only ever read or written while its owner holds
//!   a lock (descriptor links, the order/private word). It is a relaxed atomic so
//!   that shared references stay sound without `unsafe`; under loom it stays a
//!   plain core atomic because the lock that protects it is what loom models.
//!
//! Locks: [`Mutex`] and [`RwLock`] (parking_lot's) for everything a signal
//! handler never touches, and [`FutexMutex`] for the zone and per-CPU list
//! locks, which the no-lock paths try-lock and release from signal handlers
//! (its unlock takes no other lock; see its module `futex`).
//!
//! [loom]: https://docs.rs/loom

#[cfg(not(loom))]
pub use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

pub use core::sync::atomic::Ordering;

/// The loom models' shared pointer (loom's, so that it models the drops;
/// the library itself shares with `std`'s).
#[cfg(loom)]
pub use loom::sync::Arc;

/// A mutex with `lock` and `try_lock`: parking_lot's with std, a spin lock
/// without (a kernel's), loom's under loom.
#[cfg(all(not(loom), feature = "std"))]
pub type Mutex<T> = parking_lot::Mutex<T>;
#[cfg(all(not(loom), feature = "std"))]
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(not(feature = "std"))]
pub type Mutex<T> = spin::Mutex<T>;
#[cfg(not(feature = "std"))]
pub type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;

/// A reader-writer lock with `read` and `write`, as [`Mutex`].
#[cfg(all(not(loom), feature = "std"))]
pub type RwLock<T> = parking_lot::RwLock<T>;
#[cfg(not(feature = "std"))]
pub type RwLock<T> = spin::RwLock<T>;

#[cfg(loom)]
pub use loom_mutex::{Mutex, MutexGuard, RwLock};

#[cfg(all(not(loom), feature = "std", target_os = "linux"))]
mod futex;
/// The lock of everything the no-lock paths may take from a signal handler
/// (zone locks, per-CPU list locks): a futex-word mutex whose unlock is
/// async-signal-safe on Linux (the `futex` module's doc), parking_lot's
/// elsewhere, a spin lock without std, loom's under loom.
#[cfg(all(not(loom), feature = "std", target_os = "linux"))]
pub use futex::{FutexGuard, FutexMutex};
#[cfg(all(not(loom), feature = "std", not(target_os = "linux")))]
pub type FutexMutex<T> = parking_lot::Mutex<T>;
#[cfg(all(not(loom), feature = "std", not(target_os = "linux")))]
pub(crate) type FutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(not(feature = "std"))]
pub type FutexMutex<T> = spin::Mutex<T>;
#[cfg(not(feature = "std"))]
pub(crate) type FutexGuard<'a, T> = spin::MutexGuard<'a, T>;
#[cfg(loom)]
pub use loom_mutex::{Mutex as FutexMutex, MutexGuard as FutexGuard};

#[cfg(loom)]
mod loom_mutex {
    /// loom's mutex with parking_lot's signatures (no poisoning).
    #[derive(Debug)]
    pub struct Mutex<T>(loom::sync::Mutex<T>);
    pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
    impl<T> Mutex<T> {
        pub fn new(v: T) -> Self {
            Self(loom::sync::Mutex::new(v))
        }
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok()
        }
    }

    /// loom's reader-writer lock with parking_lot's signatures.
    #[derive(Debug)]
    pub struct RwLock<T>(loom::sync::RwLock<T>);
    impl<T> RwLock<T> {
        pub fn new(v: T) -> Self {
            Self(loom::sync::RwLock::new(v))
        }
        pub fn read(&self) -> loom::sync::RwLockReadGuard<'_, T> {
            self.0.read().unwrap()
        }
        pub fn write(&self) -> loom::sync::RwLockWriteGuard<'_, T> {
            self.0.write().unwrap()
        }
    }
}

/// Thread parking for the page wait queues (loom's threads under loom, which
/// has no timed park: timed waits are not modelled there).
pub mod thread {
    #[cfg(not(feature = "std"))]
    pub use crate::platform::spin_thread::{current, park, park_timeout, Thread};
    #[cfg(loom)]
    pub use loom::thread::{current, park, Thread};
    #[cfg(all(not(loom), feature = "std"))]
    pub use std::thread::{current, park, park_timeout, Thread};
}

/// Yield inside a spin loop (loom needs to be told, or it explores forever).
#[inline]
pub fn spin_yield() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    crate::platform::relax();
}

/// A `u32` owned by whoever holds the lock that protects it.
///
/// All accesses are `Relaxed`: the lock's acquire/release orders them. Never use
/// it for a word that is read outside its lock and relied upon for ordering.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct LockedU32(core::sync::atomic::AtomicU32);

impl LockedU32 {
    #[inline]
    #[cfg_attr(not(loom), allow(dead_code))]
    pub const fn new(v: u32) -> Self {
        Self(core::sync::atomic::AtomicU32::new(v))
    }
    #[inline(always)]
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
    #[inline(always)]
    pub fn set(&self, v: u32) {
        self.0.store(v, Ordering::Relaxed)
    }
}

/// A setting flag read with relaxed loads and flipped at any time: no data is
/// published through it (readers act on whichever value they see), so loom
/// need not watch it.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct RelaxedFlag(core::sync::atomic::AtomicBool);

impl RelaxedFlag {
    pub const fn new(v: bool) -> Self {
        Self(core::sync::atomic::AtomicBool::new(v))
    }
    #[inline(always)]
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    #[inline(always)]
    pub fn set(&self, v: bool) {
        self.0.store(v, Ordering::Relaxed)
    }
}

/// A counter written only by the holder of one lock and read lock-free by anyone.
///
/// The writer does a load and a store (no read-modify-write: it already has
/// exclusion); readers may see a value a moment old, never a torn one.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct LockedCounter(core::sync::atomic::AtomicU64);

impl LockedCounter {
    #[inline]
    pub const fn new(v: u64) -> Self {
        Self(core::sync::atomic::AtomicU64::new(v))
    }
    /// Lock-free read; may be stale.
    #[inline(always)]
    pub fn get_racy(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    /// Caller holds the protecting lock.
    #[inline(always)]
    pub fn add_locked(&self, d: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(d), Ordering::Relaxed)
    }
    /// Caller holds the protecting lock.
    #[inline(always)]
    pub(crate) fn set_locked(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed)
    }
    /// Caller holds the protecting lock.
    #[inline(always)]
    pub(crate) fn sub_locked(&self, d: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_sub(d), Ordering::Relaxed)
    }
}

/// Store `v` in a word whose racing writers are all read-modify-writes
/// that leave it as they found it or fail (an owned block's flags word:
/// see `Core::free_owned`). A plain store everywhere but under loom, whose
/// model lets a plain store land between the read and the write of a
/// racing read-modify-write, which neither the hardware nor the C++ model
/// allows (tokio-rs/loom#254, open): there a swap, which it models as the
/// atomic step it is.
#[inline(always)]
pub fn store_among_rmws(a: &AtomicU32, v: u32, o: Ordering) {
    #[cfg(loom)]
    a.swap(v, o);
    #[cfg(not(loom))]
    a.store(v, o);
}

/// An `UnsafeCell` that loom can watch for unsynchronised access.
#[derive(Debug)]
#[repr(transparent)]
pub struct UnsafeCell<T>(#[cfg(not(loom))] core::cell::UnsafeCell<T>, #[cfg(loom)] loom::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    pub fn new(v: T) -> Self {
        #[cfg(not(loom))]
        return Self(core::cell::UnsafeCell::new(v));
        #[cfg(loom)]
        return Self(loom::cell::UnsafeCell::new(v));
    }

    /// [`UnsafeCell::new`] in a constant (statics outside loom).
    #[cfg(not(loom))]
    pub(crate) const fn new_const(v: T) -> Self {
        Self(core::cell::UnsafeCell::new(v))
    }

    /// Exclusive access to the contents for as long as the returned value
    /// lives. Under loom the whole life of the [`CellMut`] counts as one
    /// mutable access, so loom fails a model in which any other access to the
    /// cell overlaps it (no raw pointer escapes its tracking).
    ///
    /// # Safety
    /// No other access to the contents (through this cell) may happen while
    /// the returned value lives; the caller's protocol must guarantee it.
    #[inline(always)]
    pub unsafe fn borrow_mut(&self) -> CellMut<'_, T> {
        #[cfg(not(loom))]
        return CellMut { ptr: self.0.get(), _life: core::marker::PhantomData };
        #[cfg(loom)]
        return CellMut { ptr: self.0.get_mut(), _life: core::marker::PhantomData };
    }
}

/// An exclusive borrow of an [`UnsafeCell`]'s contents (see
/// [`UnsafeCell::borrow_mut`]); `get` hands out `&mut` tied to this value.
pub struct CellMut<'a, T> {
    #[cfg(not(loom))]
    ptr: *mut T,
    #[cfg(loom)]
    ptr: loom::cell::MutPtr<T>,
    _life: core::marker::PhantomData<&'a mut T>,
}

impl<T> CellMut<'_, T> {
    /// The contents.
    #[inline(always)]
    pub fn get(&mut self) -> &mut T {
        #[cfg(not(loom))]
        // SAFETY: `borrow_mut`'s caller guaranteed exclusive access while this
        // value lives, and the returned borrow cannot outlive it.
        return unsafe { &mut *self.ptr };
        #[cfg(loom)]
        // SAFETY: as above; loom tracks the access for our whole life.
        return unsafe { self.ptr.deref() };
    }
}

/// Make parking_lot's global parking table exist now. parking_lot creates it
/// lazily, allocating, in the first park or unpark of the process; an unlock
/// that finds waiters unparks them. The no-lock paths may release a zone or
/// per-CPU lock others wait on, and must never allocate: so every allocator
/// calls this once when it is built.
pub(crate) fn prepare_parking() {
    // Not under loom (its locks are its own) nor Miri (parking_lot_core's
    // word lock casts integers to pointers, which strict provenance refuses;
    // Miri runs no signal handler that would need the table ready).
    #[cfg(all(not(any(loom, miri)), feature = "std"))]
    {
        static KEY: u8 = 0;
        // SAFETY: the key is the address of a static of ours that nothing
        // parks on, so unparking it wakes nobody; the call only creates the
        // table if it does not exist yet.
        unsafe {
            parking_lot_core::unpark_all(&KEY as *const u8 as usize, parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }
}
