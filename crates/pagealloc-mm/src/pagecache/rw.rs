//! The byte-level operations on a mapping: read and write through the
//! cache (`filemap_read`, `generic_perform_write`), the writeback of one
//! page (`folio_clear_dirty_for_io` .. `folio_end_writeback`) and fsync.
//! Every byte range is checked first ([`PageIndex::of_range`]): a range
//! that wraps or ends past [`super::MAX_FILE_BYTES`] is refused before any
//! page is touched.

use super::checked::PageIndex;
use super::handle::page_bytes;
use super::handle::CacheLock;
use super::mapping::{Mapping, MappingInner, Who};
use super::CacheInner;
use pagealloc_core::page::flags::DIRTY;
use pagealloc_core::sync::Ordering;
use pagealloc_core::types::{Pfn, PAGE_SIZE};
use std::io;

impl Mapping {
    /// Copy `buf.len()` bytes at byte offset `pos` into `buf` through the
    /// cache. Returns the bytes read (all of them: the source defines the
    /// contents of every page).
    ///
    /// # Errors
    /// `RangeTooLarge` for a range that wraps or ends past
    /// [`super::MAX_FILE_BYTES`] (nothing read); otherwise as
    /// [`Mapping::get`].
    pub fn read(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        PageIndex::of_range(pos, buf.len())?;
        self.m.live()?;
        let mut done = 0;
        while done < buf.len() {
            // In range: checked above.
            let (i, off) = PageIndex::of_range(pos + done as u64, 0)?;
            let h = self.get(i.get())?;
            done += h.read(off, &mut buf[done..]);
        }
        Ok(done)
    }

    /// Write `data` at byte offset `pos` through the cache: pages are read in
    /// if missing, written with the page locked (after any writeback of them
    /// ends) and marked dirty; the source is told how far the file now
    /// reaches ([`PageSource::grow_to`](super::PageSource::grow_to)).
    ///
    /// # Errors
    /// `RangeTooLarge` for a range that wraps or ends past
    /// [`super::MAX_FILE_BYTES`] (nothing written); otherwise as
    /// [`Mapping::get`].
    pub fn write(&self, pos: u64, data: &[u8]) -> io::Result<usize> {
        PageIndex::of_range(pos, data.len())?;
        self.m.live()?;
        let mut done = 0;
        while done < data.len() {
            let (i, off) = PageIndex::of_range(pos + done as u64, 0)?;
            let n = (data.len() - done).min(PAGE_SIZE - off);
            self.write_page(i, off, &data[done..done + n], pos + (done + n) as u64)?;
            done += n;
        }
        Ok(done)
    }

    /// Write `data` (within one page) at `off` of page `i`, which ends the
    /// write at byte `end` of the file. The source grows to `end` with the
    /// page locked, before it is dirtied: a writeback of the page (which
    /// needs the lock) then always writes it with the file's new size.
    fn write_page(&self, i: PageIndex, off: usize, data: &[u8], end: u64) -> io::Result<()> {
        let h = self.get(i.get())?;
        let core = &self.alloc().core;
        if core.mm.page(h.pfn.as_u64()).flags() & DIRTY == 0 {
            // About to dirty a clean page: over the dirty limit, wait
            // (holding no page lock).
            super::writeback::balance_dirty_pages(&self.cache);
        }
        let newly = {
            let l = CacheLock::lock(self.alloc(), h.pfn);
            let _ = l.page_ref().wait_writeback(None, None);
            self.source_call("grow_to", |s| s.grow_to(end))?;
            // SAFETY: see `page_bytes`: locked, referenced, not under writeback.
            let dst = unsafe { &mut *page_bytes(self.alloc(), h.pfn) };
            dst[off..off + data.len()].copy_from_slice(data);
            let newly = core.mm.page(h.pfn.as_u64()).flags.fetch_or(DIRTY, Ordering::Relaxed) & DIRTY == 0;
            if newly {
                core.vmscan.gauges.dirty(core.zone_of(h.pfn.as_u64()).idx.get(), true);
            }
            newly
        };
        if newly {
            super::writeback::dirtied(&self.cache, CacheInner::owner_word(self.m.slot, i.get()));
        }
        Ok(())
    }

