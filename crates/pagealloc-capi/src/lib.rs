//! # pagealloc C API
//!
//! `libpagealloc_c.so` / `libpagealloc_c.a` and `include/pagealloc.h` (generated
//! from this crate by cbindgen): the [`pagealloc`] allocator for C callers.
//!
//! Conventions, for every function:
//!
//! - **Errors** are a [`pagealloc_status`] (0 = `PAGEALLOC_OK`); functions that
//!   return something else say how they report errors. On error the calling
//!   thread's last error is set: `pagealloc_last_error_message` gives its text
//!   (the Rust error's message, naming the pfn where there is one). Successful
//!   calls leave the last error alone, as `errno` does.
//! - **Nothing unwinds into C.** Every entry point runs inside
//!   `std::panic::catch_unwind`; a panic comes back as `PAGEALLOC_ERR_PANIC`
//!   with its message. (The library must be built with `panic = "unwind"`, the
//!   default.)
//! - **Pointers.** A null pointer where one is needed is
//!   `PAGEALLOC_ERR_INVALID_ARGUMENT`, never a crash. A handle is checked for
//!   null and a magic number (and alignment, off the order-0 hit paths), so a pointer to something that is not
//!   a handle is refused when it can be read; a handle used after
//!   `pagealloc_destroy` (or a wild pointer) cannot be detected in general and
//!   is undefined behaviour, as in C APIs generally. Array arguments must be
//!   aligned for their element type and point to at least as many elements as
//!   their length says; single out parameters and the config may be at any
//!   address.
//! - **Threads.** Every function except `pagealloc_destroy` may be called from
//!   any number of threads at once on one allocator. `pagealloc_destroy` must
//!   not run concurrently with any other call on the same handle, nor be
//!   followed by one.
//! - **Pfns** are `uint64_t` page frame numbers; `PAGEALLOC_HOLE`
//!   (`UINT64_MAX`) is never a pfn and marks an empty slot in bulk arrays.
#![allow(non_camel_case_types)]

mod page_array;
mod status;
mod tcache;

pub use page_array::*;
pub use tcache::*;

use std::ffi::{c_char, c_void};
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::time::Duration;

use ::pagealloc::{Backing, Config, Gfp, PageAllocator, Pfn};

pub use status::pagealloc_status;
use status::pagealloc_status::*;
use status::{
    alloc_code, alloc_err, catch, config_err, fail, free_code, free_err, guard, invalid, invariant_err, run,
    run_nolock, state_err, wait_err, Res,
};

// ------------------------------------------------------------------ constants

/// Gfp flag: memory that may be moved (pageblocks of type Movable; may use the
/// Movable zone). Equal to the Rust `Gfp::MOVABLE` bit.
pub const PAGEALLOC_GFP_MOVABLE: u32 = 1 << 0;
/// Gfp flag: memory that can be reclaimed (pageblocks of type Reclaimable).
pub const PAGEALLOC_GFP_RECLAIMABLE: u32 = 1 << 1;
/// Gfp flag: high priority: may dip below the min watermark and use the
/// HighAtomic reserve.
pub const PAGEALLOC_GFP_HIGH: u32 = 1 << 2;
/// Gfp flag: zero the returned memory (a no-op without backing).
pub const PAGEALLOC_GFP_ZERO: u32 = 1 << 3;
/// Gfp flag: never leave the requested node.
pub const PAGEALLOC_GFP_THISNODE: u32 = 1 << 4;
/// Unmovable kernel-style allocation: no type bits (the kernel's GFP_KERNEL).
pub const PAGEALLOC_GFP_KERNEL: u32 = 0;
/// High priority and never blocks (the kernel's GFP_ATOMIC).
pub const PAGEALLOC_GFP_ATOMIC: u32 = PAGEALLOC_GFP_HIGH;
/// User pages: movable (the kernel's GFP_HIGHUSER_MOVABLE).
pub const PAGEALLOC_GFP_USER: u32 = PAGEALLOC_GFP_MOVABLE;

const _: () = {
    assert!(PAGEALLOC_GFP_MOVABLE == Gfp::MOVABLE.bits());
    assert!(PAGEALLOC_GFP_RECLAIMABLE == Gfp::RECLAIMABLE.bits());
    assert!(PAGEALLOC_GFP_HIGH == Gfp::HIGH.bits());
    assert!(PAGEALLOC_GFP_ZERO == Gfp::ZERO.bits());
    assert!(PAGEALLOC_GFP_THISNODE == Gfp::THISNODE.bits());
    assert!(PAGEALLOC_GFP_KERNEL == Gfp::KERNEL.bits());
    assert!(PAGEALLOC_GFP_ATOMIC == Gfp::ATOMIC.bits());
    assert!(PAGEALLOC_GFP_USER == Gfp::USER.bits());
    assert!(PAGEALLOC_MAX_ORDER == ::pagealloc::MAX_ORDER);
    assert!(PAGEALLOC_PAGE_SIZE as usize == ::pagealloc::PAGE_SIZE);
};

/// An empty slot in a bulk array (`UINT64_MAX`, never a pfn).
pub const PAGEALLOC_HOLE: u64 = u64::MAX;
/// The largest order (blocks of up to 1 << 10 pages).
pub const PAGEALLOC_MAX_ORDER: u32 = 10;
/// Bytes in a page.
pub const PAGEALLOC_PAGE_SIZE: u32 = 4096;

/// `pagealloc_config.backing`: anonymous private memory with MAP_NORESERVE
/// (frames get memory when touched). The default.
pub const PAGEALLOC_BACKING_ANONYMOUS: u32 = 0;
/// `pagealloc_config.backing`: anonymous memory advised MADV_HUGEPAGE.
pub const PAGEALLOC_BACKING_HUGEPAGES: u32 = 1;
/// `pagealloc_config.backing`: anonymous memory populated up front (MAP_POPULATE).
pub const PAGEALLOC_BACKING_RESIDENT: u32 = 2;
/// `pagealloc_config.backing`: no memory: abstract frame numbers only
/// (`pagealloc_page_address` fails).
pub const PAGEALLOC_BACKING_NONE: u32 = 3;

/// `pagealloc_config.drain_mode`: today's kernel (one pass under the zone lock). The default.
pub const PAGEALLOC_DRAIN_SINGLE_PASS: u32 = 0;
/// `pagealloc_config.drain_mode`: the old two-pass drain (a library built
/// with the `seed-variants` feature only).
pub const PAGEALLOC_DRAIN_TWO_PASS: u32 = 1;

// --------------------------------------------------------------------- config

