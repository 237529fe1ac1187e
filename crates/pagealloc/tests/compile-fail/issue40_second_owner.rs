// The program of issue 40: through the façade's once-public fields it
// cleared a page's OWNED bit, freed the page raw and allocated it again
// while its `Pages` handle lived: two owners of one frame.
use pagealloc::{Config, Gfp, PageAllocator};

fn main() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let p = a.alloc(Gfp::KERNEL, 0).unwrap();
    let d = a.core.core.mm.page(p.pfn().as_u64());
    d.set_flags(d.flags() & !(1 << 11));
    a.free_pages(p.pfn(), 0).unwrap();
    let _q = a.alloc(Gfp::KERNEL, 0).unwrap();
}
