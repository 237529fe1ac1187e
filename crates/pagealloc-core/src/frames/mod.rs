//! The core alone, as a kernel uses it: [`FrameAllocator`], and its page
//! locks (`locks`).

mod locks;
pub use locks::{PageLockGuard, PageLocks};

use crate::config::Config;
use crate::error::{AllocError, ConfigError, FreeError, InvariantError, PageStateError};
use crate::memmap::DescStorage;
use crate::page::flags;
use crate::page_alloc::claim::checked_order;
use crate::page_alloc::hooks::SlowPathHooks;
use crate::page_alloc::Core;
use crate::types::{Gfp, Pfn};
use alloc::sync::Weak;

/// A zoned buddy frame allocator with per-CPU lists, and nothing above it:
/// no reclaim, compaction or free page reporting, and no thread of its own.
/// This is what a kernel plugs in as its frame allocator; the `pagealloc`
/// crate's `PageAllocator` builds the same core with those layers.
///
/// It hands out frame numbers ([`Pfn`]) in `0..nr_pages`; with
/// [`Backing::None`](crate::Backing::None) no memory is behind them, and the
/// caller maps a frame to its own memory (a kernel's physical address is
/// `base + pfn * PAGE_SIZE`).
///
/// # Examples
///
/// ```
/// use pagealloc_core::{Backing, Config, FrameAllocator, Gfp, Pfn};
/// // 8 MiB of physical memory, all of it a hole until boot gives it.
/// let cfg = Config::new().arena_bytes(8 << 20).backing(Backing::None).holes(vec![(Pfn::new(0), 2048)]);
/// let f = FrameAllocator::new(cfg).unwrap();
/// f.add_free_memory(Pfn::new(16), 1024).unwrap(); // a usable region
/// let block = f.alloc(Gfp::KERNEL, 3).unwrap(); // 8 frames, aligned
/// f.split(block, 3).unwrap(); // now 8 frames, each freed alone
/// for i in 0..8 {
///     f.free(Pfn::new(block.as_u64() + i), 0).unwrap();
/// }
/// f.check_invariants().unwrap();
/// ```
pub struct FrameAllocator {
    pub(crate) core: Core,
}

impl FrameAllocator {
    /// Lay out nodes and zones over the arena `cfg` describes and free every
    /// page outside [`Config::holes`].
    ///
    /// # Errors
    /// A [`ConfigError`] naming the setting that cannot work.
    pub fn new(cfg: Config) -> Result<Self, ConfigError> {
        Ok(Self { core: Core::new(cfg)? })
    }

    /// As [`new`](Self::new), with the page descriptors (the kernel's
    /// memmap, [`PAGE_DESC_SIZE`](crate::PAGE_DESC_SIZE) bytes a page) in
    /// `storage`, which the caller sets aside for the program's life (a
    /// region it reserved at boot) instead of the global allocator. Its
    /// first slot per page of the arena is used; the rest stays untouched.
    ///
    /// # Errors
    /// As [`new`](Self::new), and [`ConfigError::Invalid`] when `storage`
    /// has fewer slots than the arena has pages.
    pub fn with_descriptors(cfg: Config, storage: DescStorage) -> Result<Self, ConfigError> {
        Ok(Self { core: Core::new_in(cfg, Some(storage))? })
    }

    /// Register the layers above the core for its slow path (reclaim,
    /// compaction): what it calls when a request cannot be met at once.
    /// `hooks` is held weakly; a hook that is gone is skipped. Only before
    /// the allocator is shared (`&mut self`): the slow path reads the
    /// registration without a lock.
    pub fn set_slow_path_hooks(&mut self, hooks: Weak<dyn SlowPathHooks>) {
        self.core.set_hooks(hooks);
    }