/// Settings for `pagealloc_create`. Initialise with `pagealloc_config_default`,
/// then change the fields you need. The layout is part of this version's ABI.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pagealloc_config {
    /// Bytes in the arena (a multiple of 4096, at least 2 MiB). Default 1 GiB.
    pub arena_bytes: u64,
    /// Bytes of each node given to a Movable zone at its top (0: none).
    pub movable_zone_bytes: u64,
    /// The kernel's min_free_kbytes; 0 computes it from the arena size.
    pub min_free_kbytes: u64,
    /// Fake NUMA nodes splitting the arena evenly. Default 1.
    pub nodes: u32,
    /// One of the PAGEALLOC_BACKING_* values.
    pub backing: u32,
    /// CPUs to size per-CPU tables for; 0 reads the process's affinity.
    pub nr_cpus: u32,
    /// The kernel's watermark_scale_factor (1..=3000). Default 10.
    pub watermark_scale_factor: u32,
    /// The kernel's lowmem_reserve_ratio for the Normal zone. Default 32.
    pub lowmem_reserve_ratio: u32,
    /// The kernel's percpu_pagelist_high_fraction (0: automatic).
    pub percpu_pagelist_high_fraction: u32,
    /// Per-CPU batch override; 0 uses the kernel's formula.
    pub pcp_batch: u32,
    /// How often a queued lock waiter may lose to a newcomer before direct handoff.
    pub page_lock_unfairness: u32,
    /// One of the PAGEALLOC_DRAIN_* values.
    pub drain_mode: u32,
    /// Per-CPU page lists for small orders. Default on.
    pub pcp_lists: bool,
    /// The thread-owned front cache before the per-CPU lists. Default on.
    pub front_cache: bool,
    /// Use the page lock's waiters bit. Default on; off (the old design) needs a
    /// library built with the `seed-variants` feature.
    pub page_lock_waiters_bit: bool,
    /// Cache the migratetype on the page at free (the old design; needs
    /// `seed-variants`). Default off.
    pub pcp_migratetype_cache: bool,
    /// Build pagetypeinfo by walking lists (the old design; needs
    /// `seed-variants`). Default off.
    pub pagetypeinfo_walk_lists: bool,
}

impl pagealloc_config {
    fn from_rust(c: &Config) -> Self {
        Self {
            arena_bytes: c.arena_bytes,
            movable_zone_bytes: c.movable_zone_bytes,
            min_free_kbytes: c.min_free_kbytes.unwrap_or(0),
            nodes: c.nodes,
            backing: match c.backing {
                Backing::HugePages => PAGEALLOC_BACKING_HUGEPAGES,
                Backing::Resident => PAGEALLOC_BACKING_RESIDENT,
                Backing::None => PAGEALLOC_BACKING_NONE,
                _ => PAGEALLOC_BACKING_ANONYMOUS,
            },
            nr_cpus: c.nr_cpus.map_or(0, |n| n.min(u32::MAX as usize) as u32),
            watermark_scale_factor: c.watermark_scale_factor,
            lowmem_reserve_ratio: c.lowmem_reserve_ratio,
            percpu_pagelist_high_fraction: c.percpu_pagelist_high_fraction,
            pcp_batch: c.pcp_batch.unwrap_or(0),
            page_lock_unfairness: c.page_lock_unfairness,
            pcp_lists: c.pcp_lists,
            front_cache: c.front_cache,
            drain_mode: PAGEALLOC_DRAIN_SINGLE_PASS,
            page_lock_waiters_bit: true,
            pcp_migratetype_cache: false,
            pagetypeinfo_walk_lists: false,
        }
        .with_variants_of(c)
    }

    /// The old designs' switches as `c` has them (`seed-variants` only: a
    /// library without it always has today's design).
    fn with_variants_of(self, c: &Config) -> Self {
        #[cfg(feature = "seed-variants")]
        return Self {
            drain_mode: match c.drain_mode {
                ::pagealloc::DrainMode::TwoPass => PAGEALLOC_DRAIN_TWO_PASS,
                _ => PAGEALLOC_DRAIN_SINGLE_PASS,
            },
            page_lock_waiters_bit: c.page_lock_waiters_bit,
            pcp_migratetype_cache: c.pcp_migratetype_cache,
            pagetypeinfo_walk_lists: c.pagetypeinfo_walk_lists,
            ..self
        };
        #[cfg(not(feature = "seed-variants"))]
        {
            let _ = c;
            self
        }
    }

    /// Apply the old designs' switches to `c`. Without `seed-variants` only
    /// today's design is accepted, with an error that says what is missing.
    fn variants_to_rust(self, c: Config) -> Res<Config> {
        let two_pass = match self.drain_mode {
            PAGEALLOC_DRAIN_SINGLE_PASS => false,
            PAGEALLOC_DRAIN_TWO_PASS => true,
            d => return Err(invalid(format_args!("drain_mode {d} is not one of PAGEALLOC_DRAIN_*"))),
        };
        #[cfg(feature = "seed-variants")]
        return Ok(c
            .drain_mode(if two_pass { ::pagealloc::DrainMode::TwoPass } else { ::pagealloc::DrainMode::SinglePass })
            .page_lock_waiters_bit(self.page_lock_waiters_bit)
            .pcp_migratetype_cache(self.pcp_migratetype_cache)
            .pagetypeinfo_walk_lists(self.pagetypeinfo_walk_lists));
        #[cfg(not(feature = "seed-variants"))]
        {
            if two_pass || !self.page_lock_waiters_bit || self.pcp_migratetype_cache || self.pagetypeinfo_walk_lists {
                return Err(invalid(format_args!(
                    "drain_mode, page_lock_waiters_bit, pcp_migratetype_cache and pagetypeinfo_walk_lists \
                     select the seed experiments' old designs, which need a library built with the \
                     seed-variants feature"
                )));
            }
            Ok(c)
        }
    }

    fn to_rust(self) -> Res<Config> {
        let backing = match self.backing {
            PAGEALLOC_BACKING_ANONYMOUS => Backing::Anonymous,
            PAGEALLOC_BACKING_HUGEPAGES => Backing::HugePages,
            PAGEALLOC_BACKING_RESIDENT => Backing::Resident,
            PAGEALLOC_BACKING_NONE => Backing::None,
            b => return Err(invalid(format_args!("backing {b} is not one of PAGEALLOC_BACKING_*"))),
        };
        let c = Config::new()
            .arena_bytes(self.arena_bytes)
            .movable_zone_bytes(self.movable_zone_bytes)
            .min_free_kbytes((self.min_free_kbytes != 0).then_some(self.min_free_kbytes))
            .nodes(self.nodes)
            .backing(backing)
            .nr_cpus((self.nr_cpus != 0).then_some(self.nr_cpus as usize))
            .watermark_scale_factor(self.watermark_scale_factor)
            .lowmem_reserve_ratio(self.lowmem_reserve_ratio)
            .percpu_pagelist_high_fraction(self.percpu_pagelist_high_fraction)
            .pcp_batch((self.pcp_batch != 0).then_some(self.pcp_batch))
            .page_lock_unfairness(self.page_lock_unfairness)
            .pcp_lists(self.pcp_lists)
            .front_cache(self.front_cache);
        self.variants_to_rust(c)
    }
}

// --------------------------------------------------------------------- handle

/// A handle's tag. 32 bits, so that the inline paths' test is one
/// compare of memory with an immediate (a 64-bit tag needs two
/// instructions on x86-64).
const MAGIC: u32 = 0x7061_6c63; // "palc"

