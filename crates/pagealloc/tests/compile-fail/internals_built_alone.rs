// A memory map, a zone or a per-CPU list built outside the core, to be
// driven by hand: their constructors are the core's own.
use pagealloc_core::memmap::MemMap;
use pagealloc_core::pcp::PcpSet;
use pagealloc_core::types::{ZoneIdx, ZoneType};
use pagealloc_core::zone::Zone;
use pagealloc_core::{Backing, Config};

fn main() {
    let blocks: std::sync::Arc<[std::sync::atomic::AtomicU16]> = Vec::new().into();
    let mm = MemMap::new_in(512, Backing::Anonymous, blocks.clone(), None).unwrap();
    mm.zero_frames(0, pagealloc_core::types::Order::ZERO);
    let z = Zone::new(ZoneIdx::FIRST, 0, ZoneType::Normal, 0, 512, &blocks);
    let _ = PcpSet::new(&[z], 1, &Config::new(), 1);
}
