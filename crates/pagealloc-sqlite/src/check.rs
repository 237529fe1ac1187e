//! [`Group::check_invariants`]: the group's bookkeeping against its pages,
//! for tests after randomized work (the module invariants of `group`).

use crate::group::{Group, State};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

/// Sums over the open caches, to compare with the group's counters.
#[derive(Default)]
struct Sums {
    frames: u64,
    charged: u64,
    reserved: u64,
    lru_pages: u64,
    lru_frames: u64,
}

/// Check one cache `id`: its map, pin count and LRU list; add to `sums`.
fn check_cache(st: &State, id: u32, sums: &mut Sums) -> Result<(), String> {
    let c = st.cache(id);
    let mut pinned = 0;
    for (&k, p) in &c.map {
        if p.key() != k || p.cache() != id {
            return Err(format!("cache {id}: page at key {k} says key {} cache {}", p.key(), p.cache()));
        }
        let on_lru = p.hdr().on_lru.load(Relaxed);
        if p.pinned() {
            pinned += 1;
        }
        if on_lru != (c.purgeable && !p.pinned()) {
            return Err(format!("cache {id}: key {k} on_lru {on_lru}, pinned {}", p.pinned()));
        }
    }
    if pinned != c.n_pinned {
        return Err(format!("cache {id}: {pinned} pages pinned, counted {}", c.n_pinned));
    }
    let lru = c.lru.walk().map_err(|e| format!("cache {id}: {e}"))?;
    let unpinned = c.map.len() as u64 - pinned;
    if lru.len() as u64 != if c.purgeable { unpinned } else { 0 } {
        return Err(format!("cache {id}: {} pages on its LRU, {unpinned} unpinned", lru.len()));
    }
    if lru.iter().any(|p| c.map.get(&p.key()) != Some(p)) {
        return Err(format!("cache {id}: an LRU page is not in its map"));
    }
    let pages = c.map.len() as u64;
    sums.frames += pages * c.frames;
    sums.charged += pages * c.charge;
    sums.reserved += c.charge;
    sums.lru_pages += lru.len() as u64;
    sums.lru_frames += lru.len() as u64 * c.frames;
    Ok(())
}

impl Group {
    /// Check the group's bookkeeping: every cache's map, pin count and LRU
    /// list agree with its pages; the global LRU holds exactly the caches'
    /// LRU pages in an order each cache's list follows; the frames, bytes
    /// charged and reserved are the sums over the caches and within the
    /// budget; the totals add up (hits + misses = fetches). Takes the
    /// group mutex (a consistent snapshot, also while other threads work).
    ///
    /// # Errors
    /// The first disagreement found, in words.
    pub fn check_invariants(&self) -> Result<(), String> {
        let st = self.state.lock();
        let mut sums = Sums::default();
        for id in 0..st.caches.len() as u32 {
            if st.caches[id as usize].is_some() {
                check_cache(&st, id, &mut sums)?;
            }
        }
        let global = st.lru.walk().map_err(|e| format!("global: {e}"))?;
        if global.len() as u64 != sums.lru_pages {
            return Err(format!("global LRU holds {}, the caches' lists {}", global.len(), sums.lru_pages));
        }
        // Each cache's pages appear on the global list in its own list's
        // order, so that the global oldest is its cache's oldest.
        let mut lists: HashMap<u32, (Vec<_>, usize)> = HashMap::new();
        for p in &global {
            let id = p.cache();
            let (list, next) = match lists.entry(id) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert((st.cache(id).lru.walk()?, 0)),
            };
            if list.get(*next) != Some(p) {
                return Err(format!("global LRU order differs from cache {id}'s"));
            }
            *next += 1;
        }
        let want = (st.used, st.charged, st.reserved, st.lru_frames);
        let (f, b) = st.in_flight;
        let got = (sums.frames + f, sums.charged + b, sums.reserved, sums.lru_frames);
        if want != got {
            return Err(format!(
                "counters (used, charged, reserved, lru_frames) {want:?}, sums {got:?} (in flight included)"
            ));
        }
        if st.charged > self.budget || st.reserved > self.budget {
            return Err(format!("charged {} or reserved {} over the budget {}", st.charged, st.reserved, self.budget));
        }
        // Under the mutex: a fetch counts itself and its hit or miss there.
        let t = &self.totals;
        let (f, h, m) = (t.fetches.load(Relaxed), t.hits.load(Relaxed), t.misses.load(Relaxed));
        if h + m != f {
            return Err(format!("hits {h} + misses {m} != fetches {f}"));
        }
        drop(st);
        Ok(())
    }
}
