//! # pagealloc-sqlite
//!
//! SQLite's page cache on pagealloc: an implementation of
//! `sqlite3_pcache_methods2` ([`METHODS`]) whose pages are frames of one
//! [`PageAllocator`], so that every database of the process shares one memory
//! budget and the coldest pages of any of them go first when it runs short.
//! Installed by [`install`] (Rust), `pagealloc_sqlite_install` (C), or with
//! no change to the program by `LD_PRELOAD=libpagealloc_sqlite.so`
//! (see `preload`).
//!
//! ## Pages, frames and the extra area
//! A page of 4 KiB takes one frame (order 0); a larger page one block of
//! `szPage / 4096` frames (order 1..=4 for 8..64 KiB), so such a page is
//! always one buddy block and evicting it gives the allocator a whole
//! block back. Pages under 4 KiB (512..2048 bytes) of one cache share
//! frames, 8, 4 or 2 to a frame (`frames`), so a small page costs its
//! own bytes; eviction prefers a frame whose pages are all unpinned and
//! then evicts all of them, so reclaim still frees whole frames.
//! [`Config::share_frames`] off gives each small page a frame of its own.
//!
//! The frame holds the page's bytes only (`pBuf`). The extra area (`pExtra`,
//! SQLite's `PgHdr`, ~200 bytes) lives beside it, in the page's header on the
//! heap (`page`'s `PageHdr`), with its first 8 bytes zeroed whenever a page
//! is new to SQLite (allocated or recycled), as pcache1 guarantees.
//!
//! ## Creation, budget, overdraft and reclaim
//! The budget is of memory: each page is charged its block of frames (or
//! its share of one) and its header with the extra area, malloc's overhead
//! included ([`page_charge`]; about 4.4 KB for a 4 KiB page with SQLite's
//! ~200-byte extra), so that the resident memory the caches hold stays
//! within it.
//!
//! `xFetch` with createFlag 1 ("only if cheap") first recycles the cache's
//! own oldest unpinned page when the cache is at its soft limit
//! (`xCachesize`, as pcache1 honours `PRAGMA cache_size`); at the budget it
//! recycles the group's oldest unpinned page in place, frame and header,
//! when that page's cache has the same page and extra sizes (pcache1
//! recycles its group's LRU page the same way), and otherwise evicts the
//! coldest unpinned pages of any cache until the page fits; it allocates
//! with `alloc_pages_nolock` (no slow path, no direct reclaim, never below
//! the min watermark), and refuses when nothing unpinned is left to evict
//! or the cache's pinned pages reach nine tenths of its soft limit, so
//! that SQLite spills dirty pages before the group overdraws.
//!
//! createFlag 2 ("every effort") recycles and evicts the same way, and
//! when nothing unpinned is left (a statement's pinned dirty pages fill the
//! budget) goes over the budget up to the hard cap
//! ([`Config::hard_cap_bytes`], the arena by default): an overdraft,
//! counted ([`Group::overdraft`], the stats line) and taken back first, as
//! pages unpin. It allocates with `alloc_pages`, whose slow path reclaims
//! directly through the group's LRU registered as a
//! [`pagealloc::Shrinker`]. A hard cap reached (or an arena exhausted) is
//! the only way a fetch answers SQLITE_NOMEM; pcache1 likewise serves
//! createFlag 2 until malloc fails.
//!
//! Pinned pages are never reclaimed. Unpinned pages of a purgeable cache sit
//! on the cache's LRU and its shard's; SQLite unpins only clean pages, so
//! eviction just frees the frame. At unpin, a cache over its soft limit,
//! or a group over its budget, frees the page at once (pcache1 frees a
//! page at unpin while its group is over its limit), so `PRAGMA
//! cache_size` gives memory back. A cache that is not purgeable (an
//! in-memory database) keeps its unpinned pages off the LRU lists: only
//! SQLite's discard, `xTruncate` and `xDestroy` drop them.
//!
//! ## Threads
//! Every method is thread-safe. The caches live in 64 shards, each with
//! its own lock (`shard`): a hit takes its cache's shard lock only, and up
//! to 64 open caches each have a shard of their own. The group's LRU order
//! is kept across shards by stamping each unpin with a shared clock, a
//! counter each shard advances every 64 of its unpins (`group`): pages
//! unpinned in different shards less than a tick apart may leave in
//! either order. Frames are allocated and freed with no lock held.
#![warn(missing_docs)]

mod budget;
mod cache;
mod check;
pub mod ffi;
mod frames;
mod group;
mod lru;
mod methods;
mod page;
mod preload;
mod shard;

