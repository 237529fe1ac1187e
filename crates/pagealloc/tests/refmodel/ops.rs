//! Step functions for allocation, frees, bulk calls, isolation and contiguous
//! ranges: each calls the allocator, checks the answer against the model's
//! expectation, then updates the model. None runs the after-step checks
//! ([`Model::check`]); the driver does.

use super::checks::events;
use super::model::Model;
use pagealloc::{AllocError, BulkFreeError, FreeError, Gfp, PageStateError, Pfn, MAX_ORDER, PAGEBLOCK_PAGES};
use std::collections::HashSet;

/// How a drain step moves pages or the caller.
#[derive(Clone, Copy, Debug)]
pub enum Drain {
    Local,
    All,
    /// Move the caller to another CPU (where the machine has it).
    PinTo(usize),
}

impl Model {
    /// `alloc_pages(gfp, order)`, or `alloc_pages_node(nid, ..)` with `node`.
    pub fn alloc(&mut self, gfp: Gfp, order: u32, node: Option<u32>) -> Option<Pfn> {
        let res = match node {
            None => self.a.alloc_pages(gfp, order),
            Some(nid) => self.a.alloc_pages_node(pagealloc::NodeId(nid), gfp, order),
        };
        let nodes = self.cfg.nodes;
        match res {
            Ok(p) => {
                assert!(order <= MAX_ORDER && node.is_none_or(|n| n < nodes), "alloc {order} {node:?}");
                // alloc_pages uses the calling CPU's node: check THISNODE only
                // for explicit node requests.
                let tn = node.filter(|_| gfp.contains(Gfp::THISNODE));
                self.took("alloc_pages", p.as_u64(), order, gfp, tn);
                Some(p)
            }
            Err(e) => {
                self.alloc_failed(e, gfp, order, node);
                None
            }
        }
    }

    /// `alloc(gfp, order)`, the `Pages` handle, driven within the step: the
    /// raw API's free and bulk free of its frame are refused with `Owned`
    /// and change nothing; then the handle is dropped (its block freed) or,
    /// with `keep`, turned into its pfn (a raw block from then on).
    pub fn alloc_handle(&mut self, gfp: Gfp, order: u32, keep: bool) {
        // A second handle on the allocator: the `Pages` borrows it, not the model.
        let a = self.a.clone();
        let h = match a.alloc(gfp, order) {
            Ok(h) => h,
            Err(e) => return self.alloc_failed(e, gfp, order, None),
        };
        let pfn = h.pfn();
        assert!(order <= MAX_ORDER && h.order() == order, "alloc({order}): a handle of order {}", h.order());
        self.took("alloc", pfn.as_u64(), order, gfp, None);
        let before = a.nr_free_pages();
        assert_eq!(a.free_pages(pfn, order), Err(FreeError::Owned { pfn }), "raw free of a handle's frame");
        match a.free_pages_bulk(&[pfn]) {
            Err(BulkFreeError { rejected }) => {
                // Bulk frees are order-0: a larger block is the wrong order first.
                let why = if order == 0 {
                    FreeError::Owned { pfn }
                } else {
                    FreeError::WrongOrder { pfn, order: 0, actual: order }
                };
                assert_eq!(rejected, vec![(0, why)], "raw bulk free of a handle's frame")
            }
            Ok(()) => panic!("raw bulk free of a handle's frame accepted"),
        }
        assert_eq!(a.nr_free_pages(), before, "a refused free of a handle's frame changed state");
        if keep {
            assert_eq!(h.into_pfn(), pfn);
        } else {
            drop(h);
            self.forget(pfn.as_u64());
        }
    }

