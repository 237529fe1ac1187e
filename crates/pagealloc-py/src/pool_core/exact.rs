//! Exact blocks: a kind whose block is not a power of two of frames (a
//! recurrent-state page of a hybrid model) takes the smallest buddy block
//! that holds it and gives the tail back at once. The allocator's way to
//! keep part of a block is a contiguous range: the pool finds a free
//! order-`order` block (so the range is aligned and, by the buddy's
//! invariant, free), returns it, and takes its first `frames` frames with
//! `alloc_contig_range`, which leaves the tail in the buddy lists. Another
//! thread may take part of the block in between: the range is then refused
//! and the pool tries again, a few times. The range comes back frame by
//! frame (`free_contig_range`).

use super::Core;
use pagealloc::{AllocError, Gfp, Pfn};

/// Tries before an exact block is refused for a race (each try first finds
/// a free block of the order, so a failure is always a race, never a lack).
const RACE_RETRIES: usize = 8;

impl Core {
    /// `need` exact blocks of kind `k` onto `got` (all or an error; the
    /// caller frees what `got` holds on error).
    pub(super) fn alloc_exact_blocks(&self, k: usize, need: usize, got: &mut Vec<u64>) -> Result<(), AllocError> {
        let (order, frames) = (self.kinds[k].order, self.kinds[k].frames);
        for _ in 0..need {
            got.push(self.alloc_exact(order, frames)?.as_u64());
        }
        Ok(())
    }

    fn alloc_exact(&self, order: u32, frames: u64) -> Result<Pfn, AllocError> {
        let mut last = None;
        for _ in 0..RACE_RETRIES {
            let pfn = self.alloc_block(order)?;
            // Our own block, just allocated: its free cannot be refused.
            let _ = self.alloc.free_pages(pfn, order);
            match self.alloc.contig().alloc_contig_range(pfn, frames, Gfp::KERNEL) {
                Ok(()) => return Ok(pfn),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("RACE_RETRIES > 0"))
    }

    /// Free blocks `ids` of kind `k`, whichever way the kind holds them.
    pub(super) fn free_kind(&self, ids: &[u64], k: usize) {
        if !self.kinds[k].exact() {
            return self.free_frames(ids, self.kinds[k].order);
        }
        for &id in ids {
            // Our own range, taken whole: see `free_frames` for why an
            // error is not surfaced here.
            let _ = self.alloc.contig().free_contig_range(Pfn::new(id), self.kinds[k].frames);
        }
    }
}
