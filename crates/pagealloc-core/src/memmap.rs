//! The memory map: the arena's backing memory, the page descriptor array and
//! the pageblock table (the per-pfn metadata of the frames layer).
//!
//! Invariants:
//! - `descs.len() == nr_pages`; pfn `p` is valid iff `p < nr_pages`.
//! - `blocks.len() * PAGEBLOCK_PAGES == nr_pages`: one word per pageblock.
//! - With backing, frame `p` is the 4 KiB at `base + p * PAGE_SIZE`, inside one
//!   mapping that lives as long as the `MemMap`.

use crate::config::Backing;
use crate::error::ConfigError;
use crate::page::PageDesc;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::sync::Ordering;
use crate::types::{Order, Pfn, PAGEBLOCK_ORDER, PAGEBLOCK_PAGES, PAGE_SIZE};
use alloc::sync::Arc;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU16;
#[cfg(feature = "std")]
use std::io;

/// The pageblock table of the whole arena, one word per pageblock, indexed by
/// `pfn >> PAGEBLOCK_ORDER` and shared by every zone (each writes only its
/// own blocks; `zone` defines the word's encoding). One load gives a pfn's
/// zone and its block's type: the free paths ask both for every page.
pub type Pageblocks = Arc<[AtomicU16]>;

/// Storage a caller gives for the descriptors (a kernel's memmap): at least
/// one per page of the arena, for the rest of the program.
pub type DescStorage = &'static mut [core::mem::MaybeUninit<PageDesc>];

/// The arena's memory, descriptors and pageblock table.
pub struct MemMap {
    /// `nr_pages` initialised descriptors, valid as long as the map: allocated
    /// here and freed on drop (`descs_owned`), or storage given for the
    /// program's life.
    descs: NonNull<[PageDesc]>,
    descs_owned: bool,
    /// Exactly one word per pageblock: `blocks.len() * PAGEBLOCK_PAGES ==
    /// descs.len()` (checked in `new`).
    blocks: Pageblocks,
    mapping: Option<Mapping>,
    /// True when hugepages were asked for and the kernel refused them.
    pub hugepage_fallback: bool,
}

struct Mapping {
    /// Start of the arena (2 MiB aligned for hugepages).
    base: NonNull<u8>,
    /// What mmap returned and its length, for munmap.
    raw: NonNull<u8>,
    raw_len: usize,
}

// SAFETY: the mapping is plain memory owned by the MemMap; handing frames to
// threads is the allocator's business and never aliases descriptors.
unsafe impl Send for Mapping {}
// SAFETY: as above; the MemMap itself never reads or writes frame memory except
// through `zero_frames`, whose caller owns the frames.
unsafe impl Sync for Mapping {}

// SAFETY: the descriptors are atomics (shared between threads by design)
// behind a pointer this map owns or that is 'static; the mapping is Send and
// Sync for the reasons given on it.
unsafe impl Send for MemMap {}
// SAFETY: as above.
unsafe impl Sync for MemMap {}

impl Drop for MemMap {
    fn drop(&mut self) {
        if self.descs_owned {
            // SAFETY: allocated as a Box<[PageDesc]> in `new` and turned into
            // this pointer there; nothing refers to it once the map is gone.
            drop(unsafe { Box::from_raw(self.descs.as_ptr()) });
        }
    }
}

#[cfg_attr(not(feature = "std"), allow(dead_code))] // hugepage alignment is mmap's
const HUGE: usize = 2 << 20;

/// Prefetch the first line of frame `pfn` of the arena at `base` (from
/// [`MemMap::prefetch_base`]) for writing. A hint only: nothing is read or
/// written, and a prefetch never faults, so any `pfn` is harmless.
#[inline(always)]
pub fn prefetch_frame(base: usize, pfn: u32) {
    // An address only, never dereferenced: no provenance needed.
    let a = core::ptr::without_provenance::<i8>(base.wrapping_add(pfn as usize * PAGE_SIZE));
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch instruction accesses no memory architecturally and
    // raises no fault whatever the address; SSE is part of x86-64.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_ET0 }>(a);
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = a;
}

/// A mapping whose length does not fit the address space.
fn mapping_too_large() -> ConfigError {
    #[cfg(feature = "std")]
    return ConfigError::Mmap(Arc::new(io::Error::from(io::ErrorKind::OutOfMemory)));
    #[cfg(not(feature = "std"))]
    return ConfigError::Mmap(Arc::new(crate::platform::OsError));
}