    /// Write one locked, referenced dirty page back (`folio_clear_dirty_for_io`,
    /// `folio_start_writeback`, the write, `folio_end_writeback`); unlocks it
    /// (`lock` goes). A failed or panicking write leaves the page dirty and
    /// queued again, its writeback ended, and the error for the next fsync.
    pub(crate) fn writeback_locked(cache: &CacheInner, m: &MappingInner, lock: CacheLock<'_>, pfn: Pfn, index: u64) {
        let core = &cache.alloc.core;
        let d = core.mm.page(pfn.as_u64());
        // Dirty is set only under the page lock, which we hold: the test
        // and the clear below agree. Writeback is set before dirty is
        // cleared, so an fsync that skips a page neither dirty nor under
        // writeback never skips one whose write is still to come.
        if d.flags() & DIRTY == 0 {
            return;
        }
        let r = *lock.page_ref();
        let _ = r.set_writeback();
        d.flags.fetch_and(!DIRTY, Ordering::Relaxed);
        let zone = core.zone_of(pfn.as_u64()).idx.get();
        core.vmscan.gauges.dirty(zone, false);
        core.vmscan.gauges.writeback(zone, true);
        drop(lock);
        // SAFETY: see `page_bytes`: under writeback with a reference held;
        // writers wait for writeback to end before touching the bytes.
        let bytes = unsafe { &*page_bytes(&cache.alloc, pfn) };
        let res = super::checked::guarded("write_page", || m.source.write_page(index, bytes));
        match res {
            Ok(()) => {
                core.vmscan.gauges.nr_written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if d.flags.fetch_or(DIRTY, Ordering::Relaxed) & DIRTY == 0 {
                    core.vmscan.gauges.dirty(zone, true);
                    // Dirty again: queued again for the flusher.
                    cache.writeback.push(CacheInner::owner_word(m.slot, index));
                }
                m.wb_error.lock().record(e);
            }
        }
        core.vmscan.gauges.writeback(zone, false);
        let _ = r.end_writeback();
    }

    /// Write every dirty page back, wait for all writeback, sync the source
    /// (`vfs_fsync`). Fails with the first writeback error that came during
    /// this call or that no fsync has reported yet (`wb_error`).
    ///
    /// A page is referenced only while it is looked at (as the kernel's
    /// writeback takes a batch of pages at a time): holding a reference on
    /// every page of the mapping for the whole walk would keep reclaim from
    /// freeing any of them meanwhile (reclaim frees only pages nobody else
    /// references), which under memory pressure made concurrent fills fail.
    ///
    /// # Errors
    /// A writeback or sync error of the source (a panicking one:
    /// [`super::PageCacheError::SourcePanicked`]), or `MappingRemoved`.
    pub fn fsync(&self) -> io::Result<()> {
        self.m.live()?;
        let mark = self.m.wb_error.lock().mark();
        let idx = self.m.cached_indexes();
        let core = &self.alloc().core;
        for &i in &idx {
            let Some(pfn) = self.lookup(i, Who::Cache)? else { continue };
            let _h = self.handle(pfn, i);
            if core.mm.page(pfn.as_u64()).flags() & DIRTY == 0 {
                continue;
            }
            let l = CacheLock::lock(self.alloc(), pfn);
            Self::writeback_locked(&self.cache, &self.m, l, pfn, i);
        }
        // Writeback others (reclaim) started on pages of this mapping.
        for &i in &idx {
            if let Some(pfn) = self.lookup(i, Who::Cache)? {
                let _h = self.handle(pfn, i);
                let _ = self.alloc().core.cache_page_ref(pfn).map_err(io::Error::other)?.wait_writeback(None, None);
            }
        }
        if let Some(e) = self.m.wb_error.lock().check(mark) {
            return Err(e);
        }
        self.source_call("sync", |s| s.sync())
    }
}