    /// The core itself, for the crates of the pagealloc workspace that build
    /// on it (reclaim, compaction, free page reporting, `PageAllocator`).
    ///
    /// # Safety
    /// Nothing behind the returned reference keeps the safe API's promises:
    /// its methods and fields change descriptors, zones, per-CPU lists and
    /// frames without the checks of [`alloc`](Self::alloc) and
    /// [`free`](Self::free), and a wrong call can give one frame two owners
    /// or two `&mut` over the same bytes. The caller keeps every invariant
    /// the core's modules state (docs/soundness.md). Only this workspace's
    /// crates call it; `tests/compile-fail` in the `pagealloc` crate pins
    /// that safe code has no other way in.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn core(&self) -> &Core {
        &self.core
    }

    /// A block of `2^order` frames, aligned to its size.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`] when no zone the request may use has such a
    /// block above its watermark (a normal result), or a typed error for a
    /// bad order or node.
    #[inline(always)]
    pub fn alloc(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        self.core.alloc_pages(gfp, order, flags::HEAD)
    }

    /// Give back the block `pfn` of `order` from [`alloc`](Self::alloc) (or a
    /// frame of a [`split`](Self::split) block, at order 0).
    ///
    /// # Errors
    /// A typed error for a frame that is not an allocated block of that
    /// order (a double free among them); nothing changes then.
    #[inline(always)]
    pub fn free(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.core.free_pages(pfn, order)
    }

    /// A block of `2^order` frames without waiting for anything: the path
    /// for interrupt (or NMI) context, where the interrupted code may hold
    /// the very lock an ordinary allocation would spin on. Every lock is
    /// only tried (the kernel's `alloc_pages_nolock`).
    ///
    /// # Errors
    /// [`AllocError::WouldBlock`] when a lock it needs is held, besides
    /// [`alloc`](Self::alloc)'s errors.
    pub fn alloc_nolock(&self, gfp: Gfp, order: u32) -> Result<Pfn, AllocError> {
        self.core.alloc_nolock(gfp, order)
    }

    /// Give back a block without waiting for anything (interrupt context):
    /// a block that cannot reach a list without a held lock is parked on a
    /// lock-free list that the next ordinary free or [`drain`](Self::drain)
    /// empties. Once its checks pass it always succeeds.
    ///
    /// # Errors
    /// As [`free`](Self::free).
    pub fn free_nolock(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.core.free_nolock(pfn, order)
    }

    /// Split the allocated block `pfn` of `order` into order-0 frames, so
    /// that any part of it can be freed alone (the kernel's `split_page`).
    ///
    /// # Errors
    /// As [`free`](Self::free) would refuse the block; nothing changes then.
    pub fn split(&self, pfn: Pfn, order: u32) -> Result<(), FreeError> {
        self.core.split_block(pfn, checked_order(pfn, order)?)
    }

    /// Give the frames `start..start + nr_pages`, all of them in holes, to
    /// the allocator (boot, or memory added later).
    ///
    /// # Errors
    /// [`PageStateError::BadRange`] for a range outside the arena or not
    /// wholly in holes; nothing changes then.
    pub fn add_free_memory(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.core.add_free_memory(start, nr_pages)
    }

    /// Frames in the arena, holes included.
    #[must_use]
    pub fn nr_pages(&self) -> u64 {
        self.core.mm.nr_pages()
    }

    /// Frames the allocator manages: the arena's, less those still in holes.
    #[must_use]
    pub fn managed_pages(&self) -> u64 {
        self.core.managed_pages()
    }

    /// Give every frame parked on a per-CPU list back to the buddy lists
    /// (the kernel's `drain_all_pages`), so the free count is exact.
    pub fn drain(&self) {
        self.core.drain_all();
    }

    /// Free frames on the buddy lists (per-CPU lists not counted), read
    /// without locks.
    #[must_use]
    pub fn nr_free_pages(&self) -> u64 {
        self.core.nr_free_pages()
    }

    /// Check conservation of pages and the lists' agreement with their
    /// counters (see the `pagealloc` crate's `check_invariants`).
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        self.core.check_invariants()
    }
}
