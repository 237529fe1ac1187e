//! The soak's operations: each does one random call of the allocator's API
//! and checks its result against what this thread owns (see the module
//! above for the checks).

use super::{alloc_ok, check, drain_handoff, free_owned, Mine, Op, Rng, Shared};
use pagealloc::{AllocError, FreeError, Gfp, NodeId, PageStateError, Pfn, WaitError, MAX_ORDER, PAGEBLOCK_PAGES};
use std::time::Duration;

pub(super) fn op_alloc(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if mine.held.len() >= 48 {
        return op_free(sh, t, rng, mine);
    }
    let (gfp, order) = (rng.gfp(), rng.order());
    sh.publish(t, Op::Alloc, order as u64);
    let r = if rng.below(4) == 0 {
        sh.a.alloc_pages_node(NodeId(rng.below(sh.nodes as u64) as u32), gfp, order)
    } else {
        sh.a.alloc_pages(gfp, order)
    };
    match r {
        Ok(p) => {
            if sh.claim_block("alloc_pages", p.as_u64(), order) {
                mine.passed += 1;
                mine.held.push((p, order));
            }
        }
        Err(e) => check(sh, mine, alloc_ok(sh, e), || format!("alloc_pages({gfp:?}, {order}): {e:?}")),
    }
}

pub(super) fn op_free(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if mine.held.is_empty() {
        return;
    }
    let (p, o) = mine.held.swap_remove(rng.below(mine.held.len() as u64) as usize);
    sh.publish(t, Op::Free, p.as_u64());
    free_owned(sh, mine, p, o);
}

pub(super) fn op_bulk_alloc(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let n = 1 + rng.below(64) as usize;
    let gfp = rng.gfp();
    sh.publish(t, Op::BulkAlloc, n as u64);
    if rng.below(4) == 0 {
        return page_array_round(sh, rng, mine, n, gfp);
    }
    const SENTINEL: u64 = 1 << 60;
    let holes = rng.next();
    let mut slots: Vec<Option<Pfn>> =
        (0..n).map(|i| (holes >> (i % 64) & 1 == 1 && i % 3 == 0).then_some(Pfn::new(SENTINEL + i as u64))).collect();
    let lead = sh.a.alloc_pages_bulk(gfp, &mut slots);
    let real_lead = slots.iter().take_while(|s| s.is_some()).count();
    check(sh, mine, lead == real_lead, || format!("alloc_pages_bulk returned {lead}, {real_lead} leading slots"));
    for (i, s) in slots.iter().enumerate() {
        match s {
            Some(p) if p.as_u64() >= SENTINEL => {
                check(sh, mine, p.as_u64() == SENTINEL + i as u64, || format!("bulk moved populated slot {i}"));
            }
            Some(p) if sh.claim("alloc_pages_bulk", p.as_u64(), 1) => {
                mine.passed += 1;
                mine.held.push((*p, 0));
            }
            Some(_) | None => {}
        }
    }
    trim(sh, rng, mine);
}

/// A `PageArray` of `n` slots: filled (every page claimed in the
/// tracker), a raw free and a lock of one of its pfns refused, each page's
/// first byte written and read back, some pages taken out as raw pages
/// (kept) or `Pages` handles (dropped), the rest released.
fn page_array_round(sh: &Shared, rng: &mut Rng, mine: &mut Mine, n: usize, gfp: Gfp) {
    let mut arr = match sh.a.page_array(n) {
        Ok(arr) => arr,
        Err(e) => return sh.violation(format!("page_array({n}): {e:?}")),
    };
    let lead = arr.fill(gfp);
    check(sh, mine, lead == arr.populated(), || format!("PageArray::fill returned {lead}, {} held", arr.populated()));
    for &p in arr.slots().iter().flatten() {
        sh.claim("PageArray::fill", p.as_u64(), 1);
    }
    if let Some(p) = arr.get(0) {
        let r = sh.a.free_pages(p, 0);
        check(sh, mine, r == Err(FreeError::Owned { pfn: p }), || format!("free_pages of an array's page: {r:?}"));
        check(sh, mine, !sh.a.page_locks().trylock_page(p), || {
            format!("trylock_page of an array's page {p:?} succeeded")
        });
    }
    for i in 0..lead {
        if let Some(f) = arr.frame_mut(i) {
            f[0] = i as u8;
        }
    }
    for i in 0..lead {
        if let Some(f) = arr.frame(i) {
            check(sh, mine, f[0] == i as u8, || format!("an array's frame {i} changed under it"));
        }
    }
    for i in 0..lead {
        match rng.below(8) {
            0 => {
                if let Some(p) = arr.take_pfn(i) {
                    mine.held.push((p, 0));
                }
            }
            1 => {
                if let Some(h) = arr.take(i) {
                    sh.release("Pages from a PageArray", h.pfn().as_u64(), 1);
                    drop(h);
                }
            }
            _ => {}
        }
    }
    for &p in arr.slots().iter().flatten() {
        sh.release("PageArray::release", p.as_u64(), 1);
    }
    arr.release();
    check(sh, mine, arr.populated() == 0, || "PageArray::release left pages".to_string());
    trim(sh, rng, mine);
}

