//! `pagealloc stress`: a soak test. N threads run a random mix of every
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

use clap::Args;
use pagealloc::{
    AllocError, Backing, Config, FreeError, Gfp, NodeId, PageAllocator, PageStateError, Pfn, WaitError, MAX_ORDER,
    PAGEBLOCK_PAGES,
};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `pagealloc stress`.
#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Seconds to run the mix for.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seed of every random choice (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Arena size in MiB (two nodes, each with a small Movable zone).
    #[arg(long, default_value_t = 128)]
    pub arena_mb: u64,
    /// Seconds one operation may take before the run is declared hung.
    #[arg(long, default_value_t = 20.0)]
    pub hang_timeout: f64,
    /// Inject allocation failures at this rate, in parts per million (needs the
    /// `fail-inject` feature).
    #[arg(long, default_value_t = 0)]
    pub fail_rate_ppm: u32,
    /// Force per-CPU trylock failures at this rate, in parts per million (needs
    /// the `fail-inject` feature).
    #[arg(long, default_value_t = 0)]
    pub trylock_fail_ppm: u32,
    /// Issue 19's signal soak instead of the mix: SIGUSR1 every 50 us to the
    /// workers, whose handler allocates and frees with the no-lock API (see
    /// `stress_nolock`).
    #[arg(long)]
    pub nolock_signal: bool,
    /// The page-cache soak instead of the mix: lookups, reads, writes,
    /// fsync and deletes of a file-backed mapping twice the arena, with
    /// reclaim, shrinker calls and compaction running, and churn mappings
    /// removed under their users, some over failing sources (see
    /// `stress_pagecache`).
    #[arg(long)]
    pub pagecache: bool,
    /// With `--pagecache`: no churn mappings (no removals, no faulty
    /// sources, no cache drop under held mappings).
    #[arg(long)]
    pub no_churn: bool,
    /// With `--pagecache`: churn mappings' sources never panic or fail.
    #[arg(long)]
    pub no_source_faults: bool,
}

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
    Teardown,
}

