//! Parsers of the kernel's /proc formats, written from its format strings
//! (fixed-width columns; any byte out of place fails).

use super::*;

// ------------------------------------------------------------------ parsers

/// A cursor over one line that takes fixed-width columns.
pub(super) struct Cols<'a> {
    line: &'a str,
    pos: usize,
}

impl<'a> Cols<'a> {
    fn new(line: &'a str) -> Self {
        Self { line, pos: 0 }
    }
    fn lit(&mut self, s: &str) {
        assert!(self.line[self.pos..].starts_with(s), "expected {s:?} at column {} of {:?}", self.pos, self.line);
        self.pos += s.len();
    }
    /// A `%Nd`/`%Ns` column: exactly `w` bytes (or more when the value is wider,
    /// as printf does), right aligned; returns the trimmed text.
    fn right(&mut self, w: usize) -> &'a str {
        let rest = &self.line[self.pos..];
        let lead = rest.bytes().take_while(|&b| b == b' ').count();
        let body = rest[lead..].bytes().take_while(|&b| b != b' ' && b != b',').count();
        assert!(lead + body >= w, "column narrower than {w} at {} of {:?}", self.pos, self.line);
        assert!(lead == 0 || lead + body == w, "column wider than {w} with padding at {} of {:?}", self.pos, self.line);
        self.pos += lead + body;
        &rest[lead..lead + body]
    }
    /// A `%-Ns` column: text padded on the right to `w` bytes.
    fn left(&mut self, w: usize) -> &'a str {
        let rest = &self.line[self.pos..];
        assert!(rest.len() >= w, "short line {:?}", self.line);
        let s = &rest[..w];
        self.pos += w;
        s.trim_end()
    }
    /// A `%d` column: digits up to the next non-digit.
    fn num(&mut self) -> u64 {
        let rest = &self.line[self.pos..];
        let n = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        assert!(n > 0, "expected a number at {} of {:?}", self.pos, self.line);
        self.pos += n;
        rest[..n].parse().unwrap()
    }
    fn end(&self) {
        assert_eq!(self.pos, self.line.len(), "trailing bytes in {:?}", self.line);
    }
}

