//! The gfp flags and the fixed numbers of the ABI (the hole, the largest
//! order, the page size), each asserted equal to the Rust library's value so
//! that a change there cannot silently change what C sees.

use ::pagealloc::Gfp;

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