pub use budget::Overdraft;
pub use cache::{page_charge, page_order, MAX_EXTRA, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
pub use group::Group;
pub use methods::{cache_stats, METHODS};
pub use preload::{pagealloc_sqlite_install, pagealloc_sqlite_install_from_env, pagealloc_sqlite_totals, stats_line};

use pagealloc::{Backing, PageAllocator, PAGEBLOCK_PAGES, PAGE_SIZE};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// How to build the process's page-cache group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The allocator's arena in bytes (a multiple of 2 MiB). Reserved with
    /// `MAP_NORESERVE`: memory is only used as pages are touched.
    pub arena_bytes: u64,
    /// Back the arena with transparent hugepages.
    pub hugepages: bool,
    /// The most bytes all caches together may hold, page headers and
    /// SQLite's extra areas included ([`page_charge`]); `None`: the arena.
    pub budget_bytes: Option<u64>,
    /// How far createFlag 2 may go over the budget when nothing unpinned
    /// is left to evict: the most bytes all caches may be charged, at
    /// least the budget; `None`: the arena. Reaching it is SQLITE_NOMEM.
    pub hard_cap_bytes: Option<u64>,
    /// Pages under 4 KiB of one cache share frames (8, 4 or 2 to a
    /// frame); off: each takes a frame of its own.
    pub share_frames: bool,
    /// Free page reporting: blocks that stay free for a while (2 s) are
    /// given back to the kernel (madvise), so a process whose databases
    /// closed or shrank returns to its baseline resident memory. Off by
    /// default: its thread and the faults on reuse are a cost a cache that
    /// stays full never repays.
    pub page_reporting: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            arena_bytes: 512 << 20,
            hugepages: false,
            budget_bytes: None,
            hard_cap_bytes: None,
            share_frames: true,
            page_reporting: false,
        }
    }
}

impl Config {
    /// The checks that need no allocator: the arena is whole pageblocks, the
    /// budget one page to the arena, the hard cap the budget to the arena.
    ///
    /// # Errors
    /// [`InstallError::Arena`], [`InstallError::Budget`] or
    /// [`InstallError::HardCap`].
    pub fn validate(&self) -> Result<(), InstallError> {
        let block = PAGEBLOCK_PAGES * PAGE_SIZE as u64;
        if self.arena_bytes == 0 || !self.arena_bytes.is_multiple_of(block) {
            return Err(InstallError::Arena(self.arena_bytes));
        }
        let budget = self.budget_bytes.unwrap_or(self.arena_bytes);
        if budget < PAGE_SIZE as u64 || budget > self.arena_bytes {
            return Err(InstallError::Budget { budget, arena: self.arena_bytes });
        }
        let cap = self.hard_cap_bytes.unwrap_or(self.arena_bytes);
        if cap < budget || cap > self.arena_bytes {
            return Err(InstallError::HardCap { cap, budget, arena: self.arena_bytes });
        }
        Ok(())
    }
}

/// Why `xCreate` made no cache (SQLite then reports `SQLITE_NOMEM`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateError {
    /// Not a power of two in 512..=65536.
    PageSize(usize),
    /// An extra area over [`MAX_EXTRA`] bytes.
    Extra(usize),
    /// The hard cap has no room for one page of each open cache.
    HardCap {
        /// Bytes one page (its whole block and its header) of each open
        /// cache, this one included, takes.
        need: u64,
        /// The hard cap in bytes.
        cap: u64,
    },
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PageSize(n) => write!(f, "unsupported page size {n} (a power of two in 512..=65536)"),
            Self::Extra(n) => write!(f, "extra area of {n} bytes over {MAX_EXTRA}"),
            Self::HardCap { need, cap } => {
                write!(f, "hard cap of {cap} bytes below one page of each open cache ({need} bytes)")
            }
        }
    }
}

impl std::error::Error for CreateError {}

/// Why [`install`] or [`Group::new`] failed.
#[derive(Debug)]
pub enum InstallError {
    /// The arena is not a positive multiple of a pageblock (2 MiB).
    Arena(u64),
    /// The budget is under one 4 KiB page or over the arena.
    Budget {
        /// The budget asked for, in bytes.
        budget: u64,
        /// The arena, in bytes.
        arena: u64,
    },
    /// The hard cap is under the budget or over the arena.
    HardCap {
        /// The hard cap asked for, in bytes.
        cap: u64,
        /// The budget, in bytes.
        budget: u64,
        /// The arena, in bytes.
        arena: u64,
    },
    /// The allocator refused the configuration.
    Allocator(pagealloc::ConfigError),
    /// A group was installed already.
    AlreadyInstalled,
    /// `sqlite3_config` failed (SQLite was initialised already): its code.
    Sqlite(i32),
}

