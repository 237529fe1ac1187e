//! `pagealloc-soak stress`: the allocator soak. N threads run a random mix of every
//! operation the allocator has (single and bulk allocation and free of every
//! order and type, cross-thread frees, contiguous ranges, isolation, drains, page
//! locks with waiters across threads, writeback, report reads, concurrent
//! misuse that must be refused) for a given time, checking each result as it
//! goes. About once a second the main thread stops the world (workers park at an
//! operation boundary) and checks `check_invariants` and exact conservation.
//!
//! Checks: every block handed out is aligned, inside the arena and owned by
//! nobody else (a shared ownership bitmap, one bit per page, set on allocation and
//! cleared before the free); every free of an owned block succeeds; every misuse
//! gets its exact typed error; lock results agree with who holds what. At the end
//! everything is freed, the lists are drained, `check_invariants` must hold and
//! every page must be back (nothing allocated, nothing on per-CPU lists, nothing
//! isolated, NR_FREE_PAGES == managed pages).
//!
//! A watchdog thread watches what each worker is doing (each publishes its
//! current operation, argument and start time in atomics) and, if one stays in
//! an operation past `--hang-timeout`, prints every thread's operation and exits
//! with status 3. Violations exit with status 1. The last line is always
//! `stress: N passed, M failed`.

mod hotplug;
mod ops;

use crate::args::StressArgs;
use hotplug::{hole_pieces, op_add_memory};
use ops::*;
use pagealloc::{AllocError, Backing, Config, Gfp, PageAllocator, Pfn};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a thread is doing, for the watchdog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    Idle,
    Alloc,
    Free,
    BulkAlloc,
    BulkList,
    BulkFree,
    CrossFree,
    Contig,
    FreeContig,
    Isolate,
    Drain,
    DrainAll,
    LockPage,
    LockTimeout,
    Trylock,
    Unlock,
    WaitLocked,
    Writeback,
    WaitWriteback,
    PeekWait,
    OwnLock,
    Reports,
    CheckInvariants,
    Misuse,
    AddMemory,
    Teardown,
}

const OPS: [Op; 26] = [
    Op::Idle,
    Op::Alloc,
    Op::Free,
    Op::BulkAlloc,
    Op::BulkList,
    Op::BulkFree,
    Op::CrossFree,
    Op::Contig,
    Op::FreeContig,
    Op::Isolate,
    Op::Drain,
    Op::DrainAll,
    Op::LockPage,
    Op::LockTimeout,
    Op::Trylock,
    Op::Unlock,
    Op::WaitLocked,
    Op::Writeback,
    Op::WaitWriteback,
    Op::PeekWait,
    Op::OwnLock,
    Op::Reports,
    Op::CheckInvariants,
    Op::Misuse,
    Op::AddMemory,
    Op::Teardown,
];

/// One thread's published state.
#[derive(Default)]
struct Slot {
    op: AtomicU32,
    arg: AtomicU64,
    /// Milliseconds since the run started when `op` began.
    since_ms: AtomicU64,
}

/// Everything the threads share.
struct Shared {
    a: PageAllocator,
    t0: Instant,
    stop: AtomicBool,
    slots: Vec<Slot>,
    /// One bit per page: set while some thread owns it.
    owned: Vec<AtomicU64>,
    passed: AtomicU64,
    failed: AtomicU64,
    messages: Mutex<Vec<String>>,
    /// Blocks handed between threads (one allocates, another frees).
    pool: Mutex<Vec<(Pfn, u32)>>,
    /// Pages every thread locks, waits on and writes back; allocated for the run.
    lock_pages: Vec<Pfn>,
    /// Lock pages locked by one thread for another to unlock.
    handoff: Mutex<Vec<Pfn>>,
    nr_pages: u64,
    nodes: u32,
    inject: bool,
    /// Set by the main thread for a checkpoint: workers park at their next
    /// operation boundary (holding no page lock) and count themselves here.
    pause: AtomicBool,
    parked: AtomicUsize,
    /// Pieces of the arena's holes not yet given (`op_add_memory`), and
    /// those given.
    holes: Mutex<Vec<(u64, u64)>>,
    added: Mutex<Vec<(u64, u64)>>,
}