/// An allocator. Opaque: made by `pagealloc_create`, ended by `pagealloc_destroy`.
pub struct pagealloc {
    magic: u32,
    inner: PageAllocator,
    /// Thread caches made on this handle and not yet destroyed
    /// (`pagealloc_destroy` refuses while there are any).
    tcaches: std::sync::atomic::AtomicUsize,
    /// Page arrays made on this handle and not yet destroyed (the same).
    arrays: std::sync::atomic::AtomicUsize,
}

/// The allocator behind a handle, or `PAGEALLOC_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `a` is null or points to readable memory at least as large as a handle
/// (a live handle from `pagealloc_create`, in a correct program).
#[inline(always)]
unsafe fn handle<'a>(a: *const pagealloc) -> Res<&'a PageAllocator> {
    if a.is_null() || !a.is_aligned() {
        return Err(bad_handle(a));
    }
    // SAFETY: non-null and aligned; readable by the caller's contract.
    let h = unsafe { &*a };
    if h.magic != MAGIC {
        return Err(bad_handle(a));
    }
    Ok(&h.inner)
}

#[cold]
#[inline(never)]
fn bad_handle(a: *const pagealloc) -> pagealloc_status {
    if a.is_null() {
        invalid("allocator handle is NULL")
    } else {
        invalid(format_args!("{a:p} is not a pagealloc handle"))
    }
}

#[inline(always)]
fn to_gfp(bits: u32) -> Res<Gfp> {
    match Gfp::from_bits(bits) {
        Some(g) => Ok(g),
        None => Err(bad_gfp(bits)),
    }
}

#[cold]
#[inline(never)]
fn bad_gfp(bits: u32) -> pagealloc_status {
    invalid(format_args!(
        "gfp {bits:#x} has bits that are not PAGEALLOC_GFP_* flags (unknown: {:#x})",
        bits & !Gfp::all().bits()
    ))
}

/// A pfn from C: `PAGEALLOC_HOLE` is not one, and no arena reaches it.
#[inline(always)]
fn to_pfn(a: &PageAllocator, p: u64) -> Res<Pfn> {
    if p == PAGEALLOC_HOLE {
        return Err(pfn_out_of_range(a, p));
    }
    Ok(Pfn::new(p))
}

#[cold]
#[inline(never)]
fn pfn_out_of_range(a: &PageAllocator, p: u64) -> pagealloc_status {
    fail(PAGEALLOC_ERR_OUT_OF_RANGE, format_args!("pfn {p:#x} is out of range (arena has {} pages)", a.nr_pages()))
}

/// A checked out parameter: non-null; written unaligned, so C callers may
/// pass any address (on x86-64 and AArch64 the write is one plain store).
struct Out<T>(NonNull<T>);

impl<T> Clone for Out<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Out<T> {}

impl<T> Out<T> {
    #[inline(always)]
    fn write(self, v: T) {
        // SAFETY: non-null (checked in `out`); the caller promised it points
        // to writable memory for a T (C's contract for an out parameter).
        unsafe { self.0.as_ptr().write_unaligned(v) }
    }
}

#[inline(always)]
fn out<T>(p: *mut T, what: &str) -> Res<Out<T>> {
    match NonNull::new(p) {
        Some(p) => Ok(Out(p)),
        None => Err(null_out(what)),
    }
}

#[cold]
#[inline(never)]
fn null_out(what: &str) -> pagealloc_status {
    invalid(format_args!("{what} is NULL"))
}

#[cold]
#[inline(never)]
fn bad_array(what: &str) -> pagealloc_status {
    invalid(format_args!("{what} is NULL or misaligned"))
}

/// Write `v` through an optional out pointer (null: not wanted).
///
/// # Safety
/// `p` is null or points to a writable, aligned `T`.
#[inline(always)]
unsafe fn opt_out<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: by the caller's contract.
        unsafe { p.write(v) }
    }
}

// ------------------------------------------------------------ create, destroy

/// Fill `*cfg` with the defaults (1 GiB anonymous arena, one node, per-CPU
/// lists and front cache on, everything else as the kernel does it).
///
/// Returns `PAGEALLOC_ERR_INVALID_ARGUMENT` if `cfg` is NULL.
/// Thread safety: touches only `*cfg`; safe to call from any thread.
///
/// # Safety
/// `cfg` is NULL or points to a writable `pagealloc_config`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_config_default(cfg: *mut pagealloc_config) -> pagealloc_status {
    run("pagealloc_config_default", || {
        out(cfg, "cfg")?.write(pagealloc_config::from_rust(&Config::default()));
        Ok(())
    })
}

/// Build an allocator from `*cfg` (NULL: the defaults) and store its handle in
/// `*out_handle`. On error `*out_handle` is set to NULL and the code says why
/// (`PAGEALLOC_ERR_INVALID_CONFIG` with the field in the message,
/// `PAGEALLOC_ERR_MMAP`, `PAGEALLOC_ERR_NO_MEMORY` when the page descriptors
/// cannot be allocated, `PAGEALLOC_ERR_INVALID_ARGUMENT` for an unknown
/// backing or drain mode).
///
/// Thread safety: safe to call from any thread; each call makes a new allocator.
///
/// # Safety
/// `cfg` is NULL or points to a readable `pagealloc_config`; `out_handle` is
/// NULL or points to a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_create(
    cfg: *const pagealloc_config,
    out_handle: *mut *mut pagealloc,
) -> pagealloc_status {
    run("pagealloc_create", || {
        let o = out(out_handle, "out_handle")?;
        o.write(ptr::null_mut());
        let c = if cfg.is_null() {
            Config::default()
        } else {
            // SAFETY: non-null, readable by the caller's contract; read
            // unaligned, so any address works.
            unsafe { cfg.read_unaligned() }.to_rust()?
        };
        let inner = PageAllocator::new(c).map_err(config_err)?;
        o.write(Box::into_raw(Box::new(pagealloc {
            magic: MAGIC,
            inner,
            tcaches: Default::default(),
            arrays: Default::default(),
        })));
        Ok(())
    })
}

