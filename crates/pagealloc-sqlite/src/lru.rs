//! The LRU lists of unpinned pages: intrusive doubly linked lists through
//! the page headers, as pcache1's `pLruNext`/`pLruPrev`, so that pinning a
//! cached page (every hit on an unpinned page) and unpinning it are a few
//! pointer writes, with no allocation and no search.
//!
//! Each page header has two pairs of links ([`Kind`]): one for its shard's
//! list and one for its cache's list. A page is on both or on neither; both
//! are ordered oldest first, because a page joins both at the tail at the
//! same moment and leaves both at once, so the oldest page of a cache is
//! also the oldest of that cache's pages on its shard's list.
//!
//! Invariants (under the shard's lock): `len` is the number of pages linked;
//! `head` is None iff `tail` is None iff `len == 0`; following `next` from
//! `head` reaches `tail` in `len - 1` steps with `prev` mirroring it.

use crate::page::{Kind, PagePtr};

/// One list; its nodes are page headers.
#[derive(Debug)]
pub(crate) struct Lru {
    kind: Kind,
    head: Option<PagePtr>,
    tail: Option<PagePtr>,
    len: u64,
}

impl Lru {
    /// An empty list linking through `kind`'s links.
    pub(crate) const fn new(kind: Kind) -> Self {
        Self { kind, head: None, tail: None, len: 0 }
    }

    /// Whether the list is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pages from oldest to newest, following the links (for checks):
    /// or why the links disagree with `head`, `tail` or `len`.
    pub(crate) fn walk(&self) -> Result<Vec<PagePtr>, String> {
        let k = self.kind;
        let mut out = Vec::new();
        let mut prev = None;
        let mut cur = self.head;
        while let Some(p) = cur {
            if p.link(k, 0) != prev {
                return Err(format!("{k:?} list: a prev link does not mirror next"));
            }
            out.push(p);
            if out.len() as u64 > self.len {
                return Err(format!("{k:?} list: more pages linked than its length {}", self.len));
            }
            prev = Some(p);
            cur = p.link(k, 1);
        }
        if out.len() as u64 != self.len || self.tail != prev {
            return Err(format!("{k:?} list: {} linked, length {}, or a wrong tail", out.len(), self.len));
        }
        Ok(out)
    }

    /// The oldest page.
    pub(crate) fn first(&self) -> Option<PagePtr> {
        self.head
    }

    /// The newest page.
    pub(crate) fn last(&self) -> Option<PagePtr> {
        self.tail
    }

    /// Link `p` (on no list of this kind) as the newest page.
    pub(crate) fn push_back(&mut self, p: PagePtr) {
        let k = self.kind;
        debug_assert!(p.link(k, 0).is_none() && p.link(k, 1).is_none() && self.head != Some(p));
        p.set_link(k, 0, self.tail);
        p.set_link(k, 1, None);
        match self.tail {
            Some(t) => t.set_link(k, 1, Some(p)),
            None => self.head = Some(p),
        }
        self.tail = Some(p);
        self.len += 1;
    }

    /// Unlink `p`, which is on this list.
    pub(crate) fn remove(&mut self, p: PagePtr) {
        let k = self.kind;
        let (prev, next) = (p.link(k, 0), p.link(k, 1));
        match prev {
            Some(q) => q.set_link(k, 1, next),
            None => {
                debug_assert_eq!(self.head, Some(p));
                self.head = next;
            }
        }
        match next {
            Some(q) => q.set_link(k, 0, prev),
            None => {
                debug_assert_eq!(self.tail, Some(p));
                self.tail = prev;
            }
        }
        p.set_link(k, 0, None);
        p.set_link(k, 1, None);
        self.len -= 1;
    }
}