impl Shared {
    fn publish(&self, t: usize, op: Op, arg: u64) {
        let s = &self.slots[t];
        s.since_ms.store(self.t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        s.arg.store(arg, Ordering::Relaxed);
        s.op.store(op as u32, Ordering::Relaxed);
    }

    fn violation(&self, msg: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut m = self.messages.lock().unwrap();
        if m.len() < 20 {
            eprintln!("stress: violation: {msg}");
            m.push(msg);
        }
    }

    /// Mark `[p, p + n)` owned; a page already owned is a double allocation.
    fn claim(&self, what: &str, p: u64, n: u64) -> bool {
        if p.checked_add(n).is_none_or(|e| e > self.nr_pages) {
            self.violation(format!("{what}: {p:#x} + {n} pages runs past the arena"));
            return false;
        }
        let mut ok = true;
        for_words(p, n, |w, mask| {
            let old = self.owned[w].fetch_or(mask, Ordering::Relaxed);
            if old & mask != 0 {
                ok = false;
            }
        });
        if !ok {
            self.violation(format!("{what}: block {p:#x} of {n} pages overlaps a block another owner holds"));
        }
        ok
    }

    /// Claim a block of `order`, which must be aligned to its size.
    fn claim_block(&self, what: &str, p: u64, order: u32) -> bool {
        if !p.is_multiple_of(1 << order) {
            self.violation(format!("{what}: block {p:#x} misaligned for order {order}"));
            return false;
        }
        self.claim(what, p, 1 << order)
    }

    /// Give up ownership before a free.
    fn release(&self, what: &str, p: u64, n: u64) {
        let mut ok = true;
        for_words(p, n, |w, mask| {
            let old = self.owned[w].fetch_and(!mask, Ordering::Relaxed);
            if old & mask != mask {
                ok = false;
            }
        });
        if !ok {
            self.violation(format!("{what}: block {p:#x} of {n} pages was not owned"));
        }
    }
}

/// Call `f(word, mask)` for the bitmap words covering `[p, p + n)`.
fn for_words(p: u64, n: u64, mut f: impl FnMut(usize, u64)) {
    let (mut i, e) = (p, p + n);
    while i < e {
        let w = i / 64;
        let lo = i % 64;
        let hi = (e - w * 64).min(64);
        let mask = if hi - lo == 64 { u64::MAX } else { ((1u64 << (hi - lo)) - 1) << lo };
        f(w as usize, mask);
        i = w * 64 + hi;
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn gfp(&mut self) -> Gfp {
        // Every combination of the type bits, HIGH and ZERO; THISNODE now and then.
        let mut g = Gfp::from_bits_truncate(self.next() as u32 & 0xf);
        if self.below(8) == 0 {
            g |= Gfp::THISNODE;
        }
        g
    }
    fn order(&mut self) -> u32 {
        match self.below(100) {
            0..=64 => 0,
            65..=84 => 1 + self.below(3) as u32,
            85..=95 => 4 + self.below(5) as u32,
            _ => 9 + self.below(2) as u32,
        }
    }
}

/// One worker's own holdings.
#[derive(Default)]
struct Mine {
    held: Vec<(Pfn, u32)>,
    contig: Vec<(Pfn, u64)>,
    passed: u64,
}

/// Run the command; returns the process exit status.
pub fn run(args: &StressArgs) -> i32 {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let inject = args.fail_rate_ppm > 0 || args.trylock_fail_ppm > 0;
    if inject && !configure_injection(args, seed) {
        eprintln!("stress: --fail-rate-ppm/--trylock-fail-ppm need a build with `--features fail-inject`");
        return 2;
    }
    let sh = match setup(args, seed, inject) {
        Ok(sh) => Arc::new(sh),
        Err(e) => {
            eprintln!("stress: {e}");
            return 2;
        }
    };
    let threads = sh.slots.len() - 1;
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (sh, done) = (sh.clone(), done.clone());
        let limit_ms = (args.hang_timeout * 1000.0) as u64;
        std::thread::spawn(move || watchdog(&sh, &done, limit_ms))
    };
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let sh = sh.clone();
            let seed = seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            std::thread::Builder::new()
                .name(format!("stress-{t}"))
                .spawn(move || worker(&sh, t, Rng(seed | 1)))
                .expect("spawn a worker")
        })
        .collect();
    let checkpoints = checkpoints_until(&sh, threads, sh.t0 + Duration::from_secs_f64(args.duration));
    sh.stop.store(true, Ordering::Relaxed);
    let mut ops = 0u64;
    for w in workers {
        match w.join() {
            Ok(n) => ops += n,
            Err(_) => sh.violation("a worker panicked".into()),
        }
    }
    let main = threads;
    sh.publish(main, Op::Teardown, 0);
    teardown(&sh);
    sh.publish(main, Op::Idle, 0);
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    summary(&sh, ops, checkpoints)
}