    /// Check an allocation's error against the model.
    fn alloc_failed(&self, e: AllocError, gfp: Gfp, order: u32, node: Option<u32>) {
        let nodes = self.cfg.nodes;
        match e {
            AllocError::InvalidOrder { order: o } => {
                assert!(o == order && order > MAX_ORDER, "alloc_pages({gfp:?}, {order}): InvalidOrder {o}");
            }
            AllocError::InvalidNode { nid: n } => {
                assert!(order <= MAX_ORDER && Some(n) == node && n >= nodes, "alloc_pages_node({node:?}): {n}");
            }
            AllocError::NoMemory { order: o } => {
                assert_eq!(o, order);
                assert!(node.is_none_or(|n| n < nodes));
                assert!(
                    self.failure_plausible(gfp, node, order),
                    "order-{order} {gfp:?} allocation failed with {} of {} pages allocated and {} blocks isolated",
                    self.allocated_pages(),
                    self.nr_pages,
                    self.isolated.len()
                );
            }
            e => panic!("alloc_pages: unexpected {e:?}"),
        }
    }

    /// `free_pages(p, order)` of any pfn and order: the exact answer the model
    /// predicts; a refused free changes nothing.
    pub fn free(&mut self, p: u64, order: u32) -> Result<(), FreeError> {
        let exp = self.expect_free(p, order);
        let before = self.a.nr_free_pages();
        let got = self.a.free_pages(Pfn::new(p), order);
        assert_eq!(got, exp, "free_pages({p:#x}, {order})");
        match got {
            Ok(()) => self.forget(p),
            Err(e) => assert_eq!(self.a.nr_free_pages(), before, "a refused free changed state: {e}"),
        }
        got
    }

    /// Free the block the model holds at head `h`, unlocking it and ending its
    /// writeback first.
    pub fn free_held(&mut self, h: u64) {
        let bl = self.blocks[&h];
        let pfn = Pfn::new(h);
        if bl.writeback {
            self.a.page_locks().end_page_writeback(pfn).unwrap();
            self.blocks.get_mut(&h).unwrap().writeback = false;
        }
        if bl.locked {
            self.a.page_locks().unlock_page(pfn).unwrap();
            self.blocks.get_mut(&h).unwrap().locked = false;
        }
        self.a.free_pages(pfn, bl.order).unwrap_or_else(|e| panic!("free of held block {h:#x}: {e}"));
        self.forget(h);
    }

    /// `alloc_pages_bulk(gfp, slots)`: the leading count, populated slots
    /// untouched, holes filled only up to the first hole left, a hole left
    /// only when memory may run short.
    pub fn bulk_alloc(&mut self, gfp: Gfp, slots: &mut [Option<Pfn>]) -> usize {
        let before = slots.to_vec();
        let lead = self.a.alloc_pages_bulk(gfp, slots);
        assert_eq!(lead, slots.iter().take_while(|s| s.is_some()).count(), "bulk: wrong leading count");
        for (i, (old, new)) in before.iter().zip(slots.iter()).enumerate() {
            match (old, new) {
                (Some(o), n) => assert_eq!(Some(*o), *n, "bulk: populated slot {i} changed"),
                (None, Some(p)) => {
                    assert!(i < lead, "bulk: slot {i} past the first hole left ({lead}) was written");
                    self.took("alloc_pages_bulk", p.as_u64(), 0, gfp, None);
                }
                (None, None) => assert!(i >= lead, "bulk: hole {i} left before the leading count"),
            }
        }
        // A hole left unfilled means memory ran short.
        if lead < slots.len() {
            assert!(
                self.failure_plausible(gfp, None, 0) || gfp.contains(Gfp::THISNODE),
                "bulk left holes with {} pages allocated",
                self.allocated_pages()
            );
        }
        lead
    }

