//! The Linux platform (the `std` feature): which CPU we run on and how many
//! there may be, from libc, and the thread controls benchmarks and the
//! library's own threads use.

/// The CPU this thread runs on right now (glibc serves it from rseq; it may be
/// stale by the time the caller uses it, which callers must tolerate).
#[inline(always)]
#[must_use]
pub(crate) fn linux_current_cpu() -> u32 {
    #[cfg(not(any(miri, loom)))]
    {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        if c >= 0 {
            return c as u32;
        }
    }
    0
}

/// The number of CPU slots per-CPU tables need: one more than the highest CPU
/// this process may run on (what [`Config::nr_cpus`](crate::Config::nr_cpus)
/// `None` sizes them for), and at least the available parallelism.
#[must_use]
pub(crate) fn linux_possible_cpus() -> usize {
    #[cfg(not(any(miri, loom)))]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, and we pass its size.
        let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        // SAFETY: pid 0 is this thread; `set` is a valid cpu_set_t of that size.
        let r = unsafe { libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if r == 0 {
            let max = (0..libc::CPU_SETSIZE as usize)
                // SAFETY: i < CPU_SETSIZE, within the set.
                .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
                .max();
            if let Some(m) = max {
                // sched_getcpu may also return CPUs outside our affinity if it
                // changes later; configured CPUs bound that.
                return (m + 1).max(std::thread::available_parallelism().map_or(1, |n| n.get()));
            }
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pin the calling thread to one CPU, for benchmarks and tests that want
/// per-CPU behaviour to be repeatable. Best effort: returns whether it worked
/// (`false` for a CPU outside the process's affinity or above `CPU_SETSIZE`, and
/// always under Miri and loom).
pub fn pin_to_cpu(cpu: usize) -> bool {
    #[cfg(not(any(miri, loom)))]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        // SAFETY: cpu < CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: pid 0 is this thread; `set` is a valid cpu_set_t of that size.
        return unsafe { libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) } == 0;
    }
    #[allow(unreachable_code)]
    {
        let _ = cpu;
        false
    }
}

/// Block every asynchronous signal in the calling thread, so that signals
/// sent to the process are delivered to the application's threads, not to
/// the library's own background threads (the reporter, kswapd): a handler the
/// application wrote for its threads never runs on ours. Best effort.
pub fn block_async_signals() {
    #[cfg(not(any(miri, loom)))]
    {
        // SAFETY: a zeroed sigset_t is a valid value for sigfillset to fill.
        let mut set: libc::sigset_t = unsafe { core::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t we own.
        unsafe { libc::sigfillset(&mut set) };
        // Synchronous faults must still reach this thread.
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL] {
            // SAFETY: as above; `sig` is a valid signal number.
            unsafe { libc::sigdelset(&mut set, sig) };
        }
        // SAFETY: `set` is a valid, initialised sigset_t; the old mask is not wanted.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut()) };
    }
}
