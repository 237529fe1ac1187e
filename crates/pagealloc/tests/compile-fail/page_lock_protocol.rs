// The page-lock protocol of any page, the page cache's guard-locked pages
// included: the public calls refuse reference-counted pages, these did not.
use pagealloc::{Config, Gfp, PageAllocator};

fn main() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let p = a.alloc_pages(Gfp::KERNEL, 0).unwrap();
    let r = a.cache_page_ref(p).unwrap();
    r.unlock().unwrap();
    let _ = a.page_ref(p);
}
