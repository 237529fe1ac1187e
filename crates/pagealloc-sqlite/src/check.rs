//! [`Group::check_invariants`]: the group's bookkeeping against its pages,
//! for tests after randomized work (the module invariants of `group`,
//! `shard`, `frames` and `budget`).

use crate::group::Group;
use crate::page::{PagePtr, NO_SLOT};
use crate::shard::{Shard, SHARDS};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

/// Sums over the open caches, to compare with the group's account.
#[derive(Default)]
struct Sums {
    frames: u64,
    charged: u64,
    reserved: u64,
}

/// Check cache `id` of shard `sh`: its map, pin count, LRU list and shared
/// frames; add to `sums`; returns its LRU pages and eighths.
fn check_cache(sh: &Shard, id: u32, sums: &mut Sums) -> Result<(Vec<PagePtr>, u64), String> {
    let c = sh.cache(id);
    let mut pinned = 0;
    for (&k, p) in &c.map {
        if p.key() != k || p.cache() != id || u64::from(k) >= c.key_bound {
            return Err(format!(
                "cache {id}: page at key {k} says key {} cache {} (key bound {})",
                p.key(),
                p.cache(),
                c.key_bound
            ));
        }
        let on_lru = p.hdr().on_lru.load(Relaxed);
        if p.pinned() {
            pinned += 1;
        }
        if on_lru != (c.purgeable && !p.pinned()) {
            return Err(format!("cache {id}: key {k} on_lru {on_lru}, pinned {}", p.pinned()));
        }
        if (p.slot() == NO_SLOT) != c.sub.is_none() {
            return Err(format!(
                "cache {id}: key {k} slot {} in a cache that shares frames: {}",
                p.slot(),
                c.sub.is_some()
            ));
        }
    }
    if pinned != c.n_pinned {
        return Err(format!("cache {id}: {pinned} pages pinned, counted {}", c.n_pinned));
    }
    if let Some(s) = &c.sub {
        let pages: Vec<PagePtr> = c.map.values().copied().collect();
        s.check(&pages).map_err(|e| format!("cache {id}: {e}"))?;
    }
    let lru = c.lru.walk().map_err(|e| format!("cache {id}: {e}"))?;
    let unpinned = c.map.len() as u64 - pinned;
    if lru.len() as u64 != if c.purgeable { unpinned } else { 0 } {
        return Err(format!("cache {id}: {} pages on its LRU, {unpinned} unpinned", lru.len()));
    }
    if lru.iter().any(|p| c.map.get(&p.key()) != Some(p)) {
        return Err(format!("cache {id}: an LRU page is not in its map"));
    }
    sums.frames += c.frames_held();
    sums.charged += c.charged();
    sums.reserved += c.block_bytes() + c.hdr;
    let eighths = lru.len() as u64 * c.eighths();
    Ok((lru, eighths))
}

/// Check shard `s`: its caches, its list against theirs, its stamps and
/// head hint, its counters.
fn check_shard(g: &Group, s: usize, sh: &Shard, sums: &mut Sums) -> Result<(), String> {
    let mut lists: HashMap<u32, (Vec<PagePtr>, usize)> = HashMap::new();
    let mut eighths = 0;
    for (ix, c) in sh.caches.iter().enumerate() {
        if c.is_some() {
            let id = (ix * SHARDS + s) as u32;
            let (lru, e) = check_cache(sh, id, sums)?;
            eighths += e;
            lists.insert(id, (lru, 0));
        }
    }
    let list = sh.lru.walk().map_err(|e| format!("shard {s}: {e}"))?;
    if list.len() != lists.values().map(|l| l.0.len()).sum::<usize>() || eighths != sh.lru_eighths {
        return Err(format!(
            "shard {s}: {} pages on its LRU, or eighths {} (sum {eighths})",
            list.len(),
            sh.lru_eighths
        ));
    }
    // Each cache's pages appear on the shard's list in its own list's
    // order, so that the shard's oldest is its cache's oldest.
    for p in &list {
        let (l, next) = lists.get_mut(&p.cache()).ok_or_else(|| format!("shard {s}: a page of another shard"))?;
        if l.get(*next) != Some(p) {
            return Err(format!("shard {s}: LRU order differs from cache {}'s", p.cache()));
        }
        *next += 1;
    }
    if list.windows(2).any(|w| w[0].stamp() > w[1].stamp()) {
        return Err(format!("shard {s}: stamps decrease along the LRU"));
    }
    let head = g.heads[s].load(Relaxed);
    let oldest = list.first().map_or(u64::MAX, |p| p.stamp());
    // (A hint of u64::MAX over a non-empty list is over its oldest stamp.)
    if head > oldest {
        return Err(format!("shard {s}: head hint {head} over the oldest stamp {oldest}"));
    }
    let n = sh.counts;
    if n.hits + n.misses != n.fetches {
        return Err(format!("shard {s}: hits {} + misses {} != fetches {}", n.hits, n.misses, n.fetches));
    }
    Ok(())
}

impl Group {
    /// Check the group's bookkeeping: every cache's map, pin count, LRU
    /// list and shared frames agree with its pages; each shard's LRU holds
    /// exactly its caches' LRU pages, in an order each cache's list
    /// follows and in stamp order, with a head hint at most its oldest
    /// stamp; the account's frames, bytes charged and reserved are the
    /// sums over the caches (plus what is in flight) and within the hard
    /// cap; hits + misses = fetches. Takes every shard's lock, in order (a
    /// consistent snapshot, also while other threads work).
    ///
    /// # Errors
    /// The first disagreement found, in words.
    pub fn check_invariants(&self) -> Result<(), String> {
        let guards: Vec<_> = (0..SHARDS).map(|s| self.lock(s)).collect();
        let mut sums = Sums::default();
        for (s, sh) in guards.iter().enumerate() {
            check_shard(self, s, sh, &mut sums)?;
        }
        let (charged, used, f, b, reserved) = self.acct.snapshot();
        let want = (used, charged, reserved);
        let got = (sums.frames + f, sums.charged + b, sums.reserved);
        if want != got {
            return Err(format!("account (used, charged, reserved) {want:?}, sums {got:?} (in flight included)"));
        }
        if charged > self.acct.hard || reserved > self.acct.hard {
            return Err(format!("charged {charged} or reserved {reserved} over the hard cap {}", self.acct.hard));
        }
        drop(guards);
        Ok(())
    }
}
