//! Page references (the kernel's `_refcount`, `get_page`, `put_page`,
//! `folio_try_get`, `folio_ref_freeze`), held in bits 16..31 of the
//! descriptor's flags word, so the descriptor stays 16 bytes.
//!
//! The count is meaningful only on the head of an allocated block (`HEAD`);
//! a block the allocator hands out starts at 0 ("not reference counted": the
//! raw pfn API owns it). The page cache sets the first references itself.
//! Invariants:
//! - A block with a non-zero count is never freed: the free claim refuses any
//!   word with a count (`flags::NO_RAW_FREE` includes `REF_MASK`), so only the
//!   holder of the last reference frees it, through the ordinary claim, after
//!   its `put` took the count to 0.
//! - [`try_get`] (lockless lookups) only succeeds on a word with `HEAD` and a
//!   count above 0, with one CAS; [`freeze`] (reclaim) takes the count from
//!   exactly `expected` to 0 with one CAS. RMWs of one word are totally
//!   ordered, so a reclaim that froze the page and a lookup that got a
//!   reference cannot both succeed (loom model in `pagecache::loom_tests`).
//! - 16 bits: [`get`] refuses to pass [`USER_REF_MAX`] for a user and
//!   [`try_get`] 65535 for the cache itself (a typed error, never a wrap).
//! - Freezing (the last put, reclaim, migration) leaves the claimed word
//!   [`frozen_word`]: between the freeze and the free, the page is nobody's
//!   to lock, mark or reference.

use crate::page::flags::{ACTIVE, DIRTY, GUARD, HEAD, LOCKED, LRU, PCP, REFERENCED, REF_MASK, REF_ONE, REF_SHIFT};
use crate::sync::{AtomicU32, Ordering};

/// The reference count in a flags word.
#[inline(always)]
pub const fn count_of(f: u32) -> u32 {
    (f & REF_MASK) >> REF_SHIFT
}

/// The most references the users of a page (handles, `PageReference`s)
/// may hold together: the count's last 1024 values are kept for the cache's
/// own short-lived references (a lookup inside truncation or writeback, an
/// LRU isolation), so that a user who saturates a page gets a typed error
/// and the cache's own work on the page still goes on.
pub const USER_REF_MAX: u32 = (REF_MASK >> REF_SHIFT) - 1024;
/// The most references a page holds at all.
pub const REF_MAX: u32 = REF_MASK >> REF_SHIFT;

/// What [`try_get_below`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryGet {
    /// A reference was taken.
    Got,
    /// The count is 0 (frozen by reclaim or migration, or being freed) or
    /// the word is not an allocated head: no reference can be had.
    Zero,
    /// The count is at the limit asked for: a refusal, distinct from frozen.
    Saturated,
}

/// Take a reference on a page that has one already (`folio_try_get`),
/// unless the count is at `max` already.
#[inline]
pub fn try_get_below(flags: &AtomicU32, max: u32) -> TryGet {
    let mut f = flags.load(Ordering::Relaxed);
    loop {
        if f & HEAD == 0 || f & REF_MASK == 0 {
            return TryGet::Zero;
        }
        if count_of(f) >= max {
            return TryGet::Saturated;
        }
        // Acquire: pairs with the Release of whoever published the page.
        match flags.compare_exchange_weak(f, f + REF_ONE, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return TryGet::Got,
            Err(cur) => f = cur,
        }
    }
}

/// [`try_get_below`] for the cache's own references (up to [`REF_MAX`]):
/// false when the count is 0, the word is not an allocated head, or the
/// count is saturated.
#[inline]
pub fn try_get(flags: &AtomicU32) -> bool {
    try_get_below(flags, REF_MAX) == TryGet::Got
}

/// Take one more reference for a user on a page that has one
/// (`get_page`), at most [`USER_REF_MAX`].
#[inline]
pub fn get(flags: &AtomicU32) -> TryGet {
    try_get_below(flags, USER_REF_MAX)
}

/// Drop a reference (`put_page_testzero`): `Some(old)` when it was the
/// last, and the caller must free the page (`Core::free_frozen` with the
/// word `old` the put replaced). The last put freezes the page for its free
/// in the same RMW ([`frozen_word`]): no stranger can lock, reference,
/// mark or free it between this put and the free. A holder of the page
/// lock holds a reference, so the last put never finds the page locked.
/// Release: the caller's writes to the page happen before whoever frees it.
#[inline]
pub fn put_testzero(flags: &AtomicU32) -> Result<Option<u32>, u32> {
    let mut f = flags.load(Ordering::Relaxed);
    loop {
        if f & HEAD == 0 || f & REF_MASK == 0 {
            return Err(f);
        }
        let last = count_of(f) == 1;
        debug_assert!(!last || f & (LOCKED | GUARD) == 0, "last put of a locked page: {f:#x}");
        let new = if last { frozen_word(f) } else { f - REF_ONE };
        match flags.compare_exchange_weak(f, new, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Ok(last.then_some(f)),
            Err(cur) => f = cur,
        }
    }
}

/// The word of a page frozen for its free: claimed (`PCP`, no `HEAD`), as a
/// free's claim leaves it, with the page-cache bits the free still needs
/// (`LRU` and `ACTIVE` name the list it must leave, `DIRTY` the gauge it
/// must leave). No pfn-taking call acts on a word without `HEAD`, and no
/// lookup or LRU isolation takes a reference on it.
#[inline(always)]
pub const fn frozen_word(f: u32) -> u32 {
    PCP | (f & (LRU | ACTIVE | DIRTY | REFERENCED))
}

