//! Typed errors. Every misuse names the pfn it was about; none of them leaves the
//! allocator's state changed.

use crate::platform::OsError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::MAX_ARENA_BYTES;
use crate::types::{MigrateType, Pfn};
use alloc::sync::Arc;
use core::fmt;
use thiserror::Error;

/// An allocation that could not be met. A normal result, never an abort.
///
/// # Examples
///
/// ```
/// use pagealloc::{AllocError, Config, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// assert!(matches!(a.alloc_pages(Gfp::KERNEL, 11), Err(AllocError::InvalidOrder { order: 11 })));
/// let mut held = Vec::new();
/// let err = loop {
///     match a.alloc_pages(Gfp::KERNEL, 9) {
///         Ok(p) => held.push(p),
///         Err(e) => break e, // the arena is used up: an error, not an abort
///     }
/// };
/// assert!(matches!(err, AllocError::NoMemory { .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AllocError {
    /// No zone in the zonelist had a free block of this order above its watermark.
    #[error("out of memory: no free block of order {order}")]
    NoMemory {
        /// The order asked for.
        order: u32,
    },
    /// The order is above `MAX_ORDER` (10).
    #[error("order {order} is above the maximum order 10")]
    InvalidOrder {
        /// The order asked for.
        order: u32,
    },
    /// The node id does not exist.
    #[error("node {nid} does not exist")]
    InvalidNode {
        /// The node asked for.
        nid: u32,
    },
    /// A failure injected by the `fail-inject` feature.
    #[error("injected allocation failure")]
    Injected,
    /// A no-lock allocation (`alloc_pages_nolock`) found every lock it could
    /// use taken, and will not wait: retry later or from a context that may
    /// wait.
    #[error("no block of order {order} without waiting for a lock")]
    WouldBlock {
        /// The order asked for.
        order: u32,
    },
    /// A contiguous range could not be emptied: `pfn` is the first page in
    /// it that is allocated and cannot be moved (pinned: its owner registered
    /// no movable operations) or was busy. Nothing was moved for a pinned page.
    #[error("contiguous range blocked by the unmovable page {pfn:?}")]
    Unmovable {
        /// The first blocking page.
        pfn: Pfn,
    },
    /// A `PageArray` of more slots than the arena has pages (it could never
    /// be filled), or whose slots could not be had.
    #[error("a page array of {slots} slots is more than the arena's {nr_pages} pages")]
    ArrayTooLarge {
        /// The slots asked for.
        slots: usize,
        /// The arena's pages.
        nr_pages: u64,
    },
}

