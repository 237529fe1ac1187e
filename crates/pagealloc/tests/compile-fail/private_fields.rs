// The handles' fields: the allocator behind a handle, a block's pfn, a
// page cache's insides.
use pagealloc::{Config, Gfp, PageAllocator, PageCache, PageCacheConfig};
use std::sync::Arc;

fn main() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let mut p = a.alloc(Gfp::KERNEL, 0).unwrap();
    p.pfn = pagealloc::Pfn::new(0);
    let _ = &a.core;
    let c = PageCache::new(Arc::new(a.clone()), PageCacheConfig::default()).unwrap();
    let _ = &c.inner;
}