/// Destroy an allocator and unmap its arena. NULL is a no-op (returns
/// `PAGEALLOC_OK`), like `free(NULL)`; a pointer that is not a handle is
/// `PAGEALLOC_ERR_INVALID_ARGUMENT`; one with thread caches or page arrays
/// not yet destroyed (`pagealloc_tcache_create`, `pagealloc_page_array_create`)
/// is `PAGEALLOC_ERR_BUSY`, and stays.
///
/// Thread safety: NOT safe concurrently with any other call on this handle.
/// Every other thread must be done with the handle (and its page addresses)
/// first; using the handle afterwards is undefined behaviour.
///
/// # Safety
/// `a` is NULL or a handle from `pagealloc_create` not yet destroyed, with no
/// call on it running or to come.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_destroy(a: *mut pagealloc) -> pagealloc_status {
    run("pagealloc_destroy", || {
        if a.is_null() {
            return Ok(());
        }
        // SAFETY: a handle (checked as far as it can be) by the caller's contract.
        unsafe { handle(a) }?;
        // SAFETY: as above.
        let live = unsafe { (*a).tcaches.load(std::sync::atomic::Ordering::Acquire) };
        if live != 0 {
            return Err(fail(
                PAGEALLOC_ERR_BUSY,
                format_args!("{live} thread caches of this allocator are not destroyed yet"),
            ));
        }
        // SAFETY: as above.
        let arrays = unsafe { (*a).arrays.load(std::sync::atomic::Ordering::Acquire) };
        if arrays != 0 {
            return Err(page_array::arrays_live(arrays));
        }
        // SAFETY: as above; made by Box::into_raw in pagealloc_create, and the
        // caller gives up the handle. The magic is cleared first so that a
        // stale copy of the pointer is more likely to be refused.
        unsafe {
            (*a).magic = 0;
            drop(Box::from_raw(a));
        }
        Ok(())
    })
}

// -------------------------------------------------------------- alloc, free

/// Allocate `1 << order` contiguous pages on the calling thread's node (or
/// another, unless `PAGEALLOC_GFP_THISNODE`) and store the first pfn in
/// `*pfn_out`. `gfp_flags` is an OR of PAGEALLOC_GFP_* flags.
///
/// Errors: `PAGEALLOC_ERR_NO_MEMORY`, `PAGEALLOC_ERR_INVALID_ORDER`,
/// `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `pfn_out`, unknown gfp bits).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `pfn_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages(
    a: *const pagealloc,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    // The hit in this thread's front cache, inline: the full path's checks
    // (handle, flags, out pointer) without their messages, then the
    // allocator's inline order-0 fast path; no error handling on the way (a
    // panic is still caught). A miss calls `alloc0_miss` with what is checked
    // already; anything else (an order above 0, an argument the full path
    // refuses) is a tail call to the full path, which checks again and
    // records the error.
    if order == 0 && !pfn_out.is_null() {
        // One mask test: the known flags but ZERO (which the front cache
        // never serves: it goes to the full path instead of the miss).
        // SAFETY: the caller's contract.
        if let (Ok(h), true) = (unsafe { handle_quiet(a) }, gfp_flags & !INLINE_GFP == 0) {
            let g = Gfp::from_bits_retain(gfp_flags);
            return match catch("pagealloc_alloc_pages", || h.alloc0_front_only(g)) {
                Ok(Some(p)) => {
                    // SAFETY: non-null; writable by the caller's contract
                    // (any alignment, as `Out::write`).
                    unsafe { pfn_out.write_unaligned(p.as_u64()) };
                    PAGEALLOC_OK
                }
                // Checked already: the miss keeps only what it needs.
                // SAFETY: pfn_out as above.
                Ok(None) => unsafe { alloc0_miss(h, gfp_flags, pfn_out) },
                Err(s) => s,
            };
        }
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { alloc_pages_full(a, gfp_flags, order, pfn_out) }
}

/// An order-0 allocation the inline path missed, its arguments checked.
///
/// # Safety
/// `pfn_out` is non-null and writable (any alignment).
/// `extern "C"`, which cannot unwind (`run` catches every panic): the
/// caller's call to it is then a tail call with no unwind landing pad, and
/// the inline hit path needs no stack frame.
#[inline(never)]
unsafe extern "C" fn alloc0_miss(a: &PageAllocator, gfp_flags: u32, pfn_out: *mut u64) -> pagealloc_status {
    let g = Gfp::from_bits_retain(gfp_flags);
    run("pagealloc_alloc_pages", || {
        let p = a.alloc_pages(g, 0).map_err(alloc_err)?;
        // SAFETY: the caller's contract.
        unsafe { pfn_out.write_unaligned(p.as_u64()) };
        Ok(())
    })
}

/// `pagealloc_alloc_pages` by every path but the inline front-cache hit.
///
/// # Safety
/// As `pagealloc_alloc_pages`.
#[inline(never)]
unsafe extern "C" fn alloc_pages_full(
    a: *const pagealloc,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_alloc_pages", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        let o = out(pfn_out, "pfn_out")?;
        let p = a.alloc_pages(g, order).map_err(alloc_err)?;
        o.write(p.as_u64());
        Ok(())
    })
}

/// `pagealloc_alloc_pages`, preferring node `nid`.
/// Errors as `pagealloc_alloc_pages`, plus `PAGEALLOC_ERR_INVALID_NODE`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_alloc_pages`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages_node(
    a: *const pagealloc,
    nid: u32,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_alloc_pages_node", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        let o = out(pfn_out, "pfn_out")?;
        let p = a.alloc_pages_node(::pagealloc::NodeId(nid), g, order).map_err(alloc_err)?;
        o.write(p.as_u64());
        Ok(())
    })
}

/// Free a block allocated with the same order. Misuse changes nothing and is
/// reported: `PAGEALLOC_ERR_OUT_OF_RANGE`, `_INVALID_ORDER`, `_MISALIGNED`,
/// `_WRONG_ORDER`, `_DOUBLE_FREE`, `_INSIDE_BLOCK`, `_NOT_ALLOCATED`,
/// `_LOCKED`, `_WRITEBACK` (each message names the pfn).
/// Thread safety: safe to call concurrently on one allocator (any thread may
/// free any page).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages(a: *const pagealloc, pfn: u64, order: u32) -> pagealloc_status {
    // As in `pagealloc_alloc_pages`: the front-cache hit inline; a page it
    // does not take (misuse included: the inline path then changes nothing)
    // goes to `free0_miss`, which checks and reports (the hole pfn
    // included); a bad handle or an order above 0 to the full path.
    if order == 0 {
        // SAFETY: the caller's contract.
        if let Ok(h) = unsafe { handle_quiet(a) } {
            // The hole is outside every arena: the inline path's range test
            // sends it to the miss, which refuses it.
            return match catch("pagealloc_free_pages", || h.free0_front_only_raw(pfn)) {
                Ok(true) => PAGEALLOC_OK,
                // Checked already: the miss keeps only what it needs.
                Ok(false) => free0_miss(h, pfn),
                Err(s) => s,
            };
        }
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { free_pages_full(a, pfn, order) }
}

/// An order-0 free the inline path did not take (misuse included), its
/// handle checked.
/// `extern "C"` for a tail call, as `alloc0_miss`.
#[inline(never)]
extern "C" fn free0_miss(a: &PageAllocator, pfn: u64) -> pagealloc_status {
    run("pagealloc_free_pages", || a.free_pages(to_pfn(a, pfn)?, 0).map_err(free_err))
}

/// `pagealloc_free_pages` by every path but the inline front-cache hit.
///
/// # Safety
/// As `pagealloc_free_pages`.
#[inline(never)]
unsafe extern "C" fn free_pages_full(a: *const pagealloc, pfn: u64, order: u32) -> pagealloc_status {
    run("pagealloc_free_pages", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.free_pages(to_pfn(a, pfn)?, order).map_err(free_err)
    })
}

