//! Holes and memory added at run time: pfn ranges of the arena kept out of
//! the buddy lists at construction (`Config::holes`: gaps in a memory map,
//! firmware areas, memory that comes later) and given to them later with
//! [`crate::PageAllocator::add_free_memory`], as a kernel hands its frame
//! allocator each usable region at boot (Asterinas's `add_free_memory`,
//! the kernel's `memblock_free_all` and memory hotplug's `online_pages`).
//!
//! Invariants:
//! - A page in a hole has no mark (flags 0, as a tail page has): no call
//!   that takes a pfn treats it as allocated or free, the buddy never merges
//!   with it, and the censuses skip it.
//! - `Holes::offline` counts each zone's pages in holes; every conservation
//!   check reads the zone's pages as free + per-CPU + allocated + offline.
//!   An addition lowers it under the zone lock, in the hold that puts the
//!   pages on the free lists, so a check under that lock sees both or
//!   neither.
//! - The hole set only shrinks, under its lock, which an addition holds
//!   until its pages are on the free lists: two additions of one range
//!   cannot both succeed.
//! - Watermarks and per-CPU batches are sized for the zone with its holes
//!   filled (the memory declared in the arena), as a kernel sizes them for
//!   the memory it will manage; a hole never added leaves them a little
//!   high, which errs toward reclaiming early.

use super::Core;
use crate::error::PageStateError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::Mutex;
use crate::sync::{AtomicU64, Ordering};
use crate::types::{Order, Pfn};
use crate::zone::Zone;
use core::ops::Range;

pub(crate) use crate::config::validate_holes as validate;

/// The pfn ranges still out of the buddy lists, sorted and disjoint, and
/// each zone's pages in them (indexed by zone).
pub struct Holes {
    ranges: Mutex<Vec<Range<u64>>>,
    offline: Box<[AtomicU64]>,
}

/// Pages of `r` inside `holes` (sorted, disjoint).
fn overlap(holes: &[Range<u64>], r: &Range<u64>) -> u64 {
    holes.iter().map(|h| h.end.min(r.end).saturating_sub(h.start.max(r.start))).sum()
}

/// The parts of `r` outside `holes` (sorted, disjoint), in order.
pub(crate) fn present_parts(holes: &[Range<u64>], r: Range<u64>) -> Vec<Range<u64>> {
    let mut parts = Vec::new();
    let mut at = r.start;
    for h in holes.iter().filter(|h| h.end > r.start && h.start < r.end) {
        if h.start > at {
            parts.push(at..h.start);
        }
        at = at.max(h.end);
    }
    if at < r.end {
        parts.push(at..r.end);
    }
    parts
}

/// Split `r` into the largest naturally aligned blocks, in address order.
pub(crate) fn aligned_blocks(r: Range<u64>) -> impl Iterator<Item = (u64, Order)> {
    let mut p = r.start;
    core::iter::from_fn(move || {
        if p >= r.end {
            return None;
        }
        let o = Order::ALL.iter().rev().copied().find(|o| p & (o.pages() - 1) == 0 && p + o.pages() <= r.end);
        let o = o.unwrap_or(Order::ZERO);
        let at = p;
        p += o.pages();
        Some((at, o))
    })
}

impl Holes {
    /// `holes` (validated) over `zones`.
    pub(crate) fn new<'a>(holes: Vec<Range<u64>>, zones: impl Iterator<Item = &'a Zone>) -> Self {
        let offline = zones.map(|z| AtomicU64::new(overlap(&holes, &(z.start..z.end)))).collect();
        Holes { ranges: Mutex::new(holes), offline }
    }

    /// The holes now (sorted, disjoint).
    pub fn snapshot(&self) -> Vec<Range<u64>> {
        self.ranges.lock().clone()
    }

    /// Pages of `z` still in holes.
    pub fn offline(&self, z: &Zone) -> u64 {
        self.offline[z.idx.get()].load(Ordering::Relaxed)
    }
}

impl Core {
    /// Pages `z` manages now: its pages less those still in holes.
    pub fn managed_now(&self, z: &Zone) -> u64 {
        z.managed - self.holes.offline(z)
    }

    /// Pages the allocator manages now: the arena's, less those in holes.
    pub fn managed_pages(&self) -> u64 {
        self.zones.iter().map(|z| self.managed_now(z)).sum()
    }

    /// Free pages on the buddy lists outside isolated blocks, every zone,
    /// read without locks (per-CPU lists not counted).
    pub fn nr_free_pages(&self) -> u64 {
        self.zones.iter().map(|z| z.free_pages_racy()).sum()
    }

    /// Give `start..start + nr_pages` (all of it in holes) to the buddy
    /// lists: see [`crate::FrameAllocator::add_free_memory`].
    pub fn add_free_memory(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        let bad = Err(PageStateError::BadRange { pfn: start });
        let s = start.as_u64();
        let Some(end) = s.checked_add(nr_pages).filter(|&e| nr_pages > 0 && e <= self.mm.nr_pages()) else {
            return bad;
        };
        let mut holes = self.holes.ranges.lock();
        if overlap(&holes, &(s..end)) != nr_pages {
            return bad;
        }
        // Out of the holes first (the lock is held until the pages are free).
        let range = s..end;
        let given = core::slice::from_ref(&range);
        let mut rest = Vec::with_capacity(holes.len() + 1);
        for h in holes.iter() {
            rest.extend(present_parts(given, h.clone()));
        }
        *holes = rest;
        for z in self.zones.iter().filter(|z| z.end > s && z.start < end) {
            let part = s.max(z.start)..end.min(z.end);
            let n = part.end - part.start;
            let mut g = z.lock(&self.mm);
            for (p, o) in aligned_blocks(part) {
                // Never claimed to read zero: a pfn in a hole has an address
                // its user may have written through.
                let mt = z.pageblock_mt_racy(p);
                g.free_one_marked_locked(p, o, mt, false);
            }
            self.holes.offline[z.idx.get()].fetch_sub(n, Ordering::Relaxed);
            drop(g);
        }
        Ok(())
    }
}