pub(super) fn op_bulk_list(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let n = 1 + rng.below(64) as usize;
    sh.publish(t, Op::BulkList, n as u64);
    let mut out = Vec::new();
    let got = sh.a.alloc_pages_bulk_list(rng.gfp(), n, &mut out);
    check(sh, mine, got == out.len() && got <= n, || format!("alloc_pages_bulk_list: {got} of {n}, {}", out.len()));
    for p in out {
        if sh.claim("alloc_pages_bulk_list", p.as_u64(), 1) {
            mine.held.push((p, 0));
        }
    }
    trim(sh, rng, mine);
}

/// Keep holdings bounded: free random blocks down to 48.
fn trim(sh: &Shared, rng: &mut Rng, mine: &mut Mine) {
    while mine.held.len() > 48 {
        let (p, o) = mine.held.swap_remove(rng.below(mine.held.len() as u64) as usize);
        free_owned(sh, mine, p, o);
    }
}

pub(super) fn op_bulk_free(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::BulkFree, 0);
    let mut list = Vec::new();
    let mut bad = Vec::new();
    let mut i = 0;
    while i < mine.held.len() && list.len() < 32 {
        if mine.held[i].1 == 0 && rng.below(2) == 0 {
            let (p, _) = mine.held.swap_remove(i);
            sh.release("free_pages_bulk", p.as_u64(), 1);
            list.push(p);
        } else {
            i += 1;
        }
    }
    // Entries that must be refused (never a duplicate: once the first copy is
    // freed another thread may own the page again).
    for _ in 0..rng.below(3) {
        let at = rng.below(list.len() as u64 + 1) as usize;
        let (p, want) = match rng.below(2) {
            0 => {
                let p = Pfn::new(sh.nr_pages + rng.below(1000));
                (p, FreeError::OutOfRange { pfn: p, nr_pages: sh.nr_pages })
            }
            _ => match mine.held.iter().find(|(_, o)| *o > 0) {
                Some(&(h, o)) => {
                    let p = h.add(1 + rng.below((1 << o) - 1));
                    (p, FreeError::InsideBlock { pfn: p, head: h })
                }
                None => (Pfn::MAX, FreeError::OutOfRange { pfn: Pfn::MAX, nr_pages: sh.nr_pages }),
            },
        };
        for b in bad.iter_mut() {
            let (j, _): &mut (usize, FreeError) = b;
            if *j >= at {
                *j += 1;
            }
        }
        list.insert(at, p);
        bad.push((at, want));
    }
    bad.sort_by_key(|b| b.0);
    let r = sh.a.free_pages_bulk(&list);
    let got = r.map_or_else(|e| e.rejected, |()| Vec::new());
    check(sh, mine, got == bad, || format!("free_pages_bulk rejected {got:?}, expected {bad:?}"));
}

pub(super) fn op_cross(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::CrossFree, 0);
    if rng.below(2) == 0 && !mine.held.is_empty() {
        let b = mine.held.swap_remove(rng.below(mine.held.len() as u64) as usize);
        sh.pool.lock().unwrap().push(b);
    } else {
        let b = sh.pool.lock().unwrap().pop();
        if let Some((p, o)) = b {
            free_owned(sh, mine, p, o);
        }
    }
}

pub(super) fn op_contig(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    if let Some((p, n)) = mine.contig.pop() {
        sh.publish(t, Op::FreeContig, p.as_u64());
        sh.release("free_contig_range", p.as_u64(), n);
        let r = sh.a.contig().free_contig_range(p, n);
        check(sh, mine, r.is_ok(), || format!("free_contig_range({p:?}, {n}): {r:?}"));
        return;
    }
    let max = if rng.below(4) == 0 { 1024 } else { 64 };
    let n = 1 + rng.below(max);
    sh.publish(t, Op::Contig, n);
    match sh.a.contig().alloc_contig_pages(n, rng.gfp()) {
        Ok(p) => {
            if sh.claim("alloc_contig_pages", p.as_u64(), n) {
                mine.passed += 1;
                mine.contig.push((p, n));
            }
        }
        Err(e) => {
            check(sh, mine, matches!(e, AllocError::NoMemory { .. }), || format!("alloc_contig_pages({n}): {e:?}"))
        }
    }
}