/// The allocator (two nodes, each with a small Movable zone, no backing),
/// the pages kept for the lock operations, and the shared state.
fn setup(args: &StressArgs, seed: u64, inject: bool) -> Result<Shared, String> {
    let nodes = 2;
    let pieces = hole_pieces((args.arena_mb << 20) / 4096, &mut Rng(seed | 1));
    let cfg = Config::new()
        .arena_bytes(args.arena_mb << 20)
        .nodes(nodes)
        .movable_zone_bytes((args.arena_mb << 20) / 16)
        .backing(Backing::None)
        .holes(pieces.iter().map(|&(s, n)| (Pfn::new(s), n)).collect());
    let a = PageAllocator::new(cfg).map_err(|e| e.to_string())?;
    let threads = args.threads.max(1);
    println!(
        "stress: {threads} threads, {:.0} s, seed {seed}, arena {} MiB ({} pages, {nodes} nodes), injection {}",
        args.duration,
        args.arena_mb,
        a.nr_pages(),
        if inject {
            format!("alloc {} ppm, trylock {} ppm", args.fail_rate_ppm, args.trylock_fail_ppm)
        } else {
            "off".into()
        }
    );
    let nr_pages = a.nr_pages();
    let lock_pages = (0..16)
        .map(|_| a.alloc_pages(Gfp::KERNEL, 0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot allocate the lock pages: {e}"))?;
    let sh = Shared {
        a,
        t0: Instant::now(),
        stop: AtomicBool::new(false),
        slots: (0..=threads).map(|_| Slot::default()).collect(),
        owned: (0..nr_pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        passed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        messages: Mutex::new(Vec::new()),
        pool: Mutex::new(Vec::new()),
        lock_pages,
        handoff: Mutex::new(Vec::new()),
        nr_pages,
        nodes,
        inject,
        pause: AtomicBool::new(false),
        parked: AtomicUsize::new(0),
        holes: Mutex::new(pieces),
        added: Mutex::new(Vec::new()),
    };
    for &p in &sh.lock_pages {
        sh.claim("lock page", p.as_u64(), 1);
    }
    Ok(sh)
}

/// About once a second until `end`, stop the world and check everything;
/// returns the number of checkpoints.
fn checkpoints_until(sh: &Shared, threads: usize, end: Instant) -> u64 {
    let mut checkpoints = 0u64;
    loop {
        let now = Instant::now();
        if now >= end {
            return checkpoints;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(1000)));
        if Instant::now() < end {
            checkpoint(sh, threads);
            checkpoints += 1;
        }
    }
}

/// The closing lines; the exit status (1 on any violation).
fn summary(sh: &Shared, ops: u64, checkpoints: u64) -> i32 {
    #[cfg(feature = "fail-inject")]
    if sh.inject {
        let s = pagealloc::failinject::stats();
        pagealloc::failinject::disable();
        println!(
            "stress: injected {} of {} allocation calls, {} of {} per-CPU trylocks",
            s.alloc_injected, s.alloc_calls, s.trylock_injected, s.trylock_calls
        );
    }
    let secs = sh.t0.elapsed().as_secs_f64();
    let passed = sh.passed.load(Ordering::Relaxed);
    let failed = sh.failed.load(Ordering::Relaxed);
    println!("stress: {ops} operations in {secs:.1} s ({:.0}/s), {checkpoints} checkpoints", ops as f64 / secs);
    let left = sh.holes.lock().unwrap().len();
    println!("stress: memory added at run time: {} pieces, {left} left", sh.added.lock().unwrap().len());
    println!("stress: {passed} passed, {failed} failed");
    i32::from(failed > 0)
}

#[cfg(feature = "fail-inject")]
fn configure_injection(args: &StressArgs, seed: u64) -> bool {
    use pagealloc::failinject::{configure, FailConfig};
    configure(FailConfig {
        alloc_rate_ppm: args.fail_rate_ppm,
        trylock_rate_ppm: args.trylock_fail_ppm,
        seed,
        ..FailConfig::new()
    });
    true
}

#[cfg(not(feature = "fail-inject"))]
fn configure_injection(_args: &StressArgs, _seed: u64) -> bool {
    false
}

fn watchdog(sh: &Shared, done: &AtomicBool, limit_ms: u64) {
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let now = sh.t0.elapsed().as_millis() as u64;
        let stuck = sh.slots.iter().enumerate().find(|(_, s)| {
            s.op.load(Ordering::Relaxed) != Op::Idle as u32
                && now.saturating_sub(s.since_ms.load(Ordering::Relaxed)) > limit_ms
        });
        if let Some((t, _)) = stuck {
            let who = |i: usize| if i + 1 == sh.slots.len() { "main".to_string() } else { format!("thread {i}") };
            eprintln!("stress: HANG: {} has been in one operation for more than {} ms", who(t), limit_ms);
            for (i, s) in sh.slots.iter().enumerate() {
                let op = OPS.get(s.op.load(Ordering::Relaxed) as usize).copied().unwrap_or(Op::Idle);
                eprintln!(
                    "stress:   {}: {:?} (arg {:#x}) since {} ms",
                    who(i),
                    op,
                    s.arg.load(Ordering::Relaxed),
                    now.saturating_sub(s.since_ms.load(Ordering::Relaxed))
                );
            }
            println!(
                "stress: {} passed, {} failed",
                sh.passed.load(Ordering::Relaxed),
                sh.failed.load(Ordering::Relaxed) + 1
            );
            std::process::exit(3);
        }
    }
}

/// Unlock every lock page parked for another thread (before anything that may
/// block, so a parked lock never waits on a thread that waits on it).
fn drain_handoff(sh: &Shared, mine: &mut Mine) {
    let parked: Vec<Pfn> = std::mem::take(&mut *sh.handoff.lock().unwrap());
    for p in parked {
        check(sh, mine, sh.a.page_locks().unlock_page(p) == Ok(()), || {
            format!("unlock of handed-off lock page {p:?} failed")
        });
    }
}

fn check(sh: &Shared, mine: &mut Mine, ok: bool, msg: impl FnOnce() -> String) {
    if ok {
        mine.passed += 1;
    } else {
        sh.violation(msg());
    }
}

fn alloc_ok(sh: &Shared, e: AllocError) -> bool {
    matches!(e, AllocError::NoMemory { .. }) || (sh.inject && e == AllocError::Injected)
}

fn worker(sh: &Shared, t: usize, mut rng: Rng) -> u64 {
    let mut mine = Mine::default();
    let mut ops = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        if sh.pause.load(Ordering::Acquire) {
            park(sh, t, &mut mine);
            continue;
        }
        ops += 1;
        let k = rng.below(1000);
        match k {
            0..=259 => op_alloc(sh, t, &mut rng, &mut mine),
            260..=479 => op_free(sh, t, &mut rng, &mut mine),
            480..=539 => op_bulk_alloc(sh, t, &mut rng, &mut mine),
            540..=569 => op_bulk_list(sh, t, &mut rng, &mut mine),
            570..=619 => op_bulk_free(sh, t, &mut rng, &mut mine),
            620..=659 => op_cross(sh, t, &mut rng, &mut mine),
            660..=669 => op_contig(sh, t, &mut rng, &mut mine),
            670..=679 => op_isolate(sh, t, &mut rng, &mut mine),
            680..=709 => {
                sh.publish(t, Op::Drain, 0);
                sh.a.drain_local_pages();
                mine.passed += 1;
            }
            710..=712 => {
                sh.publish(t, Op::DrainAll, 0);
                sh.a.drain_all_pages();
                mine.passed += 1;
            }
            713..=869 => op_lock_pages(sh, t, &mut rng, &mut mine),
            870..=899 => op_peek_wait(sh, t, &mut rng, &mut mine),
            900..=939 => op_own_lock(sh, t, &mut rng, &mut mine),
            940..=971 => op_reports(sh, t, &mut rng, &mut mine),
            972..=975 => op_add_memory(sh, t, &mut rng, &mut mine),
            _ => op_misuse(sh, t, &mut rng, &mut mine),
        }
        sh.publish(t, Op::Idle, 0);
    }
    // Give back everything this thread holds.
    sh.publish(t, Op::Teardown, 0);
    drain_handoff(sh, &mut mine);
    for (p, o) in std::mem::take(&mut mine.held) {
        free_owned(sh, &mut mine, p, o);
    }
    for (p, n) in std::mem::take(&mut mine.contig) {
        sh.release("free_contig_range", p.as_u64(), n);
        let r = sh.a.contig().free_contig_range(p, n);
        check(sh, &mut mine, r.is_ok(), || format!("free_contig_range({p:?}, {n}): {r:?}"));
    }
    sh.publish(t, Op::Idle, 0);
    sh.passed.fetch_add(mine.passed, Ordering::Relaxed);
    ops
}

