//! Dirty limits on [`PageAllocator`] (the settings and rules are
//! `vmscan::dirty`'s, the flusher and the throttling `pagecache::writeback`'s).

use super::handles::Reclaim;
use super::PageAllocator;
use crate::mm::vmscan::dirty::DirtyThresholds;
use pagealloc_core::error::ConfigError;

impl PageAllocator {
    /// Recompute the thresholds and cache them for writers and the flusher.
    pub(crate) fn refresh_dirty_thresholds(&self) -> DirtyThresholds {
        self.core.vmscan.dirty.refresh(self.reclaim().dirtyable_pages())
    }
}

impl<'a> Reclaim<'a> {
    /// Memory the page cache can use now (pages, racy): free pages plus the
    /// file LRU lists' pages, less every zone's high watermark and largest
    /// lowmem reserve (the kernel's `global_dirtyable_memory`).
    #[must_use]
    pub fn dirtyable_pages(&self) -> u64 {
        let c = &self.a.core;
        let free = c.nr_free_pages();
        let file: u64 = (0..c.nodes.len()).map(|n| c.vmscan.lru_sizes(n)).map(|(i, a)| i + a).sum();
        let reserve: u64 = c
            .zones
            .iter()
            .map(|z| {
                z.wmark[pagealloc_core::zone::Wmark::High as usize]
                    + z.lowmem_reserve.iter().copied().max().unwrap_or(0)
            })
            .sum();
        (free + file).saturating_sub(reserve)
    }

    /// The dirty thresholds now (`nr_dirty_threshold` and
    /// `nr_dirty_background_threshold` in [`crate::Stats::vmstat`]).
    #[must_use]
    pub fn dirty_thresholds(&self) -> DirtyThresholds {
        let (b, r) = self.a.core.vmscan.dirty.ratios();
        DirtyThresholds::compute(self.dirtyable_pages(), b, r)
    }

    /// (`dirty_background_ratio`, `dirty_ratio`) now, in percent.
    #[must_use]
    pub fn dirty_ratios(&self) -> (u32, u32) {
        self.a.core.vmscan.dirty.ratios()
    }

    /// Set `dirty_background_ratio` and `dirty_ratio` (percent of
    /// [`Reclaim::dirtyable_pages`]) at run time; the next writer or
    /// flusher pass uses them.
    ///
    /// # Errors
    /// `ConfigError::Invalid` naming the field if `background` is over 100
    /// or `ratio` is not in 1..=100; nothing changes then.
    pub fn set_dirty_ratios(&self, background: u32, ratio: u32) -> Result<(), ConfigError> {
        self.a.core.vmscan.dirty.set_ratios(background, ratio)?;
        self.a.refresh_dirty_thresholds();
        Ok(())
    }
}