    /// A `PageArray` of `len` slots driven within the step: filled as
    /// [`Model::bulk_alloc`] checks a fill (every slot a hole before); its
    /// pages refused to the raw free, the bulk free, the page lock and
    /// `get_page` with nothing changed; then slot `i` is taken as a raw page
    /// (kept by the model) where bit `i` of `keep` is set, or as a `Pages`
    /// handle and dropped where bit `i + 24` is; the rest go back with the
    /// array's release (bit 60) or its drop.
    pub fn page_array(&mut self, gfp: Gfp, len: usize, keep: u64) {
        // A second handle on the allocator: the array borrows it, not the model.
        let a = self.a.clone();
        let mut arr = a.page_array(len).expect("a page array smaller than the arena");
        let lead = arr.fill(gfp);
        assert_eq!(lead, arr.populated(), "PageArray::fill: holes before the leading count");
        for i in 0..lead {
            let p = arr.get(i).expect("leading slot");
            self.took("PageArray::fill", p.as_u64(), 0, gfp, None);
        }
        // Held pages are allocated pages of the fill's type to every census.
        self.check("PageArray::fill");
        if lead < len {
            assert!(
                self.failure_plausible(gfp, None, 0) || gfp.contains(Gfp::THISNODE),
                "PageArray::fill left holes with {} pages allocated",
                self.allocated_pages()
            );
        }
        if let Some(pfn) = arr.get(0) {
            let before = a.nr_free_pages();
            assert_eq!(a.free_pages(pfn, 0), Err(FreeError::Owned { pfn }), "raw free of an array's page");
            assert_eq!(
                a.free_pages_bulk(&[pfn]),
                Err(BulkFreeError { rejected: vec![(0, FreeError::Owned { pfn })] }),
                "raw bulk free of an array's page"
            );
            assert_eq!(
                a.page_locks().lock_page(pfn),
                Err(PageStateError::NotAllocated { pfn }),
                "lock of an array's page"
            );
            assert_eq!(
                a.get_page(pfn).err(),
                Some(PageStateError::NotAllocated { pfn }),
                "get_page of an array's page"
            );
            assert_eq!(a.nr_free_pages(), before, "a refused call on an array's page changed state");
        }
        for i in 0..lead.min(24) {
            if keep >> i & 1 == 1 {
                let p = arr.take_pfn(i).expect("populated slot");
                assert_eq!(arr.get(i), None, "take_pfn left the slot populated");
                // A raw page from now on: the model keeps it.
                let _ = p;
            } else if keep >> (i + 24) & 1 == 1 {
                let h = arr.take(i).expect("populated slot");
                assert_eq!((h.order(), arr.get(i)), (0, None), "take: a handle of order 0, the slot emptied");
                let p = h.pfn();
                assert_eq!(a.free_pages(p, 0), Err(FreeError::Owned { pfn: p }), "raw free of a taken handle's page");
                drop(h);
                self.forget(p.as_u64());
            }
        }
        let rest: Vec<u64> = arr.slots().iter().flatten().map(|p| p.as_u64()).collect();
        if keep >> 60 & 1 == 1 {
            arr.release();
            assert_eq!(arr.populated(), 0, "PageArray::release left pages");
        }
        drop(arr);
        for p in rest {
            self.forget(p);
        }
    }

    /// `alloc_pages_bulk_list(gfp, nr, out)`: entries already in `out` stay,
    /// up to `nr` pages are appended, fewer only when memory may run short.
    pub fn bulk_list(&mut self, gfp: Gfp, nr: usize, out: &mut Vec<Pfn>) -> usize {
        let before = out.clone();
        let n = self.a.alloc_pages_bulk_list(gfp, nr, out);
        assert!(n <= nr && out.len() == before.len() + n, "bulk list: {n} of {nr}, len {}", out.len());
        assert_eq!(out[..before.len()], before[..], "bulk list touched existing entries");
        for &p in &out[before.len()..] {
            self.took("alloc_pages_bulk_list", p.as_u64(), 0, gfp, None);
        }
        if n < nr {
            assert!(
                self.failure_plausible(gfp, None, 0) || gfp.contains(Gfp::THISNODE),
                "bulk list gave {n} of {nr} with {} pages allocated",
                self.allocated_pages()
            );
        }
        n
    }