/// Wait out a checkpoint. Lock pages parked for hand-off are unlocked first,
/// so a worker blocked on one can reach its own operation boundary too.
fn park(sh: &Shared, t: usize, mine: &mut Mine) {
    drain_handoff(sh, mine);
    sh.publish(t, Op::Idle, 0);
    sh.parked.fetch_add(1, Ordering::AcqRel);
    while sh.pause.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_micros(200));
    }
    sh.parked.fetch_sub(1, Ordering::AcqRel);
}

/// With every worker parked: invariants, and conservation against the
/// ownership bitmap (pages owned == pages allocated, exactly).
fn checkpoint(sh: &Shared, threads: usize) {
    let main = threads;
    sh.publish(main, Op::CheckInvariants, 0);
    sh.pause.store(true, Ordering::Release);
    while sh.parked.load(Ordering::Acquire) < threads {
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut mine = Mine::default();
    let a = &sh.a;
    let r = a.check_invariants();
    check(sh, &mut mine, r.is_ok(), || format!("check_invariants at a checkpoint: {r:?}"));
    let c = a.census();
    let owned = sh.owned.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as u64).sum::<u64>();
    check(sh, &mut mine, c.allocated == owned, || format!("checkpoint: {owned} pages owned but census says {c:?}"));
    check(sh, &mut mine, c.free + c.pcp + c.allocated == a.managed_pages(), || {
        format!("checkpoint: pages not conserved: {c:?}, {} managed", a.managed_pages())
    });
    sh.passed.fetch_add(mine.passed, Ordering::Relaxed);
    sh.pause.store(false, Ordering::Release);
    while sh.parked.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_micros(100));
    }
    sh.publish(main, Op::Idle, 0);
}

