//! Frames shared by the pages of one cache whose pages are smaller than a
//! frame (512, 1024 or 2048 bytes: 8, 4 or 2 to a 4 KiB frame), so that a
//! small page costs its own bytes and not a whole frame.
//!
//! A [`SubFrames`] belongs to one cache and lives under its shard's lock.
//! Each frame records which slots hold a page and how many of those are
//! pinned: eviction prefers a frame whose pages are all unpinned and then
//! evicts all of them (`evict`), so that reclaim gives whole frames back;
//! a lone page of a frame with pinned neighbours frees only its slot,
//! which the same cache fills next.
//!
//! Invariants (checked by `Group::check_invariants`): a frame's `live` is
//! the number of its slots holding a page and is at least 1 (a frame whose
//! last page goes is freed at once); `pinned` is the number of those
//! pages pinned; each page's `slot` names the frame and slot holding it;
//! `held` is the number of frames; a frame with a free slot is on
//! `partial` (which may also name frames that filled up or went since:
//! those entries are dropped when met).

use crate::page::PagePtr;
use pagealloc::{Pfn, PAGE_SIZE};

/// The most pages one frame holds: 4 KiB / 512 bytes, SQLite's smallest
/// page (`MIN_PAGE_SIZE`; a const assertion in `cache` keeps them agreed).
pub(crate) const MAX_SLOTS: usize = PAGE_SIZE / 512;

/// One shared frame.
pub(crate) struct SubFrame {
    pub(crate) pfn: Pfn,
    pages: [Option<PagePtr>; MAX_SLOTS],
    live: u8,
    pinned: u8,
    in_partial: bool,
}

/// A cache's shared frames.
pub(crate) struct SubFrames {
    /// Pages per frame (2, 4 or 8).
    slots: u32,
    frames: Vec<Option<SubFrame>>,
    /// Unused indices of `frames`.
    free_ix: Vec<u32>,
    /// Frames with a free slot (and stale entries; module doc).
    partial: Vec<u32>,
    held: u64,
}

/// The slot code of frame `ix`, slot `s`: what a page's header keeps.
fn code(ix: u32, s: u32) -> u32 {
    ix * MAX_SLOTS as u32 + s
}

/// (frame index, slot) of a slot code.
fn split(code: u32) -> (usize, usize) {
    ((code / MAX_SLOTS as u32) as usize, (code % MAX_SLOTS as u32) as usize)
}

impl SubFrames {
    /// Frames for pages of `sz_page` bytes (less than a frame).
    pub(crate) fn new(sz_page: usize) -> Self {
        debug_assert!(sz_page < PAGE_SIZE && sz_page.is_power_of_two());
        Self {
            slots: (PAGE_SIZE / sz_page) as u32,
            frames: Vec::new(),
            free_ix: Vec::new(),
            partial: Vec::new(),
            held: 0,
        }
    }

    /// Pages per frame.
    pub(crate) fn slots(&self) -> u32 {
        self.slots
    }

    /// Frames held.
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    fn frame(&self, ix: usize) -> &SubFrame {
        self.frames[ix].as_ref().expect("a live frame")
    }
    fn frame_mut(&mut self, ix: usize) -> &mut SubFrame {
        self.frames[ix].as_mut().expect("a live frame")
    }

    /// A free slot, as (slot code, frame, byte offset in it), dropping stale
    /// `partial` entries; None when every frame is full.
    pub(crate) fn free_slot(&mut self) -> Option<(u32, Pfn, usize)> {
        while let Some(&ix) = self.partial.last() {
            let f = self.frames[ix as usize].as_mut().filter(|f| u32::from(f.live) < self.slots);
            if let Some(f) = f {
                let s = f.pages.iter().position(Option::is_none).expect("a frame below its slots has a hole");
                return Some((code(ix, s as u32), f.pfn, s * (PAGE_SIZE / self.slots as usize)));
            }
            self.partial.pop();
            if let Some(f) = self.frames[ix as usize].as_mut() {
                f.in_partial = false;
            }
        }
        None
    }