impl MemMap {
    /// A map of `nr_pages` frames (a whole number of pageblocks, one word
    /// each in `blocks`) with `backing` behind them.
    #[cfg(test)]
    pub(crate) fn new(nr_pages: u64, backing: Backing, blocks: Pageblocks) -> Result<Self, ConfigError> {
        Self::new_in(nr_pages, backing, blocks, None)
    }

    /// A map of `nr_pages` frames (a whole number of pageblocks, one word
    /// each in `blocks`) with `backing` behind them, the descriptors in
    /// `storage` when given.
    pub(crate) fn new_in(
        nr_pages: u64,
        backing: Backing,
        blocks: Pageblocks,
        storage: Option<DescStorage>,
    ) -> Result<Self, ConfigError> {
        assert_eq!(blocks.len() as u64 * PAGEBLOCK_PAGES, nr_pages, "one pageblock word per pageblock");
        let too_big = || ConfigError::OutOfMemory { bytes: u64::MAX };
        let n = usize::try_from(nr_pages).map_err(|_| too_big())?;
        let (descs, descs_owned) = match storage {
            Some(s) => (given_descs(s, n)?, false),
            None => (NonNull::from(Box::leak(alloc_descs(n)?)), true),
        };
        let len = n.checked_mul(PAGE_SIZE).ok_or_else(mapping_too_large)?;
        let (mapping, hugepage_fallback) = match backing {
            Backing::None => (None, false),
            Backing::Anonymous => (Some(Mapping::new(len, false, false)?.0), false),
            Backing::Resident => (Some(Mapping::new(len, false, true)?.0), false),
            Backing::HugePages => {
                let (m, advised) = Mapping::new(len, true, false)?;
                (Some(m), !advised)
            }
        };
        Ok(Self { descs, descs_owned, blocks, mapping, hugepage_fallback })
    }

    #[inline(always)]
    pub fn nr_pages(&self) -> u64 {
        self.descs().len() as u64
    }

    /// Every descriptor, indexed by pfn (hot loops keep this slice in registers
    /// instead of re-reading the map through `&self` after each store).
    #[inline(always)]
    pub fn descs(&self) -> &[PageDesc] {
        // SAFETY: `descs` points to initialised descriptors that live as long
        // as the map (its field doc); they are only ever shared.
        unsafe { self.descs.as_ref() }
    }

    /// The pageblock table's first word (as `u16`s: `AtomicU16` has their
    /// layout), for the C API's header-inline fast path.
    #[cfg(not(loom))]
    pub fn blocks_ptr(&self) -> *const u16 {
        self.blocks.as_ptr().cast()
    }

    /// The descriptor of `pfn` and its pageblock's word, with one range
    /// check (None out of range).
    #[inline(always)]
    pub fn desc_and_block(&self, pfn: u64) -> Option<(&PageDesc, u16)> {
        self.tables().desc_and_block(pfn)
    }