pub(super) fn op_isolate(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let blocks = sh.nr_pages / PAGEBLOCK_PAGES;
    let s = rng.below(blocks) * PAGEBLOCK_PAGES + if rng.below(2) == 0 { 0 } else { rng.below(PAGEBLOCK_PAGES) };
    let nr = 1 + rng.below(2 * PAGEBLOCK_PAGES);
    sh.publish(t, Op::Isolate, s);
    match sh.a.contig().isolate_range(Pfn::new(s), nr) {
        Ok(()) => {
            let _ = sh.a.contig().test_pages_isolated(Pfn::new(s), nr);
            std::thread::yield_now();
            let r = sh.a.contig().undo_isolate_range(Pfn::new(s), nr);
            check(sh, mine, r.is_ok(), || format!("undo of our own isolation of {s:#x}+{nr}: {r:?}"));
        }
        Err(
            PageStateError::AlreadyIsolated { .. }
            | PageStateError::Unisolatable { .. }
            | PageStateError::BadRange { .. },
        ) => mine.passed += 1,
        Err(e) => sh.violation(format!("isolate_range({s:#x}, {nr}): {e:?}")),
    }
}

pub(super) fn op_lock_pages(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let p = sh.lock_pages[rng.below(sh.lock_pages.len() as u64) as usize];
    match rng.below(8) {
        0..=2 => {
            // Lock (sleeping), maybe start writeback, hold briefly, unlock, end it.
            drain_handoff(sh, mine);
            sh.publish(t, Op::LockPage, p.as_u64());
            let r = sh.a.page_locks().lock_page(p);
            check(sh, mine, r.is_ok() && sh.a.page_locks().page_locked_racy(p), || format!("lock_page({p:?}): {r:?}"));
            let wb = rng.below(3) == 0 && sh.a.page_locks().set_page_writeback(p) == Ok(true);
            for _ in 0..rng.below(50) {
                std::hint::spin_loop();
            }
            if rng.below(4) == 0 {
                std::thread::yield_now();
            }
            sh.publish(t, Op::Unlock, p.as_u64());
            let r = if rng.below(2) == 0 {
                sh.a.page_locks().unlock_page(p)
            } else {
                sh.a.page_locks().unlock_page_uptodate(p)
            };
            check(sh, mine, r.is_ok(), || format!("unlock_page({p:?}) we hold: {r:?}"));
            if wb {
                std::thread::yield_now();
                sh.publish(t, Op::Writeback, p.as_u64());
                let r = sh.a.page_locks().end_page_writeback(p);
                check(sh, mine, r.is_ok(), || format!("end_page_writeback({p:?}) we started: {r:?}"));
            }
        }
        3 => {
            sh.publish(t, Op::LockTimeout, p.as_u64());
            match sh.a.page_locks().lock_page_timeout(p, Duration::from_micros(200)) {
                Ok(()) => {
                    let r = sh.a.page_locks().unlock_page(p);
                    check(sh, mine, r.is_ok(), || format!("unlock after lock_page_timeout({p:?}): {r:?}"));
                }
                Err(e) => check(sh, mine, e == WaitError::TimedOut, || format!("lock_page_timeout({p:?}): {e:?}")),
            }
        }
        4 => {
            // Lock without sleeping and leave the unlock to whichever thread
            // next drains the hand-off list.
            sh.publish(t, Op::Trylock, p.as_u64());
            if sh.a.page_locks().trylock_page(p) {
                mine.passed += 1;
                sh.handoff.lock().unwrap().push(p);
            }
        }
        5 | 6 => {
            drain_handoff(sh, mine);
            sh.publish(t, Op::WaitLocked, p.as_u64());
            let r = sh.a.page_locks().wait_on_page_locked(p);
            check(sh, mine, r.is_ok(), || format!("wait_on_page_locked({p:?}): {r:?}"));
        }
        _ => {
            drain_handoff(sh, mine);
            sh.publish(t, Op::WaitWriteback, p.as_u64());
            let r = sh.a.page_locks().wait_on_page_writeback(p);
            check(sh, mine, r.is_ok(), || format!("wait_on_page_writeback({p:?}): {r:?}"));
        }
    }
}

/// Wait briefly on a block another thread may free at any moment: the wait
/// ends with the unlock, the timeout, or `NotAllocated` once it is freed.
pub(super) fn op_peek_wait(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let p = {
        let pool = sh.pool.lock().unwrap();
        if pool.is_empty() {
            return;
        }
        pool[rng.below(pool.len() as u64) as usize].0
    };
    sh.publish(t, Op::PeekWait, p.as_u64());
    let r = if rng.below(2) == 0 {
        sh.a.page_locks().wait_on_page_locked_timeout(p, Duration::from_micros(100))
    } else {
        sh.a.page_locks().wait_on_page_writeback_timeout(p, Duration::from_micros(100))
    };
    let ok =
        matches!(r, Ok(()) | Err(WaitError::TimedOut) | Err(WaitError::State(PageStateError::NotAllocated { .. })));
    check(sh, mine, ok, || format!("wait on pooled page {p:?}: {r:?}"));
}

