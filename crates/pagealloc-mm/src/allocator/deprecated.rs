//! The calls that moved to `PageAllocator`'s sub-handles (see `handles`),
//! kept as deprecated forwarders for one release (CHANGELOG, 0.2.0).

#![allow(missing_docs)]

use super::PageAllocator;
use crate::stats::events::VmEvent;
use crate::stats::{BuddyInfo, PageTypeInfo, PcpReport, PcpStat, Snapshot, VmStat, ZoneInfo};
use crate::*;
use pagealloc_core::types::Pfn;
use std::sync::Arc;
use std::time::Duration;

#[allow(missing_docs)]
impl PageAllocator {
    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page(..)`")]
    #[doc(hidden)]
    pub fn lock_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().lock_page(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().trylock_page(..)`")]
    #[doc(hidden)]
    pub fn trylock_page(&self, pfn: Pfn) -> bool {
        self.page_locks().trylock_page(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().unlock_page(..)`")]
    #[doc(hidden)]
    pub fn unlock_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().unlock_page(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().unlock_page_uptodate(..)`")]
    #[doc(hidden)]
    pub fn unlock_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().unlock_page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page_timeout(..)`")]
    #[doc(hidden)]
    pub fn lock_page_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_locks().lock_page_timeout(pfn, timeout)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page_cancellable(..)`")]
    #[doc(hidden)]
    pub fn lock_page_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_locks().lock_page_cancellable(pfn, cancel)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page_guard(..)`")]
    #[doc(hidden)]
    pub fn lock_page_guard(&self, pfn: Pfn) -> Result<PageLockGuard<'_>, PageStateError> {
        self.page_locks().lock_page_guard(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().trylock_page_guard(..)`")]
    #[doc(hidden)]
    pub fn trylock_page_guard(&self, pfn: Pfn) -> Result<Option<PageLockGuard<'_>>, PageStateError> {
        self.page_locks().trylock_page_guard(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_locked(..)`")]
    #[doc(hidden)]
    pub fn wait_on_page_locked(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().wait_on_page_locked(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_locked_timeout(..)`")]
    #[doc(hidden)]
    pub fn wait_on_page_locked_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_locked_timeout(pfn, timeout)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_locked_cancellable(..)`")]
    #[doc(hidden)]
    pub fn wait_on_page_locked_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_locked_cancellable(pfn, cancel)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().set_page_writeback(..)`")]
    #[doc(hidden)]
    pub fn set_page_writeback(&self, pfn: Pfn) -> Result<bool, PageStateError> {
        self.page_locks().set_page_writeback(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().end_page_writeback(..)`")]
    #[doc(hidden)]
    pub fn end_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().end_page_writeback(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_writeback(..)`")]
    #[doc(hidden)]
    pub fn wait_on_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().wait_on_page_writeback(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_writeback_timeout(..)`")]
    #[doc(hidden)]
    pub fn wait_on_page_writeback_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_writeback_timeout(pfn, timeout)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_writeback_cancellable(..)`")]
    #[doc(hidden)]
    pub fn wait_on_page_writeback_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_writeback_cancellable(pfn, cancel)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().set_page_uptodate(..)`")]
    #[doc(hidden)]
    pub fn set_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().set_page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().clear_page_uptodate(..)`")]
    #[doc(hidden)]
    pub fn clear_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().clear_page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_uptodate(..)`")]
    #[doc(hidden)]
    pub fn page_uptodate(&self, pfn: Pfn) -> bool {
        self.page_locks().page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_locked_racy(..)`")]
    #[doc(hidden)]
    pub fn page_locked_racy(&self, pfn: Pfn) -> bool {
        self.page_locks().page_locked_racy(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_owned_racy(..)`")]
    #[doc(hidden)]
    pub fn page_owned_racy(&self, pfn: Pfn) -> bool {
        self.page_locks().page_owned_racy(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_writeback_racy(..)`")]
    #[doc(hidden)]
    pub fn page_writeback_racy(&self, pfn: Pfn) -> bool {
        self.page_locks().page_writeback_racy(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_wait_bucket(..)`")]
    #[doc(hidden)]
    pub fn page_wait_bucket(&self, pfn: Pfn) -> Option<usize> {
        self.page_locks().page_wait_bucket(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().isolate_range(..)`")]
    #[doc(hidden)]
    pub fn isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.contig().isolate_range(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().undo_isolate_range(..)`")]
    #[doc(hidden)]
    pub fn undo_isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.contig().undo_isolate_range(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().test_pages_isolated(..)`")]
    #[doc(hidden)]
    pub fn test_pages_isolated(&self, start: Pfn, nr_pages: u64) -> bool {
        self.contig().test_pages_isolated(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().alloc_contig_pages(..)`")]
    #[doc(hidden)]
    pub fn alloc_contig_pages(&self, nr_pages: u64, gfp: Gfp) -> Result<Pfn, AllocError> {
        self.contig().alloc_contig_pages(nr_pages, gfp)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().free_contig_range(..)`")]
    #[doc(hidden)]
    pub fn free_contig_range(&self, start: Pfn, nr_pages: u64) -> Result<(), FreeError> {
        self.contig().free_contig_range(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().alloc_contig_range(..)`")]
    #[doc(hidden)]
    pub fn alloc_contig_range(&self, start: Pfn, nr_pages: u64, gfp: Gfp) -> Result<(), AllocError> {
        self.contig().alloc_contig_range(start, nr_pages, gfp)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().register_movable_ops(..)`")]
    #[doc(hidden)]
    pub fn register_movable_ops(&self, ops: Arc<dyn MovableOps>) -> MovableId {
        self.compaction().register_movable_ops(ops)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().fragmentation_score(..)`")]
    #[doc(hidden)]
    pub fn fragmentation_score(&self, nid: u32) -> Option<u64> {
        self.compaction().fragmentation_score(nid)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().fragmentation_score_wmarks(..)`")]
    #[doc(hidden)]
    pub fn fragmentation_score_wmarks(&self) -> (u64, u64) {
        self.compaction().fragmentation_score_wmarks()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().set_page_movable(..)`")]
    #[doc(hidden)]
    pub fn set_page_movable(&self, pfn: Pfn, id: MovableId) -> Result<(), PageStateError> {
        self.compaction().set_page_movable(pfn, id)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().clear_page_movable(..)`")]
    #[doc(hidden)]
    pub fn clear_page_movable(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.compaction().clear_page_movable(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().compact_memory(..)`")]
    #[doc(hidden)]
    pub fn compact_memory(&self) -> CompactOutcome {
        self.compaction().compact_memory()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().compact_zone(..)`")]
    #[doc(hidden)]
    pub fn compact_zone(&self, zone: usize, order: u32) -> Option<CompactOutcome> {
        self.compaction().compact_zone(zone, order)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().extfrag_index(..)`")]
    #[doc(hidden)]
    pub fn extfrag_index(&self) -> FragIndexReport {
        self.compaction().extfrag_index()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().unusable_index(..)`")]
    #[doc(hidden)]
    pub fn unusable_index(&self) -> FragIndexReport {
        self.compaction().unusable_index()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().mobility_census(..)`")]
    #[doc(hidden)]
    pub fn mobility_census(&self) -> MobilityCensus {
        self.compaction().mobility_census()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().report_free_pages_now(..)`")]
    #[doc(hidden)]
    pub fn report_free_pages_now(&self) -> ReportPass {
        self.reporting().report_free_pages_now()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().compact_and_report_now(..)`")]
    #[doc(hidden)]
    pub fn compact_and_report_now(&self) -> (bool, ReportPass) {
        self.reporting().compact_and_report_now()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().free_pages_below_pageblock(..)`")]
    #[doc(hidden)]
    pub fn free_pages_below_pageblock(&self) -> u64 {
        self.reporting().free_pages_below_pageblock()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().report_aged_free_pages(..)`")]
    #[doc(hidden)]
    pub fn report_aged_free_pages(&self) -> ReportPass {
        self.reporting().report_aged_free_pages()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().set_page_reporting(..)`")]
    #[doc(hidden)]
    pub fn set_page_reporting(&self, on: bool) -> bool {
        self.reporting().set_page_reporting(on)
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().tune_page_reporting(..)`")]
    #[doc(hidden)]
    pub fn tune_page_reporting(&self, order: u32, delay_ms: u64, batch: u32) -> Result<(), ConfigError> {
        self.reporting().tune_page_reporting(order, delay_ms, batch)
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().page_reporting_stats(..)`")]
    #[doc(hidden)]
    pub fn page_reporting_stats(&self) -> ReportingStats {
        self.reporting().page_reporting_stats()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().residency(..)`")]
    #[doc(hidden)]
    pub fn residency(&self) -> Vec<ZoneResidency> {
        self.reporting().residency()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().inject_report_errors(..)`")]
    #[doc(hidden)]
    pub fn inject_report_errors(&self, n: u32) {
        self.reporting().inject_report_errors(n)
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().snapshot(..)`")]
    #[doc(hidden)]
    pub fn snapshot(&self) -> Snapshot {
        self.stats().snapshot()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().snapshot_consistent(..)`")]
    #[doc(hidden)]
    pub fn snapshot_consistent(&self) -> Snapshot {
        self.stats().snapshot_consistent()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().buddyinfo(..)`")]
    #[doc(hidden)]
    pub fn buddyinfo(&self) -> BuddyInfo {
        self.stats().buddyinfo()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().pagetypeinfo(..)`")]
    #[doc(hidden)]
    pub fn pagetypeinfo(&self) -> PageTypeInfo {
        self.stats().pagetypeinfo()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().zoneinfo(..)`")]
    #[doc(hidden)]
    pub fn zoneinfo(&self) -> ZoneInfo {
        self.stats().zoneinfo()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().vmstat(..)`")]
    #[doc(hidden)]
    pub fn vmstat(&self) -> VmStat {
        self.stats().vmstat()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().pcpstat(..)`")]
    #[doc(hidden)]
    pub fn pcpstat(&self) -> PcpStat {
        self.stats().pcpstat()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().lockstat(..)`")]
    #[doc(hidden)]
    pub fn lockstat(&self) -> pagealloc_core::lockstat::LockStatReport {
        self.stats().lockstat()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().set_lock_stats(..)`")]
    #[doc(hidden)]
    pub fn set_lock_stats(&self, on: bool) {
        self.stats().set_lock_stats(on)
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().event_count(..)`")]
    #[doc(hidden)]
    pub fn event_count(&self, ev: VmEvent) -> u64 {
        self.stats().event_count(ev)
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().pcp_report(..)`")]
    #[doc(hidden)]
    pub fn pcp_report(&self) -> Vec<PcpReport> {
        self.stats().pcp_report()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().fragmentation(..)`")]
    #[doc(hidden)]
    pub fn fragmentation(&self) -> Fragmentation {
        self.stats().fragmentation()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().dirtyable_pages(..)`")]
    #[doc(hidden)]
    pub fn dirtyable_pages(&self) -> u64 {
        self.reclaim().dirtyable_pages()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().dirty_thresholds(..)`")]
    #[doc(hidden)]
    pub fn dirty_thresholds(&self) -> DirtyThresholds {
        self.reclaim().dirty_thresholds()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().dirty_ratios(..)`")]
    #[doc(hidden)]
    pub fn dirty_ratios(&self) -> (u32, u32) {
        self.reclaim().dirty_ratios()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().set_dirty_ratios(..)`")]
    #[doc(hidden)]
    pub fn set_dirty_ratios(&self, background: u32, ratio: u32) -> Result<(), ConfigError> {
        self.reclaim().set_dirty_ratios(background, ratio)
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().lru_add_drain(..)`")]
    #[doc(hidden)]
    pub fn lru_add_drain(&self) {
        self.reclaim().lru_add_drain()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().lru_add_drain_all(..)`")]
    #[doc(hidden)]
    pub fn lru_add_drain_all(&self) {
        self.reclaim().lru_add_drain_all()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().register_shrinker(..)`")]
    #[doc(hidden)]
    pub fn register_shrinker(&self, s: Arc<dyn Shrinker>) -> u64 {
        self.reclaim().register_shrinker(s)
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().unregister_shrinker(..)`")]
    #[doc(hidden)]
    pub fn unregister_shrinker(&self, id: u64) -> bool {
        self.reclaim().unregister_shrinker(id)
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().lru_sizes(..)`")]
    #[doc(hidden)]
    pub fn lru_sizes(&self, nid: u32) -> (u64, u64) {
        self.reclaim().lru_sizes(nid)
    }
}
