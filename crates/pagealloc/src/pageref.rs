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
//! - 16 bits: [`get`] and [`try_get`] refuse to pass 65535 (an error, never a
//!   wrap).

use crate::page::flags::{HEAD, REF_MASK, REF_ONE, REF_SHIFT};
use crate::sync::{AtomicU32, Ordering};

/// The reference count in a flags word.
#[inline(always)]
pub(crate) const fn count_of(f: u32) -> u32 {
    (f & REF_MASK) >> REF_SHIFT
}

/// Take a reference on a page that has one already (`folio_try_get`): false
/// when the count is 0 (the page is being freed or reclaimed), the word is
/// not an allocated head, or the count is saturated.
#[inline]
pub(crate) fn try_get(flags: &AtomicU32) -> bool {
    let mut f = flags.load(Ordering::Relaxed);
    loop {
        if f & HEAD == 0 || f & REF_MASK == 0 || f & REF_MASK == REF_MASK {
            return false;
        }
        // Acquire: pairs with the Release of whoever published the page.
        match flags.compare_exchange_weak(f, f + REF_ONE, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(cur) => f = cur,
        }
    }
}

/// Take one more reference on a page the caller holds one on (`get_page`);
/// false only if the count is saturated.
#[inline]
pub(crate) fn get(flags: &AtomicU32) -> bool {
    try_get(flags)
}

/// Drop a reference (`put_page_testzero`): true when it was the last, and
/// the caller must free the page. Release: the caller's writes to the page
/// happen before whoever frees it.
#[inline]
pub(crate) fn put_testzero(flags: &AtomicU32) -> Result<bool, u32> {
    let mut f = flags.load(Ordering::Relaxed);
    loop {
        if f & HEAD == 0 || f & REF_MASK == 0 {
            return Err(f);
        }
        match flags.compare_exchange_weak(f, f - REF_ONE, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Ok(count_of(f) == 1),
            Err(cur) => f = cur,
        }
    }
}

/// Take the count from exactly `expected` to 0 (`folio_ref_freeze`): after
/// this no [`try_get`] succeeds. False if anyone else holds a reference.
#[inline]
pub(crate) fn freeze(flags: &AtomicU32, expected: u32) -> bool {
    let mut f = flags.load(Ordering::Relaxed);
    loop {
        if f & HEAD == 0 || count_of(f) != expected {
            return false;
        }
        match flags.compare_exchange_weak(f, f & !REF_MASK, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(cur) => f = cur,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::page::flags::LOCKED;

    #[test]
    fn counts_and_freeze() {
        let w = AtomicU32::new(HEAD);
        assert!(!try_get(&w), "count 0 is not referenced");
        w.store(HEAD | REF_ONE, Ordering::Relaxed);
        assert!(try_get(&w));
        assert_eq!(count_of(w.load(Ordering::Relaxed)), 2);
        assert!(!freeze(&w, 1));
        assert_eq!(put_testzero(&w), Ok(false));
        w.fetch_or(LOCKED, Ordering::Relaxed);
        assert!(freeze(&w, 1));
        assert_eq!(w.load(Ordering::Relaxed), HEAD | LOCKED);
        assert!(!try_get(&w), "a frozen page takes no reference");
        assert!(put_testzero(&w).is_err());
        w.store(HEAD | REF_MASK, Ordering::Relaxed);
        assert!(!get(&w), "saturated");
        w.store(REF_ONE, Ordering::Relaxed);
        assert!(!try_get(&w), "not an allocated head");
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
            let w = Arc::new(AtomicU32::new(HEAD | 2 * REF_ONE));
            let w2 = w.clone();
            let t = loom::thread::spawn(move || try_get(&w2));
            let froze = freeze(&w, 2);
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
}
