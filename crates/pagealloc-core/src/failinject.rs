//! Failure injection (the kernel's `fail_page_alloc` and `should_fail_alloc_page`),
//! behind the `fail-inject` cargo feature.
//!
//! Two kinds of failure can be injected:
//! - allocation failures: `alloc_pages*` returns [`crate::AllocError::Injected`]
//!   at a configured rate (parts per million), on every `interval`-th call, or
//!   for every call after the first `after` ones, at most `times` times, only for
//!   orders at or above `min_order` (as the kernel's `min-order`);
//! - per-CPU trylock failures: the per-CPU list lock reports "busy" at a
//!   configured rate, so the fallback paths (allocate from, and free to, the buddy
//!   lists under the zone lock) run as often as a test wants.
//!
//! The configuration is process-wide, like the kernel's debugfs knobs, and can be
//! limited to one allocator with `FailConfig::only`. Without the feature every
//! hook is an `#[inline(always)]` function returning a constant, so the hot paths
//! compile to exactly what they were.
//!
//! Hook points: the top of `PageAllocator::alloc_pages_node` (`alloc_fails`),
//! the inline front-cache paths (which step aside while `armed`) and every
//! `try_lock` of a per-CPU list in `fastpath` (`trylock_ok`).

#[cfg(feature = "fail-inject")]
pub use enabled::*;

/// `true` when this allocation must fail (always `false` without the feature).
#[cfg(not(feature = "fail-inject"))]
#[inline(always)]
pub const fn alloc_fails(_allocator: u64, _order: u32) -> bool {
    false
}

/// `true` while any injection is configured (always `false` without the
/// feature): the inline fast paths then step aside, so every allocation meets
/// [`alloc_fails`] exactly once, in `alloc_pages_node`.
#[cfg(not(feature = "fail-inject"))]
#[inline(always)]
pub const fn armed() -> bool {
    false
}

/// The window between a free's checks of a page and the CAS that claims it
/// (see `page_alloc::claim`): with the feature and `set_claim_window`
/// set, the thread yields the CPU there, so a test can make other threads
/// free and reallocate the page meanwhile. Nothing without the feature.
#[cfg(not(feature = "fail-inject"))]
#[inline(always)]
pub const fn claim_window() {}

/// `false` when this per-CPU trylock must report "busy" (always `true` without
/// the feature).
#[cfg(not(feature = "fail-inject"))]
#[inline(always)]
pub const fn trylock_ok(_allocator: u64) -> bool {
    true
}

#[cfg(feature = "fail-inject")]
mod enabled {
    /// An allocator that failure injection can be restricted to
    /// ([`FailConfig::only`]).
    pub trait FailTarget {
        /// The allocator's id (unique in the process, never reused).
        fn fail_target_id(&self) -> u64;
    }
    use core::sync::atomic::{AtomicU64, Ordering};

