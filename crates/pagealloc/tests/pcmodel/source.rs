//! The model's page source: an in-memory file (page index -> bytes, zeros
//! where nothing was written back) behind a fault injector. Every call is
//! logged with its index, the bytes it was asked to write and the fault
//! injected into it, if any; the harness reads the log after each operation
//! and checks it against the calls the model expects.
//!
//! A source either reads page by page (`readahead()` false: the cache's
//! fills then read one page, through `read_page`) or asks for readahead
//! (`read_pages` gets windows of several pages, logged as one call).
//!
//! Faults come from a schedule fixed before the run: "the `n`th call
//! (from 0) of kind `call` to this source fails by `fault`". The schedule
//! depends only on call counts, never on the cache's state, so a sequence
//! that fails replays exactly.

use pagealloc::{PageCacheError, PageSource, PAGE_SIZE};
use std::collections::HashMap;
use std::io;
use std::sync::{Mutex, Once};

/// The message of every injected error and the payload of every injected
/// panic: the panic hook silences exactly these.
pub const MARKER: &str = "pagecache_model: injected fault";

/// A kind of source call that can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    Read,
    Write,
    Sync,
}

/// How an injected fault fails the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `Err(io::Error::other(MARKER))`.
    Error,
    /// `panic_any(MARKER)`.
    Panic,
}

/// One scheduled fault: the `nth` call of kind `call` fails by `fault`.
pub type Planned = (Call, u32, Fault);

/// One call the source received.
#[derive(Clone, Debug)]
pub struct Event {
    pub call: Call,
    /// The page (the first of a window; 0 for `sync`).
    pub index: u64,
    /// Pages of a read (1 but for readahead windows); 0 for the others.
    pub count: u64,
    /// The bytes a `write_page` was handed (empty for the others).
    pub bytes: Vec<u8>,
    /// The fault injected into this call, if any (the call then changed
    /// nothing).
    pub fault: Option<Fault>,
}

#[derive(Default)]
struct State {
    counts: HashMap<Call, u32>,
    log: Vec<Event>,
}

/// See the module doc.
pub struct FaultySource {
    readahead: bool,
    pages: Mutex<HashMap<u64, Vec<u8>>>,
    schedule: Vec<Planned>,
    state: Mutex<State>,
}

impl FaultySource {
    pub fn new(readahead: bool, schedule: Vec<Planned>) -> Self {
        Self { readahead, pages: Mutex::new(HashMap::new()), schedule, state: Mutex::new(State::default()) }
    }

    /// The calls since the last `take_log`, in order.
    pub fn take_log(&self) -> Vec<Event> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }

    /// The written-back pages now.
    pub fn pages(&self) -> HashMap<u64, Vec<u8>> {
        self.pages.lock().unwrap().clone()
    }

    /// Whether the cache reads this source ahead.
    pub fn reads_ahead(&self) -> bool {
        self.readahead
    }

    /// Page `index` of the file into `buf` (zeros where it has none).
    fn copy_out(&self, index: u64, buf: &mut [u8]) {
        match self.pages.lock().unwrap().get(&index) {
            Some(p) => buf.copy_from_slice(p),
            None => buf.fill(0),
        }
    }

    /// Store `bytes` as page `index` without a call being logged: a change
    /// behind the model's back (the harness's self-test).
    pub fn poke(&self, index: u64, bytes: Vec<u8>) {
        self.pages.lock().unwrap().insert(index, bytes);
    }

    /// Count and log a call; the fault to inject into it, if any. No lock is
    /// held on return, so the caller may panic.
    fn enter(&self, call: Call, index: u64, count: u64, bytes: &[u8]) -> Option<Fault> {
        let mut s = self.state.lock().unwrap();
        let n = s.counts.entry(call).or_default();
        let nth = *n;
        *n += 1;
        let fault = self.schedule.iter().find(|&&(c, k, _)| c == call && k == nth).map(|&(_, _, f)| f);
        s.log.push(Event { call, index, count, bytes: bytes.to_vec(), fault });
        fault
    }
}

fn fail(fault: Fault) -> io::Result<()> {
    match fault {
        Fault::Error => Err(io::Error::other(MARKER)),
        Fault::Panic => std::panic::panic_any(MARKER),
    }
}

impl PageSource for FaultySource {
    fn read_page(&self, index: u64, buf: &mut [u8]) -> io::Result<()> {
        if let Some(f) = self.enter(Call::Read, index, 1, &[]) {
            return fail(f);
        }
        self.copy_out(index, buf);
        Ok(())
    }
    fn read_pages(&self, index: u64, bufs: &mut [&mut [u8]]) -> io::Result<()> {
        if !self.readahead {
            // As the trait's default: page by page, through `read_page`.
            for (k, b) in bufs.iter_mut().enumerate() {
                self.read_page(index + k as u64, b)?;
            }
            return Ok(());
        }
        if let Some(f) = self.enter(Call::Read, index, bufs.len() as u64, &[]) {
            return fail(f);
        }
        for (k, b) in bufs.iter_mut().enumerate() {
            self.copy_out(index + k as u64, b);
        }
        Ok(())
    }
    fn readahead(&self) -> bool {
        self.readahead
    }
    fn write_page(&self, index: u64, buf: &[u8]) -> io::Result<()> {
        assert_eq!(buf.len(), PAGE_SIZE, "writeback hands whole pages");
        if let Some(f) = self.enter(Call::Write, index, 0, buf) {
            return fail(f);
        }
        self.pages.lock().unwrap().insert(index, buf.to_vec());
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        match self.enter(Call::Sync, 0, 0, &[]) {
            Some(f) => fail(f),
            None => Ok(()),
        }
    }
}

/// The callback name a panic of `call` is reported under (a fill reads
/// through `read_pages`, whose default calls `read_page`).
fn op_name(call: Call) -> &'static str {
    match call {
        Call::Read => "read_pages",
        Call::Write => "write_page",
        Call::Sync => "sync",
    }
}

/// Whether `e` is the error the page cache must report for `fault`
/// injected into a call of kind `call`: the source's own error unchanged,
/// or a panic as `SourcePanicked` naming the callback and its message.
pub fn is_injected(e: &io::Error, call: Call, fault: Fault) -> bool {
    match fault {
        Fault::Error => PageCacheError::of(e).is_none() && e.to_string() == MARKER,
        Fault::Panic => matches!(
            PageCacheError::of(e),
            Some(PageCacheError::SourcePanicked { op, message }) if *op == op_name(call) && message == MARKER
        ),
    }
}

/// Install (once per process) a panic hook that drops the report of the
/// injected panics, which the page cache catches and turns into errors,
/// and hands every other panic to the hook it replaces: the test harness
/// still reports real failures, with their messages.
pub fn silence_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let msg = p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str));
            if msg != Some(MARKER) {
                prev(info);
            }
        }));
    });
}
