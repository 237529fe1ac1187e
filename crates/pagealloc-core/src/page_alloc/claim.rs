//! The free claim: the one routine every free goes through before its block
//! joins a list (the kernel pays one atomic per free too, in
//! `put_page_testzero`).
//!
//! A claim checks the block in O(1) (range, order, alignment, allocated head,
//! nothing that forbids the free) and then takes the descriptor's flags from
//! the word it checked to `PCP` with one compare-and-swap. If the word changed
//! in between (a racing free, lock, writeback or `Pages` handle), the CAS
//! fails and the checks run again on the new word. So:
//! - two frees of one block racing each other: exactly one claims it, the
//!   other sees `PCP` (or a later state) and is refused with a typed error;
//! - a free racing `lock_page`: either the lock's CAS (which needs `HEAD`)
//!   wins and the free is refused as `Locked`, or the free wins and the lock
//!   is refused as `NotAllocated`; no lock bit or waiter is ever wiped;
//! - a block owned by a `Pages` handle (`OWNED`) is refused to the raw pfn
//!   API (`FreeError::Owned`); only the handle's own free passes `owned`.
//!
//! The old flags are returned: a set `WAITERS` means someone may wait on the
//! page, and the freer wakes them.
//!
//! # The block a claim lands on
//!
//! The CAS compares the flags word only, and the order lives in the private
//! word: between the checks and the CAS the block may be freed and its pfn
//! handed out again at another order (or type) with the very same flags
//! word (a stale free racing its owner's free and a reallocation: an ABA).
//! Freeing it at the order the checks read would free pages that belong to
//! somebody else, `Pages` handles' frames included. So every claim reads
//! the private word again once it holds the block (nobody else writes it
//! then; the allocation's `set_flags` is a release store after its private
//! word, the claim's CAS an acquire) and, where it changed, frees the block
//! as it is now: [`Claim::order`] here, [`changed_under_claim`] and
//! [`Core::free_as_is`] for the inline claims. Conservation holds; the stale free took somebody's raw
//! block, as a stale free landing a moment later would have. Loom model:
//! `tests::loom_models::stale_free_races_reallocation_at_another_order`.

use super::Core;
use crate::error::FreeError;
use crate::page::{flags, PageDesc};
use crate::sync::Ordering;
use crate::types::{Order, Pfn, MAX_ORDER};

/// A free's order as the user gave it, checked: the one place a free's
/// order becomes an [`Order`].
#[inline(always)]
pub(crate) fn checked_order(pfn: Pfn, order: u32) -> Result<Order, FreeError> {
    Order::new(order).ok_or(FreeError::InvalidOrder { pfn, order })
}

/// What a claim took: the flags word it replaced, and the block's order
/// when it landed (the order asked for, unless the block changed under the
/// claim: see the module doc).
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    pub old: u32,
    pub order: Order,
}

