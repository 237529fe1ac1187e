//! The façade of the bulk allocator's linked list form (the `bulk` experiment's old design,
//! as the kernel had it): see `page_alloc::bulk_linked`.

use super::PageAllocator;
use pagealloc_core::error::BulkFreeError;
use pagealloc_core::page_alloc::bulk_linked::{ChainIter, PageChain};
use pagealloc_core::types::Gfp;

impl PageAllocator {
    /// Allocate up to `nr` order-0 pages linked through their descriptors
    /// (the kernel's old list form of the bulk allocator: one per-CPU lock
    /// hold, each page threaded onto the chain as it is taken). Fewer on
    /// shortage: see [`PageChain::len`].
    #[inline(always)]
    pub fn alloc_pages_bulk_linked(&self, gfp: Gfp, nr: usize) -> PageChain {
        self.core.alloc_pages_bulk_linked(gfp, nr)
    }

    /// Walk a chain from this allocator, first page first, through the
    /// descriptors' links (nothing for another allocator's chain).
    #[inline]
    pub fn chain_iter<'a>(&'a self, chain: &PageChain) -> ChainIter<'a> {
        self.core.chain_iter(chain)
    }

    /// Free every page of a chain.
    ///
    /// # Errors
    /// [`BulkFreeError`] with every skipped entry's position on the chain;
    /// another allocator's chain is refused whole.
    pub fn free_pages_bulk_linked(&self, chain: PageChain) -> Result<(), BulkFreeError> {
        self.core.free_pages_bulk_linked(chain)
    }
}