/// Why `free_pages` refused a pfn. The allocator's state is unchanged.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FreeError, Gfp, PageAllocator};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 2).unwrap();
/// assert!(matches!(a.free_pages(pfn, 1), Err(FreeError::WrongOrder { .. })));
/// a.free_pages(pfn, 2).unwrap();
/// assert_eq!(a.free_pages(pfn, 2), Err(FreeError::DoubleFree { pfn }));
/// a.check_invariants().unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FreeError {
    /// The pfn is past the end of the arena.
    #[error("{pfn:?} is out of range (arena has {nr_pages} pages)")]
    OutOfRange {
        /// The pfn given.
        pfn: Pfn,
        /// Pages in the arena.
        nr_pages: u64,
    },
    /// The order is above `MAX_ORDER`.
    #[error("{pfn:?}: order {order} is above the maximum order 10")]
    InvalidOrder {
        /// The pfn given.
        pfn: Pfn,
        /// The order given.
        order: u32,
    },
    /// The pfn is not aligned to `1 << order`.
    #[error("{pfn:?} is not aligned for order {order}")]
    Misaligned {
        /// The pfn given.
        pfn: Pfn,
        /// The order given.
        order: u32,
    },
    /// The pfn heads an allocated block of another order.
    #[error("{pfn:?} was allocated with order {actual}, freed with order {order}")]
    WrongOrder {
        /// The pfn given.
        pfn: Pfn,
        /// The order given.
        order: u32,
        /// The order it was allocated with.
        actual: u32,
    },
    /// The pfn is already free (in the buddy lists or on a per-CPU list).
    #[error("{pfn:?} is already free (double free)")]
    DoubleFree {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The pfn lies inside an allocated block headed by another pfn.
    #[error("{pfn:?} is inside the allocated block headed by {head:?}")]
    InsideBlock {
        /// The pfn given.
        pfn: Pfn,
        /// The head of the block it lies in.
        head: Pfn,
    },
    /// The pfn is not the head of any allocated block and not free either (it is
    /// held by isolation, or otherwise not the allocator's to take back).
    #[error("{pfn:?} was never allocated")]
    NotAllocated {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page is locked: unlock it before freeing.
    #[error("{pfn:?} is locked")]
    Locked {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page is under writeback: end writeback before freeing.
    #[error("{pfn:?} is under writeback")]
    Writeback {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page holds page references or sits on an LRU list (page cache):
    /// only the last `put_page` frees it.
    #[error("{pfn:?} is referenced (page cache): the last put_page frees it")]
    Referenced {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The block is owned by a `Pages` handle: free it through the handle
    /// (drop it, or call `Pages::free`), or take it out with `Pages::into_pfn`.
    #[error("{pfn:?} is owned by a Pages handle: free it through the handle")]
    Owned {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page is isolated for migration: its owner said it would not touch
    /// it until told where it went (or that it was put back).
    #[error("{pfn:?} is isolated for migration")]
    Migrating {
        /// The pfn given.
        pfn: Pfn,
    },
}

impl FreeError {
    /// The pfn the error is about.
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        match *self {
            FreeError::OutOfRange { pfn, .. }
            | FreeError::InvalidOrder { pfn, .. }
            | FreeError::Misaligned { pfn, .. }
            | FreeError::WrongOrder { pfn, .. }
            | FreeError::DoubleFree { pfn }
            | FreeError::InsideBlock { pfn, .. }
            | FreeError::NotAllocated { pfn }
            | FreeError::Locked { pfn }
            | FreeError::Writeback { pfn }
            | FreeError::Referenced { pfn }
            | FreeError::Owned { pfn }
            | FreeError::Migrating { pfn } => pfn,
        }
    }
}

/// A `Config` that cannot work, or memory for the allocator that could not be had.
///
/// Not `PartialEq`: [`ConfigError::Mmap`] carries the [`std::io::Error`] it came
/// from (reachable through [`std::error::Error::source`]), which has no equality.
/// Match on the variants instead.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, ConfigError, PageAllocator};
/// let err = PageAllocator::new(Config::small(3 << 20)).err().unwrap();
/// assert!(matches!(err, ConfigError::ArenaNotPageblockMultiple { bytes } if bytes == 3 << 20));
/// assert!(err.to_string().ends_with("use 2097152 or 4194304 bytes")); // the sizes that work
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConfigError {
    /// The arena is smaller than one pageblock (2 MiB).
    ArenaTooSmall {
        /// Bytes asked for.
        bytes: u64,
        /// The smallest arena that works.
        min: u64,
    },
    /// The arena is not a whole number of pages.
    ArenaNotPageMultiple {
        /// Bytes asked for.
        bytes: u64,
    },
    /// The arena is not a whole number of pageblocks (2 MiB), the unit zones and
    /// nodes are laid out in. The message suggests the nearest sizes that work.
    ArenaNotPageblockMultiple {
        /// Bytes asked for.
        bytes: u64,
    },
    /// The arena has more pages than 32-bit pfn links can name (at most
    /// 2^32 - 512 pages: 16 TiB less one pageblock).
    ArenaTooLarge {
        /// Bytes asked for.
        bytes: u64,
    },
    /// More nodes than pageblocks (or zero nodes).
    TooManyNodes {
        /// Nodes asked for.
        nodes: u32,
        /// Pageblocks in the arena.
        pageblocks: u64,
    },
    /// A zone would have no pages.
    EmptyZone {
        /// Node.
        nid: u32,
        /// Zone name.
        zone: &'static str,
        /// What made it empty.
        why: String,
    },
    /// The memory mapping failed; the source is the operating system's error.
    Mmap(Arc<OsError>),
    /// The allocator's own bookkeeping (the page descriptor array: 16 bytes per
    /// page) could not be allocated. The arena is too large for this machine, or
    /// for the process's memory limits.
    OutOfMemory {
        /// Bytes asked for (`u64::MAX` when the size does not fit the address space).
        bytes: u64,
    },
    /// Some other field is out of its range.
    Invalid {
        /// The field.
        field: &'static str,
        /// Why.
        why: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ArenaTooSmall { bytes, min } => {
                write!(
                    f,
                    "arena of {bytes} bytes is smaller than one pageblock ({min} bytes): give at least {min} bytes"
                )
            }
            ConfigError::ArenaNotPageMultiple { bytes } => {
                write!(f, "arena of {bytes} bytes is not a multiple of the page size (4096)")
            }
            ConfigError::ArenaNotPageblockMultiple { bytes } => write!(
                f,
                "arena of {bytes} bytes is not a multiple of the pageblock size (2 MiB = 2097152 bytes): {}",
                pageblock_suggestion(*bytes)
            ),
            ConfigError::ArenaTooLarge { bytes } => {
                write!(
                    f,
                    "arena of {bytes} bytes is too large: pfn links are 32 bits, so at most 2^32 - 512 pages \
                     ({MAX_ARENA_BYTES} bytes, 16 TiB less one pageblock)"
                )
            }
            ConfigError::TooManyNodes { nodes, pageblocks } => write!(
                f,
                "{nodes} nodes cannot split an arena of {pageblocks} pageblocks: each node needs at least one pageblock"
            ),
            ConfigError::EmptyZone { nid, zone, why } => {
                write!(f, "zone {zone} on node {nid} would have no pages: {why}")
            }
            // The operating system's error is the source, not part of this message.
            ConfigError::Mmap(_) => f.write_str("mapping the arena failed"),
            ConfigError::OutOfMemory { bytes } => {
                write!(f, "could not allocate {bytes} bytes for the page descriptors of the arena")
            }
            ConfigError::Invalid { field, why } => write!(f, "invalid setting {field}: {why}"),
        }
    }
}

impl core::error::Error for ConfigError {
    /// For [`ConfigError::Mmap`], the operating system's error itself (with
    /// std, an `io::Error`: it downcasts to that, not to the `Arc` that keeps
    /// the error `Clone`).
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            ConfigError::Mmap(e) => Some(&**e),
            _ => None,
        }
    }
}

/// A broken invariant found by `check_invariants`.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, InvariantError, PageAllocator, Pfn};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// assert_eq!(a.check_invariants(), Ok(())); // a fresh allocator is sound
/// let e = InvariantError { pfn: Pfn::new(7), what: "not on a free list".into() };
/// assert!(e.to_string().ends_with("not on a free list")); // what a failed check prints
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invariant broken at {pfn:?}: {what}")]
pub struct InvariantError {
    /// Where it was found (or pfn 0 for a global count).
    pub pfn: Pfn,
    /// What is wrong.
    pub what: String,
}

impl InvariantError {
    pub fn new(pfn: u64, what: impl Into<String>) -> Self {
        Self { pfn: Pfn::new(pfn), what: what.into() }
    }
}

/// Why a page-state operation (lock, writeback, isolation) was refused.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, Gfp, PageAllocator, PageStateError};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// assert_eq!(a.page_locks().unlock_page(pfn), Err(PageStateError::NotLocked { pfn }));
/// a.free_pages(pfn, 0).unwrap();
/// assert_eq!(a.page_locks().lock_page(pfn), Err(PageStateError::NotAllocated { pfn }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PageStateError {
    /// The pfn is past the end of the arena.
    #[error("{pfn:?} is out of range")]
    OutOfRange {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The pfn is not the head of an allocated block.
    #[error("{pfn:?} is not an allocated page")]
    NotAllocated {
        /// The pfn given.
        pfn: Pfn,
    },
    /// Unlock of a page that is not locked.
    #[error("{pfn:?} is not locked")]
    NotLocked {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page lock is held by a `PageLockGuard`: only the guard releases it.
    #[error("{pfn:?} is locked by a PageLockGuard: only the guard unlocks it")]
    HeldByGuard {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page is reference counted (a page-cache page): its lock,
    /// writeback and up-to-date state are the cache's, not the pfn API's.
    #[error("{pfn:?} is a reference-counted (page-cache) page: its lock and state are the cache's")]
    Referenced {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page is the head of a block an owning handle holds (`Pages`,
    /// `OwnedBlock`): its state is the handle's alone, so the pfn API can
    /// neither lock, mark nor free it (and the handle's free needs no
    /// atomic read-modify-write).
    #[error("{pfn:?} is owned by a Pages or OwnedBlock handle: its state is the handle's")]
    Owned {
        /// The pfn given.
        pfn: Pfn,
    },
    /// The page holds the most references its users may take: put some
    /// first (a typed refusal; the count never wraps).
    #[error("{pfn:?} has the most references a page may hold")]
    Saturated {
        /// The pfn given.
        pfn: Pfn,
    },
    /// end_page_writeback of a page not under writeback.
    #[error("{pfn:?} is not under writeback")]
    NotWriteback {
        /// The pfn given.
        pfn: Pfn,
    },
    /// A pageblock in the range is already isolated.
    #[error("pageblock at {pfn:?} is already isolated")]
    AlreadyIsolated {
        /// First pfn of the block.
        pfn: Pfn,
    },
    /// A pageblock in the range is not isolated.
    #[error("pageblock at {pfn:?} is not isolated")]
    NotIsolated {
        /// First pfn of the block.
        pfn: Pfn,
    },
    /// A range that is empty, runs past the arena, or crosses a zone boundary.
    #[error("range at {pfn:?} is empty, out of range, or crosses a zone")]
    BadRange {
        /// First pfn of the range.
        pfn: Pfn,
    },
    /// The page cannot be made movable: it is not an order-0 page allocated
    /// through the raw pfn API (a `Pages` handle's page, a larger block), or
    /// it is being migrated right now.
    #[error("{pfn:?} cannot be registered as movable")]
    NotMovable {
        /// The pfn given.
        pfn: Pfn,
    },
    /// A range holds a HighAtomic block, which isolation refuses (as the kernel does).
    #[error("range at {pfn:?} holds a {mt} pageblock")]
    Unisolatable {
        /// First pfn of the offending block.
        pfn: Pfn,
        /// Its type.
        mt: MigrateType,
    },
}

/// Why a wait ended without its condition.
///
/// # Examples
///
/// ```
/// use pagealloc::{CancelToken, Config, Gfp, PageAllocator, WaitError};
/// use std::time::Duration;
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// a.page_locks().lock_page(pfn).unwrap(); // held: the waits below cannot get it
/// assert_eq!(a.page_locks().lock_page_timeout(pfn, Duration::from_millis(1)), Err(WaitError::TimedOut));
/// let cancel = CancelToken::new();
/// cancel.cancel();
/// assert_eq!(a.page_locks().lock_page_cancellable(pfn, &cancel), Err(WaitError::Cancelled));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The timeout passed.
    #[error("wait timed out")]
    TimedOut,
    /// The cancel token was cancelled.
    #[error("wait cancelled")]
    Cancelled,
    /// The page is not in a state that can be waited on.
    #[error(transparent)]
    State(#[from] PageStateError),
}

/// A bulk free that skipped some entries. Every valid entry was freed.
///
/// # Examples
///
/// ```
/// use pagealloc::{Config, FreeError, Gfp, PageAllocator, Pfn};
/// let a = PageAllocator::new(Config::small(4 << 20)).unwrap();
/// let pfn = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
/// let stray = Pfn::new(1 << 30); // past the arena
/// let err = a.free_pages_bulk(&[pfn, stray]).unwrap_err();
/// assert!(matches!(err.rejected[..], [(1, FreeError::OutOfRange { .. })]));
/// assert_eq!(a.free_pages(pfn, 0), Err(FreeError::DoubleFree { pfn })); // it was freed
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct BulkFreeError {
    /// `(index in the input slice, why)` for every skipped entry, in input order.
    pub rejected: Vec<(usize, FreeError)>,
}

impl fmt::Display for BulkFreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The allocator never returns an empty one, but the field is public, so
        // a user can build one: it must still print.
        match self.rejected.first() {
            None => f.write_str("bulk free skipped no entries"),
            Some((i, e)) => {
                write!(f, "bulk free skipped {} invalid entries (first: index {i}: {e})", self.rejected.len())
            }
        }
    }
}

/// Round-down and round-up suggestions for an arena size that is not a whole
/// number of pageblocks.
fn pageblock_suggestion(bytes: u64) -> String {
    const BLOCK: u64 = crate::types::PAGEBLOCK_BYTES;
    let down = bytes - bytes % BLOCK;
    let up = down.checked_add(BLOCK);
    match (down, up) {
        (0, Some(up)) => format!("use {up} bytes"),
        (down, Some(up)) => format!("use {down} or {up} bytes"),
        (down, None) => format!("use {down} bytes"),
    }
}