const OPS: [Op; 25] = [
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
    if args.nolock_signal {
        return crate::stress_nolock::run(args.threads, args.duration, args.arena_mb);
    }
    if args.pagecache {
        return crate::stress_pagecache::run(args);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let inject = args.fail_rate_ppm > 0 || args.trylock_fail_ppm > 0;
    if inject && !configure_injection(args, seed) {
        eprintln!("stress: --fail-rate-ppm/--trylock-fail-ppm need a build with `--features fail-inject`");
        return 2;
    }
    let nodes = 2;
    let cfg = Config::new()
        .arena_bytes(args.arena_mb << 20)
        .nodes(nodes)
        .movable_zone_bytes((args.arena_mb << 20) / 16)
        .backing(Backing::None);
    let a = match PageAllocator::new(cfg) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stress: {e}");
            return 2;
        }
    };
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
    let mut lock_pages = Vec::new();
    for _ in 0..16 {
        match a.alloc_pages(Gfp::KERNEL, 0) {
            Ok(p) => lock_pages.push(p),
            Err(e) => {
                eprintln!("stress: cannot allocate the lock pages: {e}");
                return 2;
            }
        }
    }
    let sh = Arc::new(Shared {
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
    });
    for &p in &sh.lock_pages {
        sh.claim("lock page", p.as_u64(), 1);
    }
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
    // Checkpoints: about once a second stop the world and check everything.
    let end = sh.t0 + Duration::from_secs_f64(args.duration);
    let mut checkpoints = 0u64;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(1000)));
        if Instant::now() < end {
            checkpoint(&sh, threads);
            checkpoints += 1;
        }
    }
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
    #[cfg(feature = "fail-inject")]
    if inject {
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
        check(sh, mine, sh.a.unlock_page(p) == Ok(()), || format!("unlock of handed-off lock page {p:?} failed"));
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
        let r = sh.a.free_contig_range(p, n);
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

fn op_alloc(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if mine.held.len() >= 48 {
        return op_free(sh, t, rng, mine);
    }
    let (gfp, order) = (rng.gfp(), rng.order());
    sh.publish(t, Op::Alloc, order as u64);
    let r = if rng.below(4) == 0 {
        sh.a.alloc_pages_node(NodeId(rng.below(sh.nodes as u64) as u32), gfp, order)
    } else {
        sh.a.alloc_pages(gfp, order)
    };
    match r {
        Ok(p) => {
            if sh.claim_block("alloc_pages", p.as_u64(), order) {
                mine.passed += 1;
                mine.held.push((p, order));
            }
        }
        Err(e) => check(sh, mine, alloc_ok(sh, e), || format!("alloc_pages({gfp:?}, {order}): {e:?}")),
    }
}

fn op_free(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if mine.held.is_empty() {
        return;
    }
    let (p, o) = mine.held.swap_remove(rng.below(mine.held.len() as u64) as usize);
    sh.publish(t, Op::Free, p.as_u64());
    free_owned(sh, mine, p, o);
}

fn op_bulk_alloc(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let n = 1 + rng.below(64) as usize;
    let gfp = rng.gfp();
    sh.publish(t, Op::BulkAlloc, n as u64);
    if rng.below(4) == 0 {
        return page_array_round(sh, rng, mine, n, gfp);
    }
    const SENTINEL: u64 = 1 << 60;
    let holes = rng.next();
    let mut slots: Vec<Option<Pfn>> =
        (0..n).map(|i| (holes >> (i % 64) & 1 == 1 && i % 3 == 0).then_some(Pfn::new(SENTINEL + i as u64))).collect();
    let lead = sh.a.alloc_pages_bulk(gfp, &mut slots);
    let real_lead = slots.iter().take_while(|s| s.is_some()).count();
    check(sh, mine, lead == real_lead, || format!("alloc_pages_bulk returned {lead}, {real_lead} leading slots"));
    for (i, s) in slots.iter().enumerate() {
        match s {
            Some(p) if p.as_u64() >= SENTINEL => {
                check(sh, mine, p.as_u64() == SENTINEL + i as u64, || format!("bulk moved populated slot {i}"));
            }
            Some(p) if sh.claim("alloc_pages_bulk", p.as_u64(), 1) => {
                mine.passed += 1;
                mine.held.push((*p, 0));
            }
            Some(_) | None => {}
        }
    }
    trim(sh, rng, mine);
}

/// A `PageArray` of `n` slots: filled (every page claimed in the
/// tracker), a raw free and a lock of one of its pfns refused, each page's
/// first byte written and read back, some pages taken out as raw pages
/// (kept) or `Pages` handles (dropped), the rest released.
fn page_array_round(sh: &Shared, rng: &mut Rng, mine: &mut Mine, n: usize, gfp: Gfp) {
    let mut arr = match sh.a.page_array(n) {
        Ok(arr) => arr,
        Err(e) => return sh.violation(format!("page_array({n}): {e:?}")),
    };
    let lead = arr.fill(gfp);
    check(sh, mine, lead == arr.populated(), || format!("PageArray::fill returned {lead}, {} held", arr.populated()));
    for &p in arr.slots().iter().flatten() {
        sh.claim("PageArray::fill", p.as_u64(), 1);
    }
    if let Some(p) = arr.get(0) {
        let r = sh.a.free_pages(p, 0);
        check(sh, mine, r == Err(FreeError::Owned { pfn: p }), || format!("free_pages of an array's page: {r:?}"));
        check(sh, mine, !sh.a.trylock_page(p), || format!("trylock_page of an array's page {p:?} succeeded"));
    }
    for i in 0..lead {
        if let Some(f) = arr.frame_mut(i) {
            f[0] = i as u8;
        }
    }
    for i in 0..lead {
        if let Some(f) = arr.frame(i) {
            check(sh, mine, f[0] == i as u8, || format!("an array's frame {i} changed under it"));
        }
    }
    for i in 0..lead {
        match rng.below(8) {
            0 => {
                if let Some(p) = arr.take_pfn(i) {
                    mine.held.push((p, 0));
                }
            }
            1 => {
                if let Some(h) = arr.take(i) {
                    sh.release("Pages from a PageArray", h.pfn().as_u64(), 1);
                    drop(h);
                }
            }
            _ => {}
        }
    }
    for &p in arr.slots().iter().flatten() {
        sh.release("PageArray::release", p.as_u64(), 1);
    }
    arr.release();
    check(sh, mine, arr.populated() == 0, || "PageArray::release left pages".to_string());
    trim(sh, rng, mine);
}

fn op_bulk_list(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let n = 1 + rng.below(64) as usize;
    sh.publish(t, Op::BulkList, n as u64);
    let mut out = Vec::new();
    let got = sh.a.alloc_pages_bulk_list(rng.gfp(), n, &mut out);
    check(sh, mine, got == out.len() && got <= n, || format!("alloc_pages_bulk_list: {got} of {n}, {}", out.len()));
    for p in out {
        if sh.claim("alloc_pages_bulk_list", p.as_u64(), 1) {
            mine.held.push((p, 0));
        }
    }
    trim(sh, rng, mine);
}

/// Keep holdings bounded: free random blocks down to 48.
fn trim(sh: &Shared, rng: &mut Rng, mine: &mut Mine) {
    while mine.held.len() > 48 {
        let (p, o) = mine.held.swap_remove(rng.below(mine.held.len() as u64) as usize);
        free_owned(sh, mine, p, o);
    }
}

fn op_bulk_free(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::BulkFree, 0);
    let mut list = Vec::new();
    let mut bad = Vec::new();
    let mut i = 0;
    while i < mine.held.len() && list.len() < 32 {
        if mine.held[i].1 == 0 && rng.below(2) == 0 {
            let (p, _) = mine.held.swap_remove(i);
            sh.release("free_pages_bulk", p.as_u64(), 1);
            list.push(p);
        } else {
            i += 1;
        }
    }
    // Entries that must be refused (never a duplicate: once the first copy is
    // freed another thread may own the page again).
    for _ in 0..rng.below(3) {
        let at = rng.below(list.len() as u64 + 1) as usize;
        let (p, want) = match rng.below(2) {
            0 => {
                let p = Pfn::new(sh.nr_pages + rng.below(1000));
                (p, FreeError::OutOfRange { pfn: p, nr_pages: sh.nr_pages })
            }
            _ => match mine.held.iter().find(|(_, o)| *o > 0) {
                Some(&(h, o)) => {
                    let p = h.add(1 + rng.below((1 << o) - 1));
                    (p, FreeError::InsideBlock { pfn: p, head: h })
                }
                None => (Pfn::MAX, FreeError::OutOfRange { pfn: Pfn::MAX, nr_pages: sh.nr_pages }),
            },
        };
        for b in bad.iter_mut() {
            let (j, _): &mut (usize, FreeError) = b;
            if *j >= at {
                *j += 1;
            }
        }
        list.insert(at, p);
        bad.push((at, want));
    }
    bad.sort_by_key(|b| b.0);
    let r = sh.a.free_pages_bulk(&list);
    let got = r.map_or_else(|e| e.rejected, |()| Vec::new());
    check(sh, mine, got == bad, || format!("free_pages_bulk rejected {got:?}, expected {bad:?}"));
}

