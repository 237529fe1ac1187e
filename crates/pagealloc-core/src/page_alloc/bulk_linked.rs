//! The bulk allocator's list form as the kernel had it, the old design the
//! `bulk` experiment compares against (`seed-variants` feature only):
//! the pages it returns are threaded onto a chain through their own
//! descriptors (the 32-bit `next`/`prev` links, as `list_add_tail` threads
//! `page->lru`), and the caller walks the chain back, one dependent descriptor
//! load per page. Taken from this thread's front cache first (what it holds),
//! then under one per-CPU lock hold through the same fast path as the array
//! form ([`Core::bulk_fast`]); what it cannot fill comes one page at a time,
//! as the kernel's fallback did.
//!
//! Invariants:
//! - A [`PageChain`] owns its pages: each is an allocated order-0 head of
//!   the allocator whose id the chain records; the links of an allocated page
//!   are unused by the allocator (page.rs), so only the chain's owner writes
//!   and reads them, and only while the page is allocated.
//! - `len` pages are reachable from `head` through `next`; the last one's
//!   `next` is NIL, and each page's `prev` is the one before it (NIL first).
//! - Freeing reads a page's `next` before the page is freed (a freed page's
//!   links belong to whichever list it joins).

use super::Core;
use crate::error::{BulkFreeError, FreeError};
use crate::front::FRONT_BATCH;
use crate::page::{flags, NIL};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::{Gfp, Pfn};

/// Pages per `free_pages_bulk` call when a chain is freed.
const FREE_CHUNK: usize = 64;

/// Order-0 pages linked through their descriptors, from
/// `PageAllocator::alloc_pages_bulk_linked`. Walk it with
/// `PageAllocator::chain_iter`; give it back with
/// `PageAllocator::free_pages_bulk_linked` (dropping it leaks its pages).
#[derive(Debug)]
#[must_use = "a dropped chain leaks its pages"]
pub struct PageChain {
    pub owner: u64,
    pub head: u32,
    pub tail: u32,
    pub len: usize,
}

impl PageChain {
    /// Pages on the chain.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No pages.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Walks a [`PageChain`] through the `next` links, first page first.
pub struct ChainIter<'a> {
    core: &'a Core,
    at: u32,
    left: usize,
}