/// Take the count from exactly `expected` to frozen (`folio_ref_freeze`):
/// the word becomes [`frozen_word`], so no [`try_get`] succeeds and no
/// stranger's pfn call can touch it. `Some(old)`: the word replaced, which
/// the caller either frees the page with or stores back to unfreeze it
/// (nobody else writes a frozen word). `None` if anyone else holds a
/// reference.
#[inline]
pub fn freeze(flags: &AtomicU32, expected: u32) -> Option<u32> {
    let mut f = flags.load(Ordering::Relaxed);
    loop {
        if f & HEAD == 0 || count_of(f) != expected {
            return None;
        }
        match flags.compare_exchange_weak(f, frozen_word(f), Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Some(f),
            Err(cur) => f = cur,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_and_freeze() {
        let w = AtomicU32::new(HEAD);
        assert!(!try_get(&w), "count 0 is not referenced");
        w.store(HEAD | REF_ONE, Ordering::Relaxed);
        assert!(try_get(&w));
        assert_eq!(count_of(w.load(Ordering::Relaxed)), 2);
        assert!(freeze(&w, 1).is_none());
        assert_eq!(put_testzero(&w), Ok(None));
        w.fetch_or(LOCKED | GUARD | LRU, Ordering::Relaxed);
        assert_eq!(freeze(&w, 1), Some(HEAD | LOCKED | GUARD | LRU | REF_ONE));
        assert_eq!(w.load(Ordering::Relaxed), PCP | LRU, "claimed, with the list it must leave");
        assert!(!try_get(&w), "a frozen page takes no reference");
        assert!(put_testzero(&w).is_err());
        w.store(REF_ONE, Ordering::Relaxed);
        assert!(!try_get(&w), "not an allocated head");
    }

    #[test]
    fn saturation_is_refused_not_frozen() {
        let w = AtomicU32::new(HEAD | (USER_REF_MAX << REF_SHIFT));
        assert_eq!(get(&w), TryGet::Saturated, "a user stops at USER_REF_MAX");
        assert!(try_get(&w), "the cache's own reference still goes through");
        w.store(HEAD | REF_MASK, Ordering::Relaxed);
        assert_eq!(try_get_below(&w, REF_MAX), TryGet::Saturated);
        assert!(!try_get(&w));
        assert_eq!(count_of(w.load(Ordering::Relaxed)), REF_MAX, "no wrap");
        w.store(HEAD, Ordering::Relaxed);
        assert_eq!(get(&w), TryGet::Zero);
    }

    #[test]
    fn the_last_put_freezes_for_the_free() {
        let w = AtomicU32::new(HEAD | DIRTY | (2 * REF_ONE));
        assert_eq!(put_testzero(&w), Ok(None));
        assert_eq!(put_testzero(&w), Ok(Some(HEAD | DIRTY | REF_ONE)));
        assert_eq!(w.load(Ordering::Relaxed), PCP | DIRTY);
        assert_eq!(try_get_below(&w, REF_MAX), TryGet::Zero);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Reclaim (freeze from the cache's reference plus its own, 2) against a
    /// lookup taking a new reference: exactly one wins, and the loser leaves
    /// the count as it found it.
    #[test]
    fn reclaim_vs_new_reference() {
        loom::model(|| {
            let w = Arc::new(AtomicU32::new(HEAD | (2 * REF_ONE)));
            let w2 = w.clone();
            let t = loom::thread::spawn(move || try_get(&w2));
            let froze = freeze(&w, 2).is_some();
            let got = t.join().unwrap();
            let c = count_of(w.load(Ordering::Relaxed));
            if froze {
                assert!(!got);
                assert_eq!(c, 0);
            } else {
                assert!(got);
                assert_eq!(c, 3);
            }
        });
    }

    /// The last put against a stranger's lock attempt (the public pfn
    /// API's `trylock_page`, which may lock a page only while its count is
    /// 0) and a lookup's `try_get`: the put freezes the page into the
    /// claimed word in its own RMW, so the stranger never takes the lock
    /// (before the put it is refused by the count, after it the page is no
    /// allocated head) and the lookup never revives it.
    #[test]
    fn last_put_vs_stranger_lock_and_lookup() {
        loom::model(|| {
            let w = Arc::new(AtomicU32::new(HEAD | REF_ONE));
            let (w2, w3) = (w.clone(), w.clone());
            let stranger = loom::thread::spawn(move || {
                let f = w2.load(Ordering::Relaxed);
                // The pfn API: refused while referenced, else a trylock CAS.
                f & (REF_MASK | LOCKED | GUARD) == 0
                    && f & HEAD != 0
                    && w2.compare_exchange(f, f | LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
            });
            let lookup = loom::thread::spawn(move || try_get(&w3));
            let last = put_testzero(&w).unwrap().is_some();
            let locked = stranger.join().unwrap();
            let got = lookup.join().unwrap();
            assert!(!locked, "a stranger locked a page on its way to the free");
            let f = w.load(Ordering::Relaxed);
            if got {
                // The lookup came first: the put was not the last.
                assert!(!last);
                assert_eq!(count_of(f), 1);
            } else {
                assert!(last);
                assert_eq!(f, PCP, "frozen: claimed for the free");
            }
        });
    }
}