// ----------------------------------------------------------------- no-lock

/// The gfp flags the inline order-0 hit takes: every known one but ZERO.
const INLINE_GFP: u32 = Gfp::all().bits() & !Gfp::ZERO.bits();

/// The allocator behind a handle, checked without recording a message.
///
/// # Safety
/// As [`handle`].
/// The inline hit paths' form: no alignment test (one test and branch
/// fewer a call). The magic number is read unaligned, so a misaligned
/// pointer to anything else is refused like any other non-handle; a
/// misaligned pointer whose bytes at the magic's offset spell the magic
/// would get past, which only a pointer made to fool the check can do (the
/// caller's contract rules it out, as it rules out a dangling handle).
#[inline(always)]
unsafe fn handle_quiet<'a>(a: *const pagealloc) -> Res<&'a PageAllocator> {
    if a.is_null() {
        return Err(PAGEALLOC_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null; readable by the caller's contract; read unaligned.
    let magic = unsafe { std::ptr::addr_of!((*a).magic).read_unaligned() };
    if magic != MAGIC {
        return Err(PAGEALLOC_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: a handle (its magic is there), so aligned and live by the
    // caller's contract.
    Ok(unsafe { &(*a).inner })
}

/// `pagealloc_alloc_pages` that never waits (the kernel's
/// `alloc_pages_nolock`): async-signal-safe, so it may be called from a signal
/// handler, even one that interrupted a pagealloc call on the same thread, or
/// from a real-time thread. No heap allocation, no thread-local state (not the
/// thread front cache), no slow path; only try-locks. Zones stay above their
/// min watermark.
///
/// Errors: `PAGEALLOC_ERR_WOULD_BLOCK` (a lock it needed was taken: retry
/// later), `PAGEALLOC_ERR_NO_MEMORY`, `PAGEALLOC_ERR_INVALID_ORDER`,
/// `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `pfn_out`, unknown gfp
/// bits). Unlike every other call it records no last-error message (that
/// would allocate): `pagealloc_last_error_message` is left as it was.
/// Thread safety: safe to call concurrently on one allocator, and from signal
/// handlers.
///
/// # Safety
/// `a` is a live handle (or NULL); `pfn_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages_nolock(
    a: *const pagealloc,
    gfp_flags: u32,
    order: u32,
    pfn_out: *mut u64,
) -> pagealloc_status {
    run_nolock(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle_quiet(a) }?;
        let g = Gfp::from_bits(gfp_flags).ok_or(PAGEALLOC_ERR_INVALID_ARGUMENT)?;
        if pfn_out.is_null() || !pfn_out.is_aligned() {
            return Err(PAGEALLOC_ERR_INVALID_ARGUMENT);
        }
        let p = a.alloc_pages_nolock(g, order).map_err(|e| alloc_code(&e))?;
        // SAFETY: non-null and aligned; writable by the caller's contract.
        unsafe { pfn_out.write(p.as_u64()) };
        Ok(())
    })
}

/// `pagealloc_free_pages` that never waits (the kernel's
/// `free_pages_nolock`): async-signal-safe, as `pagealloc_alloc_pages_nolock`.
/// The checks are `pagealloc_free_pages`'s; a block that cannot reach a list
/// without waiting for a lock is parked on a lock-free deferred list that the
/// next locked free or drain empties. Once the checks pass the free succeeds.
///
/// Errors: those of `pagealloc_free_pages`, with no last-error message
/// recorded (see `pagealloc_alloc_pages_nolock`).
/// Thread safety: safe to call concurrently on one allocator, and from signal
/// handlers.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages_nolock(a: *const pagealloc, pfn: u64, order: u32) -> pagealloc_status {
    run_nolock(|| {
        // SAFETY: the caller's contract.
        let a = unsafe { handle_quiet(a) }?;
        if pfn == PAGEALLOC_HOLE {
            return Err(PAGEALLOC_ERR_OUT_OF_RANGE);
        }
        a.free_pages_nolock(Pfn::new(pfn), order).map_err(|e| free_code(&e))
    })
}

/// Store the address of frame `pfn` in `*addr_out` (the block's memory runs on
/// for `4096 << order` bytes). Errors: `PAGEALLOC_ERR_OUT_OF_RANGE` for a pfn
/// past the arena, `PAGEALLOC_ERR_INVALID_ARGUMENT` for an arena without
/// backing (PAGEALLOC_BACKING_NONE) or a NULL `addr_out`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `addr_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_address(
    a: *const pagealloc,
    pfn: u64,
    addr_out: *mut *mut c_void,
) -> pagealloc_status {
    run("pagealloc_page_address", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let o = out(addr_out, "addr_out")?;
        let p = to_pfn(a, pfn)?;
        match a.page_address(p) {
            Some(m) => {
                o.write(m.as_ptr().cast());
                Ok(())
            }
            None => Err(no_address(a, p)),
        }
    })
}

#[cold]
#[inline(never)]
fn no_address(a: &PageAllocator, p: Pfn) -> pagealloc_status {
    if p.as_u64() >= a.nr_pages() {
        pfn_out_of_range(a, p.as_u64())
    } else {
        invalid(format_args!("{p:?} has no address: the arena has no backing memory"))
    }
}

// ----------------------------------------------------------------------- bulk

/// Bulk arrays go through the Rust API in chunks of this many slots, converted
/// on the stack (`Option<Pfn>`'s layout is the library's business).
const CHUNK: usize = 256;

/// A slice of C slots (`len` may be 0 with a NULL pointer).
///
/// # Safety
/// `p` is NULL or points to `len` readable (and, for `_mut`, writable) elements.
unsafe fn c_slots_mut<'a>(p: *mut u64, len: usize, what: &str) -> Res<&'a mut [u64]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(bad_array(what));
    }
    // SAFETY: by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// # Safety
/// As [`c_slots_mut`], read only.
unsafe fn c_slots<'a>(p: *const u64, len: usize, what: &str) -> Res<&'a [u64]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() || !p.is_aligned() {
        return Err(bad_array(what));
    }
    // SAFETY: by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `buf[..src.len()]` filled by `f`, as an initialised slice.
#[inline(always)]
fn convert<'b, S: Copy, D>(buf: &'b mut [MaybeUninit<D>; CHUNK], src: &[S], f: impl Fn(S) -> D) -> &'b mut [D] {
    let n = src.len();
    assert!(n <= CHUNK);
    for (d, s) in buf.iter_mut().zip(src) {
        d.write(f(*s));
    }
    // SAFETY: the first n elements were written just above (zip stops at the
    // shorter, and n <= CHUNK).
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<D>(), n) }
}

#[inline(always)]
fn slot_in(v: u64) -> Option<Pfn> {
    (v != PAGEALLOC_HOLE).then(|| Pfn::new(v))
}

