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
    pub fn split_block(&self, pfn: Pfn, order: Order) -> Result<(), FreeError> {
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
        // The head's word back as the claim found it: an allocated head,
        // now of order 0.
        self.unclaim(pfn, c.old);
        Ok(())
    }
}
