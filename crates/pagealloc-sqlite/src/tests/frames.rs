//! Pages under a frame share frames; eviction prefers frames whose pages
//! are all unpinned; sharing can be turned off.

use super::{assert_conserved, close, open, tag, tag_of, ARENA};
use crate::group::Evicted;
use crate::{page_charge, Config, Group};
use std::sync::Arc;

fn group(budget: Option<u64>, share: bool) -> Arc<Group> {
    let cap = budget;
    Group::new(&Config {
        arena_bytes: ARENA,
        budget_bytes: budget,
        hard_cap_bytes: cap,
        share_frames: share,
        ..Config::default()
    })
    .unwrap()
}

/// Header bytes of a page with a 200-byte extra area.
fn hdr() -> u64 {
    page_charge(1024, 200) - 1024
}

#[test]
fn small_pages_share_frames_and_keep_their_bytes_apart() {
    for (sz, per) in [(512usize, 8u64), (1024, 4), (2048, 2)] {
        let g = group(None, true);
        let c = open(&g, sz, true);
        let n = 3 * per + 1;
        let ps: Vec<_> = (0..n as u32).map(|k| c.fetch(k, 2)).collect();
        for (i, &p) in ps.iter().enumerate() {
            tag(p, i as u8 + 1, sz);
        }
        for (i, &p) in ps.iter().enumerate() {
            assert_eq!(tag_of(p, sz), vec![i as u8 + 1; sz], "page {i} of {sz} bytes overlaps another");
        }
        assert_eq!(g.used_frames(), 4, "{n} pages of {sz} bytes in 4 frames");
        assert_eq!(g.charged_bytes(), 4 * 4096 + n * hdr());
        g.check_invariants().unwrap();
        close(&g, c, ps);
    }
}

#[test]
fn a_frame_is_freed_with_its_last_page_and_slots_are_reused() {
    let g = group(None, true);
    let c = open(&g, 1024, true);
    let ps: Vec<_> = (0..8).map(|k| c.fetch(k, 2)).collect();
    assert_eq!(g.used_frames(), 2);
    // Discard one page of the first frame: its slot is free, the frame held.
    c.unpin(ps[1], true);
    assert_eq!(g.used_frames(), 2);
    let q = c.fetch(100, 2);
    assert_eq!(g.used_frames(), 2, "the free slot is filled, no frame allocated");
    // Discard all of the second frame: it goes back.
    for &p in &ps[4..] {
        c.unpin(p, true);
    }
    assert_eq!(g.used_frames(), 1);
    g.check_invariants().unwrap();
    c.truncate(0);
    assert_eq!((c.pagecount(), g.used_frames()), (0, 0));
    let _ = q;
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn eviction_prefers_a_frame_whose_pages_are_all_unpinned() {
    // Budget: two frames of 1 KiB pages, full.
    let g = group(Some(2 * 4096 + 8 * hdr() + page_charge(4096, 200) - 1), true);
    let c = open(&g, 1024, true);
    let d = open(&g, 4096, true);
    let ps: Vec<_> = (0..8).map(|k| c.fetch(k, 2)).collect();
    // Frame 0 keeps page 1 pinned; pages 0, 2, 3 are the oldest unpinned.
    for k in [0usize, 2, 3, 4, 5, 6, 7] {
        c.unpin(ps[k], false);
    }
    // A 4 KiB page needs a frame: the oldest pages' frame cannot give one,
    // frame 1 (pages 4..8, all unpinned) can and goes whole.
    let p = d.fetch(0, 1);
    assert!(!p.is_null());
    assert_eq!(c.pagecount(), 4);
    assert!((0..4).all(|k| !c.fetch(k, 0).is_null()), "frame 0's pages stay");
    assert!((4..8).all(|k| c.fetch(k, 0).is_null()), "frame 1's pages went together");
    assert_eq!((c.stats().evictions, g.used_frames()), (4, 2));
    g.check_invariants().unwrap();
    for &q in &ps[..4] {
        c.unpin(q, false);
    }
    d.unpin(p, false);
    c.destroy();
    d.destroy();
    assert_conserved(&g);
}

#[test]
fn a_cache_at_the_budget_reuses_its_own_oldest_page_in_place() {
    let g = group(Some(2 * 4096 + 8 * hdr() + hdr() / 2), true);
    let c = open(&g, 1024, true);
    let ps: Vec<_> = (0..8).map(|k| c.fetch(k, 2)).collect();
    // Every frame keeps a pinned page: no frame can be freed.
    for k in [0usize, 2, 3, 5, 6, 7] {
        c.unpin(ps[k], false);
    }
    let p = c.fetch(100, 1);
    assert!(!p.is_null(), "the oldest page, its own, is recycled in place");
    assert_eq!((c.pagecount(), g.used_frames(), c.stats().evictions), (8, 2, 1));
    assert!(c.fetch(0, 0).is_null());
    g.check_invariants().unwrap();
    c.unpin(p, false);
    c.unpin(ps[1], false);
    c.unpin(ps[4], false);
    c.destroy();
    assert_conserved(&g);
}

#[test]
fn sharing_off_gives_each_small_page_a_frame() {
    let g = group(None, false);
    let c = open(&g, 1024, true);
    let ps: Vec<_> = (0..6).map(|k| c.fetch(k, 2)).collect();
    assert_eq!(g.used_frames(), 6);
    assert_eq!(g.charged_bytes(), 6 * (4096 + hdr()));
    g.check_invariants().unwrap();
    close(&g, c, ps);
}

#[test]
fn the_checker_sees_a_frame_count_drift() {
    let g = group(None, true);
    let c = open(&g, 512, true);
    let p = c.fetch(1, 2);
    g.lock(0).cache_mut(0).sub.as_mut().unwrap().set_pinned(p_slot(p), true);
    assert!(g.check_invariants().unwrap_err().contains("frame"));
    g.lock(0).cache_mut(0).sub.as_mut().unwrap().set_pinned(p_slot(p), false);
    g.check_invariants().unwrap();
    c.unpin(p, false);
    c.destroy();
    assert_conserved(&g);
}

/// The slot code of a page SQLite holds.
fn p_slot(p: *mut crate::ffi::Sqlite3PcachePage) -> u32 {
    // SAFETY: a live page of this test's cache.
    unsafe { crate::page::PagePtr::from_sqlite(p) }.slot()
}

#[test]
fn reclaim_stops_when_no_frame_can_be_freed() {
    let g = group(None, true);
    let c = open(&g, 512, true);
    // 8 frames of 8 pages, one pinned in each: no frame can be freed.
    let ps: Vec<_> = (0..64).map(|k| c.fetch(k, 2)).collect();
    for (k, &p) in ps.iter().enumerate() {
        if k % 8 != 0 {
            c.unpin(p, false);
        }
    }
    let Evicted::Freed(out) = g.evict_global(0, 4, None) else { panic!("no steal was asked") };
    assert_eq!(out.frames, 0);
    let evicted = out.evicted;
    assert!((1..=16).contains(&evicted), "{evicted} pages evicted for nothing");
    g.release(out);
    assert_eq!((c.pagecount() as u64, g.used_frames()), (64 - evicted, 8));
    // With the pinned pages unpinned, reclaim frees whole frames.
    for &p in ps.iter().step_by(8) {
        c.unpin(p, false);
    }
    let Evicted::Freed(out) = g.evict_global(0, 4, None) else { panic!("no steal was asked") };
    assert!(out.frames >= 4, "{} frames", out.frames);
    g.release(out);
    g.check_invariants().unwrap();
    c.destroy();
    assert_conserved(&g);
}