/// Fill the empty slots (`PAGEALLOC_HOLE`) of `slots[0..nr]` with order-0
/// pages; populated slots are left alone. `*nr_populated` (optional) gets the
/// number of leading populated slots afterwards: `nr` when every hole was
/// filled, less when memory ran short (the first hole is at that index).
/// Running short is not an error: the call returns `PAGEALLOC_OK`.
///
/// Errors: `PAGEALLOC_ERR_INVALID_ARGUMENT` (bad handle, NULL `slots` with
/// `nr > 0`, unknown gfp bits).
/// Thread safety: safe to call concurrently on one allocator (on different arrays).
///
/// # Safety
/// `a` is a live handle (or NULL); `slots` points to `nr` writable `uint64_t`
/// (may be NULL when `nr` is 0); `nr_populated` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_pages_bulk(
    a: *const pagealloc,
    gfp_flags: u32,
    slots: *mut u64,
    nr: usize,
    nr_populated: *mut usize,
) -> pagealloc_status {
    run("pagealloc_alloc_pages_bulk", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        // SAFETY: the caller's contract.
        let s = unsafe { c_slots_mut(slots, nr, "slots") }?;
        let mut buf = [const { MaybeUninit::<Option<Pfn>>::uninit() }; CHUNK];
        let mut lead = 0;
        for c in s.chunks_mut(CHUNK) {
            let b = convert(&mut buf, c, slot_in);
            let got = a.alloc_pages_bulk(g, b);
            for (d, v) in c.iter_mut().zip(b.iter()) {
                *d = v.map_or(PAGEALLOC_HOLE, Pfn::as_u64);
            }
            lead += got;
            if got < c.len() {
                break;
            }
        }
        // SAFETY: the caller's contract.
        unsafe { opt_out(nr_populated, lead) };
        Ok(())
    })
}

/// Rejections of a bulk free, gathered over the chunks.
struct Rejects {
    count: usize,
    first: Option<(usize, pagealloc_status, String)>,
}

impl Rejects {
    fn new() -> Self {
        Self { count: 0, first: None }
    }

    #[cold]
    fn add(&mut self, base: usize, err: ::pagealloc::BulkFreeError, orig: &[u64]) {
        for (i, e) in err.rejected {
            self.count += 1;
            if self.first.is_none() {
                let msg = if orig[i] == PAGEALLOC_HOLE {
                    format!("pfn {:#x} is out of range (PAGEALLOC_HOLE is not a pfn)", orig[i])
                } else {
                    e.to_string()
                };
                self.first = Some((base + i, free_code(&e), msg));
            }
        }
    }

    /// Report through the optional outs; the first rejection's code.
    ///
    /// # Safety
    /// The pointers are NULL or writable.
    unsafe fn finish(self, nr_rejected: *mut usize, first_rejected: *mut usize) -> Res {
        // SAFETY: the caller's contract.
        unsafe {
            opt_out(nr_rejected, self.count);
            opt_out(first_rejected, self.first.as_ref().map_or(usize::MAX, |f| f.0));
        }
        match self.first {
            None => Ok(()),
            Some((i, code, msg)) => Err(fail(
                code,
                format_args!("bulk free skipped {} invalid entries (first: index {i}: {msg})", self.count),
            )),
        }
    }
}

/// Free the order-0 pages `pfns[0..nr]`. Invalid entries (the same classes as
/// `pagealloc_free_pages`; `PAGEALLOC_HOLE` counts as out of range) are skipped
/// and every valid one is freed. Returns `PAGEALLOC_OK` when all were freed,
/// else the code of the first rejected entry; `*nr_rejected` (optional) gets
/// how many were skipped and `*first_rejected` (optional) the index of the
/// first (`SIZE_MAX` when none).
///
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `pfns` points to `nr` readable `uint64_t`
/// (may be NULL when `nr` is 0); the out pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages_bulk(
    a: *const pagealloc,
    pfns: *const u64,
    nr: usize,
    nr_rejected: *mut usize,
    first_rejected: *mut usize,
) -> pagealloc_status {
    run("pagealloc_free_pages_bulk", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        // SAFETY: the caller's contract.
        let s = unsafe { c_slots(pfns, nr, "pfns") }?;
        let mut buf = [const { MaybeUninit::<Pfn>::uninit() }; CHUNK];
        let mut rej = Rejects::new();
        for (ci, c) in s.chunks(CHUNK).enumerate() {
            // PAGEALLOC_HOLE becomes Pfn::MAX, past every arena (at most 2^32 pages).
            let b = convert(&mut buf, c, |v| if v == PAGEALLOC_HOLE { Pfn::MAX } else { Pfn::new(v) });
            if let Err(e) = a.free_pages_bulk(b) {
                rej.add(ci * CHUNK, e, c);
            }
        }
        // SAFETY: the caller's contract.
        unsafe { rej.finish(nr_rejected, first_rejected) }
    })
}

/// The partner of `pagealloc_alloc_pages_bulk`: free every populated slot of
/// `slots[0..nr]` (order-0 pages) and set it to `PAGEALLOC_HOLE`. Holes are
/// skipped. Invalid entries stay in their slots and are reported as by
/// `pagealloc_free_pages_bulk`; every valid one is freed.
///
/// Thread safety: safe to call concurrently on one allocator (on different arrays).
///
/// # Safety
/// As `pagealloc_free_pages_bulk`, with `slots` writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_pages_bulk_slots(
    a: *const pagealloc,
    slots: *mut u64,
    nr: usize,
    nr_rejected: *mut usize,
    first_rejected: *mut usize,
) -> pagealloc_status {
    run("pagealloc_free_pages_bulk_slots", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        // SAFETY: the caller's contract.
        let s = unsafe { c_slots_mut(slots, nr, "slots") }?;
        let mut buf = [const { MaybeUninit::<Option<Pfn>>::uninit() }; CHUNK];
        let mut rej = Rejects::new();
        for (ci, c) in s.chunks_mut(CHUNK).enumerate() {
            let b = convert(&mut buf, c, slot_in);
            let r = a.free_pages_bulk_slots(b);
            if let Err(e) = r {
                rej.add(ci * CHUNK, e, c);
            }
            for (d, v) in c.iter_mut().zip(b.iter()) {
                *d = v.map_or(PAGEALLOC_HOLE, Pfn::as_u64);
            }
        }
        // SAFETY: the caller's contract.
        unsafe { rej.finish(nr_rejected, first_rejected) }
    })
}

// ------------------------------------------------------------------ isolation

/// `start + nr` must stay a pfn.
fn range(a: &PageAllocator, start: u64, nr: u64) -> Res<Pfn> {
    let p = to_pfn(a, start)?;
    if start.checked_add(nr).is_none() {
        return Err(fail(
            PAGEALLOC_ERR_BAD_RANGE,
            format_args!("range at pfn {start:#x} of {nr} pages runs past the largest pfn"),
        ));
    }
    Ok(p)
}

