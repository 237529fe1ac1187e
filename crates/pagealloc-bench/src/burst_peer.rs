//! `pagealloc burst-peer PEER BLOCKS IDLE_MS` (hidden): one peer's side of
//! `bench burst-idle`, run by that experiment in a process of its own so that
//! each allocator's resident memory is measured alone.
//!
//! The child does what the experiment does to pagealloc, with the peer's
//! 4 KiB-aligned 4 KiB blocks instead of order-0 pages: take the resident set
//! (/proc/self/statm) before the burst, allocate `BLOCKS` blocks touching one
//! byte of each, free three quarters of them in the experiment's random order
//! ([`crate::harness::rand::shuffle`]), then idle with nothing called,
//! sampling the resident set every 100 ms for `IDLE_MS`. It prints one line per
//! sample, `sample <t_ms> <rss_pages>` (t from just before the frees), then
//! `burst-peer: before=<p> allocated=<n> live=<n> burst=<p> peak=<p> after=<p>`
//! (pages; `burst` before the frees, `peak` right after them, `after` the last
//! sample), or `burst-peer: not-run <reason>` when the peer
//! cannot be loaded. [`parse`] reads that back.

use crate::peers::DlAlloc;
use clap::ValueEnum;
use std::io::Write;
use std::time::{Duration, Instant};

/// The peer allocators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Peer {
    /// glibc's `aligned_alloc`/`free`, default settings (no `malloc_trim`).
    Glibc,
    /// gperftools' `tc_memalign`/`tc_free` (libtcmalloc_minimal.so.4).
    Tcmalloc,
    /// jemalloc's `aligned_alloc`/`free` (libjemalloc.so.2), default decay.
    Jemalloc,
}

impl Peer {
    /// Every peer, in the order the experiment runs them.
    pub const ALL: [Peer; 3] = [Peer::Glibc, Peer::Tcmalloc, Peer::Jemalloc];

    /// Its name on the command line and in the figures.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Glibc => "glibc",
            Peer::Tcmalloc => "tcmalloc",
            Peer::Jemalloc => "jemalloc",
        }
    }

    fn load(self) -> Result<DlAlloc, String> {
        match self {
            Peer::Glibc => Ok(DlAlloc::glibc()),
            Peer::Tcmalloc => DlAlloc::tcmalloc(),
            Peer::Jemalloc => DlAlloc::jemalloc(),
        }
    }
}

/// One peer's run, as the child reported it (resident sizes in 4 KiB pages).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerRun {
    /// Resident set before the burst.
    pub before: u64,
    /// Blocks allocated by the burst.
    pub allocated: u64,
    /// Blocks still allocated after the frees.
    pub live: u64,
    /// Resident set at the end of the burst, before the frees.
    pub burst: u64,
    /// Resident set right after the frees.
    pub peak: u64,
    /// Resident set at the end of the idle time.
    pub after: u64,
    /// (ms since just before the frees, resident pages), every 100 ms.
    pub samples: Vec<(u64, u64)>,
}

impl PeerRun {
    /// (resident after - resident before) / live.
    pub fn ratio(&self) -> f64 {
        (self.after as f64 - self.before as f64) / self.live as f64
    }
}

/// What the child said.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It ran.
    Ran(PeerRun),
    /// It could not load the peer: why.
    NotRun(String),
}

/// Read a child's output back; an error for anything that is neither a run
/// nor a refusal.
pub fn parse(out: &str) -> Result<Outcome, String> {
    let mut samples = Vec::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("sample ") {
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{line:?}: {e}"))?;
            match v[..] {
                [t, rss] => samples.push((t, rss)),
                _ => return Err(format!("{line:?}: two numbers expected")),
            }
        } else if let Some(why) = line.strip_prefix("burst-peer: not-run ") {
            return Ok(Outcome::NotRun(why.to_string()));
        } else if let Some(rest) = line.strip_prefix("burst-peer: ") {
            let mut r = PeerRun::default();
            for kv in rest.split_whitespace() {
                let (k, v) = kv.split_once('=').ok_or_else(|| format!("{kv:?}: key=value expected"))?;
                let v: u64 = v.parse().map_err(|e| format!("{kv:?}: {e}"))?;
                match k {
                    "before" => r.before = v,
                    "allocated" => r.allocated = v,
                    "live" => r.live = v,
                    "burst" => r.burst = v,
                    "peak" => r.peak = v,
                    "after" => r.after = v,
                    _ => return Err(format!("{kv:?}: unknown key")),
                }
            }
            if r.live == 0 || r.allocated < r.live {
                return Err(format!("{line:?}: no live blocks"));
            }
            r.samples = samples;
            return Ok(Outcome::Ran(r));
        }
    }
    Err("no burst-peer line in the child's output".into())
}