fn free_owned(sh: &Shared, mine: &mut Mine, p: Pfn, o: u32) {
    sh.release("free_pages", p.as_u64(), 1 << o);
    let r = sh.a.free_pages(p, o);
    check(sh, mine, r.is_ok(), || format!("free_pages({p:?}, {o}) of an owned block: {r:?}"));
}

/// After the workers: free what is left, drain, and check that every page is
/// back and the invariants hold.
fn teardown(sh: &Shared) {
    let mut mine = Mine::default();
    drain_handoff(sh, &mut mine);
    for (p, o) in std::mem::take(&mut *sh.pool.lock().unwrap()) {
        free_owned(sh, &mut mine, p, o);
    }
    for &p in &sh.lock_pages {
        check(
            sh,
            &mut mine,
            !sh.a.page_locks().page_locked_racy(p) && !sh.a.page_locks().page_writeback_racy(p),
            || format!("lock page {p:?} still locked or under writeback at the end"),
        );
        free_owned(sh, &mut mine, p, 0);
    }
    let a = &sh.a;
    a.drain_all_pages();
    let r = a.check_invariants();
    check(sh, &mut mine, r.is_ok(), || format!("check_invariants at the end: {r:?}"));
    let c = a.census();
    check(sh, &mut mine, c.allocated == 0 && c.pcp == 0 && c.isolated_free == 0, || {
        format!("pages not all back at the end: {c:?}")
    });
    check(sh, &mut mine, a.nr_free_pages() == a.managed_pages(), || {
        format!("conservation: {} free of {} managed after all frees", a.nr_free_pages(), a.managed_pages())
    });
    let leftover = sh.owned.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as u64).sum::<u64>();
    check(sh, &mut mine, leftover == 0, || format!("{leftover} pages still marked owned"));
    sh.passed.fetch_add(mine.passed, Ordering::Relaxed);
}