/// Isolate the pageblocks covering `[start, start + nr_pages)` (one zone).
/// Fails without changing anything: `PAGEALLOC_ERR_BAD_RANGE`,
/// `_ALREADY_ISOLATED`, `_UNISOLATABLE`, `_OUT_OF_RANGE`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_isolate_range(a: *const pagealloc, start: u64, nr_pages: u64) -> pagealloc_status {
    run("pagealloc_isolate_range", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.isolate_range(range(a, start, nr_pages)?, nr_pages).map_err(state_err)
    })
}

/// Undo `pagealloc_isolate_range` over the same range (`PAGEALLOC_ERR_NOT_ISOLATED`
/// if a block in it is not isolated).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_undo_isolate_range(
    a: *const pagealloc,
    start: u64,
    nr_pages: u64,
) -> pagealloc_status {
    run("pagealloc_undo_isolate_range", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.undo_isolate_range(range(a, start, nr_pages)?, nr_pages).map_err(state_err)
    })
}

/// Store in `*isolated` whether every page of `[start, start + nr_pages)` is
/// free inside isolated pageblocks.
/// Thread safety: safe to call concurrently on one allocator (the answer is a
/// snapshot).
///
/// # Safety
/// `a` is a live handle (or NULL); `isolated` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_test_pages_isolated(
    a: *const pagealloc,
    start: u64,
    nr_pages: u64,
    isolated: *mut bool,
) -> pagealloc_status {
    run("pagealloc_test_pages_isolated", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let o = out(isolated, "isolated")?;
        let p = range(a, start, nr_pages)?;
        o.write(a.test_pages_isolated(p, nr_pages));
        Ok(())
    })
}

/// Find, isolate and take `nr_pages` contiguous free pages; the first pfn goes
/// to `*start_out`. The pages come back as order-0 allocated pages: free them
/// with `pagealloc_free_contig_range` or one by one. `PAGEALLOC_ERR_NO_MEMORY`
/// when no such run is free.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `start_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_alloc_contig_pages(
    a: *const pagealloc,
    nr_pages: u64,
    gfp_flags: u32,
    start_out: *mut u64,
) -> pagealloc_status {
    run("pagealloc_alloc_contig_pages", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let g = to_gfp(gfp_flags)?;
        let o = out(start_out, "start_out")?;
        let p = a.alloc_contig_pages(nr_pages, g).map_err(alloc_err)?;
        o.write(p.as_u64());
        Ok(())
    })
}

/// Free a range from `pagealloc_alloc_contig_pages`. Stops at the first page
/// that cannot be freed and reports it (the pages before it are freed).
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_free_contig_range(
    a: *const pagealloc,
    start: u64,
    nr_pages: u64,
) -> pagealloc_status {
    run("pagealloc_free_contig_range", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.free_contig_range(range(a, start, nr_pages)?, nr_pages).map_err(free_err)
    })
}

// ------------------------------------------------------------ lock, writeback

/// Lock a page (the head of an allocated block), sleeping while another holder
/// has it. Errors: `PAGEALLOC_ERR_OUT_OF_RANGE`, `_NOT_ALLOCATED`.
/// Thread safety: safe to call concurrently on one allocator; blocks.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_lock_page(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_lock_page", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.lock_page(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Lock a page if nobody holds it; never blocks. `PAGEALLOC_ERR_BUSY` when it
/// did not get the lock (held by another, or not an allocated page),
/// `PAGEALLOC_ERR_OUT_OF_RANGE` past the arena.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_trylock_page(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_trylock_page", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let p = to_pfn(a, pfn)?;
        if a.trylock_page(p) {
            Ok(())
        } else if p.as_u64() >= a.nr_pages() {
            Err(pfn_out_of_range(a, pfn))
        } else {
            Err(fail(PAGEALLOC_ERR_BUSY, format_args!("{p:?} is locked by another holder or is not an allocated page")))
        }
    })
}

/// Lock a page, giving up after `timeout_ns` nanoseconds (`PAGEALLOC_ERR_TIMED_OUT`).
/// Thread safety: safe to call concurrently on one allocator; blocks up to the timeout.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_lock_page_timeout(
    a: *const pagealloc,
    pfn: u64,
    timeout_ns: u64,
) -> pagealloc_status {
    run("pagealloc_lock_page_timeout", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.lock_page_timeout(to_pfn(a, pfn)?, Duration::from_nanos(timeout_ns)).map_err(wait_err)
    })
}

/// Unlock a page. `PAGEALLOC_ERR_NOT_LOCKED` (nothing changed) if it was not locked.
/// Thread safety: safe to call concurrently on one allocator; any thread may
/// unlock (as in the kernel, the lock has no owner).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_unlock_page(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_unlock_page", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.unlock_page(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Unlock a page and mark it up to date in one atomic step (the kernel's
/// `folio_end_read`). Errors as `pagealloc_unlock_page`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_unlock_page_uptodate(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_unlock_page_uptodate", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.unlock_page_uptodate(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Store in `*uptodate` whether the page is marked up to date.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `uptodate` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_page_uptodate(
    a: *const pagealloc,
    pfn: u64,
    uptodate: *mut bool,
) -> pagealloc_status {
    run("pagealloc_page_uptodate", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let o = out(uptodate, "uptodate")?;
        let p = to_pfn(a, pfn)?;
        if p.as_u64() >= a.nr_pages() {
            return Err(pfn_out_of_range(a, pfn));
        }
        o.write(a.page_uptodate(p));
        Ok(())
    })
}

/// Mark a page under writeback. `*was_set` (optional) gets true if this call
/// set the flag, false if it already was set.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL); `was_set` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_set_page_writeback(
    a: *const pagealloc,
    pfn: u64,
    was_set: *mut bool,
) -> pagealloc_status {
    run("pagealloc_set_page_writeback", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        let set = a.set_page_writeback(to_pfn(a, pfn)?).map_err(state_err)?;
        // SAFETY: the caller's contract.
        unsafe { opt_out(was_set, set) };
        Ok(())
    })
}

/// End writeback and wake its waiters. `PAGEALLOC_ERR_NOT_WRITEBACK` if the
/// page was not under writeback.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_end_page_writeback(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_end_page_writeback", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.end_page_writeback(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// Wait until the page is not under writeback.
/// Thread safety: safe to call concurrently on one allocator; blocks.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_wait_on_page_writeback(a: *const pagealloc, pfn: u64) -> pagealloc_status {
    run("pagealloc_wait_on_page_writeback", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.wait_on_page_writeback(to_pfn(a, pfn)?).map_err(state_err)
    })
}

/// `pagealloc_wait_on_page_writeback`, giving up after `timeout_ns`
/// nanoseconds (`PAGEALLOC_ERR_TIMED_OUT`).
/// Thread safety: safe to call concurrently on one allocator; blocks up to the timeout.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_wait_on_page_writeback_timeout(
    a: *const pagealloc,
    pfn: u64,
    timeout_ns: u64,
) -> pagealloc_status {
    run("pagealloc_wait_on_page_writeback_timeout", || {
        // SAFETY: the caller's contract.
        let a = unsafe { handle(a) }?;
        a.wait_on_page_writeback_timeout(to_pfn(a, pfn)?, Duration::from_nanos(timeout_ns)).map_err(wait_err)
    })
}

