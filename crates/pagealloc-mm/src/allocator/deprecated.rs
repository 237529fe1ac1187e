//! The calls that moved to `PageAllocator`'s sub-handles (see `handles`),
//! kept as deprecated forwarders for one release (CHANGELOG, 0.2.0).

use super::PageAllocator;
use crate::stats::events::VmEvent;
use crate::stats::{BuddyInfo, PageTypeInfo, PcpReport, PcpStat, Snapshot, VmStat, ZoneInfo};
use crate::*;
use pagealloc_core::types::Pfn;
use std::sync::Arc;
use std::time::Duration;

/// The calls of 0.1.0 that moved to sub-handles; each forwards there.
#[allow(missing_docs)]
impl PageAllocator {
    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page(..)`")]
    pub fn lock_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().lock_page(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().trylock_page(..)`")]
    pub fn trylock_page(&self, pfn: Pfn) -> bool {
        self.page_locks().trylock_page(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().unlock_page(..)`")]
    pub fn unlock_page(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().unlock_page(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().unlock_page_uptodate(..)`")]
    pub fn unlock_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().unlock_page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page_timeout(..)`")]
    pub fn lock_page_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_locks().lock_page_timeout(pfn, timeout)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page_cancellable(..)`")]
    pub fn lock_page_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_locks().lock_page_cancellable(pfn, cancel)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().lock_page_guard(..)`")]
    pub fn lock_page_guard(&self, pfn: Pfn) -> Result<PageLockGuard<'_>, PageStateError> {
        self.page_locks().lock_page_guard(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().trylock_page_guard(..)`")]
    pub fn trylock_page_guard(&self, pfn: Pfn) -> Result<Option<PageLockGuard<'_>>, PageStateError> {
        self.page_locks().trylock_page_guard(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_locked(..)`")]
    pub fn wait_on_page_locked(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().wait_on_page_locked(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_locked_timeout(..)`")]
    pub fn wait_on_page_locked_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_locked_timeout(pfn, timeout)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_locked_cancellable(..)`")]
    pub fn wait_on_page_locked_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_locked_cancellable(pfn, cancel)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().set_page_writeback(..)`")]
    pub fn set_page_writeback(&self, pfn: Pfn) -> Result<bool, PageStateError> {
        self.page_locks().set_page_writeback(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().end_page_writeback(..)`")]
    pub fn end_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().end_page_writeback(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_writeback(..)`")]
    pub fn wait_on_page_writeback(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().wait_on_page_writeback(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_writeback_timeout(..)`")]
    pub fn wait_on_page_writeback_timeout(&self, pfn: Pfn, timeout: Duration) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_writeback_timeout(pfn, timeout)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().wait_on_page_writeback_cancellable(..)`")]
    pub fn wait_on_page_writeback_cancellable(&self, pfn: Pfn, cancel: &CancelToken) -> Result<(), WaitError> {
        self.page_locks().wait_on_page_writeback_cancellable(pfn, cancel)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().set_page_uptodate(..)`")]
    pub fn set_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().set_page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().clear_page_uptodate(..)`")]
    pub fn clear_page_uptodate(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.page_locks().clear_page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_uptodate(..)`")]
    pub fn page_uptodate(&self, pfn: Pfn) -> bool {
        self.page_locks().page_uptodate(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_locked_racy(..)`")]
    pub fn page_locked_racy(&self, pfn: Pfn) -> bool {
        self.page_locks().page_locked_racy(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_owned_racy(..)`")]
    pub fn page_owned_racy(&self, pfn: Pfn) -> bool {
        self.page_locks().page_owned_racy(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_writeback_racy(..)`")]
    pub fn page_writeback_racy(&self, pfn: Pfn) -> bool {
        self.page_locks().page_writeback_racy(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.page_locks().page_wait_bucket(..)`")]
    pub fn page_wait_bucket(&self, pfn: Pfn) -> Option<usize> {
        self.page_locks().page_wait_bucket(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().isolate_range(..)`")]
    pub fn isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.contig().isolate_range(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().undo_isolate_range(..)`")]
    pub fn undo_isolate_range(&self, start: Pfn, nr_pages: u64) -> Result<(), PageStateError> {
        self.contig().undo_isolate_range(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().test_pages_isolated(..)`")]
    pub fn test_pages_isolated(&self, start: Pfn, nr_pages: u64) -> bool {
        self.contig().test_pages_isolated(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().alloc_contig_pages(..)`")]
    pub fn alloc_contig_pages(&self, nr_pages: u64, gfp: Gfp) -> Result<Pfn, AllocError> {
        self.contig().alloc_contig_pages(nr_pages, gfp)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().free_contig_range(..)`")]
    pub fn free_contig_range(&self, start: Pfn, nr_pages: u64) -> Result<(), FreeError> {
        self.contig().free_contig_range(start, nr_pages)
    }

    #[deprecated(since = "0.2.0", note = "use `.contig().alloc_contig_range(..)`")]
    pub fn alloc_contig_range(&self, start: Pfn, nr_pages: u64, gfp: Gfp) -> Result<(), AllocError> {
        self.contig().alloc_contig_range(start, nr_pages, gfp)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().register_movable_ops(..)`")]
    pub fn register_movable_ops(&self, ops: Arc<dyn MovableOps>) -> MovableId {
        self.compaction().register_movable_ops(ops)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().fragmentation_score(..)`")]
    pub fn fragmentation_score(&self, nid: u32) -> Option<u64> {
        self.compaction().fragmentation_score(nid)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().fragmentation_score_wmarks(..)`")]
    pub fn fragmentation_score_wmarks(&self) -> (u64, u64) {
        self.compaction().fragmentation_score_wmarks()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().set_page_movable(..)`")]
    pub fn set_page_movable(&self, pfn: Pfn, id: MovableId) -> Result<(), PageStateError> {
        self.compaction().set_page_movable(pfn, id)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().clear_page_movable(..)`")]
    pub fn clear_page_movable(&self, pfn: Pfn) -> Result<(), PageStateError> {
        self.compaction().clear_page_movable(pfn)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().compact_memory(..)`")]
    pub fn compact_memory(&self) -> CompactOutcome {
        self.compaction().compact_memory()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().compact_zone(..)`")]
    pub fn compact_zone(&self, zone: usize, order: u32) -> Option<CompactOutcome> {
        self.compaction().compact_zone(zone, order)
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().extfrag_index(..)`")]
    pub fn extfrag_index(&self) -> FragIndexReport {
        self.compaction().extfrag_index()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().unusable_index(..)`")]
    pub fn unusable_index(&self) -> FragIndexReport {
        self.compaction().unusable_index()
    }

    #[deprecated(since = "0.2.0", note = "use `.compaction().mobility_census(..)`")]
    pub fn mobility_census(&self) -> MobilityCensus {
        self.compaction().mobility_census()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().report_free_pages_now(..)`")]
    pub fn report_free_pages_now(&self) -> ReportPass {
        self.reporting().report_free_pages_now()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().compact_and_report_now(..)`")]
    pub fn compact_and_report_now(&self) -> (bool, ReportPass) {
        self.reporting().compact_and_report_now()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().free_pages_below_pageblock(..)`")]
    pub fn free_pages_below_pageblock(&self) -> u64 {
        self.reporting().free_pages_below_pageblock()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().report_aged_free_pages(..)`")]
    pub fn report_aged_free_pages(&self) -> ReportPass {
        self.reporting().report_aged_free_pages()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().set_page_reporting(..)`")]
    pub fn set_page_reporting(&self, on: bool) -> bool {
        self.reporting().set_page_reporting(on)
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().tune_page_reporting(..)`")]
    pub fn tune_page_reporting(&self, order: u32, delay_ms: u64, batch: u32) -> Result<(), ConfigError> {
        self.reporting().tune_page_reporting(order, delay_ms, batch)
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().page_reporting_stats(..)`")]
    pub fn page_reporting_stats(&self) -> ReportingStats {
        self.reporting().page_reporting_stats()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().residency(..)`")]
    pub fn residency(&self) -> Vec<ZoneResidency> {
        self.reporting().residency()
    }

    #[deprecated(since = "0.2.0", note = "use `.reporting().inject_report_errors(..)`")]
    pub fn inject_report_errors(&self, n: u32) {
        self.reporting().inject_report_errors(n)
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().snapshot(..)`")]
    pub fn snapshot(&self) -> Snapshot {
        self.stats().snapshot()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().snapshot_consistent(..)`")]
    pub fn snapshot_consistent(&self) -> Snapshot {
        self.stats().snapshot_consistent()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().buddyinfo(..)`")]
    pub fn buddyinfo(&self) -> BuddyInfo {
        self.stats().buddyinfo()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().pagetypeinfo(..)`")]
    pub fn pagetypeinfo(&self) -> PageTypeInfo {
        self.stats().pagetypeinfo()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().zoneinfo(..)`")]
    pub fn zoneinfo(&self) -> ZoneInfo {
        self.stats().zoneinfo()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().vmstat(..)`")]
    pub fn vmstat(&self) -> VmStat {
        self.stats().vmstat()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().pcpstat(..)`")]
    pub fn pcpstat(&self) -> PcpStat {
        self.stats().pcpstat()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().lockstat(..)`")]
    pub fn lockstat(&self) -> pagealloc_core::lockstat::LockStatReport {
        self.stats().lockstat()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().set_lock_stats(..)`")]
    pub fn set_lock_stats(&self, on: bool) {
        self.stats().set_lock_stats(on)
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().event_count(..)`")]
    pub fn event_count(&self, ev: VmEvent) -> u64 {
        self.stats().event_count(ev)
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().pcp_report(..)`")]
    pub fn pcp_report(&self) -> Vec<PcpReport> {
        self.stats().pcp_report()
    }

    #[deprecated(since = "0.2.0", note = "use `.stats().fragmentation(..)`")]
    pub fn fragmentation(&self) -> Fragmentation {
        self.stats().fragmentation()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().dirtyable_pages(..)`")]
    pub fn dirtyable_pages(&self) -> u64 {
        self.reclaim().dirtyable_pages()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().dirty_thresholds(..)`")]
    pub fn dirty_thresholds(&self) -> DirtyThresholds {
        self.reclaim().dirty_thresholds()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().dirty_ratios(..)`")]
    pub fn dirty_ratios(&self) -> (u32, u32) {
        self.reclaim().dirty_ratios()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().set_dirty_ratios(..)`")]
    pub fn set_dirty_ratios(&self, background: u32, ratio: u32) -> Result<(), ConfigError> {
        self.reclaim().set_dirty_ratios(background, ratio)
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().lru_add_drain(..)`")]
    pub fn lru_add_drain(&self) {
        self.reclaim().lru_add_drain()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().lru_add_drain_all(..)`")]
    pub fn lru_add_drain_all(&self) {
        self.reclaim().lru_add_drain_all()
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().register_shrinker(..)`")]
    pub fn register_shrinker(&self, s: Arc<dyn Shrinker>) -> u64 {
        self.reclaim().register_shrinker(s)
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().unregister_shrinker(..)`")]
    pub fn unregister_shrinker(&self, id: u64) -> bool {
        self.reclaim().unregister_shrinker(id)
    }

    #[deprecated(since = "0.2.0", note = "use `.reclaim().lru_sizes(..)`")]
    pub fn lru_sizes(&self, nid: u32) -> (u64, u64) {
        self.reclaim().lru_sizes(nid)
    }
}
