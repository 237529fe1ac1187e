//! A mapping's writeback errors, reported to every fsync that should see
//! them (the kernel's `errseq_t`, reduced to what fsync needs).
//!
//! Each failed write back bumps a sequence number. An fsync notes the
//! number when it starts and, when it ends, fails if an error came during
//! its run (whoever else also reports it: two fsyncs racing one failed
//! write both fail) or if an error is still unreported (one that came
//! between fsyncs, say in the flusher or in reclaim: the first fsync after
//! it fails). One slot that the first fsync took, as before, let the other
//! of two racing fsyncs return `Ok` with the page still dirty.
//!
//! The first reporter gets the error as the source returned it; the others
//! a copy (the same `PageCacheError`, OS error code, or kind and message).

use super::checked::PageCacheError;
use std::io;

/// See the module doc.
#[derive(Default)]
pub(crate) struct WbErrors {
    /// Errors recorded so far.
    seq: u64,
    /// `seq` when an fsync last reported.
    reported: u64,
    /// The first error since the last report, as the source gave it.
    first: Option<io::Error>,
    /// A copy of the latest first error, for every other reporter.
    copy: Option<Copy>,
}

enum Copy {
    Cache(PageCacheError),
    Os(i32),
    Other(io::ErrorKind, String),
}

impl Copy {
    fn of(e: &io::Error) -> Self {
        if let Some(c) = PageCacheError::of(e) {
            return Self::Cache(c.clone());
        }
        match e.raw_os_error() {
            Some(code) => Self::Os(code),
            None => Self::Other(e.kind(), e.to_string()),
        }
    }
    fn make(&self) -> io::Error {
        match self {
            Self::Cache(c) => c.clone().into(),
            Self::Os(code) => io::Error::from_raw_os_error(*code),
            Self::Other(kind, msg) => io::Error::new(*kind, msg.clone()),
        }
    }
}

impl WbErrors {
    /// A write back failed with `e`.
    pub(crate) fn record(&mut self, e: io::Error) {
        self.seq += 1;
        if self.first.is_none() && self.seq == self.reported + 1 {
            self.copy = Some(Copy::of(&e));
            self.first = Some(e);
        }
    }

    /// An fsync starts: its mark.
    pub(crate) fn mark(&self) -> u64 {
        self.seq
    }

    /// An fsync that started at `mark` ends: the error it must return.
    pub(crate) fn check(&mut self, mark: u64) -> Option<io::Error> {
        if self.seq > self.reported {
            self.reported = self.seq;
            return self.first.take().or_else(|| self.copy.as_ref().map(Copy::make));
        }
        (self.seq > mark).then(|| self.copy.as_ref().map(Copy::make)).flatten()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_overlapping_fsync_and_the_first_later_one_see_an_error() {
        let mut w = WbErrors::default();
        let (a, b) = (w.mark(), w.mark());
        w.record(io::Error::other("EIO"));
        w.record(io::Error::other("second"));
        let ea = w.check(a).expect("a overlapped the error");
        assert_eq!(ea.to_string(), "EIO", "the first error is the one reported");
        assert_eq!(w.check(b).map(|e| e.to_string()).as_deref(), Some("EIO"), "b overlapped it too");
        assert!(w.check(w.mark()).is_none(), "reported, and nothing new");
        // Between fsyncs: the next one reports it, once.
        w.record(io::Error::from_raw_os_error(28));
        let c = w.mark();
        assert_eq!(w.check(c).and_then(|e| e.raw_os_error()), Some(28));
        assert!(w.check(w.mark()).is_none());
        w.record(PageCacheError::SourcePanicked { op: "write_page", message: "x".into() }.into());
        let (d, e) = (w.mark() - 1, w.mark() - 1);
        assert!(w.check(d).is_some());
        let again = w.check(e).unwrap();
        assert!(matches!(PageCacheError::of(&again), Some(PageCacheError::SourcePanicked { .. })));
    }
}
