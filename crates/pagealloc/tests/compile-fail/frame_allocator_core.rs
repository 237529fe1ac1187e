// The core behind a FrameAllocator: the door is `unsafe`.
use pagealloc_core::{Config, FrameAllocator, Gfp};

fn main() {
    let f = FrameAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap();
    let p = f.alloc(Gfp::KERNEL, 0).unwrap();
    let core = f.core();
    core.mm.page(p.as_u64()).set_flags(0);
}
