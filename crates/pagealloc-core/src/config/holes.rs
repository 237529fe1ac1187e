//! [`super::Config::holes`] checked (see the `hotplug` module for what holes are).

use crate::error::ConfigError;
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::Pfn;
use core::ops::Range;

/// Most [`super::Config::holes`] a configuration may have: each is walked
/// at construction and at every addition, so the bound keeps both cheap.
pub const MAX_HOLES: usize = 4096;

/// `holes` checked against an arena of `pages`, as sorted pfn ranges.
pub(crate) fn validate_holes(holes: &[(Pfn, u64)], pages: u64) -> Result<Vec<Range<u64>>, ConfigError> {
    let bad = |why: String| Err(ConfigError::Invalid { field: "holes", why });
    if holes.len() > MAX_HOLES {
        return bad(format!("{} ranges, more than {MAX_HOLES}", holes.len()));
    }
    let mut sorted = Vec::with_capacity(holes.len());
    for &(start, n) in holes {
        let s = start.as_u64();
        match s.checked_add(n) {
            Some(end) if n > 0 && end <= pages => sorted.push(s..end),
            _ => return bad(format!("{n} pages at pfn {s} is empty or outside the arena's pfns 0..{pages}")),
        }
    }
    sorted.sort_by_key(|r| r.start);
    for (i, r) in sorted.iter().enumerate() {
        if i > 0 && sorted[i - 1].end > r.start {
            return bad(format!("{:?} and {r:?} overlap", sorted[i - 1]));
        }
    }
    Ok(sorted)
}
