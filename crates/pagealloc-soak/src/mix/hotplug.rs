//! Memory added at run time: the arena's holes, and the operation that
//! gives them piece by piece while every other operation runs.

use super::{check, Mine, Op, Rng, Shared};
use pagealloc::{PageStateError, Pfn};

/// Holes for about a tenth of an arena of `pages`: 24 chunks, one in each
/// 24th of the arena at a random offset (in either zone of either node),
/// each cut into pieces that `op_add_memory` gives one by one, spread
/// over a run of some seconds.
pub(super) fn hole_pieces(pages: u64, rng: &mut Rng) -> Vec<(u64, u64)> {
    let (slot, chunk) = (pages / 24, pages / 256);
    let mut pieces = Vec::new();
    for i in 0..24 {
        let mut at = i * slot + rng.below(slot - chunk);
        let end = at + chunk;
        while at < end {
            let n = (1 + rng.below(chunk / 8)).min(end - at);
            pieces.push((at, n));
            at += n;
        }
    }
    pieces
}

/// Give one piece of the arena's holes (it merges into the free lists
/// while everything else runs), or, far more often so the pieces last the
/// run, try to give memory that is not in a hole (a piece given already,
/// or a lock page): refused, nothing changed.
pub(super) fn op_add_memory(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if rng.below(128) != 0 {
        let given = sh.added.lock().unwrap().last().copied();
        let (s, n) = given.unwrap_or((sh.lock_pages[0].as_u64(), 1));
        sh.publish(t, Op::AddMemory, s);
        let r = sh.a.add_free_memory(Pfn::new(s), n);
        let refused = r == Err(PageStateError::BadRange { pfn: Pfn::new(s) });
        check(sh, mine, refused, || format!("add_free_memory({s:#x}, {n}) of memory not in a hole: {r:?}"));
        return;
    }
    let piece = {
        let mut h = sh.holes.lock().unwrap();
        let n = h.len() as u64;
        (n > 0).then(|| h.swap_remove(rng.below(n) as usize))
    };
    let Some((s, n)) = piece else {
        mine.passed += 1;
        return;
    };
    sh.publish(t, Op::AddMemory, s);
    let r = sh.a.add_free_memory(Pfn::new(s), n);
    check(sh, mine, r.is_ok(), || format!("add_free_memory({s:#x}, {n}) of a hole: {r:?}"));
    sh.added.lock().unwrap().push((s, n));
}
