//! Reading a `scripts/capture-trace` file: the header, the /proc snapshots
//! at the start and the end, and the kmem events, as tracefs prints them
//! (`include/trace/events/kmem.h`'s formats, Linux 6.18):
//!
//! ```text
//! cc1-1056 [001] ..... 2334.185765: mm_page_alloc: page=00000000 pfn=0x4720ac order=0 migratetype=0 gfp_flags=GFP_KERNEL|__GFP_ZERO
//! cc1-1056 [001] ..... 2334.186693: mm_page_free: page=00000000 pfn=0x491420 order=0
//! ```
//!
//! Only allocations and frees are kept (compactly, for replaying more than
//! once); the other events are counted as the kernel's own figures: its
//! fragmenting fallbacks (`mm_page_alloc_extfrag` with `fragmenting=1`) and
//! an estimate of its zone-lock acquisitions (a run of per-CPU refills, a run
//! of drains, or one direct buddy allocation on one CPU takes the lock once).
//! `mm_page_free_batched` repeats a page `mm_page_free` already reported
//! (6.18 traces both for a batched free), so it is counted, not freed again.
//!
//! Nothing in a file can make the reader panic: a line it cannot read is
//! counted in [`BadInput`] and skipped, and a file cut short ends the events
//! where it was cut.

use std::collections::BTreeMap;
use std::io::BufRead;

/// One allocation or free, as replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Microseconds since the first event.
    pub t_us: u32,
    /// The kernel's pfn.
    pub pfn: u64,
    /// Order of the block.
    pub order: u8,
    /// What happened.
    pub kind: OpKind,
}

/// An allocation (with what the replay needs of its request) or a free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// `mm_page_alloc`: migratetype 0..=2 and the zone its gfp flags ask for.
    Alloc { mt: u8, zone: GfpZone, high: bool },
    /// `mm_page_free`.
    Free,
}

/// The highest zone a request may use, from its gfp flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GfpZone {
    /// `__GFP_DMA`.
    Dma,
    /// `__GFP_DMA32`.
    Dma32,
    /// Neither: Normal (or Movable, which this kernel's snapshot may lack).
    Normal,
}

/// Lines and events the reader could not use, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BadInput {
    /// An event line whose fields did not parse.
    pub malformed: u64,
    /// An event this reader does not know.
    pub unknown_event: u64,
    /// The file ended inside a line, or the compressed stream was cut.
    pub truncated: bool,
    /// Lines outside any section, or snapshot sections named twice.
    pub stray_lines: u64,
}

/// What the kernel itself did in the trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelCounts {
    /// Allocations that returned a page.
    pub allocs: u64,
    /// Allocations that failed (`pfn=0`, no page).
    pub alloc_failures: u64,
    /// `mm_page_free` events.
    pub frees: u64,
    /// `mm_page_free_batched` events (each repeats an `mm_page_free`).
    pub free_batched: u64,
    /// `mm_page_pcpu_drain` events (pages drained from per-CPU lists).
    pub pcpu_drain: u64,
    /// `mm_page_alloc_zone_locked` events (pages taken under the zone lock).
    pub zone_locked: u64,
    /// `mm_page_alloc_extfrag` events.
    pub extfrag: u64,
    /// Of those, `fragmenting=1` (fallback below pageblock order).
    pub extfrag_fragmenting: u64,
    /// Zone-lock acquisitions, estimated from the runs above.
    pub zone_lock_estimate: u64,
}

/// A whole capture.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// `# key: value` header lines.
    pub header: BTreeMap<String, String>,
    /// `## start <file>` sections: file name -> text.
    pub start: BTreeMap<String, String>,
    /// `## end <file>` sections.
    pub end: BTreeMap<String, String>,
    /// Allocations and frees in trace order.
    pub ops: Vec<Op>,
    /// The kernel's own counts.
    pub kernel: KernelCounts,
    /// Events the ring buffer dropped (`## lost`).
    pub lost: u64,
    /// Seconds from the first event to the last.
    pub span_s: f64,
    /// What could not be read.
    pub bad: BadInput,
}

