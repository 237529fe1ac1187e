//! Intrusive doubly linked lists of pfns, threaded through the descriptors'
//! `next`/`prev` links (the kernel's `list_head`, with 32-bit pfns for pointers).
//!
//! A list is owned by whoever holds its lock; every method takes the memory map
//! so it can reach the descriptors. Invariant: `head == NIL` iff `tail == NIL`;
//! walking `next` from `head` reaches `tail` and then NIL, and `prev` mirrors it.

use crate::memmap::MemMap;
use crate::page::NIL;
#[allow(unused_imports)]
use crate::prelude::*;

/// Head and tail of one list.
#[derive(Clone, Copy, Debug)]
pub struct PfnList {
    head: u32,
    tail: u32,
}

impl Default for PfnList {
    fn default() -> Self {
        Self::new()
    }
}

impl PfnList {
    pub const fn new() -> Self {
        Self { head: NIL, tail: NIL }
    }

    #[cfg(any(test, feature = "testing"))]
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    #[inline(always)]
    pub fn first(&self) -> Option<u64> {
        (self.head != NIL).then_some(self.head as u64)
    }

    #[inline(always)]
    pub fn last(&self) -> Option<u64> {
        (self.tail != NIL).then_some(self.tail as u64)
    }

    #[inline(always)]
    pub fn push_head(&mut self, mm: &MemMap, pfn: u64) {
        let p = pfn as u32;
        let d = mm.page(pfn);
        d.prev.set(NIL);
        d.next.set(self.head);
        if self.head == NIL {
            self.tail = p;
        } else {
            mm.page(self.head as u64).prev.set(p);
        }
        self.head = p;
    }

    #[inline(always)]
    pub(crate) fn push_tail(&mut self, mm: &MemMap, pfn: u64) {
        let p = pfn as u32;
        let d = mm.page(pfn);
        d.next.set(NIL);
        d.prev.set(self.tail);
        if self.tail == NIL {
            self.head = p;
        } else {
            mm.page(self.tail as u64).next.set(p);
        }
        self.tail = p;
    }

    /// Unlink a page known to be on this list.
    #[inline(always)]
    pub fn remove(&mut self, mm: &MemMap, pfn: u64) {
        let d = mm.page(pfn);
        let (n, p) = (d.next.get(), d.prev.get());
        if p == NIL {
            self.head = n;
        } else {
            mm.page(p as u64).next.set(n);
        }
        if n == NIL {
            self.tail = p;
        } else {
            mm.page(n as u64).prev.set(p);
        }
    }

    /// Drop every element before `new_head` (NIL: all of them), which the
    /// caller walked from the head by `next` and takes over: one head update
    /// instead of an unlink each. The dropped elements' links are left as
    /// they were (their new owner rewrites them).
    #[inline(always)]
    pub(crate) fn cut_head(&mut self, mm: &MemMap, new_head: u32) {
        self.head = new_head;
        if new_head == NIL {
            self.tail = NIL;
        } else {
            mm.page(new_head as u64).prev.set(NIL);
        }
    }

    #[cfg(test)]
    #[cfg(any(test, feature = "testing"))]
    #[inline(always)]
    pub(crate) fn pop_head(&mut self, mm: &MemMap) -> Option<u64> {
        let h = self.first()?;
        self.remove(mm, h);
        Some(h)
    }

    #[cfg(test)]
    #[cfg(any(test, feature = "testing"))]
    #[inline(always)]
    pub(crate) fn pop_tail(&mut self, mm: &MemMap) -> Option<u64> {
        let t = self.last()?;
        self.remove(mm, t);
        Some(t)
    }

    /// Iterate from head to tail (the caller holds the list's lock and does not
    /// modify the list while iterating).
    pub fn iter<'a>(&self, mm: &'a MemMap) -> impl Iterator<Item = u64> + 'a {
        let mut cur = self.head;
        core::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let p = cur as u64;
            cur = mm.page(p).next.get();
            Some(p)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_remove_keep_links_consistent() {
        let mm = MemMap::new(512, crate::Backing::None, crate::zone::new_pageblocks(1)).unwrap();
        let mut l = PfnList::new();
        assert!(l.is_empty());
        for p in [5, 6, 7] {
            l.push_tail(&mm, p);
        }
        l.push_head(&mm, 4);
        assert_eq!(l.iter(&mm).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        l.remove(&mm, 6);
        assert_eq!(l.iter(&mm).collect::<Vec<_>>(), vec![4, 5, 7]);
        assert_eq!(l.pop_tail(&mm), Some(7));
        assert_eq!(l.pop_head(&mm), Some(4));
        assert_eq!(l.pop_head(&mm), Some(5));
        assert!(l.is_empty());
        assert_eq!(l.last(), None);
    }
}