    /// Take a newly allocated frame; its slots are free (`free_slot` finds them).
    pub(crate) fn add_frame(&mut self, pfn: Pfn) {
        let f = SubFrame { pfn, pages: [None; MAX_SLOTS], live: 0, pinned: 0, in_partial: true };
        let ix = match self.free_ix.pop() {
            Some(ix) => {
                self.frames[ix as usize] = Some(f);
                ix
            }
            None => {
                self.frames.push(Some(f));
                (self.frames.len() - 1) as u32
            }
        };
        self.partial.push(ix);
        self.held += 1;
    }

    /// Put the new (pinned) page `p` in the free slot `code`.
    pub(crate) fn fill(&mut self, code: u32, p: PagePtr) {
        let (ix, s) = split(code);
        let f = self.frame_mut(ix);
        debug_assert!(f.pages[s].is_none());
        f.pages[s] = Some(p);
        f.live += 1;
        f.pinned += 1;
    }

    /// The page in slot `code` was pinned (`true`) or unpinned.
    pub(crate) fn set_pinned(&mut self, code: u32, pinned: bool) {
        let f = self.frame_mut(split(code).0);
        if pinned {
            f.pinned += 1;
        } else {
            f.pinned -= 1;
        }
    }

    /// Whether every page of the frame of slot `code` is unpinned.
    pub(crate) fn all_unpinned(&self, code: u32) -> bool {
        self.frame(split(code).0).pinned == 0
    }

    /// The pages sharing the frame of slot `code`, itself included.
    pub(crate) fn neighbours(&self, code: u32) -> impl Iterator<Item = PagePtr> + '_ {
        self.frame(split(code).0).pages.iter().flatten().copied()
    }

    /// Empty slot `code` (its page, pinned or not, is leaving the cache):
    /// the frame, when that was its last page, to free.
    pub(crate) fn remove(&mut self, code: u32, was_pinned: bool) -> Option<Pfn> {
        let (ix, s) = split(code);
        let f = self.frame_mut(ix);
        debug_assert!(f.pages[s].is_some());
        f.pages[s] = None;
        f.live -= 1;
        if was_pinned {
            f.pinned -= 1;
        }
        if f.live == 0 {
            let pfn = f.pfn;
            self.frames[ix] = None;
            self.free_ix.push(ix as u32);
            self.held -= 1;
            return Some(pfn);
        }
        if !f.in_partial {
            f.in_partial = true;
            self.partial.push(ix as u32);
        }
        None
    }

    /// Check the frames against the pages: every page's slot names a frame
    /// slot holding it, counts agree, frames with room are on `partial`.
    pub(crate) fn check(&self, pages: &[PagePtr]) -> Result<(), String> {
        let mut seen = 0usize;
        let mut held = 0;
        for (ix, f) in self.frames.iter().enumerate() {
            let Some(f) = f else { continue };
            held += 1;
            let live: Vec<_> = f.pages.iter().flatten().collect();
            let pinned = live.iter().filter(|p| p.pinned()).count();
            if live.is_empty() || live.len() != usize::from(f.live) || pinned != usize::from(f.pinned) {
                return Err(format!(
                    "frame {ix}: live {} pinned {}, pages {} pinned {pinned}",
                    f.live,
                    f.pinned,
                    live.len()
                ));
            }
            for (s, p) in f.pages.iter().enumerate() {
                if p.is_some_and(|p| p.slot() != code(ix as u32, s as u32)) {
                    return Err(format!("frame {ix} slot {s}: the page says slot {}", p.map_or(0, PagePtr::slot)));
                }
            }
            if u32::from(f.live) < self.slots && !(f.in_partial && self.partial.contains(&(ix as u32))) {
                return Err(format!("frame {ix} has a free slot but is not on the partial list"));
            }
            seen += live.len();
        }
        for p in pages {
            let (ix, s) = split(p.slot());
            if self.frames.get(ix).and_then(|f| f.as_ref()).and_then(|f| f.pages[s]) != Some(*p) {
                return Err(format!("page {}: not in the frame slot it names", p.key()));
            }
        }
        if seen != pages.len() || held != self.held {
            return Err(format!(
                "{seen} pages in frames, {} in the map; {held} frames, counted {}",
                pages.len(),
                self.held
            ));
        }
        Ok(())
    }
}
