//! The /proc snapshots of a capture, read back: free blocks per zone,
//! migratetype and order (`/proc/pagetypeinfo`), pageblocks per type, and
//! each zone's managed pages, min watermark and pfn span (`/proc/zoneinfo`).

use std::collections::BTreeMap;

/// The migratetypes pagetypeinfo prints that the replay seeds (HighAtomic,
/// CMA and Isolate blocks are seeded as Unmovable: a replay cannot ask for
/// them).
pub const TYPES: [&str; 3] = ["Unmovable", "Movable", "Reclaimable"];

/// One zone of the snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Zone {
    /// `DMA`, `DMA32`, `Normal`, ...
    pub name: String,
    /// Free blocks per type index ([`TYPES`]) and order (capped counts as printed).
    pub free: [[u64; 11]; 3],
    /// Pageblocks per type index.
    pub blocks: [u64; 3],
    /// `managed` pages (zoneinfo).
    pub managed: u64,
    /// The `min` watermark in pages (zoneinfo).
    pub min: u64,
    /// First pfn and pages spanned (zoneinfo).
    pub start_pfn: u64,
    /// Pages spanned.
    pub spanned: u64,
}

impl Zone {
    /// Free pages per order, all types.
    pub fn free_pages(&self) -> [u64; 11] {
        let mut v = [0; 11];
        for t in &self.free {
            for (o, n) in t.iter().enumerate() {
                v[o] += n << o;
            }
        }
        v
    }
}

/// The type index of a pagetypeinfo type name.
fn type_index(name: &str) -> usize {
    TYPES.iter().position(|t| *t == name).unwrap_or(0)
}

/// `Node 0, zone   Normal` -> `Normal`.
fn zone_name(s: &str) -> Option<&str> {
    let rest = s.split_once("zone")?.1;
    rest.split(|c: char| c == ',' || c.is_whitespace()).find(|n| !n.is_empty())
}

/// Zones from the three snapshot files (any of them may be missing).
pub fn zones(pagetypeinfo: &str, zoneinfo: &str) -> Vec<Zone> {
    let mut zs = Zones::default();
    let mut block_types: Vec<usize> = Vec::new();
    for l in pagetypeinfo.lines() {
        if let Some(rest) = l.strip_prefix("Number of blocks type") {
            block_types = rest.split_whitespace().map(type_index).collect();
        } else if let (Some(z), Some((_, after))) = (zone_name(l), l.split_once(", type")) {
            let mut w = after.split_whitespace();
            let ti = type_index(w.next().unwrap_or(""));
            let counts = w.filter_map(|x| x.trim_start_matches('>').parse::<u64>().ok());
            let zone = zs.get(z);
            for (o, n) in counts.take(11).enumerate() {
                zone.free[ti][o] += n;
            }
        } else if let (Some(z), false) = (zone_name(l), block_types.is_empty()) {
            // "Node 0, zone Normal 166 2451 ...": the node is "0," and does not parse.
            let nums: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            let zone = zs.get(z);
            for (&ti, n) in block_types.iter().zip(nums) {
                zone.blocks[ti] += n;
            }
        }
    }
    let mut cur: Option<String> = None;
    for l in zoneinfo.lines() {
        if l.starts_with("Node") {
            cur = zone_name(l).map(str::to_string);
            continue;
        }
        let Some(z) = cur.as_deref() else { continue };
        let w: Vec<&str> = l.split_whitespace().collect();
        let val = || w.get(1).and_then(|v| v.parse::<u64>().ok());
        match w.first().copied() {
            Some("min") => zs.get(z).min = val().unwrap_or(0),
            Some("managed") => zs.get(z).managed = val().unwrap_or(0),
            Some("spanned") => zs.get(z).spanned = val().unwrap_or(0),
            Some("start_pfn:") => zs.get(z).start_pfn = val().unwrap_or(0),
            _ => {}
        }
    }
    let Zones { mut map, order } = zs;
    order.into_iter().filter_map(|n| map.remove(&n)).collect()
}

/// Zones by name, in the order first seen.
#[derive(Default)]
struct Zones {
    map: BTreeMap<String, Zone>,
    order: Vec<String>,
}

impl Zones {
    fn get(&mut self, n: &str) -> &mut Zone {
        if !self.order.iter().any(|o| o == n) {
            self.order.push(n.to_string());
        }
        self.map.entry(n.to_string()).or_insert_with(|| Zone { name: n.to_string(), ..Zone::default() })
    }
}