    /// What to inject. The default injects nothing.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct FailConfig {
        /// Fail allocations with this probability, in parts per million.
        pub alloc_rate_ppm: u32,
        /// Fail every `alloc_interval`-th allocation call (0: off).
        pub alloc_interval: u64,
        /// Fail every allocation call after the first `alloc_after` (`None`: off).
        pub alloc_after: Option<u64>,
        /// Inject at most this many allocation failures (`None`: no limit).
        pub alloc_times: Option<u64>,
        /// Only orders at least this high fail (the kernel's `min-order`).
        pub min_order: u32,
        /// Report a per-CPU trylock as busy with this probability (ppm).
        pub trylock_rate_ppm: u32,
        /// Seed of the pseudo-random choices.
        pub seed: u64,
        /// Restrict injection to one allocator (`None`: all). An opaque id: set
        /// it with [`FailConfig::only`].
        pub allocator: Option<u64>,
    }

    impl FailConfig {
        /// Nothing injected.
        pub fn new() -> Self {
            Self::default()
        }

        /// Only `a` (and its clones) sees injected failures.
        #[must_use]
        pub fn only(mut self, a: &impl FailTarget) -> Self {
            self.allocator = Some(a.fail_target_id());
            self
        }
    }

    /// What was injected so far (since the last [`configure`]).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct FailStats {
        /// Allocation calls that reached the hook.
        pub alloc_calls: u64,
        /// Allocations failed on purpose.
        pub alloc_injected: u64,
        /// Per-CPU trylocks that reached the hook.
        pub trylock_calls: u64,
        /// Per-CPU trylocks reported busy on purpose.
        pub trylock_injected: u64,
    }

    /// Non-zero only while something is configured: the hooks' only load when
    /// injection is off. The other knobs are plain relaxed atomics (a test sets
    /// them before its workload starts; a stale read only shifts one decision).
    static ARMED: AtomicU64 = AtomicU64::new(0);
    static ALLOC_RATE: AtomicU64 = AtomicU64::new(0);
    static ALLOC_INTERVAL: AtomicU64 = AtomicU64::new(0);
    static ALLOC_AFTER: AtomicU64 = AtomicU64::new(u64::MAX);
    static ALLOC_TIMES: AtomicU64 = AtomicU64::new(u64::MAX);
    static MIN_ORDER: AtomicU64 = AtomicU64::new(0);
    static TRYLOCK_RATE: AtomicU64 = AtomicU64::new(0);
    static SEED: AtomicU64 = AtomicU64::new(0);
    /// Allocator id to restrict to (ids start at 1; 0: every allocator).
    static TARGET: AtomicU64 = AtomicU64::new(0);
    static ALLOC_CALLS: AtomicU64 = AtomicU64::new(0);
    static ALLOC_INJECTED: AtomicU64 = AtomicU64::new(0);
    static TRYLOCK_CALLS: AtomicU64 = AtomicU64::new(0);
    static TRYLOCK_INJECTED: AtomicU64 = AtomicU64::new(0);

    /// Install a configuration and reset the counters.
    pub fn configure(cfg: FailConfig) {
        ARMED.store(0, Ordering::Relaxed);
        ALLOC_RATE.store(cfg.alloc_rate_ppm as u64, Ordering::Relaxed);
        ALLOC_INTERVAL.store(cfg.alloc_interval, Ordering::Relaxed);
        ALLOC_AFTER.store(cfg.alloc_after.unwrap_or(u64::MAX), Ordering::Relaxed);
        ALLOC_TIMES.store(cfg.alloc_times.unwrap_or(u64::MAX), Ordering::Relaxed);
        MIN_ORDER.store(cfg.min_order as u64, Ordering::Relaxed);
        TRYLOCK_RATE.store(cfg.trylock_rate_ppm as u64, Ordering::Relaxed);
        SEED.store(cfg.seed, Ordering::Relaxed);
        TARGET.store(cfg.allocator.unwrap_or(0), Ordering::Relaxed);
        ALLOC_CALLS.store(0, Ordering::Relaxed);
        ALLOC_INJECTED.store(0, Ordering::Relaxed);
        TRYLOCK_CALLS.store(0, Ordering::Relaxed);
        TRYLOCK_INJECTED.store(0, Ordering::Relaxed);
        let armed =
            cfg.alloc_rate_ppm > 0 || cfg.alloc_interval > 0 || cfg.alloc_after.is_some() || cfg.trylock_rate_ppm > 0;
        ARMED.store(armed as u64, Ordering::Relaxed);
    }

    /// Stop injecting (counters are kept for [`stats`]).
    pub fn disable() {
        ARMED.store(0, Ordering::Relaxed);
    }

    /// What was injected since the last [`configure`].
    pub fn stats() -> FailStats {
        FailStats {
            alloc_calls: ALLOC_CALLS.load(Ordering::Relaxed),
            alloc_injected: ALLOC_INJECTED.load(Ordering::Relaxed),
            trylock_calls: TRYLOCK_CALLS.load(Ordering::Relaxed),
            trylock_injected: TRYLOCK_INJECTED.load(Ordering::Relaxed),
        }
    }

    fn targeted(allocator: u64) -> bool {
        let t = TARGET.load(Ordering::Relaxed);
        t == 0 || t == allocator
    }

    /// A well-mixed hash of call number `n` (splitmix64's finaliser).
    fn mix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    fn hit(rate_ppm: u64, seed: u64, n: u64) -> bool {
        rate_ppm > 0 && mix(seed ^ n.wrapping_mul(0xd6e8_feb8_6659_fd93)) % 1_000_000 < rate_ppm
    }

    /// `true` while any injection is configured.
    #[inline]
    pub fn armed() -> bool {
        ARMED.load(Ordering::Relaxed) != 0
    }

    /// `true` when this allocation must fail.
    #[inline]
    pub fn alloc_fails(allocator: u64, order: u32) -> bool {
        if ARMED.load(Ordering::Relaxed) == 0 {
            return false;
        }
        alloc_fails_slow(allocator, order)
    }

    #[cold]
    #[inline(never)]
    fn alloc_fails_slow(allocator: u64, order: u32) -> bool {
        if !targeted(allocator) || (order as u64) < MIN_ORDER.load(Ordering::Relaxed) {
            return false;
        }
        let n = ALLOC_CALLS.fetch_add(1, Ordering::Relaxed);
        let interval = ALLOC_INTERVAL.load(Ordering::Relaxed);
        let want = hit(ALLOC_RATE.load(Ordering::Relaxed), SEED.load(Ordering::Relaxed), n)
            || (interval > 0 && (n + 1).is_multiple_of(interval))
            || n >= ALLOC_AFTER.load(Ordering::Relaxed);
        if !want {
            return false;
        }
        // Count against `alloc_times` without overshooting it under races.
        let limit = ALLOC_TIMES.load(Ordering::Relaxed);
        ALLOC_INJECTED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| (k < limit).then_some(k + 1)).is_ok()
    }

    /// Yields in every free's claim window (between its checks and its CAS).
    static CLAIM_YIELDS: AtomicU64 = AtomicU64::new(0);

    /// Make every free yield the CPU `yields` times between its checks of a
    /// page and the CAS that claims it (0: off), on every allocator and
    /// independently of [`configure`]: a stale free then races the page's
    /// free and reallocation by other threads far more often than it
    /// would (the claim must land on the block as it is by then).
    pub fn set_claim_window(yields: u32) {
        CLAIM_YIELDS.store(yields as u64, Ordering::Relaxed);
    }

    /// The claim window's hook (see `set_claim_window`).
    #[inline]
    pub fn claim_window() {
        let n = CLAIM_YIELDS.load(Ordering::Relaxed);
        for _ in 0..n {
            crate::platform::relax();
        }
    }

    /// `false` when this per-CPU trylock must report "busy".
    #[inline]
    pub fn trylock_ok(allocator: u64) -> bool {
        if ARMED.load(Ordering::Relaxed) == 0 {
            return true;
        }
        trylock_ok_slow(allocator)
    }

    #[cold]
    #[inline(never)]
    fn trylock_ok_slow(allocator: u64) -> bool {
        let rate = TRYLOCK_RATE.load(Ordering::Relaxed);
        if !targeted(allocator) || rate == 0 {
            return true;
        }
        let n = TRYLOCK_CALLS.fetch_add(1, Ordering::Relaxed);
        if hit(rate, SEED.load(Ordering::Relaxed) ^ 0x5555, n) {
            TRYLOCK_INJECTED.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }
}
