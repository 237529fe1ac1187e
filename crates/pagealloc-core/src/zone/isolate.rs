//! The buddy-list side of pageblock isolation: what the isolation layer
//! above the core asks of a zone it holds locked.

use super::ZoneGuard;
use crate::types::{Order, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES};

impl ZoneGuard<'_> {
    /// If a free block above pageblock order covers `pfn`'s pageblock, split it
    /// into pageblock-sized free blocks.
    pub fn split_straddling_locked(&mut self, pfn: u64) {
        for order in Order::ALL[PAGEBLOCK_ORDER as usize + 1..].iter().copied() {
            let head = pfn & !(order.pages() - 1);
            if !self.zone.contains(head) {
                break;
            }
            let d = self.mm.page(head);
            if d.is_buddy() && d.order() == order.get() {
                self.del_from_free_list(head, order);
                let mut p = head;
                while p < head + order.pages() {
                    let mt = self.zone.pageblock_mt_racy(p);
                    self.add_to_free_list(p, Order::PAGEBLOCK, mt, false);
                    p += PAGEBLOCK_PAGES;
                }
                return;
            }
        }
    }

    /// After un-isolating the pageblock at `start`: if it is one free block,
    /// free it again so it merges with its buddy.
    pub fn remerge_block_locked(&mut self, start: u64) {
        let d = self.mm.page(start);
        if d.is_buddy() && d.order() == PAGEBLOCK_ORDER {
            let mt = self.zone.pageblock_mt_racy(start);
            self.del_from_free_list(start, Order::PAGEBLOCK);
            self.free_one_locked(start, Order::PAGEBLOCK, mt);
        }
    }
}
