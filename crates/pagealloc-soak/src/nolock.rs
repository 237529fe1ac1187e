//! `pagealloc-soak stress --nolock-signal`: the signal soak. A timer thread
//! sends SIGUSR1 to the workers in turn, one signal every 50 us; the handler
//! frees and allocates with the no-lock API (`alloc_pages_nolock`,
//! `free_pages_nolock`) while the interrupted workers allocate and free
//! through the normal API. A watchdog exits with status 3 if a worker stops
//! making progress (a deadlock); at the end every page must be back
//! (`check_invariants`, exact census). Prints the handler's allocation count
//! and success rate beside the trylock failures; the last line is
//! `stress: N passed, M failed`.
//!
//! The handler touches only atomics and the no-lock API: blocks it holds
//! between signals live in a static slot table, taken with a swap and put
//! back with a compare-and-swap (a handler on another thread may have filled
//! the slot meanwhile; the block is then freed at once), so no block is lost
//! or held twice whatever the interleaving.

use pagealloc::stats::events::VmEvent;
use pagealloc::{AllocError, Config, Gfp, PageAllocator, Pfn};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SLOTS: usize = 1024;
/// Blocks the handlers hold: `(pfn + 1) << 8 | order`, 0 for none.
static HELD: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static CURSOR: AtomicU64 = AtomicU64::new(0);
static ALLOC: AtomicPtr<PageAllocator> = AtomicPtr::new(std::ptr::null_mut());
static RUNS: AtomicU64 = AtomicU64::new(0);
static OK: AtomicU64 = AtomicU64::new(0);
static WOULD_BLOCK: AtomicU64 = AtomicU64::new(0);
static NO_MEMORY: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);
static BAD: AtomicU64 = AtomicU64::new(0);
/// Frees and allocations per signal.
const PER_SIGNAL: u64 = 16;

