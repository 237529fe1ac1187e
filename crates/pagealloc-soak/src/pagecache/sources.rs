//! The page sources of `stress --pagecache`'s churn mappings (see
//! `churn`): the page images they serve, a versioned in-memory store
//! that behaves as a file does, and [`Faulty`], a wrapper that panics or
//! fails on a schedule.
//!
//! A churn page's image names its mapping id, its index and a version in a
//! 24-byte header, and every other byte is a function of the three: a page
//! read from the wrong mapping, the wrong index, a freed and reused frame or
//! a torn write shows up as a header that is not the page's or bytes that
//! do not match their header.
//!
//! [`Faulty`] fails one call in every `period` calls of each source
//! operation, at a phase fixed by the seed: two consecutive calls of one
//! operation never both fail, so a caller's retry after an injected fault
//! succeeds unless other threads' calls came in between. Half the faults
//! are panics whose message carries [`PANIC_MARKER`] (the panic hook of
//! [`silence_injected_panics`] keeps them off stderr), half return an
//! [`Injected`] error.

use pagealloc::PageSource;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Header bytes of a churn image: index, version, mapping id.
const HEADER: usize = 24;

/// The bytes of page `index` of churn mapping `id` at `version`.
pub(crate) fn churn_image(id: u64, index: u64, version: u64, buf: &mut [u8]) {
    buf[..8].copy_from_slice(&index.to_le_bytes());
    buf[8..16].copy_from_slice(&version.to_le_bytes());
    buf[16..24].copy_from_slice(&id.to_le_bytes());
    let seed = index.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ version.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ id.wrapping_mul(0x1656_67b1_9e37_79f9);
    for (k, b) in buf[HEADER..].iter_mut().enumerate() {
        *b = (seed >> ((k % 8) * 8)) as u8 ^ (k / 8) as u8;
    }
}

/// The version a churn image of page `index` of mapping `id` holds, or why
/// it is not one.
pub(crate) fn check_churn(id: u64, index: u64, buf: &[u8]) -> Result<u64, String> {
    let word = |k: usize| u64::from_le_bytes(buf[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
    let (got_index, version, got_id) = (word(0), word(1), word(2));
    if (got_id, got_index) != (id, index) {
        return Err(format!("mapping {id} page {index} holds mapping {got_id} page {got_index}'s header"));
    }
    let mut want = vec![0u8; buf.len()];
    churn_image(id, index, version, &mut want);
    if buf != want.as_slice() {
        return Err(format!("mapping {id} page {index} version {version}: bytes do not match the header"));
    }
    Ok(version)
}

/// A versioned store standing in for a file: page `i` reads as
/// `churn_image(id, i, versions[i])`, and writing a page back stores the
/// version its header names. It outlives every mapping opened over it, as
/// a file outlives the inodes cached from it: a removal discards dirty
/// pages, and the next mapping reads what was written back.
pub(crate) struct Store {
    id: u64,
    versions: Vec<AtomicU64>,
    /// Pages written back whose bytes were not a churn image of their own
    /// index (a violation the soak reports at the end).
    pub(crate) bad_writes: AtomicU64,
}

impl Store {
    pub(crate) fn new(id: u64, pages: u64) -> Self {
        Self { id, versions: (0..pages).map(|_| AtomicU64::new(0)).collect(), bad_writes: AtomicU64::new(0) }
    }
}

impl PageSource for Store {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        // Past the store's end (the largest index) a page reads as version 0.
        let v = self.versions.get(index as usize).map_or(0, |v| v.load(Ordering::Acquire));
        churn_image(self.id, index, v, buf);
        Ok(())
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        match (check_churn(self.id, index, buf), self.versions.get(index as usize)) {
            (Ok(v), Some(slot)) => slot.store(v, Ordering::Release),
            (Err(e), _) => {
                if self.bad_writes.fetch_add(1, Ordering::Relaxed) < 5 {
                    eprintln!("stress --pagecache: VIOLATION: written back: {e}");
                }
            }
            // Nobody writes past the store: a write there is a page that
            // carries an index it was never given.
            (Ok(_), None) => {
                self.bad_writes.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
    fn readahead(&self) -> bool {
        true
    }
    fn nr_pages(&self) -> Option<u64> {
        Some(self.versions.len() as u64)
    }
}

/// The text every injected panic's message carries.
pub(crate) const PANIC_MARKER: &str = "stress-injected-panic";

/// The source operations [`Faulty`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceOp {
    ReadPage,
    ReadPages,
    WritePage,
    Sync,
}

impl SourceOp {
    pub(crate) const ALL: [SourceOp; 4] = [Self::ReadPage, Self::ReadPages, Self::WritePage, Self::Sync];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::ReadPage => "read_page",
            Self::ReadPages => "read_pages",
            Self::WritePage => "write_page",
            Self::Sync => "sync",
        }
    }

    /// One call in `period` fails. Writeback faults are rarer: one fsync
    /// writes back every dirty page of its mapping, and a retried fsync
    /// must get through within a few tries.
    fn period(self) -> u64 {
        match self {
            Self::ReadPage => 24,
            Self::ReadPages => 32,
            Self::WritePage => 64,
            Self::Sync => 12,
        }
    }
}

/// The error an injected failure returns.
#[derive(Debug)]
pub(crate) struct Injected {
    pub(crate) op: SourceOp,
    call: u64,
}

impl Injected {
    /// The injected failure an I/O error carries, if it carries one.
    pub(crate) fn of(e: &io::Error) -> Option<&Injected> {
        e.get_ref().and_then(|i| i.downcast_ref())
    }

    /// The operation of an injected failure that reached the caller as a
    /// copy: a failed write back is reported to every fsync that overlapped
    /// it, and all but the first get its kind and message only (the
    /// library's fsync error sequence), not this type.
    pub(crate) fn copied_op(e: &io::Error) -> Option<SourceOp> {
        let msg = e.to_string();
        SourceOp::ALL.into_iter().find(|o| msg.starts_with(&format!("injected failure of {} call ", o.name())))
    }
}

impl fmt::Display for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected failure of {} call {}", self.op.name(), self.call)
    }
}

