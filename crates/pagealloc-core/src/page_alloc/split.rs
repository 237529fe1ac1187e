//! Splitting an allocated block into order-0 pages (the kernel's
//! `split_page`), so that its owner can free any part of it alone: what a
//! kernel's `dealloc(addr, size)` of part of an earlier allocation needs.

use super::Core;
use crate::error::FreeError;
use crate::types::{Order, Pfn};

impl Core {
    /// Turn the allocated block `pfn` of `order` into `2^order` allocated
    /// order-0 pages, each freed on its own afterwards. The block must be
    /// one a raw free would accept (no lock, writeback, references or
    /// owner): the split holds it with the free path's claim, so a free or
    /// lock racing with it fails cleanly rather than seeing half a split.
    ///
    /// # Errors
    /// Whatever a free of the block would be refused with, and nothing
    /// changes.
    pub(crate) fn split_block(&self, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        let c = self.claim(pfn, order, false)?;
        if c.order != order {
            // Freed and reallocated at another order while the checks ran:
            // not the block the caller meant.
            self.unclaim(pfn, c.old);
            return Err(FreeError::WrongOrder { pfn, order: order.get(), actual: c.order.get() });
        }
        let p = pfn.as_u64();
        let mt = self.mm.page(p).private_mt();
        for q in p + 1..p + order.pages() {
            // Tails are the claimant's alone: nothing reads them as heads
            // until these stores, and the caller hands the pages on only
            // after this returns.
            let d = self.mm.page(q);
            d.set_private(Order::ZERO, mt);
            d.set_flags(crate::page::flags::HEAD);
        }
        self.mm.page(p).set_private(Order::ZERO, mt);
        // The head's word back as the claim found it (an allocated head, now
        // of order 0), plus `WAITERS`: a free of the whole block that read
        // the old word and order before the split must not find that word
        // again (its compare-and-swap would land on the head alone, at its
        // new order), so its CAS fails and its checks, run again, refuse it
        // as `WrongOrder`. A spurious `WAITERS` costs the page's next unlock
        // or free one wait-queue lookup (see `unclaim`). Loom models below.
        self.unclaim(pfn, c.old | crate::page::flags::WAITERS);
        Ok(())
    }
}

/// A split racing the frees a confused owner (or a stranger) may make at
/// the same time: of a tail frame, and of the whole block. Whatever order
/// they run in, each call either happens whole or is refused, and every
/// frame comes back exactly once.
#[cfg(all(test, loom))]
mod loom_tests {
    use crate::{Config, FrameAllocator, Gfp, Pfn};
    use loom::sync::Arc;

    fn tiny() -> Arc<FrameAllocator> {
        Arc::new(FrameAllocator::new(Config::small(2 << 20).nr_cpus(Some(1)).min_free_kbytes(Some(0))).unwrap())
    }

    fn all_back(f: &FrameAllocator) {
        f.check_invariants().unwrap();
        f.drain();
        assert_eq!(f.nr_free_pages(), f.nr_pages());
    }

    #[test]
    fn split_races_a_free_of_a_tail_frame() {
        loom::model(|| {
            let f = tiny();
            let p = f.alloc(Gfp::KERNEL, 1).unwrap();
            let tail = Pfn::new(p.as_u64() + 1);
            let g = Arc::clone(&f);
            let t = loom::thread::spawn(move || g.free(tail, 0));
            f.split(p, 1).expect("the owner's split of its block");
            if t.join().unwrap().is_err() {
                // Refused while the tail was still inside the block: the
                // owner frees it now.
                f.free(tail, 0).unwrap();
            }
            f.free(p, 0).unwrap();
            all_back(&f);
        });
    }

    #[test]
    fn split_races_a_free_of_the_whole_block() {
        loom::model(|| {
            let f = tiny();
            let p = f.alloc(Gfp::KERNEL, 1).unwrap();
            let g = Arc::clone(&f);
            let t = loom::thread::spawn(move || g.free(p, 1));
            let split = f.split(p, 1);
            let freed = t.join().unwrap();
            assert!(split.is_ok() != freed.is_ok(), "exactly one wins: {split:?} {freed:?}");
            if split.is_ok() {
                f.free(p, 0).unwrap();
                f.free(Pfn::new(p.as_u64() + 1), 0).unwrap();
            }
            all_back(&f);
        });
    }
}
