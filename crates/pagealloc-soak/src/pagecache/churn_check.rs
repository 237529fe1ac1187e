//! The checks of `stress --pagecache`'s churn threads: the rules of
//! `churn`'s module doc, as code. A failed call is judged by the
//! refusals it may give; a page read is judged by who may have written it.

use super::churn::{Held, Session, Worker, WRITTEN};
use super::sources::{check_churn, Injected, SourceOp, PANIC_MARKER};
use pagealloc::{PageCacheError, PageHandle};
use std::io;
use std::sync::atomic::Ordering;

/// Retries of a call that hit an injected fault.
const FAULT_RETRIES: u32 = 16;

/// How a failed call was refused, when the refusal is allowed.
#[derive(PartialEq, Eq)]
pub(crate) enum Refusal {
    Removed,
    Fault,
    NoMemory,
}

impl Worker<'_> {
    /// Judge a failed call on the session's mapping (`ops`: the library's
    /// names of the source operations the call may reach). Returns the
    /// refusal if it is allowed; reports it otherwise.
    pub(crate) fn refused(
        &self,
        c: usize,
        dead_at: &mut Option<u64>,
        what: &str,
        ops: &[&str],
        e: &io::Error,
    ) -> Option<Refusal> {
        let cid = &self.ch.ids[c];
        let counts = &self.ch.counts;
        let r = match (PageCacheError::of(e), Injected::of(e)) {
            (Some(PageCacheError::MappingRemoved { id }), _) if *id == cid.id => {
                counts.refused_removed.fetch_add(1, Ordering::Relaxed);
                dead_at.get_or_insert_with(|| cid.started.load(Ordering::SeqCst));
                return Some(Refusal::Removed);
            }
            (Some(PageCacheError::SourcePanicked { op, message }), _)
                if cid.faulty && ops.contains(op) && message.contains(PANIC_MARKER) =>
            {
                counts.seen_panics.fetch_add(1, Ordering::Relaxed);
                Refusal::Fault
            }
            (None, Some(inj)) if cid.faulty && ops.iter().any(|o| allowed(o, inj.op)) => {
                counts.seen_errors.fetch_add(1, Ordering::Relaxed);
                Refusal::Fault
            }
            (None, None)
                if cid.faulty && Injected::copied_op(e).is_some_and(|op| ops.iter().any(|o| allowed(o, op))) =>
            {
                counts.seen_errors.fetch_add(1, Ordering::Relaxed);
                Refusal::Fault
            }
            (None, None) if e.kind() == io::ErrorKind::OutOfMemory && !ops.is_empty() => {
                self.sh.failed_fills.fetch_add(1, Ordering::Relaxed);
                Refusal::NoMemory
            }
            _ => {
                self.sh.violation(format!("{what} on churn mapping {}: unexpected error: {e}", cid.id));
                return None;
            }
        };
        if dead_at.is_some() {
            self.sh.violation(format!("{what} on churn mapping {} after MappingRemoved: {e}", cid.id));
        }
        Some(r)
    }

    /// The result of a call on the session's mapping: its value, or None
    /// after judging its error (a dead handle must refuse every call).
    pub(crate) fn outcome<T>(&self, s: &mut Session<'_>, what: &str, ops: &[&str], r: io::Result<T>) -> Option<T> {
        match r {
            Ok(v) => {
                if s.dead_at.is_some() {
                    self.sh.violation(format!("{what} on churn mapping {} served after MappingRemoved", s.m.id()));
                }
                Some(v)
            }
            Err(e) => {
                self.refused(s.c, &mut s.dead_at, what, ops, &e);
                None
            }
        }
    }

    /// `f` until it succeeds or is refused for another reason than an
    /// injected fault; a fault that does not clear is a violation.
    pub(crate) fn retry<T>(
        &self,
        s: &mut Session<'_>,
        what: &str,
        ops: &[&str],
        mut f: impl FnMut() -> io::Result<T>,
    ) -> Option<T> {
        let mut faults = 0;
        loop {
            match f() {
                Ok(v) => {
                    if faults > 0 {
                        self.ch.counts.recovered.fetch_add(1, Ordering::Relaxed);
                    }
                    return self.outcome(s, what, ops, Ok(v));
                }
                Err(e) => match self.refused(s.c, &mut s.dead_at, what, ops, &e) {
                    Some(Refusal::Fault) if faults < FAULT_RETRIES => faults += 1,
                    Some(Refusal::Fault) => {
                        self.sh.violation(format!(
                            "{what} on churn mapping {}: {faults} injected faults in a row, the source's faults \
                             do not clear",
                            s.m.id()
                        ));
                        return None;
                    }
                    _ => return None,
                },
            }
        }
    }

    /// Check the bytes of page `i` of churn id `c` (module doc). `fresh`:
    /// just looked up in the mapping, not read through a handle held since
    /// (whose page a removal or delete may have left behind a newer one).
    pub(crate) fn check_read(&self, c: usize, i: u64, buf: &[u8], fresh: bool) -> Option<u64> {
        let cid = &self.ch.ids[c];
        let st_after = cid.started.load(Ordering::SeqCst);
        let v = match check_churn(cid.id, i, buf) {
            Ok(v) => v,
            Err(e) => {
                self.sh.violation(format!("{} {e}", if fresh { "fresh read:" } else { "held handle:" }));
                return None;
            }
        };
        let bad = if cid.store.is_none() || i >= WRITTEN {
            (v != 0).then(|| format!("read-only page {i} of churn mapping {} holds version {v}", cid.id))
        } else if fresh && i % self.ch.threads == self.j {
            let o = self.own[c][((i - self.j) / self.ch.threads) as usize];
            if st_after == o.fin_at_write && v != o.hi {
                let how = if o.deleted { " (deleted after an fsync returned Ok)" } else { "" };
                Some(format!(
                    "lost write: churn mapping {} page {i} holds version {v}, {} was written{how}",
                    cid.id, o.hi
                ))
            } else if v > o.hi {
                Some(format!("churn mapping {} page {i} holds version {v}, never written (last {})", cid.id, o.hi))
            } else {
                if v < o.synced {
                    self.ch.counts.stale_after_removal.fetch_add(1, Ordering::Relaxed);
                }
                None
            }
        } else {
            let max = cid.max_written[i as usize].load(Ordering::SeqCst);
            (v > max).then(|| format!("churn mapping {} page {i} holds version {v}, above any begun ({max})", cid.id))
        };
        if let Some(msg) = bad {
            self.sh.violation(msg);
            return None;
        }
        Some(v)
    }

    /// Read a handle's page and check it as a fresh read.
    pub(crate) fn check_handle(&self, s: &Session<'_>, h: &PageHandle<'_>, buf: &mut [u8], fresh: bool) -> Option<u64> {
        h.read(0, buf);
        self.check_read(s.c, h.index(), buf, fresh)
    }

    /// Check a page `find_get` found, which may not be up to date: a page
    /// whose fill failed is dropped unfilled, holding its frame's old bytes.
    /// Only a page still mapped after the read was filled (a failed fill
    /// leaves the map before its unlock); on a faulty mapping the others
    /// are not checked (those with bytes not their own are counted).
    pub(crate) fn check_found(&self, s: &Session<'_>, h: &PageHandle<'_>, buf: &mut [u8]) {
        h.read(0, buf);
        let cid = &self.ch.ids[s.c];
        if cid.faulty && !matches!(s.m.find_get(h.index()), Ok(Some(again)) if again.pfn() == h.pfn()) {
            if check_churn(cid.id, h.index(), buf).is_err() {
                self.ch.counts.unfilled_found.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        self.check_read(s.c, h.index(), buf, true);
    }

    /// A held handle still reads its page: the same bytes for a read-only
    /// page, never an older version for a written one.
    pub(crate) fn check_held(&self, s: &Session<'_>, held: &Held<'_>, buf: &mut [u8]) {
        let Some(v) = self.check_handle(s, &held.h, buf, false) else { return };
        if v < held.version {
            self.sh.violation(format!(
                "held handle on churn mapping {} page {} went back from version {} to {v}",
                s.m.id(),
                held.h.index(),
                held.version
            ));
        }
        if s.dead_at.is_some() {
            self.ch.counts.held_across_removal.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Judge an error of a fill outside a session (the end's handshake).
    pub(crate) fn judge_end(&self, c: usize, what: &str, e: &io::Error) {
        self.refused(c, &mut None, what, &["read_pages"], e);
    }
}

/// Whether an injected failure of `op` can surface in the library's `name`
/// for the source call (the cache reads only through `read_pages`).
fn allowed(name: &str, op: SourceOp) -> bool {
    match op {
        SourceOp::ReadPage | SourceOp::ReadPages => name == "read_pages",
        SourceOp::WritePage => name == "write_page",
        SourceOp::Sync => name == "sync",
    }
}