impl std::fmt::Display for InstallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Budget { budget, arena } => {
                write!(f, "budget of {budget} bytes must be at least {PAGE_SIZE} and at most the arena ({arena})")
            }
            Self::HardCap { cap, budget, arena } => {
                write!(
                    f,
                    "hard cap of {cap} bytes must be at least the budget ({budget}) and at most the arena ({arena})"
                )
            }
            Self::Arena(n) => write!(f, "arena of {n} bytes is not a positive multiple of 2 MiB"),
            Self::Allocator(e) => write!(f, "allocator configuration: {e}"),
            Self::AlreadyInstalled => f.write_str("a pagealloc page cache is installed already"),
            Self::Sqlite(rc) => write!(f, "sqlite3_config(SQLITE_CONFIG_PCACHE2) failed with {rc}"),
        }
    }
}

impl std::error::Error for InstallError {}

/// Counters of one cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `xFetch` calls.
    pub fetches: u64,
    /// Fetches that found the page.
    pub hits: u64,
    /// Fetches that did not (created or not).
    pub misses: u64,
    /// Unpinned pages dropped without SQLite's discard (LRU, soft limit at
    /// fetch or unpin, budget, overdraft, reclaim, `xShrink`).
    pub evictions: u64,
    /// Pages pinned now.
    pub pinned: u64,
    /// Pages in the cache now.
    pub pages: u64,
}

impl Group {
    /// A group over a new allocator built from `cfg`.
    ///
    /// # Errors
    /// [`InstallError::Budget`] or [`InstallError::Allocator`].
    pub fn new(cfg: &Config) -> Result<Arc<Self>, InstallError> {
        cfg.validate()?;
        let budget = cfg.budget_bytes.unwrap_or(cfg.arena_bytes);
        let cap = cfg.hard_cap_bytes.unwrap_or(cfg.arena_bytes);
        let backing = if cfg.hugepages { Backing::HugePages } else { Backing::Anonymous };
        // Page reporting (a thread that madvises free blocks away) only when
        // asked for, and no lock statistics: a full cache wants neither.
        let acfg = pagealloc::Config::new()
            .arena_bytes(cfg.arena_bytes)
            .backing(backing)
            .page_reporting(cfg.page_reporting)
            .lock_stats(false);
        let alloc = PageAllocator::new(acfg).map_err(InstallError::Allocator)?;
        Ok(Group::with_allocator(alloc, budget, cap, cfg.share_frames))
    }

    /// Totals over every cache of the group: (caches, fetches, hits,
    /// misses, evictions).
    #[must_use]
    pub fn totals(&self) -> (u64, u64, u64, u64, u64) {
        let t = self.counts();
        (self.caches_created.load(Relaxed), t.fetches, t.hits, t.misses, t.evictions)
    }
}

/// Build the process's group from `cfg` and install it with
/// `sqlite3_config(SQLITE_CONFIG_PCACHE2)`. Call before the first connection
/// (before `sqlite3_initialize`).
///
/// # Errors
/// A bad configuration, a second install, or SQLite refusing the config.
pub fn install(cfg: &Config) -> Result<Arc<Group>, InstallError> {
    if methods::GLOBAL.get().is_some() || methods::PENDING.lock().is_some() {
        return Err(InstallError::AlreadyInstalled);
    }
    let g = Group::new(cfg)?;
    methods::GLOBAL.set(Arc::clone(&g)).map_err(|_| InstallError::AlreadyInstalled)?;
    configure_sqlite()?;
    Ok(g)
}

/// As [`install`], but the group (its arena) is built by the first
/// `xCreate`; `cfg` is checked now, except what only building the allocator
/// can find (then `xCreate` fails: SQLITE_NOMEM, the reason on stderr).
///
/// # Errors
/// As [`install`].
pub fn install_lazy(cfg: &Config) -> Result<(), InstallError> {
    cfg.validate()?;
    {
        let mut pending = methods::PENDING.lock();
        if methods::GLOBAL.get().is_some() || pending.is_some() {
            return Err(InstallError::AlreadyInstalled);
        }
        *pending = Some(*cfg);
    }
    configure_sqlite().inspect_err(|_| *methods::PENDING.lock() = None)
}

/// Hand [`METHODS`] to SQLite, and arrange the exit line.
fn configure_sqlite() -> Result<(), InstallError> {
    // SAFETY: SQLITE_CONFIG_PCACHE2 takes one `sqlite3_pcache_methods2*`,
    // which SQLite copies; METHODS is a 'static of that layout.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_PCACHE2, &raw const METHODS) };
    if rc != ffi::SQLITE_OK {
        return Err(InstallError::Sqlite(rc));
    }
    preload::register_exit_stats();
    Ok(())
}

/// The installed group, if any (a lazy install's once a database opened).
#[must_use]
pub fn global() -> Option<Arc<Group>> {
    methods::GLOBAL.get().cloned()
}

#[cfg(test)]
mod tests;