fn op_cross(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::CrossFree, 0);
    if rng.below(2) == 0 && !mine.held.is_empty() {
        let b = mine.held.swap_remove(rng.below(mine.held.len() as u64) as usize);
        sh.pool.lock().unwrap().push(b);
    } else {
        let b = sh.pool.lock().unwrap().pop();
        if let Some((p, o)) = b {
            free_owned(sh, mine, p, o);
        }
    }
}

fn op_contig(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if let Some((p, n)) = mine.contig.pop() {
        sh.publish(t, Op::FreeContig, p.as_u64());
        sh.release("free_contig_range", p.as_u64(), n);
        let r = sh.a.free_contig_range(p, n);
        check(sh, mine, r.is_ok(), || format!("free_contig_range({p:?}, {n}): {r:?}"));
        return;
    }
    let max = if rng.below(4) == 0 { 1024 } else { 64 };
    let n = 1 + rng.below(max);
    sh.publish(t, Op::Contig, n);
    match sh.a.alloc_contig_pages(n, rng.gfp()) {
        Ok(p) => {
            if sh.claim("alloc_contig_pages", p.as_u64(), n) {
                mine.passed += 1;
                mine.contig.push((p, n));
            }
        }
        Err(e) => {
            check(sh, mine, matches!(e, AllocError::NoMemory { .. }), || format!("alloc_contig_pages({n}): {e:?}"))
        }
    }
}

