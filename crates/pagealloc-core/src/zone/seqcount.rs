//! The zone's sequence count: lock-free readers get the zone counters of one
//! instant, never a merge or split caught halfway (the kernel's
//! `seqcount_t`; the fence placement is Boehm's, "Can seqlocks get along
//! with programming language memory models?", MSPC 2012).
//!
//! The writer, which holds the zone lock, makes the count odd before its
//! first counter write and even again after its last. A reader that sees the
//! same even count before and after its reads saw no write of a section in
//! progress: a counter value written inside a section is stored after the
//! writer's Release fence, so a reader that read it synchronises at its own
//! Acquire fence and must then see the odd count (or a later one).
//!
//! The protocol is modelled by loom below on loom atomics. The zone's own
//! counters are core atomics ([`crate::sync::LockedCounter`]: loom does not
//! model them), so under loom a zone read reports no consistent answer and
//! its caller takes the lock: a core-atomic read cannot synchronise with
//! loom's fences, and the model would report torn reads that real hardware
//! and the language's memory model rule out.

use crate::sync::{fence, AtomicU64, Ordering};

/// Start a write section (the caller holds the lock that serialises writers).
#[inline(always)]
pub(crate) fn write_begin(seq: &AtomicU64) {
    let s = seq.load(Ordering::Relaxed);
    seq.store(s.wrapping_add(1), Ordering::Relaxed);
    // The odd value is ordered before every counter store of the section.
    fence(Ordering::Release);
}

/// End a write section.
#[inline(always)]
pub(crate) fn write_end(seq: &AtomicU64) {
    let s = seq.load(Ordering::Relaxed);
    // Every counter stored in the section is visible to a reader that
    // Acquire-loads the even value.
    seq.store(s.wrapping_add(1), Ordering::Release);
}

/// `read()` on values of one instant: at most `tries` attempts while writers
/// keep the count moving, then None.
#[inline]
pub(crate) fn read<R>(seq: &AtomicU64, tries: usize, mut read: impl FnMut() -> R) -> Option<R> {
    for _ in 0..tries {
        let s = seq.load(Ordering::Acquire);
        if s & 1 == 0 {
            let r = read();
            // The values are read before the count is read again.
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s {
                return Some(r);
            }
        }
        core::hint::spin_loop();
    }
    None
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;

    /// A writer moving 256 units between two counters the way a merge
    /// does (the total dips to 0 between its stores) races a reader: the
    /// reader never returns the dip.
    #[test]
    fn seqcount_reader_never_sees_a_section_halfway() {
        loom::model(|| {
            let w = Arc::new((AtomicU64::new(0), AtomicU64::new(256), AtomicU64::new(0)));
            let r = w.clone();
            let t = loom::thread::spawn(move || {
                let (seq, a, b) = &*r;
                if let Some(total) = read(seq, 2, || a.load(Ordering::Relaxed) + b.load(Ordering::Relaxed)) {
                    assert!(total == 256 || total == 512, "a torn read: {total}");
                }
            });
            let (seq, a, b) = &*w;
            write_begin(seq);
            a.store(0, Ordering::Relaxed);
            b.store(512, Ordering::Relaxed);
            write_end(seq);
            t.join().unwrap();
        });
    }
}