extern "C" fn on_signal(_sig: libc::c_int) {
    // SAFETY: errno is this thread's; saved and restored around the handler.
    let errno = unsafe { *libc::__errno_location() };
    let a = ALLOC.load(Ordering::Acquire);
    if !a.is_null() {
        // SAFETY: cleared (and every signal source joined) before the
        // allocator is dropped.
        handle(unsafe { &*a });
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

fn unpack(w: u64) -> (Pfn, u32) {
    (Pfn::new((w >> 8) - 1), (w & 0xff) as u32)
}

fn handle(a: &PageAllocator) {
    RUNS.fetch_add(1, Ordering::Relaxed);
    let c = CURSOR.fetch_add(PER_SIGNAL, Ordering::Relaxed);
    for k in 0..PER_SIGNAL {
        let i = ((c + k) % SLOTS as u64) as usize;
        let w = HELD[i].swap(0, Ordering::Relaxed);
        if w != 0 {
            let (p, o) = unpack(w);
            match a.free_pages_nolock(p, o) {
                Ok(()) => FREES.fetch_add(1, Ordering::Relaxed),
                Err(_) => BAD.fetch_add(1, Ordering::Relaxed),
            };
        }
        let order = [0, 0, 0, 1, 0, 2, 0, 3][(c + k) as usize % 8];
        match a.alloc_pages_nolock(Gfp::KERNEL, order) {
            Ok(p) => {
                OK.fetch_add(1, Ordering::Relaxed);
                let w = ((p.as_u64() + 1) << 8) | order as u64;
                if HELD[i].compare_exchange(0, w, Ordering::Relaxed, Ordering::Relaxed).is_err() {
                    match a.free_pages_nolock(p, order) {
                        Ok(()) => FREES.fetch_add(1, Ordering::Relaxed),
                        Err(_) => BAD.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
            Err(AllocError::WouldBlock { .. }) => {
                WOULD_BLOCK.fetch_add(1, Ordering::Relaxed);
            }
            Err(AllocError::NoMemory { .. }) => {
                NO_MEMORY.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                BAD.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Normal-API churn until `stop`; every free must succeed. Returns
/// (operations, failed frees).
fn churn(a: &PageAllocator, stop: &AtomicBool, progress: &AtomicU64, seed: u64) -> (u64, u64) {
    let keep = 2048;
    let mut held: Vec<(Pfn, u32)> = Vec::with_capacity(keep);
    let (mut x, mut ops, mut bad) = (seed | 1, 0u64, 0u64);
    let mut free = |p: Pfn, o: u32| {
        if a.free_pages(p, o).is_err() {
            bad += 1;
        }
    };
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if held.len() < keep && !x.is_multiple_of(3) {
                let order = [0, 0, 0, 0, 1, 2, 3, 0][(x >> 8) as usize % 8];
                if let Ok(p) = a.alloc_pages(Gfp::KERNEL, order) {
                    held.push((p, order));
                }
            } else if !held.is_empty() {
                let (p, o) = held.swap_remove((x >> 16) as usize % held.len());
                free(p, o);
            }
            ops += 1;
        }
        if x.is_multiple_of(512) {
            a.drain_local_pages();
        }
        progress.fetch_add(1, Ordering::Relaxed);
    }
    for (p, o) in held {
        free(p, o);
    }
    (ops, bad)
}

/// Run the soak; the process exit status.
pub fn run(threads: usize, secs: f64, arena_mb: u64) -> i32 {
    let a = match PageAllocator::new(Config::new().arena_bytes(arena_mb << 20)) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("stress: {e}");
            return 2;
        }
    };
    let threads = threads.max(1);
    println!("stress --nolock-signal: {threads} workers, {secs:.0} s, SIGUSR1 every 50 us, arena {arena_mb} MiB");
    let managed = a.managed_pages();
    ALLOC.store(Arc::as_ptr(&a) as *mut PageAllocator, Ordering::Release);
    // SAFETY: a plain handler with an empty mask; SA_RESTART so the
    // interrupted workers' own syscalls resume.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) != 0 {
            eprintln!("stress: sigaction failed");
            return 2;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let progress: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    let (tx, rx) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (a, stop, progress, tx) = (a.clone(), stop.clone(), progress.clone(), tx.clone());
            std::thread::spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                tx.send(unsafe { libc::pthread_self() } as u64).unwrap();
                churn(&a, &stop, &progress[t], 0x9e37_79b9_7f4a_7c15 ^ (t as u64) << 32)
            })
        })
        .collect();
    let targets: Vec<u64> = (0..threads).map(|_| rx.recv().unwrap()).collect();
    let sent = Arc::new(AtomicU64::new(0));
    let timer = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let (mut k, mut next) = (0, Instant::now());
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: the workers are joined only after this thread stops.
                unsafe { libc::pthread_kill(targets[k % targets.len()] as libc::pthread_t, libc::SIGUSR1) };
                k += 1;
                sent.fetch_add(1, Ordering::Relaxed);
                pace(&mut next);
            }
        })
    };
    let t0 = Instant::now();
    watch_progress(&progress, secs);
    stop.store(true, Ordering::Relaxed);
    timer.join().unwrap();
    let (mut ops, mut bad_frees) = (0, 0);
    for w in workers {
        let (o, b) = w.join().unwrap();
        ops += o;
        bad_frees += b;
    }
    ALLOC.store(std::ptr::null_mut(), Ordering::Release);
    let elapsed = t0.elapsed().as_secs_f64();
    for s in HELD.iter() {
        let w = s.swap(0, Ordering::Relaxed);
        if w != 0 {
            let (p, o) = unpack(w);
            if a.free_pages(p, o).is_err() {
                bad_frees += 1;
            }
        }
    }
    let sent = sent.load(Ordering::Relaxed);
    verdict(&a, managed, elapsed, sent, ops, bad_frees)
}

