// Compaction's paths run on a host that dereferences to a core; a core
// comes only through the `unsafe` door.
use pagealloc_compaction::movable::Mobility;
use pagealloc_compaction::{Compaction, CompactionHost};
use pagealloc_core::page_alloc::Core;
use pagealloc_core::{Config, FrameAllocator};

struct Host(FrameAllocator, Mobility);

impl std::ops::Deref for Host {
    type Target = Core;
    fn deref(&self) -> &Core {
        self.0.core()
    }
}

impl CompactionHost for Host {
    fn mobility(&self) -> &Mobility {
        &self.1
    }
    fn lru_add_drain_all(&self) {}
}

fn main() {
    let h = Host(FrameAllocator::new(Config::new().arena_bytes(8 << 20)).unwrap(), Mobility::new(8, 1));
    Compaction::new(&h).compact_memory(&mut Default::default());
}