fn rss_pages() -> u64 {
    crate::harness::process_rss_pages().unwrap_or(0)
}

/// The child's work, written to `out` (see the module's documentation).
pub fn child(peer: Peer, blocks: usize, idle_ms: u64, out: &mut impl Write) -> std::io::Result<()> {
    let p = match peer.load() {
        Ok(p) => p,
        Err(e) => return writeln!(out, "burst-peer: not-run {e}"),
    };
    let before = rss_pages();
    let mut ptrs = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        // SAFETY: a power-of-two alignment and a size that is a multiple of it.
        let b = unsafe { (p.alloc)(4096, 4096) }.cast::<u8>();
        if b.is_null() {
            break;
        }
        // SAFETY: `b` is a fresh 4096-byte block of this peer's.
        unsafe { b.write_volatile(1) };
        ptrs.push(b);
    }
    crate::harness::rand::shuffle(&mut ptrs);
    let allocated = ptrs.len();
    let keep = allocated / 4;
    let burst = rss_pages();
    let t_free = Instant::now();
    for b in ptrs.drain(keep..) {
        // SAFETY: allocated above by this peer, freed once, to it.
        unsafe { (p.free)(b.cast()) };
    }
    let peak = rss_pages();
    let mut last = peak;
    let steps = idle_ms / 100;
    for k in 0..=steps {
        last = rss_pages();
        writeln!(out, "sample {} {last}", t_free.elapsed().as_millis())?;
        if let Some(d) = Duration::from_millis((k + 1) * 100).checked_sub(t_free.elapsed()) {
            if k < steps {
                std::thread::sleep(d);
            }
        }
    }
    writeln!(
        out,
        "burst-peer: before={before} allocated={allocated} live={keep} burst={burst} peak={peak} after={last}"
    )?;
    for b in ptrs {
        // SAFETY: allocated above by this peer, freed once, to it.
        unsafe { (p.free)(b.cast()) };
    }
    Ok(())
}

/// `pagealloc burst-peer`: the exit status.
pub fn run(peer: Peer, blocks: usize, idle_ms: u64) -> i32 {
    let mut out = std::io::stdout().lock();
    match child(peer, blocks, idle_ms, &mut out) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("burst-peer: {e}");
            1
        }
    }
}

/// Run `peer` in a child process (this executable, hidden subcommand, with
/// [`crate::peers::STATIC_TLS_TUNABLE`] added to `GLIBC_TUNABLES` so that
/// jemalloc can be loaded) and read its report.
pub fn spawn(peer: Peer, blocks: usize, idle_ms: u64) -> Result<Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let tunables = match std::env::var("GLIBC_TUNABLES") {
        Ok(t) if !t.is_empty() => format!("{t}:{}", crate::peers::STATIC_TLS_TUNABLE),
        _ => crate::peers::STATIC_TLS_TUNABLE.to_string(),
    };
    let o = std::process::Command::new(exe)
        .env("GLIBC_TUNABLES", tunables)
        .args(["burst-peer", peer.name(), &blocks.to_string(), &idle_ms.to_string()])
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("spawn: {e}"))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: String = err.lines().rev().take(3).collect::<Vec<_>>().join(" / ");
        return Err(format!("child {}: {tail}", o.status));
    }
    parse(&String::from_utf8_lossy(&o.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_parses() {
        let out =
            "sample 5 100\nsample 104 90\nburst-peer: before=10 allocated=400 live=100 burst=410 peak=400 after=120\n";
        let Ok(Outcome::Ran(r)) = parse(out) else { panic!("{:?}", parse(out)) };
        assert_eq!((r.before, r.allocated, r.live, r.burst, r.peak, r.after), (10, 400, 100, 410, 400, 120));
        assert_eq!(r.samples, vec![(5, 100), (104, 90)]);
        assert!((r.ratio() - 1.1).abs() < 1e-9, "{}", r.ratio());
        assert_eq!(parse("burst-peer: not-run no such file\n"), Ok(Outcome::NotRun("no such file".into())));
        for bad in [
            "",
            "sample 1\n",
            "burst-peer: before=x\n",
            "burst-peer: bogus=1 live=1 allocated=1\n",
            "burst-peer: before=1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    /// The child's own output, for the process's allocator, parses back with
    /// the counts it was given (a small burst, no idle time).
    #[test]
    fn a_glibc_child_reports_its_burst() {
        let mut out = Vec::new();
        child(Peer::Glibc, 256, 0, &mut out).expect("child");
        let Ok(Outcome::Ran(r)) = parse(&String::from_utf8_lossy(&out)) else { panic!("{out:?}") };
        assert_eq!((r.allocated, r.live, r.samples.len()), (256, 64, 1));
        assert!(r.before > 0 && r.after > 0, "{r:?}");
    }
}