    /// The descriptor and pageblock tables as one `Copy` value, for hot loops
    /// that keep both in registers across atomics (through `&self` each use
    /// would read the map's fields again after every locked instruction).
    #[inline(always)]
    pub fn tables(&self) -> Tables<'_> {
        Tables { descs: self.descs(), blocks: &self.blocks }
    }

    /// The descriptor of `pfn` without a range check (the order-0 inline
    /// allocation's, whose pfn comes off a front-cache stack).
    ///
    /// # Safety
    /// `pfn < self.nr_pages()`.
    #[inline(always)]
    pub(crate) unsafe fn page_unchecked(&self, pfn: u64) -> &PageDesc {
        debug_assert!(pfn < self.nr_pages());
        // SAFETY: in range (the caller's contract).
        unsafe { self.descs().get_unchecked(pfn as usize) }
    }

    /// The descriptor of a pfn the caller has range-checked.
    #[inline(always)]
    pub fn page(&self, pfn: u64) -> &PageDesc {
        &self.descs()[pfn as usize]
    }

    /// Prefetch the descriptor of `pfn` for reading (a hint; nothing when
    /// `pfn` is out of range). A drain calls it before the zone lock for the
    /// buddies the lock holder will look at first.
    #[inline(always)]
    pub fn prefetch_desc(&self, pfn: u64) {
        if let Some(d) = self.descs().get(pfn as usize) {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: a prefetch accesses no memory architecturally and
            // raises no fault; the address is a live descriptor's anyway.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    (d as *const PageDesc).cast::<i8>(),
                );
            }
            #[cfg(not(all(target_arch = "x86_64", not(miri))))]
            let _ = d;
        }
    }

    /// Address of a frame (None without backing or out of range).
    #[inline]
    pub fn page_address(&self, pfn: Pfn) -> Option<NonNull<u8>> {
        let m = self.mapping.as_ref()?;
        if pfn.as_u64() >= self.nr_pages() {
            return None;
        }
        // SAFETY: pfn < nr_pages, so the offset stays inside the mapping of
        // nr_pages * PAGE_SIZE bytes that starts at `base`.
        Some(unsafe { m.base.add(pfn.idx() * PAGE_SIZE) })
    }

    /// Where [`prefetch_frame`] aims frames: the arena's base address, or 0
    /// without backing memory.
    pub fn prefetch_base(&self) -> usize {
        self.mapping.as_ref().map_or(0, |m| m.base.as_ptr() as usize)
    }

    /// Zero `order.pages()` frames starting at `pfn`.
    ///
    /// The caller has just allocated the block, so no one else may access it.
    pub fn zero_frames(&self, pfn: u64, order: Order) {
        if let Some(p) = self.page_address(Pfn::new(pfn)) {
            let len = PAGE_SIZE << order.get();
            debug_assert!(pfn + order.pages() <= self.nr_pages());
            // SAFETY: the block [pfn, pfn + 2^order) is inside the mapping (checked
            // by the allocator before handing it out) and owned by the caller, who
            // just allocated it, so no other reference to these bytes exists.
            unsafe { core::ptr::write_bytes(p.as_ptr(), 0, len) };
        }
    }

    /// Copy frame `from`'s bytes into frame `to` for migration (nothing
    /// without backing). False, copying nothing, unless `to` is a migration
    /// target (exactly `MIGRATE_TARGET`: allocated by the migrating thread,
    /// reachable by nobody else) distinct from `from`. The caller keeps
    /// `from` still meanwhile: isolated for migration (`ISOLATED_MIGRATE`,
    /// whose owner promised in `MovableOps::isolate` not to touch it) or
    /// frozen (`pageref::freeze`: no reference to it exists).
    pub fn copy_to_target(&self, from: Pfn, to: Pfn) -> bool {
        use crate::page::flags;
        let (Some(s), Some(t)) = (self.page_address(from), self.page_address(to)) else {
            return false;
        };
        if from == to || self.page(to.as_u64()).flags() != flags::MIGRATE_TARGET {
            return false;
        }
        // SAFETY: both frames lie inside the mapping (page_address checked
        // the range) and are distinct pages; the target is the caller's
        // private allocated page (checked above) and the source is held
        // still by the caller (isolated or frozen), so nothing else accesses
        // either while the page copies.
        unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), t.as_ptr(), PAGE_SIZE) };
        true
    }

    /// Give the memory of the free run `[pfn, pfn + pages)` back to the
    /// kernel with `madvise(advice)` (free page reporting); false when it
    /// fails, when there is no backing, or when the run is not made of free
    /// buddy blocks (`BUDDY` heads tiling it), which the caller keeps so by
    /// holding their zone's lock.
    #[cfg(feature = "std")]
    pub fn madvise_free_run(&self, pfn: u64, pages: u64, advice: libc::c_int) -> bool {
        use crate::page::flags;
        let Some(end) = pfn.checked_add(pages).filter(|&e| e <= self.nr_pages() && pages > 0) else {
            return false;
        };
        let mut p = pfn;
        while p < end {
            let d = self.page(p);
            if d.flags() & flags::BUDDY == 0 {
                return false;
            }
            p += 1u64 << d.order();
        }
        if p != end {
            return false;
        }
        let Some(addr) = self.page_address(Pfn::new(pfn)) else {
            return false;
        };
        // SAFETY: the range lies inside our own mapping (checked above) and is
        // made of free blocks (their heads checked above) under the zone lock
        // the caller holds: nobody owns its memory, and dropping its contents
        // is what freeing it allows.
        unsafe { libc::madvise(addr.as_ptr().cast(), PAGE_SIZE * pages as usize, advice) == 0 }
    }
}

