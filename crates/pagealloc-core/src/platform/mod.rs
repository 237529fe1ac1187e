//! What the operating system supplies to the core: the current CPU, the
//! number of CPU slots, a way to wait (yield or spin) and a monotonic clock.
//! The locks come from the `sync` shim (parking_lot's and futexes with
//! `std`, spin locks without); the front cache needs thread-local storage
//! and `membarrier`, so without `std` it is off and order-0 requests go to
//! the per-CPU lists.
//!
//! With the `std` feature (the default) the platform is Linux through
//! libc and std. Without it, the program that links the core names its
//! [`Platform`] once with [`set_platform!`](crate::set_platform): the macro
//! defines the functions the core calls, so each call is a direct call
//! (inlined across crates with LTO), not an indirect one, and the fast paths
//! stay monomorphic. The `critical-section` crate binds its implementation
//! the same way.

#[cfg(feature = "std")]
pub mod linux;

/// Whether this build has the `std` feature (Linux through std and libc)
/// rather than a platform from [`set_platform!`](crate::set_platform).
pub fn built_with_std() -> bool {
    cfg!(feature = "std")
}

/// A platform the core runs on. Every method may be called from any context
/// the allocator is called from, concurrently, and must not allocate.
pub trait Platform {
    /// The CPU the caller runs on. A hint: it may be stale by the time it is
    /// used (the per-CPU lists are locked), but must be below
    /// [`possible_cpus`](Platform::possible_cpus) for per-CPU state to be
    /// spread well.
    fn current_cpu() -> u32;
    /// How many CPU slots per-CPU tables need.
    fn possible_cpus() -> usize;
    /// Called in every wait loop (a contended lock, a locked page): yield
    /// the CPU, or spin (`core::hint::spin_loop`) where nothing else can run.
    fn relax();
    /// A monotonic clock in nanoseconds (for lock statistics, per-CPU list
    /// decay and page-lock deadlines); a constant is allowed where there is
    /// no clock, at the cost of those features.
    fn now_ns() -> u64;
}

/// Name the platform of a `no_std` build, once, in the program that links
/// the core (a kernel, or a test):
///
/// ```ignore
/// struct Kernel;
/// impl pagealloc_core::Platform for Kernel {
///     fn current_cpu() -> u32 { arch::cpu_id() }
///     fn possible_cpus() -> usize { arch::nr_cpus() }
///     fn relax() { core::hint::spin_loop() }
///     fn now_ns() -> u64 { arch::monotonic_ns() }
/// }
/// pagealloc_core::set_platform!(Kernel);
/// ```
#[macro_export]
macro_rules! set_platform {
    ($platform:ty) => {
        #[no_mangle]
        fn __pagealloc_platform_current_cpu() -> u32 {
            <$platform as $crate::Platform>::current_cpu()
        }
        #[no_mangle]
        fn __pagealloc_platform_possible_cpus() -> usize {
            <$platform as $crate::Platform>::possible_cpus()
        }
        #[no_mangle]
        fn __pagealloc_platform_relax() {
            <$platform as $crate::Platform>::relax()
        }
        #[no_mangle]
        fn __pagealloc_platform_now_ns() -> u64 {
            <$platform as $crate::Platform>::now_ns()
        }
    };
}

#[cfg(not(feature = "std"))]
extern "Rust" {
    fn __pagealloc_platform_current_cpu() -> u32;
    fn __pagealloc_platform_possible_cpus() -> usize;
    fn __pagealloc_platform_relax();
    fn __pagealloc_platform_now_ns() -> u64;
}

/// The CPU the caller runs on (see [`Platform::current_cpu`]).
#[inline(always)]
pub fn current_cpu() -> u32 {
    #[cfg(feature = "std")]
    return linux::linux_current_cpu();
    // SAFETY: `set_platform!` defines this symbol with this signature; it
    // has no preconditions.
    #[cfg(not(feature = "std"))]
    return unsafe { __pagealloc_platform_current_cpu() };
}

/// CPU slots per-CPU tables need (see [`Platform::possible_cpus`]).
pub fn possible_cpus() -> usize {
    #[cfg(feature = "std")]
    return linux::linux_possible_cpus();
    // SAFETY: as in `current_cpu`.
    #[cfg(not(feature = "std"))]
    return unsafe { __pagealloc_platform_possible_cpus() };
}

/// Wait a moment in a wait loop (see [`Platform::relax`]).
#[inline]
pub fn relax() {
    #[cfg(feature = "std")]
    std::thread::yield_now();
    // SAFETY: as in `current_cpu`.
    #[cfg(not(feature = "std"))]
    unsafe {
        __pagealloc_platform_relax()
    };
}

/// Monotonic nanoseconds (see [`Platform::now_ns`]).
#[inline]
pub fn now_ns() -> u64 {
    #[cfg(feature = "std")]
    {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
    // SAFETY: as in `current_cpu`.
    #[cfg(not(feature = "std"))]
    unsafe {
        __pagealloc_platform_now_ns()
    }
}

#[cfg(feature = "std")]
pub use std::time::Instant;

/// The operating system's error for a failed mapping: std's `io::Error`.
#[cfg(feature = "std")]
pub(crate) type OsError = std::io::Error;

/// The operating system's error for a failed mapping. Without std the core
/// maps nothing (arena memory comes from the global allocator), so none is
/// ever made.
#[cfg(not(feature = "std"))]
#[derive(Debug)]
pub struct OsError;

#[cfg(not(feature = "std"))]
impl core::fmt::Display for OsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the platform refused the mapping")
    }
}

#[cfg(not(feature = "std"))]
impl core::error::Error for OsError {}

/// A point in time on the platform's clock (std's `Instant` with `std`).
#[cfg(not(feature = "std"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

#[cfg(not(feature = "std"))]
impl Instant {
    /// Now.
    pub fn now() -> Self {
        Self(now_ns())
    }
    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> core::time::Duration {
        core::time::Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
    /// As [`Instant::saturating_duration_since`].
    pub fn duration_since(&self, earlier: Instant) -> core::time::Duration {
        self.saturating_duration_since(earlier)
    }
    /// Time since `self`.
    pub fn elapsed(&self) -> core::time::Duration {
        Self::now().saturating_duration_since(*self)
    }
    /// `self + d`, or `None` past the clock's range.
    pub fn checked_add(&self, d: core::time::Duration) -> Option<Instant> {
        u64::try_from(d.as_nanos()).ok().and_then(|n| self.0.checked_add(n)).map(Self)
    }
}

/// Waiting without threads to park: a page-lock waiter spins on its queue
/// node, calling [`relax`], until its waker writes the node.
#[cfg(not(feature = "std"))]
pub(crate) mod spin_thread {
    /// A waiter's handle; waking it is the waker's store to its node.
    #[derive(Clone, Debug)]
    pub struct Thread;

    impl Thread {
        /// Nothing to do: the waiter sees its node change on its next look.
        pub fn unpark(&self) {}
        /// Every waiter's id is the same: nothing is kept per waiter.
        pub fn id(&self) -> ThreadId {
            ThreadId
        }
    }

    /// A waiter's id (see [`Thread::id`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ThreadId;

    /// The calling waiter's handle.
    pub fn current() -> Thread {
        Thread
    }

    /// Wait a moment before the caller looks at its node again.
    pub fn park() {
        super::relax();
    }

    /// As [`park`]: the caller checks its deadline itself.
    pub fn park_timeout(_d: core::time::Duration) {
        super::relax();
    }
}