fn op_isolate(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let blocks = sh.nr_pages / PAGEBLOCK_PAGES;
    let s = rng.below(blocks) * PAGEBLOCK_PAGES + if rng.below(2) == 0 { 0 } else { rng.below(PAGEBLOCK_PAGES) };
    let nr = 1 + rng.below(2 * PAGEBLOCK_PAGES);
    sh.publish(t, Op::Isolate, s);
    match sh.a.isolate_range(Pfn::new(s), nr) {
        Ok(()) => {
            let _ = sh.a.test_pages_isolated(Pfn::new(s), nr);
            std::thread::yield_now();
            let r = sh.a.undo_isolate_range(Pfn::new(s), nr);
            check(sh, mine, r.is_ok(), || format!("undo of our own isolation of {s:#x}+{nr}: {r:?}"));
        }
        Err(
            PageStateError::AlreadyIsolated { .. }
            | PageStateError::Unisolatable { .. }
            | PageStateError::BadRange { .. },
        ) => mine.passed += 1,
        Err(e) => sh.violation(format!("isolate_range({s:#x}, {nr}): {e:?}")),
    }
}

fn op_lock_pages(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let p = sh.lock_pages[rng.below(sh.lock_pages.len() as u64) as usize];
    match rng.below(8) {
        0..=2 => {
            // Lock (sleeping), maybe start writeback, hold briefly, unlock, end it.
            drain_handoff(sh, mine);
            sh.publish(t, Op::LockPage, p.as_u64());
            let r = sh.a.lock_page(p);
            check(sh, mine, r.is_ok() && sh.a.page_locked_racy(p), || format!("lock_page({p:?}): {r:?}"));
            let wb = rng.below(3) == 0 && sh.a.set_page_writeback(p) == Ok(true);
            for _ in 0..rng.below(50) {
                std::hint::spin_loop();
            }
            if rng.below(4) == 0 {
                std::thread::yield_now();
            }
            sh.publish(t, Op::Unlock, p.as_u64());
            let r = if rng.below(2) == 0 { sh.a.unlock_page(p) } else { sh.a.unlock_page_uptodate(p) };
            check(sh, mine, r.is_ok(), || format!("unlock_page({p:?}) we hold: {r:?}"));
            if wb {
                std::thread::yield_now();
                sh.publish(t, Op::Writeback, p.as_u64());
                let r = sh.a.end_page_writeback(p);
                check(sh, mine, r.is_ok(), || format!("end_page_writeback({p:?}) we started: {r:?}"));
            }
        }
        3 => {
            sh.publish(t, Op::LockTimeout, p.as_u64());
            match sh.a.lock_page_timeout(p, Duration::from_micros(200)) {
                Ok(()) => {
                    let r = sh.a.unlock_page(p);
                    check(sh, mine, r.is_ok(), || format!("unlock after lock_page_timeout({p:?}): {r:?}"));
                }
                Err(e) => check(sh, mine, e == WaitError::TimedOut, || format!("lock_page_timeout({p:?}): {e:?}")),
            }
        }
        4 => {
            // Lock without sleeping and leave the unlock to whichever thread
            // next drains the hand-off list.
            sh.publish(t, Op::Trylock, p.as_u64());
            if sh.a.trylock_page(p) {
                mine.passed += 1;
                sh.handoff.lock().unwrap().push(p);
            }
        }
        5 | 6 => {
            drain_handoff(sh, mine);
            sh.publish(t, Op::WaitLocked, p.as_u64());
            let r = sh.a.wait_on_page_locked(p);
            check(sh, mine, r.is_ok(), || format!("wait_on_page_locked({p:?}): {r:?}"));
        }
        _ => {
            drain_handoff(sh, mine);
            sh.publish(t, Op::WaitWriteback, p.as_u64());
            let r = sh.a.wait_on_page_writeback(p);
            check(sh, mine, r.is_ok(), || format!("wait_on_page_writeback({p:?}): {r:?}"));
        }
    }
}

/// Wait briefly on a block another thread may free at any moment: the wait
/// ends with the unlock, the timeout, or `NotAllocated` once it is freed.
fn op_peek_wait(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let p = {
        let pool = sh.pool.lock().unwrap();
        if pool.is_empty() {
            return;
        }
        pool[rng.below(pool.len() as u64) as usize].0
    };
    sh.publish(t, Op::PeekWait, p.as_u64());
    let r = if rng.below(2) == 0 {
        sh.a.wait_on_page_locked_timeout(p, Duration::from_micros(100))
    } else {
        sh.a.wait_on_page_writeback_timeout(p, Duration::from_micros(100))
    };
    let ok =
        matches!(r, Ok(()) | Err(WaitError::TimedOut) | Err(WaitError::State(PageStateError::NotAllocated { .. })));
    check(sh, mine, ok, || format!("wait on pooled page {p:?}: {r:?}"));
}