impl std::error::Error for Injected {}

/// Faults injected so far, per operation (indexed as [`SourceOp::ALL`]).
#[derive(Default)]
pub(crate) struct FaultCounts {
    pub(crate) panics: [AtomicU64; 4],
    pub(crate) errors: [AtomicU64; 4],
}

/// A source that fails on a schedule (module doc).
pub(crate) struct Faulty {
    inner: Arc<dyn PageSource>,
    /// Per operation: the call that fails first (`phase < period`).
    phase: [u64; 4],
    seed: u64,
    calls: [AtomicU64; 4],
    counts: Arc<FaultCounts>,
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

impl Faulty {
    pub(crate) fn new(inner: Arc<dyn PageSource>, seed: u64, counts: Arc<FaultCounts>) -> Self {
        let phase = SourceOp::ALL.map(|op| mix(seed ^ op as u64) % op.period());
        Self { inner, phase, seed, calls: Default::default(), counts }
    }

    /// Count a call of `op`; fail it if the schedule says so.
    fn hit(&self, op: SourceOp) -> io::Result<()> {
        let k = op as usize;
        let n = self.calls[k].fetch_add(1, Ordering::Relaxed);
        if n % op.period() != self.phase[k] {
            return Ok(());
        }
        if mix(self.seed ^ n.rotate_left(17) ^ k as u64) & 1 == 0 {
            self.counts.panics[k].fetch_add(1, Ordering::Relaxed);
            panic!("{PANIC_MARKER}: {} call {n}", op.name());
        }
        self.counts.errors[k].fetch_add(1, Ordering::Relaxed);
        Err(io::Error::other(Injected { op, call: n }))
    }
}

impl PageSource for Faulty {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        self.hit(SourceOp::ReadPage)?;
        self.inner.read_page(index, buf)
    }
    /// A single page through our own `read_page`, so that its faults reach
    /// the cache (which calls only `read_pages`). A window of several pages
    /// is failed only as a whole: a page failing inside it fails the whole
    /// window, and the retry's window would most likely hold another
    /// failing page, the retried read never getting through.
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        self.hit(SourceOp::ReadPages)?;
        match bufs {
            [one] => self.read_page(index, one),
            _ => self.inner.read_pages(index, bufs),
        }
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        self.hit(SourceOp::WritePage)?;
        self.inner.write_page(index, buf)
    }
    fn sync(&self) -> io::Result<()> {
        self.hit(SourceOp::Sync)?;
        self.inner.sync()
    }
    fn nr_pages(&self) -> Option<u64> {
        self.inner.nr_pages()
    }
    fn readahead(&self) -> bool {
        self.inner.readahead()
    }
    fn grow_to(&self, end: u64) -> io::Result<()> {
        self.inner.grow_to(end)
    }
}

/// Keep the default panic hook quiet about the panics [`Faulty`] injects
/// (their message carries [`PANIC_MARKER`]); every other panic goes to the
/// hook installed before.
pub(crate) fn silence_injected_panics() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str));
        if !msg.is_some_and(|m| m.contains(PANIC_MARKER)) {
            prev(info);
        }
    }));
}