/// The descriptor array, zero-filled by the allocator so untouched pages cost nothing.
///
/// Fallible: an arena too large for this machine (or for the process's memory
/// limits) is a [`ConfigError::OutOfMemory`], not an abort.
#[cfg(not(loom))]
fn alloc_descs(n: usize) -> Result<Box<[PageDesc]>, ConfigError> {
    use alloc::alloc::{alloc_zeroed, Layout};
    // All-zero is "a tail page with no links"; links are only read after being
    // written, so NIL initialisation is unnecessary.
    let bytes = (n as u64).saturating_mul(core::mem::size_of::<PageDesc>() as u64);
    let layout = Layout::array::<PageDesc>(n).map_err(|_| ConfigError::OutOfMemory { bytes })?;
    if layout.size() == 0 {
        // Never for a validated arena (at least one pageblock); no allocation needed.
        return Ok(Box::default());
    }
    // SAFETY: layout has non-zero size (checked above).
    let p = unsafe { alloc_zeroed(layout) } as *mut PageDesc;
    if p.is_null() {
        return Err(ConfigError::OutOfMemory { bytes });
    }
    // SAFETY: `p` points to `n` zeroed PageDescs allocated with the global
    // allocator and the layout of `[PageDesc; n]`, which Box<[PageDesc]> frees
    // with the same layout. PageDesc is four 32-bit atomics, for which all-zero
    // bytes are a valid value.
    Ok(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, n)) })
}

/// The first `n` slots of the caller's `storage`, zeroed: all-zero is a
/// valid descriptor ("a tail page with no links", as `alloc_descs` gives).
#[cfg(not(loom))]
fn given_descs(storage: DescStorage, n: usize) -> Result<NonNull<[PageDesc]>, ConfigError> {
    if storage.len() < n {
        let why = format!("{} slots for {n} pages", storage.len());
        return Err(ConfigError::Invalid { field: "descriptor storage", why });
    }
    let p = storage.as_mut_ptr().cast::<PageDesc>();
    // SAFETY: the first n slots are ours (a 'static exclusive borrow, checked
    // long enough), and PageDesc is four 32-bit atomics, for which all-zero
    // bytes are a valid value; MaybeUninit<PageDesc> has PageDesc's layout.
    unsafe { core::ptr::write_bytes(p, 0, n) };
    let p = NonNull::new(p).expect("a slice's pointer is never null");
    Ok(NonNull::slice_from_raw_parts(p, n))
}

/// Under loom a descriptor is not plain zeroes: no caller storage.
#[cfg(loom)]
fn given_descs(_storage: DescStorage, _n: usize) -> Result<NonNull<[PageDesc]>, ConfigError> {
    Err(ConfigError::Invalid { field: "descriptor storage", why: "not under loom".into() })
}

#[cfg(loom)]
fn alloc_descs(n: usize) -> Result<Box<[PageDesc]>, ConfigError> {
    Ok((0..n).map(|_| PageDesc::new()).collect())
}

impl Mapping {
    /// Map `len` bytes (populated up front if `populate`); returns the mapping
    /// and whether MADV_HUGEPAGE was accepted.
    #[cfg(all(not(miri), feature = "std"))]
    fn new(len: usize, huge: bool, populate: bool) -> Result<(Self, bool), ConfigError> {
        let raw_len = if huge { len.checked_add(HUGE).ok_or_else(mapping_too_large)? } else { len };
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing has no preconditions; the result is checked below.
        let raw = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                raw_len,
                libc::PROT_READ | libc::PROT_WRITE,
                if populate {
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE
                } else {
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE
                },
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(ConfigError::Mmap(Arc::new(io::Error::last_os_error())));
        }
        let raw = NonNull::new(raw as *mut u8)
            .ok_or_else(|| ConfigError::Mmap(Arc::new(io::Error::other("mmap returned a null address"))))?;
        let mut advised = false;
        let base = if huge {
            let off = raw.as_ptr().align_offset(HUGE);
            // SAFETY: off < HUGE and the mapping is len + HUGE bytes, so
            // base..base+len is inside it.
            let base = unsafe { raw.add(off) };
            // SAFETY: madvise on a range inside our own mapping.
            advised = unsafe { libc::madvise(base.as_ptr().cast(), len, libc::MADV_HUGEPAGE) } == 0;
            base
        } else {
            raw
        };
        Ok((Self { base, raw, raw_len }, advised))
    }

    /// Under Miri, and without std, memory from the global allocator stands
    /// in for mmap.
    #[cfg(any(miri, not(feature = "std")))]
    fn new(len: usize, _huge: bool, _populate: bool) -> Result<(Self, bool), ConfigError> {
        let layout = alloc::alloc::Layout::from_size_align(len, PAGE_SIZE).map_err(|_| mapping_too_large())?;
        // SAFETY: len >= one pageblock, so the layout is non-zero.
        let raw = NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout) })
            .ok_or(ConfigError::OutOfMemory { bytes: len as u64 })?;
        Ok((Self { base: raw, raw, raw_len: len }, false))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        #[cfg(all(not(miri), feature = "std"))]
        // SAFETY: raw/raw_len are exactly what mmap returned; nothing refers to
        // the frames once the MemMap (and so the allocator) is gone.
        unsafe {
            libc::munmap(self.raw.as_ptr().cast(), self.raw_len);
        }
        #[cfg(any(miri, not(feature = "std")))]
        // SAFETY: allocated in `new` with this layout.
        unsafe {
            alloc::alloc::dealloc(
                self.raw.as_ptr(),
                alloc::alloc::Layout::from_size_align_unchecked(self.raw_len, PAGE_SIZE),
            );
        }
    }
}