/// The inline claims' CAS, from exactly `HEAD` (an allocated head with no
/// lock state, no waiters and no owner) to `PCP`; false (nothing changed)
/// for any other word. Acquire: as in [`Core::claim`]. A page it took is
/// then checked with [`changed_under_claim`].
#[inline(always)]
pub fn claim_head(d: &PageDesc) -> bool {
    crate::failinject::claim_window();
    d.flags.compare_exchange(flags::HEAD, flags::PCP, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// After [`claim_head`] took the page: has its private word changed from
/// `word`, the one the caller read and checked before the CAS (the pfn
/// freed and handed out again meanwhile: see the module doc)? Such a page
/// is freed with [`Core::free_as_is`].
#[inline(always)]
pub fn changed_under_claim(d: &PageDesc, word: u32) -> bool {
    d.private_raw() != word
}

impl Core {
    /// Claim the allocated block `pfn` of `order` for freeing (see the module
    /// doc). `owned`: the caller is the `Pages` handle that owns the block.
    /// The caller frees [`Claim::order`], which is `order` unless the block
    /// was freed and reallocated at another order while the checks ran.
    #[inline(always)]
    pub fn claim(&self, pfn: Pfn, order: Order, owned: bool) -> Result<Claim, FreeError> {
        let d = self.checked_head(pfn, order)?;
        let mut old = d.flags();
        loop {
            check_word(pfn, order, d, old, owned).map_err(|e| self.refine(e, pfn, order))?;
            crate::failinject::claim_window();
            // Acquire: pairs with the Release of an unlock or end of writeback
            // that left the word as we read it: their writes to the page
            // happen before its next owner's.
            match d.flags.compare_exchange(old, flags::PCP, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(cur) => old = cur,
            }
        }
        // Held: the private word is ours now. The order the checks read, or
        // the block as it was reallocated meanwhile.
        let order = match d.order() {
            o if o == order.get() => order,
            o => claimed_order(o),
        };
        Ok(Claim { old, order })
    }

    /// Free a page an order-0 claim holds (it replaced flags word `old`) by
    /// the full path, at the order its private word says now: the inline
    /// paths' way out for a page they claimed but cannot keep (no slot, a
    /// full stack, another key), and for one whose private word changed
    /// between the checks and the claim (the pfn was freed and handed out
    /// again meanwhile, at another order or type: see the module doc).
    #[cold]
    #[inline(never)]
    pub fn free_as_is(&self, p: u64, old: u32) {
        let order = claimed_order(self.mm.page(p).order());
        self.init_on_free(p, order);
        self.finish_free(Pfn::new(p), order, old);
    }

    /// The range, order and alignment checks; the descriptor of `pfn`.
    #[inline(always)]
    fn checked_head(&self, pfn: Pfn, order: Order) -> Result<&PageDesc, FreeError> {
        let p = pfn.as_u64();
        let Some(d) = self.mm.descs().get(p as usize) else {
            return Err(FreeError::OutOfRange { pfn, nr_pages: self.mm.nr_pages() });
        };
        if p & (order.pages() - 1) != 0 {
            return Err(FreeError::Misaligned { pfn, order: order.get() });
        }
        Ok(d)
    }

    /// A check failure, made precise: a pfn that is not an allocated head is
    /// diagnosed (free, inside a block, never allocated).
    #[cold]
    fn refine(&self, e: FreeError, pfn: Pfn, order: Order) -> FreeError {
        match e {
            FreeError::NotAllocated { .. } => self.diagnose_free(pfn, order),
            e => e,
        }
    }

    /// Why a pfn that is not an allocated head cannot be freed: O(MAX_ORDER).
    #[cold]
    #[inline(never)]
    pub fn diagnose_free(&self, pfn: Pfn, _order: Order) -> FreeError {
        let p = pfn.as_u64();
        let f = self.mm.page(p).flags();
        if flags::array_held(f) {
            // A `PageArray`'s page: only the array frees it.
            return FreeError::Owned { pfn };
        }
        if f & (flags::BUDDY | flags::PCP) != 0 {
            return FreeError::DoubleFree { pfn };
        }
        for k in 1..=MAX_ORDER {
            let h = p & !((1u64 << k) - 1);
            let d = self.mm.page(h);
            let hf = d.flags();
            if h != p && hf & (flags::BUDDY | flags::HEAD | flags::PCP) != 0 && d.order() >= k {
                return if hf & flags::HEAD != 0 {
                    FreeError::InsideBlock { pfn, head: Pfn::new(h) }
                } else {
                    FreeError::DoubleFree { pfn }
                };
            }
        }
        FreeError::NotAllocated { pfn }
    }

    /// Undo a claim made by [`Core::claim`] that found nothing wrong but must
    /// not go ahead (an all-or-nothing range free that failed later on):
    /// the descriptor gets back the word the claim took.
    pub fn unclaim(&self, pfn: Pfn, old: u32) {
        // A plain store: while the word reads PCP nobody else changes it (every
        // RMW that could needs HEAD), except a waker clearing WAITERS, which
        // this may set again: harmless, it costs the next unlock one lookup.
        self.mm.page(pfn.as_u64()).set_flags(old);
    }
}

/// Can a block whose head descriptor `d` holds `f` be freed at `order` by a
/// raw free (`owned` false) or its owning handle (`owned` true)?
#[inline(always)]
fn check_word(pfn: Pfn, order: Order, d: &PageDesc, f: u32, owned: bool) -> Result<(), FreeError> {
    // First: during migration's hand-over the word is `ISOLATED_MIGRATE`
    // without `HEAD`, and the owner's free must read `Migrating` (retry), not
    // `NotAllocated` (loom model `migrate::loom_tests`).
    if f & flags::ISOLATED_MIGRATE != 0 {
        return Err(FreeError::Migrating { pfn });
    }
    if f & flags::HEAD == 0 {
        return Err(FreeError::NotAllocated { pfn });
    }
    if d.order() != order.get() {
        return Err(FreeError::WrongOrder { pfn, order: order.get(), actual: d.order() });
    }
    if f & (flags::LOCKED | flags::GUARD) != 0 {
        return Err(FreeError::Locked { pfn });
    }
    if f & flags::WRITEBACK != 0 {
        return Err(FreeError::Writeback { pfn });
    }
    if flags::cache_owned(f) {
        return Err(FreeError::Referenced { pfn });
    }
    if (f & flags::OWNED != 0) != owned {
        return Err(if owned { FreeError::NotAllocated { pfn } } else { FreeError::Owned { pfn } });
    }
    Ok(())
}

/// The order in the private word of a block just claimed: an allocated
/// head's word holds the order it was allocated at (every allocation stores
/// it before the release store of `HEAD` that the claim's CAS read).
#[inline(always)]
pub fn claimed_order(o: u32) -> Order {
    Order::new(o).expect("an allocated head's private word holds its order")
}