/// Lock states of a block only this thread holds: every answer is exact.
pub(super) fn op_own_lock(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    let Some(&(p, o)) = mine.held.get(rng.below(mine.held.len() as u64 + 1) as usize) else { return };
    sh.publish(t, Op::OwnLock, p.as_u64());
    let a = &sh.a;
    check(sh, mine, a.page_locks().trylock_page(p), || format!("trylock of our unlocked block {p:?}"));
    check(sh, mine, !a.page_locks().trylock_page(p), || format!("second trylock of {p:?} succeeded"));
    let r = a.free_pages(p, o);
    check(sh, mine, r == Err(FreeError::Locked { pfn: p }), || format!("free of locked {p:?}: {r:?}"));
    check(sh, mine, a.page_locks().set_page_writeback(p) == Ok(true), || format!("set_page_writeback({p:?})"));
    check(sh, mine, a.page_locks().unlock_page(p).is_ok(), || format!("unlock_page({p:?})"));
    let r = a.page_locks().unlock_page(p);
    check(sh, mine, r == Err(PageStateError::NotLocked { pfn: p }), || format!("unlock of unlocked {p:?}: {r:?}"));
    let r = a.free_pages(p, o);
    check(sh, mine, r == Err(FreeError::Writeback { pfn: p }), || format!("free under writeback {p:?}: {r:?}"));
    check(sh, mine, a.page_locks().end_page_writeback(p).is_ok(), || format!("end_page_writeback({p:?})"));
    let r = a.page_locks().end_page_writeback(p);
    check(sh, mine, r == Err(PageStateError::NotWriteback { pfn: p }), || {
        format!("second end_page_writeback {p:?}: {r:?}")
    });
}

pub(super) fn op_reports(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::Reports, 0);
    let a = &sh.a;
    let ok = match rng.below(7) {
        0 => a.stats().buddyinfo().to_string().starts_with("Node 0, zone"),
        1 => a.stats().pagetypeinfo().to_string().starts_with("Page block order: 9"),
        2 => !a.stats().zoneinfo().to_string().is_empty(),
        3 => !a.stats().vmstat().to_string().is_empty(),
        4 => a.stats().snapshot_consistent().consistent,
        5 => a.stats().pcp_report().len() >= 4,
        _ => {
            let c = a.census();
            c.free + c.pcp + c.allocated <= a.managed_pages()
        }
    };
    check(sh, mine, ok, || "a report read gave a malformed answer".into());
}

pub(super) fn op_misuse(sh: &Shared, t: usize, rng: &mut Rng, mine: &mut Mine) {
    sh.publish(t, Op::Misuse, 0);
    let a = &sh.a;
    let n = sh.nr_pages;
    match rng.below(6) {
        0 => {
            let p = Pfn::new(n + rng.below(4096));
            let r = a.free_pages(p, 0);
            check(sh, mine, r == Err(FreeError::OutOfRange { pfn: p, nr_pages: n }), || format!("free {p:?}: {r:?}"));
        }
        1 => {
            let r = a.alloc_pages(Gfp::KERNEL, MAX_ORDER + 1);
            check(sh, mine, r == Err(AllocError::InvalidOrder { order: MAX_ORDER + 1 }), || format!("{r:?}"));
        }
        2 => {
            let r = a.alloc_pages_node(NodeId(sh.nodes + 3), Gfp::KERNEL, 0);
            let ok = r == Err(AllocError::InvalidNode { nid: sh.nodes + 3 })
                || (sh.inject && r == Err(AllocError::Injected));
            check(sh, mine, ok, || format!("{r:?}"));
        }
        3 => {
            if let Some(&(p, o)) = mine.held.iter().find(|(_, o)| *o < MAX_ORDER) {
                let r = a.free_pages(p, o + 1);
                let want = if p.as_u64() % (2 << o) != 0 {
                    FreeError::Misaligned { pfn: p, order: o + 1 }
                } else {
                    FreeError::WrongOrder { pfn: p, order: o + 1, actual: o }
                };
                check(sh, mine, r == Err(want), || format!("free {p:?} with order {}: {r:?}", o + 1));
            }
        }
        4 => {
            let r = a.contig().isolate_range(Pfn::new(0), 0);
            check(sh, mine, r == Err(PageStateError::BadRange { pfn: Pfn::new(0) }), || format!("{r:?}"));
        }
        _ => {
            let p = Pfn::new(n + 1);
            let r = a.page_locks().lock_page(p);
            check(sh, mine, r == Err(PageStateError::OutOfRange { pfn: p }), || format!("lock {p:?}: {r:?}"));
        }
    }
}