/// [`MemMap::tables`]: the descriptors and the pageblock words, with the
/// map's invariant (`descs.len() == blocks.len() * PAGEBLOCK_PAGES`).
#[derive(Clone, Copy)]
pub struct Tables<'a> {
    descs: &'a [PageDesc],
    blocks: &'a [AtomicU16],
}

impl<'a> Tables<'a> {
    /// As [`MemMap::desc_and_block`].
    #[inline(always)]
    pub fn desc_and_block(self, pfn: u64) -> Option<(&'a PageDesc, u16)> {
        let d = self.descs.get(pfn as usize)?;
        // SAFETY: pfn < descs.len() == blocks.len() * PAGEBLOCK_PAGES (the
        // map's invariant, checked in `MemMap::new`, which `tables` carries
        // over), so its pageblock index is below blocks.len().
        let b = unsafe { self.blocks.get_unchecked((pfn >> PAGEBLOCK_ORDER) as usize) };
        Some((d, b.load(Ordering::Relaxed)))
    }

    /// [`Tables::desc_and_block`] without the range check.
    ///
    /// # Safety
    /// `pfn` is below the map's page count (a page of this allocator: on
    /// one of its lists, or held in one of its `PageArray`s).
    #[inline(always)]
    pub(crate) unsafe fn desc_and_block_unchecked(self, pfn: u64) -> (&'a PageDesc, u16) {
        debug_assert!((pfn as usize) < self.descs.len());
        // SAFETY: pfn < descs.len() (the caller's contract) ==
        // blocks.len() * PAGEBLOCK_PAGES (the map's invariant).
        unsafe {
            let d = self.descs.get_unchecked(pfn as usize);
            let b = self.blocks.get_unchecked((pfn >> PAGEBLOCK_ORDER) as usize);
            (d, b.load(Ordering::Relaxed))
        }
    }
}

#[cfg(all(test, feature = "std", not(loom), not(miri)))]
mod tests {
    use super::*;
    use crate::page::flags;
    use crate::types::MigrateType;

    fn map() -> MemMap {
        MemMap::new(PAGEBLOCK_PAGES, Backing::Anonymous, [AtomicU16::new(0)].into_iter().collect()).unwrap()
    }

    #[test]
    fn copy_to_target_needs_a_private_target() {
        let m = map();
        let (from, to) = (Pfn::new(1), Pfn::new(2));
        // SAFETY: the frame is ours alone (no allocator on this map).
        unsafe { m.page_address(from).unwrap().as_ptr().write(0x5A) };
        m.page(2).set_flags(flags::HEAD);
        assert!(!m.copy_to_target(from, to), "an allocated page that is not a target");
        m.page(2).set_flags(flags::MIGRATE_TARGET);
        assert!(!m.copy_to_target(to, to), "onto itself");
        assert!(!m.copy_to_target(from, Pfn::new(PAGEBLOCK_PAGES)), "out of range");
        assert!(m.copy_to_target(from, to));
        // SAFETY: as above.
        assert_eq!(unsafe { m.page_address(to).unwrap().as_ptr().read() }, 0x5A);
    }

    #[test]
    fn madvise_free_run_needs_free_heads_tiling_it() {
        let m = map();
        for (p, o) in [(0u64, 2u32), (4, 2)] {
            m.page(p).set_private(Order::new(o).unwrap(), MigrateType::Movable);
            m.page(p).set_flags(flags::BUDDY);
        }
        assert!(m.madvise_free_run(0, 8, libc::MADV_DONTNEED));
        assert!(!m.madvise_free_run(0, 6, libc::MADV_DONTNEED), "a run that cuts a block");
        assert!(!m.madvise_free_run(0, 12, libc::MADV_DONTNEED), "a run past the free blocks");
        assert!(!m.madvise_free_run(0, 0, libc::MADV_DONTNEED), "an empty run");
        assert!(!m.madvise_free_run(u64::MAX, 2, libc::MADV_DONTNEED), "an overflowing run");
        m.page(4).set_flags(flags::HEAD);
        assert!(!m.madvise_free_run(0, 8, libc::MADV_DONTNEED), "an allocated block inside");
    }
}