impl Iterator for ChainIter<'_> {
    type Item = Pfn;

    #[inline]
    fn next(&mut self) -> Option<Pfn> {
        if self.left == 0 || self.at == NIL {
            return None;
        }
        let p = self.at;
        self.at = self.core.mm.descs().get(p as usize).map_or(NIL, |d| d.next.get());
        self.left -= 1;
        Some(Pfn::from_u32(p))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

impl Core {
    /// Append `p` (an allocated page this chain owns) to the chain.
    #[inline(always)]
    fn chain_push(&self, c: &mut PageChain, p: u32) {
        let descs = self.mm.descs();
        let d = &descs[p as usize];
        d.next.set(NIL);
        d.prev.set(c.tail);
        if c.tail == NIL {
            c.head = p;
        } else {
            descs[c.tail as usize].next.set(p);
        }
        c.tail = p;
        c.len += 1;
    }

    /// Up to `nr` order-0 pages, linked into a chain (fewer on shortage).
    ///
    /// A small request that this thread's front cache can fill is handled
    /// inline in the caller (as the other forms' are); the rest is a call.
    #[inline(always)]
    pub fn alloc_pages_bulk_linked(&self, gfp: Gfp, nr: usize) -> PageChain {
        let mut c = PageChain { owner: self.id, head: NIL, tail: NIL, len: 0 };
        if nr <= FRONT_BATCH {
            self.front_take_chain(gfp, nr, &mut c);
            if c.len == nr {
                return c;
            }
        }
        self.alloc_pages_bulk_linked_slow(gfp, nr, c)
    }

    /// The inline part: up to `nr` pages off this thread's front cache (no
    /// refill), each marked allocated and linked as it is taken, in one pass
    /// with the chain's ends in registers, hottest page first (as the
    /// kernel's list got the page it popped first). `c` must be empty.
    /// Applies where [`Core::front_take_fast`] does; elsewhere takes none.
    #[inline(always)]
    fn front_take_chain(&self, gfp: Gfp, nr: usize, c: &mut PageChain) {
        debug_assert!(c.len == 0);
        let Some(mut g) = self.enter_inline_for(gfp) else {
            return;
        };
        let (stacks, events) = g.split();
        let s = &mut stacks[gfp.migratetype().index()];
        let len = s.len as usize;
        let k = nr.min(len);
        if k == 0 {
            return;
        }
        // Hottest last in the slice: it goes first on the chain.
        let run = &s.pfns[len - k..len];
        self.link_run(NIL, run, true);
        (c.head, c.tail, c.len) = (run[k - 1], run[0], k);
        s.len = (len - k) as u32;
        events.add_owner(s.alloc_ev, k as u64);
    }

    /// Link `run` (a front-cache stack's or per-CPU slice's pages, hottest
    /// last) into a chain segment, hottest first, after the page `prev`
    /// (`NIL`: the segment starts the chain): one pass, each page but the
    /// coldest linked to the next colder one with no test in the loop, the
    /// coldest ending the chain. `mark`: each page's flags are stored as
    /// allocated (`HEAD`) in the same pass. The caller links `prev` to the
    /// hottest page and updates the chain's ends. `run` is not empty.
    #[inline(always)]
    fn link_run(&self, prev: u32, run: &[u32], mark: bool) {
        let descs = self.mm.descs();
        let link = |p: u32, prev: u32, next: u32| {
            debug_assert!((p as usize) < descs.len());
            // SAFETY: every pfn on a front-cache stack or a per-CPU list is
            // one of this allocator's pages (their invariants), so below
            // nr_pages.
            let d = unsafe { descs.get_unchecked(p as usize) };
            if mark {
                d.set_flags(flags::HEAD);
            }
            d.prev.set(prev);
            d.next.set(next);
        };
        let mut prev = prev;
        for j in (1..run.len()).rev() {
            link(run[j], prev, run[j - 1]);
            prev = run[j];
        }
        link(run[0], prev, NIL);
    }

    /// Everything [`Core::alloc_pages_bulk_linked`]'s inline part left, onto
    /// the chain it started.
    #[inline(never)]
    fn alloc_pages_bulk_linked_slow(&self, gfp: Gfp, nr: usize, mut c: PageChain) -> PageChain {
        let gfp = gfp | self.zeroing.alloc_extra; // init_on_alloc
        let zero = gfp.contains(Gfp::ZERO);
        if c.len == 0 && nr > FRONT_BATCH {
            // What this thread's front cache holds first, as the smaller
            // requests and the single pages take it (the array form does
            // the same); the per-CPU lists give the rest.
            self.front_take_chain(gfp, nr, &mut c);
        }
        if nr - c.len > 1 {
            let want = nr - c.len;
            self.bulk_fast(gfp, want, (true, flags::HEAD), |pages| {
                // Hottest last in the slice: linked first, as the kernel's
                // list got the page it popped first; flags stored in the
                // same pass unless the page is to be zeroed (bulk_fast
                // preps it then).
                let k = pages.len().min(nr - c.len);
                if k == 0 {
                    return 0;
                }
                let run = &pages[pages.len() - k..];
                self.link_run(c.tail, run, !zero);
                if c.tail == NIL {
                    c.head = run[k - 1];
                } else {
                    self.mm.page(c.tail as u64).next.set(run[k - 1]);
                }
                c.tail = run[0];
                c.len += k;
                k
            });
        }
        while c.len < nr {
            match self.alloc_pages(gfp, 0, flags::HEAD) {
                Ok(p) => self.chain_push(&mut c, p.as_u64() as u32),
                Err(_) => break,
            }
        }
        c
    }

    /// The chain's pages, first to last.
    pub fn chain_iter<'a>(&'a self, c: &PageChain) -> ChainIter<'a> {
        let ours = c.owner == self.id;
        ChainIter { core: self, at: if ours { c.head } else { NIL }, left: if ours { c.len } else { 0 } }
    }

    /// Free every page of a chain, walking it in chunks of [`FREE_CHUNK`]
    /// through `free_pages_bulk` (each chunk's `next` links read before the
    /// chunk is freed). Invalid entries are reported with their positions on
    /// the chain; a chain of another allocator frees nothing and is rejected
    /// as one `OutOfRange` entry at position 0 naming its first page.
    pub fn free_pages_bulk_linked(&self, c: PageChain) -> Result<(), BulkFreeError> {
        if c.owner != self.id {
            let (pfn, nr_pages) = (Pfn::from_u32(c.head), self.mm.nr_pages());
            return Err(BulkFreeError { rejected: vec![(0, FreeError::OutOfRange { pfn, nr_pages })] });
        }
        let mut it = self.chain_iter(&c);
        let mut buf = [Pfn::from_u32(0); FREE_CHUNK];
        let (mut base, mut rejected) = (0, Vec::new());
        loop {
            let mut n = 0;
            for (slot, p) in buf.iter_mut().zip(&mut it) {
                *slot = p;
                n += 1;
            }
            if n == 0 {
                break;
            }
            if let Err(e) = self.free_pages_bulk(&buf[..n]) {
                rejected.extend(e.rejected.into_iter().map(|(i, why)| (base + i, why)));
            }
            base += n;
        }
        if rejected.is_empty() {
            Ok(())
        } else {
            Err(BulkFreeError { rejected })
        }
    }
}
