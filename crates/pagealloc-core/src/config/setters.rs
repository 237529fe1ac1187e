//! The setters of [`Config`]: one per setting, named as its field of
//! [`ConfigValues`], the only way to change a setting.

#[allow(unused_imports)] // named by the setters' doc links
use super::ConfigValues;
#[cfg(feature = "seed-variants")]
use super::DrainMode;
use super::{Backing, Config, ReportCallback};
#[allow(unused_imports)]
use crate::prelude::*;
use crate::types::Pfn;

macro_rules! setters {
    ($($(#[$m:meta])* $name:ident : $t:ty),* $(,)?) => {
        impl Config {
            $(
                $(#[$m])*
                #[must_use]
                pub fn $name(mut self, v: $t) -> Self {
                    self.v.$name = v;
                    self
                }
            )*
        }
    };
}

setters! {
    /// Set [`ConfigValues::arena_bytes`].
    arena_bytes: u64,
    /// Set [`ConfigValues::nodes`].
    nodes: u32,
    /// Set [`ConfigValues::movable_zone_bytes`].
    movable_zone_bytes: u64,
    /// Set [`ConfigValues::backing`].
    backing: Backing,
    /// Set [`ConfigValues::holes`].
    holes: Vec<(Pfn, u64)>,
    /// Set [`ConfigValues::min_free_kbytes`].
    min_free_kbytes: Option<u64>,
    /// Set [`ConfigValues::watermark_scale_factor`].
    watermark_scale_factor: u32,
    /// Set [`ConfigValues::lowmem_reserve_ratio`].
    lowmem_reserve_ratio: u32,
    /// Set [`ConfigValues::nr_cpus`].
    nr_cpus: Option<usize>,
    /// Set [`ConfigValues::percpu_pagelist_high_fraction`].
    percpu_pagelist_high_fraction: u32,
    /// Set [`ConfigValues::depot_fraction`].
    depot_fraction: u32,
    /// Set [`ConfigValues::pcp_batch`].
    pcp_batch: Option<u32>,
    /// Set [`ConfigValues::pcp_lists`].
    pcp_lists: bool,
    /// Set [`ConfigValues::front_cache`].
    front_cache: bool,
    /// Set [`ConfigValues::page_lock_unfairness`].
    page_lock_unfairness: u32,
    /// Set [`ConfigValues::page_reporting`].
    page_reporting: bool,
    /// Set [`ConfigValues::page_reporting_order`].
    page_reporting_order: Option<u32>,
    /// Set [`ConfigValues::page_reporting_delay_ms`].
    page_reporting_delay_ms: u64,
    /// Set [`ConfigValues::page_reporting_batch`].
    page_reporting_batch: u32,
    /// Set [`ConfigValues::page_reporting_madv_free`].
    page_reporting_madv_free: bool,
    /// Set [`ConfigValues::page_reporting_callback`].
    page_reporting_callback: Option<ReportCallback>,
    /// Set [`ConfigValues::init_on_alloc`].
    init_on_alloc: bool,
    /// Set [`ConfigValues::extfrag_threshold`].
    extfrag_threshold: u32,
    /// Set [`ConfigValues::lock_stats`].
    lock_stats: bool,
    /// Set [`ConfigValues::page_reporting_compact`].
    page_reporting_compact: bool,
    /// Set [`ConfigValues::init_on_free`].
    init_on_free: bool,
    /// Set [`ConfigValues::compaction_proactiveness`].
    compaction_proactiveness: u32,
    /// Set [`ConfigValues::page_group_by_mobility_disabled`].
    page_group_by_mobility_disabled: bool,
    /// Set [`ConfigValues::hugepage_filler`].
    hugepage_filler: bool,
    /// Set [`ConfigValues::prefetch_on_alloc`].
    prefetch_on_alloc: bool,
}

#[cfg(feature = "seed-variants")]
setters! {
    /// Set [`ConfigValues::drain_mode`].
    drain_mode: DrainMode,
    /// Set [`ConfigValues::pcp_migratetype_cache`].
    pcp_migratetype_cache: bool,
    /// Set [`ConfigValues::page_lock_waiters_bit`].
    page_lock_waiters_bit: bool,
    /// Set [`ConfigValues::pagetypeinfo_walk_lists`].
    pagetypeinfo_walk_lists: bool,
}