    /// The sequential meaning of an order-0 bulk free of `entries` (None: a
    /// hole, skipped): the rejections, in input order, with the model updated
    /// as the frees happen.
    fn simulate_bulk_free(&mut self, entries: &[Option<Pfn>]) -> Vec<(usize, FreeError)> {
        let mut rejected = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let Some(p) = *e else { continue };
            match self.expect_free(p.as_u64(), 0) {
                Ok(()) => self.forget(p.as_u64()),
                Err(e) => rejected.push((i, e)),
            }
        }
        rejected
    }

    /// One bulk free (`free`, of `entries` as slots: None is a hole), checked
    /// against its sequential meaning, the census and pgfree.
    fn bulk_free_checked(
        &mut self,
        entries: &[Option<Pfn>],
        what: &str,
        free: impl FnOnce(&pagealloc::PageAllocator) -> Result<(), BulkFreeError>,
    ) -> Vec<(usize, FreeError)> {
        let held = self.allocated_pages();
        let expected = self.simulate_bulk_free(entries);
        let freed = held - self.allocated_pages();
        let (ev, allocated) = (events(&self.a), self.a.census().allocated);
        let got = match free(&self.a) {
            Ok(()) => Vec::new(),
            Err(e) => {
                assert!(!e.rejected.is_empty(), "{what}: an error with nothing rejected");
                e.rejected
            }
        };
        assert_eq!(got, expected, "rejections of {what}");
        assert_eq!(self.a.census().allocated, allocated - freed, "pages freed by {what}");
        let e = events(&self.a);
        assert_eq!((e.alloc, e.free), (ev.alloc, ev.free + freed), "pgalloc, pgfree after {what}");
        got
    }

    /// `free_pages_bulk(entries)`: rejects exactly the entries a loop of
    /// `free_pages(p, 0)` would, with the same errors, in order.
    pub fn bulk_free(&mut self, entries: &[Pfn]) -> Vec<(usize, FreeError)> {
        let as_slots: Vec<Option<Pfn>> = entries.iter().map(|&p| Some(p)).collect();
        let what = format!("a bulk free of {} entries", entries.len());
        self.bulk_free_checked(&as_slots, &what, |a| a.free_pages_bulk(entries))
    }

    /// `free_pages_bulk_slots(slots)`, as [`Model::bulk_free`]; freed and empty
    /// slots end empty, rejected ones keep their pfn.
    pub fn slots_free(&mut self, slots: &mut [Option<Pfn>]) -> Vec<(usize, FreeError)> {
        let before = slots.to_vec();
        let what = format!("a slots free of {} slots", before.len());
        let got = self.bulk_free_checked(&before, &what, |a| a.free_pages_bulk_slots(slots));
        let kept: HashSet<usize> = got.iter().map(|r| r.0).collect();
        for (i, (s, b)) in slots.iter().zip(&before).enumerate() {
            if kept.contains(&i) {
                assert_eq!(s, b, "rejected slot {i} changed");
            } else {
                assert_eq!(*s, None, "slot {i} (was {b:?}) not emptied");
            }
        }
        got
    }

    /// The pageblocks of `[s, s + nr)` if the range is good (one zone, in the arena).
    fn range_blocks(&self, s: u64, nr: u64) -> Option<Vec<u64>> {
        let e = s.checked_add(nr)?;
        if nr == 0 || e > self.nr_pages || self.zone_of(s) != self.zone_of(e - 1) {
            return None;
        }
        let bs = s & !(PAGEBLOCK_PAGES - 1);
        Some((bs..e).step_by(PAGEBLOCK_PAGES as usize).collect())
    }

    /// `isolate_range(s, nr)`.
    pub fn isolate(&mut self, s: u64, nr: u64) -> Result<(), PageStateError> {
        let got = self.a.contig().isolate_range(Pfn::new(s), nr);
        let Some(blocks) = self.range_blocks(s, nr) else {
            assert_eq!(got, Err(PageStateError::BadRange { pfn: Pfn::new(s) }), "isolate_range({s:#x}, {nr})");
            return got;
        };
        let first_iso = blocks.iter().copied().find(|bl| self.isolated.contains(bl));
        match got {
            Ok(()) => {
                assert!(first_iso.is_none(), "isolate_range({s:#x}, {nr}) isolated {first_iso:?} twice");
                self.isolated.extend(blocks);
            }
            Err(PageStateError::AlreadyIsolated { pfn }) => {
                assert_eq!(Some(pfn.as_u64()), first_iso, "isolate_range({s:#x}, {nr})")
            }
            // The model does not track HighAtomic reserves: accept one before any
            // isolated block.
            Err(PageStateError::Unisolatable { pfn, .. }) => {
                assert!(blocks.contains(&pfn.as_u64()) && first_iso.is_none_or(|f| pfn.as_u64() < f))
            }
            Err(e) => panic!("isolate_range({s:#x}, {nr}): unexpected {e:?}"),
        }
        got
    }

    /// `undo_isolate_range(s, nr)`.
    pub fn undo_isolate(&mut self, s: u64, nr: u64) -> Result<(), PageStateError> {
        let got = self.a.contig().undo_isolate_range(Pfn::new(s), nr);
        let exp = match self.range_blocks(s, nr) {
            None => Err(PageStateError::BadRange { pfn: Pfn::new(s) }),
            Some(blocks) => match blocks.iter().find(|bl| !self.isolated.contains(bl)) {
                Some(&bl) => Err(PageStateError::NotIsolated { pfn: Pfn::new(bl) }),
                None => {
                    for bl in &blocks {
                        self.isolated.remove(bl);
                    }
                    Ok(())
                }
            },
        };
        assert_eq!(got, exp, "undo_isolate_range({s:#x}, {nr})");
        got
    }

    /// `test_pages_isolated(s, nr)`.
    pub fn test_isolated(&mut self, s: u64, nr: u64) -> bool {
        let got = self.a.contig().test_pages_isolated(Pfn::new(s), nr);
        let exp = self
            .range_blocks(s, nr)
            .is_some_and(|blocks| blocks.iter().all(|bl| self.isolated.contains(bl)) && self.overlaps(s, nr).is_none());
        assert_eq!(got, exp, "test_pages_isolated({s:#x}, {nr})");
        got
    }

    /// `alloc_contig_pages(nr, gfp)`: `nr` order-0 pages.
    pub fn contig(&mut self, gfp: Gfp, nr: u64) -> Option<Pfn> {
        match self.a.contig().alloc_contig_pages(nr, gfp) {
            Ok(p) => {
                assert!(nr > 0 && nr <= self.nr_pages);
                for q in p.as_u64()..p.as_u64() + nr {
                    self.took("alloc_contig_pages", q, 0, gfp, None);
                }
                if !Self::CONTIG_COUNTS_PGALLOC {
                    self.events.alloc -= nr;
                }
                Some(p)
            }
            Err(AllocError::NoMemory { .. }) => None,
            Err(e) => panic!("alloc_contig_pages({nr}): unexpected {e:?}"),
        }
    }

    /// `free_contig_range(s, nr)`, as [`Model::expect_free_contig`] has it.
    pub fn free_contig(&mut self, s: u64, nr: u64) -> Result<(), FreeError> {
        let (exp, freed) = self.expect_free_contig(s, nr);
        let got = self.a.contig().free_contig_range(Pfn::new(s), nr);
        assert_eq!(got, exp, "free_contig_range({s:#x}, {nr})");
        for p in freed {
            self.forget(p);
        }
        got
    }

    /// Drain per-CPU lists, or move the caller.
    pub fn drain(&mut self, how: Drain) {
        match how {
            Drain::PinTo(cpu) => {
                pagealloc::pin_to_cpu(cpu);
            }
            Drain::Local => self.a.drain_local_pages(),
            Drain::All => {
                self.a.drain_all_pages();
                assert_eq!(self.a.census().pcp, 0, "drain_all_pages left pages on per-CPU lists");
                assert!(self.a.stats().pcp_report().iter().all(|r| r.count == 0));
            }
        }
    }
}