/// Lock states of a block only this thread holds: every answer is exact.
fn op_own_lock(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let Some(&(p, o)) = mine.held.get(rng.below(mine.held.len() as u64 + 1) as usize) else { return };
    sh.publish(t, Op::OwnLock, p.as_u64());
    let a = &sh.a;
    check(sh, mine, a.trylock_page(p), || format!("trylock of our unlocked block {p:?}"));
    check(sh, mine, !a.trylock_page(p), || format!("second trylock of {p:?} succeeded"));
    let r = a.free_pages(p, o);
    check(sh, mine, r == Err(FreeError::Locked { pfn: p }), || format!("free of locked {p:?}: {r:?}"));
    check(sh, mine, a.set_page_writeback(p) == Ok(true), || format!("set_page_writeback({p:?})"));
    check(sh, mine, a.unlock_page(p).is_ok(), || format!("unlock_page({p:?})"));
    let r = a.unlock_page(p);
    check(sh, mine, r == Err(PageStateError::NotLocked { pfn: p }), || format!("unlock of unlocked {p:?}: {r:?}"));
    let r = a.free_pages(p, o);
    check(sh, mine, r == Err(FreeError::Writeback { pfn: p }), || format!("free under writeback {p:?}: {r:?}"));
    check(sh, mine, a.end_page_writeback(p).is_ok(), || format!("end_page_writeback({p:?})"));
    let r = a.end_page_writeback(p);
    check(sh, mine, r == Err(PageStateError::NotWriteback { pfn: p }), || {
        format!("second end_page_writeback {p:?}: {r:?}")
    });
}

fn op_reports(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::Reports, 0);
    let a = &sh.a;
    let ok = match rng.below(7) {
        0 => a.buddyinfo().to_string().starts_with("Node 0, zone"),
        1 => a.pagetypeinfo().to_string().starts_with("Page block order: 9"),
        2 => !a.zoneinfo().to_string().is_empty(),
        3 => !a.vmstat().to_string().is_empty(),
        4 => a.snapshot_consistent().consistent,
        5 => a.pcp_report().len() >= 4,
        _ => {
            let c = a.census();
            c.free + c.pcp + c.allocated <= a.managed_pages()
        }
    };
    check(sh, mine, ok, || "a report read gave a malformed answer".into());
}

fn op_misuse(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::Misuse, 0);
    let a = &sh.a;
    let n = sh.nr_pages;
    match rng.below(6) {
        0 => {
            let p = Pfn::new(n + rng.below(4096));
            let r = a.free_pages(p, 0);
            check(sh, mine, r == Err(FreeError::OutOfRange { pfn: p, nr_pages: n }), || format!("free {p:?}: {r:?}"));
        }
        1 => {
            let r = a.alloc_pages(Gfp::KERNEL, MAX_ORDER + 1);
            check(sh, mine, r == Err(AllocError::InvalidOrder { order: MAX_ORDER + 1 }), || format!("{r:?}"));
        }
        2 => {
            let r = a.alloc_pages_node(NodeId(sh.nodes + 3), Gfp::KERNEL, 0);
            let ok = r == Err(AllocError::InvalidNode { nid: sh.nodes + 3 })
                || (sh.inject && r == Err(AllocError::Injected));
            check(sh, mine, ok, || format!("{r:?}"));
        }
        3 => {
            if let Some(&(p, o)) = mine.held.iter().find(|(_, o)| *o < MAX_ORDER) {
                let r = a.free_pages(p, o + 1);
                let want = if p.as_u64() % (2 << o) != 0 {
                    FreeError::Misaligned { pfn: p, order: o + 1 }
                } else {
                    FreeError::WrongOrder { pfn: p, order: o + 1, actual: o }
                };
                check(sh, mine, r == Err(want), || format!("free {p:?} with order {}: {r:?}", o + 1));
            }
        }
        4 => {
            let r = a.isolate_range(Pfn::new(0), 0);
            check(sh, mine, r == Err(PageStateError::BadRange { pfn: Pfn::new(0) }), || format!("{r:?}"));
        }
        _ => {
            let p = Pfn::new(n + 1);
            let r = a.lock_page(p);
            check(sh, mine, r == Err(PageStateError::OutOfRange { pfn: p }), || format!("lock {p:?}: {r:?}"));
        }
    }
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
        check(sh, &mut mine, !sh.a.page_locked_racy(p) && !sh.a.page_writeback_racy(p), || {
            format!("lock page {p:?} still locked or under writeback at the end")
        });
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