/// Until `secs` have passed, check every 100 ms that each worker moves on;
/// one stuck for 20 s ends the process as hung (exit status 3).
fn watch_progress(progress: &[AtomicU64], secs: f64) {
    let t0 = Instant::now();
    let mut last: Vec<(u64, Instant)> = progress.iter().map(|_| (0, Instant::now())).collect();
    while t0.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_millis(100));
        for (t, l) in last.iter_mut().enumerate() {
            let p = progress[t].load(Ordering::Relaxed);
            if p != l.0 {
                *l = (p, Instant::now());
            } else if l.1.elapsed() > Duration::from_secs(20) {
                println!("stress: worker {t} made no progress for 20 s: hung (deadlock?)");
                println!("stress: 0 passed, 1 failed");
                std::process::exit(3);
            }
        }
    }
}

/// The run's figures and its checks (conservation, counters, invariants);
/// the exit status.
fn verdict(a: &PageAllocator, managed: u64, elapsed: f64, sent: u64, ops: u64, bad_frees: u64) -> i32 {
    let (ok, wb, nomem) =
        (OK.load(Ordering::Relaxed), WOULD_BLOCK.load(Ordering::Relaxed), NO_MEMORY.load(Ordering::Relaxed));
    let tried = ok + wb + nomem;
    let frees = FREES.load(Ordering::Relaxed);
    let trylock_fail = a.stats().event_count(VmEvent::NolockTrylockFail);
    println!(
        "stress --nolock-signal: {elapsed:.1} s, {} signals sent, {} handler runs; handler allocations: {ok} of {tried} \
         ({:.2}% success), {wb} would-block, {nomem} no-memory; {frees} handler frees, {} deferred; {trylock_fail} \
         trylock failures ({:.3} per no-lock call); {ops} normal-API operations",
        sent,
        RUNS.load(Ordering::Relaxed),
        100.0 * ok as f64 / tried.max(1) as f64,
        a.stats().event_count(VmEvent::NolockDeferred),
        trylock_fail as f64 / (tried + frees).max(1) as f64,
    );
    println!(
        "stress --nolock-signal: {ok} handler allocations (target: at least 1000000 in the run: {})",
        if ok >= 1_000_000 { "met" } else { "missed" }
    );
    let mut failed = Vec::new();
    if BAD.load(Ordering::Relaxed) != 0 {
        failed.push(format!("{} no-lock calls failed unexpectedly", BAD.load(Ordering::Relaxed)));
    }
    if bad_frees != 0 {
        failed.push(format!("{bad_frees} normal frees of owned blocks failed"));
    }
    if a.stats().event_count(VmEvent::NolockAlloc) != ok {
        failed.push(format!(
            "nolock_alloc counts {} but the handlers got {ok}",
            a.stats().event_count(VmEvent::NolockAlloc)
        ));
    }
    if let Err(e) = a.check_invariants() {
        failed.push(format!("check_invariants before the drain: {e}"));
    }
    a.drain_all_pages();
    if let Err(e) = a.check_invariants() {
        failed.push(format!("check_invariants: {e}"));
    }
    let c = a.census();
    if (c.free, c.pcp, c.allocated) != (managed, 0, 0) || a.nr_free_pages() != managed {
        failed.push(format!("conservation: {c:?}, {managed} managed, {} free", a.nr_free_pages()));
    }
    for f in &failed {
        println!("stress: FAILED: {f}");
    }
    println!("stress: {} passed, {} failed", 6 - failed.len(), failed.len());
    i32::from(!failed.is_empty())
}

/// Waits for the next 50 us tick on absolute deadlines: a sleep's overshoot
/// (about as long as the period itself here) is caught up by returning at
/// once, so the signal rate holds at one per 50 us whenever the timer thread
/// has a CPU; a backlog over 10 ms (the thread was descheduled) is dropped.
fn pace(next: &mut Instant) {
    *next += Duration::from_micros(50);
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else if now - *next > Duration::from_millis(10) {
        *next = now;
    }
}
