//! Contiguous allocation with migration (the kernel's `alloc_contig_range`):
//! isolate the range's pageblocks, migrate its movable pages (registered
//! ones and page-cache pages) out
//! (to targets the ordinary allocator gives, which cannot lie in the
//! isolated range), then take the range.
//!
//! A range holding a pinned page (allocated, not registered as movable) is
//! refused before anything moves, with the first such pfn named
//! ([`AllocError::Unmovable`]). A page that turns busy during the moves
//! (locked, refused by its owner) fails the range after a few tries; pages
//! already moved stay moved (their owners were told), nothing is lost. An
//! owner's panic stops the moves at once: the range's isolation is undone
//! and the call fails, the panic in its `OwnerPanic` (see `migrate`).

use crate::isolation::contig_order;
use crate::migrate::{Moved, OwnerPanic};
use crate::{Compaction, CompactionHost};
use pagealloc_core::error::AllocError;
use pagealloc_core::page::flags;
use pagealloc_core::types::{Gfp, Order, Pfn, MAX_ORDER, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};

/// Tries at emptying a range before giving up on it.
const TRIES: usize = 3;

impl<H: CompactionHost + ?Sized> Compaction<'_, H> {
    /// The first page of `[s, e)` that is allocated and not registered
    /// movable (racy). Free pages and per-CPU pages do not block.
    pub(crate) fn first_pinned(&self, s: u64, e: u64) -> Option<u64> {
        let mut p = s & !(PAGEBLOCK_PAGES - 1);
        while p < e {
            let d = self.mm.page(p);
            let f = d.flags();
            let n =
                if f & (flags::BUDDY | flags::PCP | flags::HEAD) != 0 { 1u64 << d.order().min(MAX_ORDER) } else { 1 };
            let blocks = if flags::array_held(f) {
                // A `PageArray`'s page: allocated, and pinned.
                true
            } else if f & (flags::BUDDY | flags::PCP) != 0 {
                false
            } else if f & flags::HEAD != 0 {
                !self.is_migratable_racy(p)
            } else {
                // A tail, or a page in hand-over: blocks only inside the range.
                true
            };
            if blocks && p + n > s {
                return Some(p.max(s));
            }
            p += n;
        }
        None
    }

    /// The first page of `[s, e)` not free (racy), for error reports.
    pub(crate) fn first_busy(&self, s: u64, e: u64) -> u64 {
        (s..e)
            .find(|&p| self.mm.page(p).flags() & flags::BUDDY == 0 && !self.test_pages_isolated(Pfn::new(p), 1))
            .unwrap_or(s)
    }

    /// Allocate exactly `[start, start + nr_pages)` (one zone), migrating its
    /// movable pages out. The pages come back as order-0 allocated pages, as
    /// from `alloc_contig_pages`. An owner's panic fails it, caught in `caught`.
    pub fn alloc_contig_range(
        &self,
        start: Pfn,
        nr_pages: u64,
        gfp: Gfp,
        caught: &mut OwnerPanic,
    ) -> Result<(), AllocError> {
        let s = start.as_u64();
        // Any `start` and `nr_pages` may come here: checked arithmetic only
        // until the range is known to lie inside the arena.
        let order = contig_order(nr_pages);
        let Some(e) = s.checked_add(nr_pages).filter(|&e| nr_pages > 0 && e <= self.mm.nr_pages()) else {
            return Err(AllocError::NoMemory { order });
        };
        // Page-cache pages waiting in a per-CPU LRU batch are not on a list
        // yet, so not migratable: put them there first.
        if self.mobility().lru_ops().is_some() {
            self.lru_add_drain_all();
        }
        if let Some(p) = self.first_pinned(s, e) {
            return Err(AllocError::Unmovable { pfn: Pfn::new(p) });
        }
        if let Err(err) = self.isolate_range(start, nr_pages) {
            return Err(match err {
                pagealloc_core::PageStateError::AlreadyIsolated { pfn }
                | pagealloc_core::PageStateError::Unisolatable { pfn, .. } => AllocError::Unmovable { pfn },
                _ => AllocError::NoMemory { order },
            });
        }
        let target_gfp = Gfp::MOVABLE | Gfp::NO_COMPACT;
        let mut done = false;
        'tries: for _ in 0..TRIES {
            for p in s..e {
                if !self.is_migratable_racy(p) {
                    continue;
                }
                // Born a migration target: nobody else can free it or lock it.
                let Ok(t) = self.alloc_pages(target_gfp, 0, flags::MIGRATE_TARGET) else {
                    break;
                };
                if self.migrate_page(p, t.as_u64(), caught) != Moved::Yes {
                    self.free_target(t.as_u64());
                }
                if caught.is_set() {
                    break 'tries;
                }
            }
            if self.test_pages_isolated(start, nr_pages) {
                done = self.take_isolated(self.zone_of(s), s, nr_pages, gfp.migratetype());
                break;
            }
        }
        let blocker = if done { 0 } else { self.first_busy(s, e) };
        let _ = self.undo_isolate_range(start, nr_pages);
        if !done {
            return Err(AllocError::Unmovable { pfn: Pfn::new(blocker) });
        }
        if gfp.contains(Gfp::ZERO) {
            for p in s..e {
                self.mm.zero_frames(p, Order::ZERO);
            }
        }
        Ok(())
    }

    /// `alloc_contig_pages` when no free range exists: try each aligned
    /// candidate range without pinned pages, migrating. The error names the
    /// first blocking pfn met.
    ///
    /// REQUIRES: `0 < nr_pages <= nr_pages()` (`alloc_contig_pages` checked
    /// it), so the sums below stay inside the arena. An owner's panic ends
    /// the search, caught in `caught`.
    pub fn alloc_contig_pages_migrate(
        &self,
        nr_pages: u64,
        gfp: Gfp,
        caught: &mut OwnerPanic,
    ) -> Result<Pfn, AllocError> {
        let order = contig_order(nr_pages);
        let align = 1u64 << order.min(PAGEBLOCK_ORDER);
        let Some(node) = self.node(self.numa_node_id()) else {
            return Err(AllocError::InvalidNode { nid: self.numa_node_id() });
        };
        let mut first = None;
        for &zi in node.zonelist(gfp) {
            let z = &self.zones[zi];
            let mut s = z.start.div_ceil(align) * align;
            while s + nr_pages <= z.end {
                let blocked = match self.first_pinned(s, s + nr_pages) {
                    Some(p) => Some(p),
                    None => match self.alloc_contig_range(Pfn::new(s), nr_pages, gfp, caught) {
                        Ok(()) => return Ok(Pfn::new(s)),
                        Err(e @ AllocError::Unmovable { .. }) if caught.is_set() => return Err(e),
                        Err(AllocError::Unmovable { pfn }) => Some(pfn.as_u64()),
                        Err(e) => return Err(e),
                    },
                };
                let p = blocked.unwrap_or(s);
                first.get_or_insert(p);
                s = (p + 1).max(s + 1).div_ceil(align) * align;
            }
        }
        Err(first.map_or(AllocError::NoMemory { order }, |p| AllocError::Unmovable { pfn: Pfn::new(p) }))
    }
}