pub(super) fn u(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// /proc/buddyinfo: `Node %d, zone %8s ` then `%6lu ` per order.
pub(super) fn parse_buddyinfo(text: &str) -> Vec<(u64, String, Vec<u64>)> {
    assert!(text.ends_with('\n'));
    text.lines()
        .map(|l| {
            let mut c = Cols::new(l);
            c.lit("Node ");
            let nid = c.num();
            c.lit(", zone ");
            let zone = c.right(8).to_string();
            c.lit(" ");
            let mut v = Vec::new();
            for _ in 0..NR_ORDERS {
                v.push(u(c.right(6)));
                c.lit(" ");
            }
            c.end();
            (nid, zone, v)
        })
        .collect()
}

/// One zone of a parsed pagetypeinfo: counts per type and order (with the
/// overflow mark), and block counts per type.
#[derive(Debug, Default)]
pub(super) struct PtZone {
    pub(super) nid: u64,
    pub(super) zone: String,
    pub(super) free: Vec<Vec<(bool, u64)>>,
    pub(super) blocks: Vec<u64>,
}

pub(super) const TYPE_NAMES: [&str; MIGRATE_TYPES] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

/// /proc/pagetypeinfo, node after node.
pub(super) fn parse_pagetypeinfo(text: &str, zones_per_node: usize) -> Vec<PtZone> {
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < lines.len() {
        assert_eq!(lines[i], "Page block order: 9");
        assert_eq!(lines[i + 1], "Pages per block:  512");
        assert_eq!(lines[i + 2], "");
        let mut c = Cols::new(lines[i + 3]);
        assert_eq!(c.left(43), "Free pages count per migrate type at order");
        c.lit(" ");
        for o in 0..NR_ORDERS {
            assert_eq!(u(c.right(6)), o as u64);
            c.lit(" ");
        }
        c.end();
        i += 4;
        let first = out.len();
        for _ in 0..zones_per_node {
            let mut z = PtZone::default();
            for name in TYPE_NAMES {
                let mut c = Cols::new(lines[i]);
                c.lit("Node ");
                let nid = u(c.right(4));
                c.lit(", zone ");
                let zone = c.right(8).to_string();
                c.lit(", type ");
                assert_eq!(c.right(12), name);
                c.lit(" ");
                let mut row = Vec::new();
                for _ in 0..NR_ORDERS {
                    let over = c.line[c.pos..].starts_with('>');
                    if over {
                        c.lit(">");
                    }
                    row.push((over, u(c.right(6))));
                    c.lit(" ");
                }
                c.end();
                z.nid = nid;
                z.zone = zone;
                z.free.push(row);
                i += 1;
            }
            out.push(z);
        }
        assert_eq!(lines[i], "");
        let mut c = Cols::new(lines[i + 1]);
        assert_eq!(c.left(23), "Number of blocks type");
        for name in TYPE_NAMES {
            assert_eq!(c.right(12), name);
            c.lit(" ");
        }
        c.end();
        i += 2;
        for z in &mut out[first..] {
            let mut c = Cols::new(lines[i]);
            c.lit("Node ");
            assert_eq!(c.num(), z.nid);
            c.lit(", zone ");
            assert_eq!(c.right(8), z.zone);
            c.lit(" ");
            for _ in TYPE_NAMES {
                z.blocks.push(u(c.right(12)));
                c.lit(" ");
            }
            c.end();
            i += 1;
        }
    }
    out
}

/// /proc/zoneinfo: per zone the named values, and per CPU (count, high, batch).
#[derive(Debug, Default)]
pub(super) struct ZiZone {
    pub(super) nid: u64,
    pub(super) zone: String,
    pub(super) vals: std::collections::BTreeMap<String, u64>,
    pub(super) protection: Vec<u64>,
    pub(super) cpus: Vec<(u64, u64, u64, u64)>,
}

pub(super) fn parse_zoneinfo(text: &str) -> Vec<ZiZone> {
    assert!(text.ends_with('\n'));
    let mut out: Vec<ZiZone> = Vec::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("Node ") {
            let mut c = Cols::new(rest);
            let nid = c.num();
            c.lit(", zone ");
            let zone = c.right(8).to_string();
            c.end();
            out.push(ZiZone { nid, zone, ..Default::default() });
            continue;
        }
        let z = out.last_mut().expect("zone header first");
        if let Some(v) = l.strip_prefix("  pages free     ") {
            z.vals.insert("free".into(), u(v));
        } else if let Some(v) = l.strip_prefix("        protection: (") {
            let v = v.strip_suffix(')').unwrap();
            z.protection = v.split(", ").map(u).collect();
        } else if l.starts_with("        ") && !l.starts_with("         ") {
            let mut c = Cols::new(&l[8..]);
            let k = c.left(8).to_string();
            c.lit(" ");
            z.vals.insert(k, c.num());
            c.end();
        } else if l.starts_with("      ") && !l.starts_with("       ") {
            let mut c = Cols::new(&l[6..]);
            let name_len = l[6..].find(' ').unwrap().max(12);
            let k = c.left(name_len).to_string();
            c.lit(" ");
            z.vals.insert(k, c.num());
            c.end();
        } else if l == "  pagesets" || l == "  per-node stats" {
        } else if let Some(v) = l.strip_prefix("    cpu: ") {
            z.cpus.push((u(v), 0, 0, 0));
        } else if let Some(v) = l.strip_prefix("              count:    ") {
            z.cpus.last_mut().unwrap().1 = u(v);
        } else if let Some(v) = l.strip_prefix("              high:     ") {
            z.cpus.last_mut().unwrap().2 = u(v);
        } else if let Some(v) = l.strip_prefix("              batch:    ") {
            z.cpus.last_mut().unwrap().3 = u(v);
        } else if l.starts_with("              high_min: ")
            || l.starts_with("              high_max: ")
            || l.starts_with("  vm stats threshold: ")
        {
        } else if let Some(v) = l.strip_prefix("  node_unreclaimable:  ") {
            u(v);
        } else if let Some(v) = l.strip_prefix("  start_pfn:           ") {
            z.vals.insert("start_pfn".into(), u(v));
        } else {
            panic!("unexpected zoneinfo line {l:?}");
        }
    }
    out
}

/// /proc/vmstat: `name value`.
pub(super) fn parse_vmstat(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            assert!(!k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            (k.to_string(), u(v))
        })
        .collect()
}
