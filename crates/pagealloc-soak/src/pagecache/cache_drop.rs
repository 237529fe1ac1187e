//! The end of `stress --pagecache`'s churn: the `PageCache` dropped while
//! churn threads still hold `Mapping`s of it and `PageHandle`s on their
//! pages. A `Mapping` owns the cache's internals, so it may outlive the
//! cache; the drop kills every mapping, and from then on each call on a
//! held `Mapping` must fail with `MappingRemoved` (deletes drop nothing,
//! truncation does nothing, no page stays mapped), while each held handle
//! still reads its page's bytes until it is dropped, which frees the page
//! (the conservation check at the end sees any page leaked).

use super::churn::{Worker, CHURN_IDS, CHURN_PAGES};
use pagealloc::{Mapping, PageCache, PageCacheError, PAGE_SIZE};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Open two churn mappings, take handles on their read-only pages, give
/// the cache reference back, wait for the main thread's drop, then check
/// every call on the mappings and every handle.
pub(crate) fn final_phase(w: &mut Worker<'_>, pc: Arc<PageCache>, buf: &mut [u8]) {
    let cs = [w.rng.below(CHURN_IDS as u64) as usize, w.rng.below(CHURN_IDS as u64) as usize];
    let maps: Vec<(usize, Mapping)> = cs.iter().map(|&c| (c, w.open(&pc, c))).collect();
    let mut held = Vec::new();
    for (c, m) in &maps {
        for _ in 0..3 {
            let i = w.read_only_index(*c);
            match m.get(i) {
                Ok(h) => {
                    h.read(0, buf);
                    if w.check_read(*c, i, buf, true).is_some() {
                        held.push((*c, h));
                    }
                }
                // Churn threads still in their last session may remove it;
                // a faulty source may fail the fill; the arena may be short.
                Err(e) => w.judge_end(*c, "get before the cache drop", &e),
            }
        }
    }
    drop(pc);
    let (sh, ch, slot) = (w.sh, w.ch, w.slot);
    ch.ready.fetch_add(1, Ordering::SeqCst);
    // Acquire: pairs with the main thread's Release store after the drop.
    while !ch.dropped.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
        sh.beat(slot);
    }
    for (c, m) in &maps {
        let id = ch.ids[*c].id;
        let i = w.rng.below(CHURN_PAGES);
        let refused = |what: &str, r: io::Result<()>| match r.as_ref().map_err(PageCacheError::of) {
            Err(Some(PageCacheError::MappingRemoved { id: got })) if *got == id => {
                ch.counts.refused_after_drop.fetch_add(1, Ordering::Relaxed);
            }
            _ => sh.violation(format!("{what} on churn mapping {id} after the cache drop: {r:?}")),
        };
        refused("find_get", m.find_get(i).map(|_| ()));
        refused("get", m.get(i).map(|_| ()));
        refused("read", m.read(i * PAGE_SIZE as u64, buf).map(|_| ()));
        refused("write", m.write(i * PAGE_SIZE as u64, &buf[..64]).map(|_| ()));
        refused("fsync", m.fsync());
        m.truncate();
        if m.is_live() || m.delete(i) || m.nr_pages() != 0 {
            sh.violation(format!(
                "churn mapping {id} after the cache drop: live {}, {} pages",
                m.is_live(),
                m.nr_pages()
            ));
        }
    }
    // Read-only pages: exactly the bytes they had.
    for (c, h) in &held {
        h.read(0, buf);
        w.check_read(*c, h.index(), buf, false);
    }
    drop(held);
    drop(maps);
}