/// Where the reader is in the file.
enum Section {
    None,
    Start(String),
    End(String),
    Events,
}

/// Per-CPU state of the zone-lock estimate: the kind of the CPU's last
/// lock-taking event.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LastLocked {
    Other,
    Refill,
    Drain,
}

/// The reader's running state over the event lines.
struct Events {
    t0: Option<f64>,
    last_t: f64,
    per_cpu: Vec<LastLocked>,
}

/// Read a capture from `r` (already decompressed).
pub fn read(r: impl BufRead) -> Trace {
    let mut t = Trace::default();
    let mut section = Section::None;
    let mut ev = Events { t0: None, last_t: 0.0, per_cpu: Vec::new() };
    for line in r.split(b'\n') {
        let Ok(mut line) = line else {
            t.bad.truncated = true;
            break;
        };
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let line = String::from_utf8_lossy(&line);
        if let Some(rest) = line.strip_prefix("## ") {
            section = start_section(&mut t, rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some((k, v)) = rest.split_once(": ") {
                t.header.insert(k.trim().to_string(), v.trim().to_string());
            }
            continue;
        }
        match &section {
            Section::Start(f) => push_line(&mut t.start, f, &line),
            Section::End(f) => push_line(&mut t.end, f, &line),
            Section::Events if line.trim().is_empty() => {}
            Section::Events => event_line(&mut t, &mut ev, &line),
            Section::None => t.bad.stray_lines += u64::from(!line.trim().is_empty()),
        }
    }
    t.span_s = ev.t0.map_or(0.0, |t0| ev.last_t - t0);
    // capture-trace writes the end snapshots after the events: without
    // them the file was cut.
    if t.end.is_empty() {
        t.bad.truncated = true;
    }
    t
}

/// A `## ...` line: which section starts.
fn start_section(t: &mut Trace, rest: &str) -> Section {
    let mut w = rest.split_whitespace();
    match (w.next(), w.next()) {
        (Some("start"), Some(f)) => Section::Start(f.to_string()),
        (Some("end"), Some(f)) => Section::End(f.to_string()),
        (Some("trace"), None) => Section::Events,
        (Some("lost"), Some(n)) => {
            t.lost = n.parse().unwrap_or(0);
            Section::None
        }
        _ => {
            t.bad.stray_lines += 1;
            Section::None
        }
    }
}

fn push_line(m: &mut BTreeMap<String, String>, f: &str, line: &str) {
    let s = m.entry(f.to_string()).or_default();
    s.push_str(line);
    s.push('\n');
}

/// `key=value` of a field list.
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields.split_whitespace().find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

fn num(fields: &str, key: &str) -> Option<u64> {
    let v = field(fields, key)?;
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// One line of `trace_pipe`.
fn event_line(t: &mut Trace, ev: &mut Events, line: &str) {
    let Some(at) = line.find(": mm_") else {
        // A line that is no kmem event: another event's, or garbage.
        if line.contains(": ") && line.contains('[') {
            t.bad.unknown_event += 1;
        } else {
            t.bad.malformed += 1;
        }
        return;
    };
    let (prefix, rest) = (&line[..at], &line[at + 2..]);
    let (Some((name, fields)), Some(ts), Some(cpu)) = (rest.split_once(": "), timestamp(prefix), cpu_of(prefix)) else {
        t.bad.malformed += 1;
        return;
    };
    let t0 = *ev.t0.get_or_insert(ts);
    ev.last_t = ev.last_t.max(ts);
    let t_us = ((ts - t0).max(0.0) * 1e6).min(f64::from(u32::MAX)) as u32;
    if ev.per_cpu.len() <= cpu {
        ev.per_cpu.resize(cpu + 1, LastLocked::Other);
    }
    let ok = match name {
        "mm_page_alloc" => alloc(t, fields, t_us),
        "mm_page_free" => free(t, fields, t_us),
        "mm_page_free_batched" => num(fields, "pfn").map(|_| t.kernel.free_batched += 1),
        "mm_page_pcpu_drain" => num(fields, "pfn").map(|_| {
            t.kernel.pcpu_drain += 1;
            lock_run(t, &mut ev.per_cpu[cpu], LastLocked::Drain);
        }),
        "mm_page_alloc_zone_locked" => num(fields, "percpu_refill").map(|refill| {
            t.kernel.zone_locked += 1;
            let kind = if refill == 1 { LastLocked::Refill } else { LastLocked::Other };
            lock_run(t, &mut ev.per_cpu[cpu], kind);
        }),
        "mm_page_alloc_extfrag" => num(fields, "fragmenting").map(|f| {
            t.kernel.extfrag += 1;
            t.kernel.extfrag_fragmenting += u64::from(f == 1);
        }),
        _ => {
            t.bad.unknown_event += 1;
            return;
        }
    };
    if ok.is_none() {
        t.bad.malformed += 1;
    }
    if !matches!(name, "mm_page_pcpu_drain" | "mm_page_alloc_zone_locked") {
        ev.per_cpu[cpu] = LastLocked::Other;
    }
}

/// Count a zone-lock acquisition when a run of refills or drains starts on
/// a CPU, or for each direct buddy allocation (`kind` Other).
fn lock_run(t: &mut Trace, last: &mut LastLocked, kind: LastLocked) {
    if kind == LastLocked::Other || *last != kind {
        t.kernel.zone_lock_estimate += 1;
    }
    *last = kind;
}

/// The timestamp: the word before `: mm_`.
fn timestamp(prefix: &str) -> Option<f64> {
    prefix.rsplit(' ').next()?.parse().ok().filter(|t: &f64| t.is_finite())
}

/// The CPU: the last `[NNN]` of the prefix (a task name may hold brackets).
fn cpu_of(prefix: &str) -> Option<usize> {
    let open = prefix.rfind('[')?;
    let close = open + prefix[open..].find(']')?;
    prefix[open + 1..close].trim().parse().ok().filter(|&c| c < 1 << 16)
}

fn alloc(t: &mut Trace, fields: &str, t_us: u32) -> Option<()> {
    let (pfn, order, mt) = (num(fields, "pfn")?, num(fields, "order")?, num(fields, "migratetype")?);
    let flags = field(fields, "gfp_flags")?;
    if order > 10 {
        return None;
    }
    if pfn == 0 {
        t.kernel.alloc_failures += 1;
        return Some(());
    }
    let has = |f: &str| flags.split('|').any(|x| x == f);
    let zone = if has("__GFP_DMA") || has("GFP_DMA") {
        GfpZone::Dma
    } else if has("__GFP_DMA32") || has("GFP_DMA32") {
        GfpZone::Dma32
    } else {
        GfpZone::Normal
    };
    let high = has("__GFP_HIGH") || has("GFP_ATOMIC");
    t.kernel.allocs += 1;
    // HighAtomic (3) and others are requested as unmovable, as the
    // kernel's gfp_migratetype would have them.
    let mt = if mt <= 2 { mt as u8 } else { 0 };
    t.ops.push(Op { t_us, pfn, order: order as u8, kind: OpKind::Alloc { mt, zone, high } });
    Some(())
}

fn free(t: &mut Trace, fields: &str, t_us: u32) -> Option<()> {
    let (pfn, order) = (num(fields, "pfn")?, num(fields, "order")?);
    if order > 10 {
        return None;
    }
    t.kernel.frees += 1;
    t.ops.push(Op { t_us, pfn, order: order as u8, kind: OpKind::Free });
    Some(())
}

/// Open a capture: gzip (by its magic bytes) or plain text.
pub fn open(path: &std::path::Path) -> std::io::Result<Trace> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path)?);
    let gz = f.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gz { read(std::io::BufReader::new(flate2::bufread::MultiGzDecoder::new(f))) } else { read(f) })
}
