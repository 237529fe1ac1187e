// A second `Pages` handle of a block another handle owns: two `&mut`
// over the same bytes.
use pagealloc::{Config, Gfp, PageAllocator, Pages};

fn main() {
    let a = PageAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let mut p = a.alloc(Gfp::KERNEL, 0).unwrap();
    let mut q = Pages::from_owned(&a, p.pfn(), 0);
    let (x, y) = (p.as_mut_slice().unwrap(), q.as_mut_slice().unwrap());
    x[0] = y[0];
}