// --------------------------------------------------------------------- drains

/// Return this CPU's per-CPU pages and this thread's front cache to the buddy.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_drain_local_pages(a: *const pagealloc) -> pagealloc_status {
    run("pagealloc_drain_local_pages", || {
        // SAFETY: the caller's contract.
        unsafe { handle(a) }?.drain_local_pages();
        Ok(())
    })
}

/// Return every per-CPU page and every thread's front cache to the buddy.
/// Thread safety: safe to call concurrently on one allocator (drains are
/// serialised inside).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_drain_all_pages(a: *const pagealloc) -> pagealloc_status {
    run("pagealloc_drain_all_pages", || {
        // SAFETY: the caller's contract.
        unsafe { handle(a) }?.drain_all_pages();
        Ok(())
    })
}

// ---------------------------------------------------------------- statistics

/// Check every invariant; `PAGEALLOC_ERR_INVARIANT` with the first broken one
/// (and its pfn) in the message.
/// Thread safety: safe to call concurrently on one allocator, but exact only
/// when no other thread allocates or frees meanwhile (it may then report a page
/// in the middle of a free); it never changes anything.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_check_invariants(a: *const pagealloc) -> pagealloc_status {
    run("pagealloc_check_invariants", || {
        // SAFETY: the caller's contract.
        unsafe { handle(a) }?.check_invariants().map_err(invariant_err)
    })
}

/// A count from the allocator, 0 (last error set) for a bad handle.
///
/// # Safety
/// `a` is a live handle (or NULL).
unsafe fn count(name: &'static str, a: *const pagealloc, f: impl FnOnce(&PageAllocator) -> u64) -> u64 {
    guard(name, 0, || {
        // SAFETY: the caller's contract.
        match unsafe { handle(a) } {
            Ok(a) => f(a),
            Err(_) => 0,
        }
    })
}

/// Free pages in the buddy lists outside isolated blocks (NR_FREE_PAGES; pages
/// on per-CPU lists and front caches are not counted). 0 with the last error
/// set for a bad handle.
/// Thread safety: safe to call concurrently on one allocator (read without locks).
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_nr_free_pages(a: *const pagealloc) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { count("pagealloc_nr_free_pages", a, PageAllocator::nr_free_pages) }
}

/// Pages the allocator manages. 0 with the last error set for a bad handle.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_managed_pages(a: *const pagealloc) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { count("pagealloc_managed_pages", a, PageAllocator::managed_pages) }
}

/// Pages in the arena (valid pfns are 0 .. this - 1). 0 with the last error set
/// for a bad handle.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// `a` is a live handle (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pagealloc_nr_pages(a: *const pagealloc) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { count("pagealloc_nr_pages", a, PageAllocator::nr_pages) }
}

/// Copy `text` snprintf-style: at most `len` bytes including a NUL, always
/// terminated when `len > 0`; returns the full length (without the NUL).
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
unsafe fn copy_out(text: &str, buf: *mut c_char, len: usize) -> usize {
    if let Some(b) = NonNull::new(buf) {
        if len > 0 {
            let n = text.len().min(len - 1);
            // SAFETY: n + 1 <= len bytes at buf, writable by the caller's
            // contract; the source is a distinct Rust string.
            unsafe {
                ptr::copy_nonoverlapping(text.as_ptr(), b.as_ptr().cast::<u8>(), n);
                b.as_ptr().add(n).write(0);
            }
        }
    }
    text.len()
}

/// A report as text into `buf`, snprintf-style.
///
/// # Safety
/// `a` is a live handle (or NULL); `buf` is NULL or points to `len` writable bytes.
unsafe fn report(
    name: &'static str,
    a: *const pagealloc,
    buf: *mut c_char,
    len: usize,
    f: impl FnOnce(&PageAllocator) -> String,
) -> i64 {
    guard(name, -(PAGEALLOC_ERR_PANIC as i64), || {
        // SAFETY: the caller's contract.
        let a = match unsafe { handle(a) } {
            Ok(a) => a,
            Err(e) => return -(e as i64),
        };
        if buf.is_null() && len > 0 {
            return -(invalid("buf is NULL with len > 0") as i64);
        }
        let text = f(a);
        // SAFETY: the caller's contract.
        unsafe { copy_out(&text, buf, len) as i64 }
    })
}

/// /proc/buddyinfo's text, snprintf-style: writes at most `len` bytes including
/// the terminating NUL (always terminated when `len > 0`; `buf` may be NULL when
/// `len` is 0) and returns the length of the whole text without the NUL, so a
/// return value `>= len` means it was cut short. A negative value is
/// `-pagealloc_status` (bad handle, NULL `buf` with `len > 0`).
/// Thread safety: safe to call concurrently on one allocator (read without locks).
///
/// # Safety
/// `a` is a live handle (or NULL); `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_buddyinfo(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_buddyinfo", a, buf, len, |a| a.buddyinfo().to_string()) }
}

/// /proc/pagetypeinfo's text (counts capped at 100000 as the kernel prints
/// them), as `pagealloc_buddyinfo`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_buddyinfo`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_pagetypeinfo(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_pagetypeinfo", a, buf, len, |a| a.pagetypeinfo().to_string()) }
}

/// /proc/zoneinfo's text, as `pagealloc_buddyinfo`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_buddyinfo`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_zoneinfo(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_zoneinfo", a, buf, len, |a| a.zoneinfo().to_string()) }
}

/// /proc/vmstat's text, as `pagealloc_buddyinfo`.
/// Thread safety: safe to call concurrently on one allocator.
///
/// # Safety
/// As `pagealloc_buddyinfo`.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_vmstat(a: *const pagealloc, buf: *mut c_char, len: usize) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { report("pagealloc_vmstat", a, buf, len, |a| a.vmstat().to_string()) }
}

// -------------------------------------------------------------------- errors

/// The message of the calling thread's last error, snprintf-style (as
/// `pagealloc_buddyinfo`; `buf` may be NULL to ask for the length). An empty
/// string when this thread has had no error. Successful calls do not clear it.
/// Thread safety: safe from any thread; each thread has its own last error.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pagealloc_last_error_message(buf: *mut c_char, len: usize) -> usize {
    guard("pagealloc_last_error_message", 0, || {
        let (_, msg) = status::last();
        // SAFETY: the caller's contract.
        unsafe { copy_out(&msg, buf, len) }
    })
}

/// The code of the calling thread's last error (`PAGEALLOC_OK` if none yet).
/// Thread safety: safe from any thread; each thread has its own last error.
#[no_mangle]
pub extern "C" fn pagealloc_last_error() -> pagealloc_status {
    guard("pagealloc_last_error", PAGEALLOC_ERR_PANIC, || status::last().0)
}

/// The name of a status code ("PAGEALLOC_ERR_DOUBLE_FREE"), a static string;
/// "(not a pagealloc status)" for other values.
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn pagealloc_status_name(code: i32) -> *const c_char {
    status::name(code).as_ptr()
}
