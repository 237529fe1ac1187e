//! One step function per operation on a mapping or a held handle: call the
//! cache, take the sources' logs, check both against the model, update the
//! model. The rules each step checks are the page cache's promises; see
//! the module doc of `pcmodel` for how source calls are matched.

use super::model::Bytes;
use super::source::{is_injected, Call, Event, Fault};
use super::{check_page, expect_refused, pattern, Harness, Held, MAX_HELD};
use pagealloc::{Mapping, PageCacheError, PageHandle, MAX_FILE_BYTES, MAX_INDEX, PAGE_SIZE};
use std::collections::VecDeque;
use std::io;
use std::ops::Range;

/// The pages of the byte range `pos..pos + len`, each as (index, offset in
/// the page, the range of the caller's buffer it covers); `None` if the
/// range wraps or ends past `MAX_FILE_BYTES` (an empty range may start at
/// it).
fn chunks(pos: u64, len: usize) -> Option<Vec<(u64, usize, Range<usize>)>> {
    let end = pos.checked_add(len as u64).filter(|&e| e <= MAX_FILE_BYTES)?;
    let mut v = Vec::new();
    let mut at = pos;
    while at < end {
        let (index, off) = (at / PAGE_SIZE as u64, (at % PAGE_SIZE as u64) as usize);
        let n = ((end - at) as usize).min(PAGE_SIZE - off);
        let lo = (at - pos) as usize;
        v.push((index, off, lo..lo + n));
        at += n as u64;
    }
    Some(v)
}

/// The refusal an index past `MAX_INDEX` must meet.
fn index_check(index: u64) -> Option<PageCacheError> {
    (index > MAX_INDEX).then_some(PageCacheError::IndexTooLarge { index })
}

impl<'a> Harness<'a> {
    /// The refusals owed before any page is touched: `bad` (an index or
    /// range out of bounds) and, on a removed mapping, `MappingRemoved`.
    /// Which of the two a call that earns both reports is not promised;
    /// either passes. True if the call had to be refused (it was, and no
    /// source was called).
    fn refused<T>(&self, inst: usize, res: &io::Result<T>, bad: Option<PageCacheError>, what: &str) -> bool {
        let mut want: Vec<PageCacheError> = bad.into_iter().collect();
        if !self.model.insts[inst].live {
            want.push(PageCacheError::MappingRemoved { id: self.id_of(inst) });
        }
        if want.is_empty() {
            return false;
        }
        expect_refused(res, &want, what);
        self.no_calls(what);
        true
    }

    /// A touch of page `index` of `inst` (`rest`: the pages the operation
    /// touches after it, in order). If the model has it uncached: the fill
    /// of a window that starts at it (one page on a source that reads no
    /// ahead; a failed window of several pages is followed by a read of
    /// the page alone), `Err(fault)` if that failed. Then, on a readahead source, the
    /// asynchronous windows markers start (their failures fail nothing),
    /// taken here for every page up to the next uncached one. Which touched
    /// page's marker started which window is not observable, and a window
    /// that starts at a touched page may be its fill or a window that
    /// covers it; the two are told apart where it matters, when it fails.
    fn fill(&mut self, inst: usize, ev: &mut VecDeque<Event>, index: u64, rest: &[u64]) -> Result<(), Fault> {
        let ra = self.sources[self.id_of(inst) as usize].reads_ahead();
        if !self.model.insts[inst].cached.contains(&index) {
            let e = ev.pop_front().unwrap_or_else(|| panic!("page {index} was not cached, yet not read"));
            assert!(e.call == Call::Read && e.index == index, "expected the fill of page {index}, got {e:?}");
            assert!(ra || e.count == 1, "a source that reads no ahead was asked for {} pages", e.count);
            self.window(inst, &e);
            if let Some(f) = e.fault {
                if e.count == 1 {
                    return Err(f);
                }
                // A failed window of several pages falls back to the page
                // alone.
                let g = ev.pop_front().unwrap_or_else(|| panic!("no read of page {index} alone after {e:?} failed"));
                assert!(g.call == Call::Read && g.index == index && g.count == 1, "expected page {index} alone: {g:?}");
                self.window(inst, &g);
                if let Some(f) = g.fault {
                    return Err(f);
                }
            }
        }
        while ra && self.is_async_window(inst, ev, index, rest) {
            let e = ev.pop_front().unwrap();
            self.window(inst, &e);
        }
        Ok(())
    }

    /// Whether the next call is an asynchronous window started while the
    /// pages from `index` (cached now) up to the next uncached one in
    /// `rest` are touched: a read after `index`, and not the fill of that
    /// uncached page (a read that starts at it is an asynchronous window
    /// only if a second read of it follows: the window failed and dropped
    /// it, so the fill read it again).
    fn is_async_window(&self, inst: usize, ev: &VecDeque<Event>, index: u64, rest: &[u64]) -> bool {
        let Some(e) = ev.front().filter(|e| e.call == Call::Read && e.index > index) else { return false };
        let cached = &self.model.insts[inst].cached;
        let fill_of_next = rest.iter().find(|p| !cached.contains(p)) == Some(&e.index);
        !fill_of_next || ev.get(1).is_some_and(|f| f.call == Call::Read && f.index == e.index)
    }

    /// A read of a window of pages: none of them cached before (a window
    /// stops at the first cached page), none past `MAX_INDEX`; all cached
    /// after it if it succeeded, none if it failed (checked after the step
    /// with the whole cached set: a later window of the same operation may
    /// read them again).
    fn window(&mut self, inst: usize, e: &Event) {
        assert!(e.count >= 1 && e.index <= MAX_INDEX && e.count - 1 <= MAX_INDEX - e.index, "window {e:?}");
        let pages = e.index..e.index + e.count;
        let i = &mut self.model.insts[inst];
        if let Some(p) = pages.clone().find(|p| i.cached.contains(p)) {
            panic!("the window {e:?} read page {p}, which was cached");
        }
        if e.fault.is_none() {
            i.cached.extend(pages);
        }
    }

    /// The end of an operation whose fill of page `index` failed by
    /// `fault`: the call failed with that error, the page was dropped.
    fn fill_failed<T>(&self, m: &Mapping, res: &io::Result<T>, index: u64, fault: Fault) {
        let e = res.as_ref().err().unwrap_or_else(|| panic!("a failed fill of page {index} went unreported"));
        assert!(is_injected(e, Call::Read, fault), "the fill of page {index} failed by {fault:?}, reported {e:?}");
        assert!(!m.is_cached(index), "a page whose fill failed stayed cached");
    }

    /// `get` (retried once if an injected read fault failed it: the retry
    /// reads the page again and must return the model's bytes, unless the
    /// schedule fails it too), optionally keeping the handle.
    pub(super) fn get(&mut self, pick: usize, index: u64, hold: bool) {
        let (inst, m) = self.mapping(pick);
        for _ in 0..2 {
            let res = m.get(index);
            if self.refused(inst, &res, index_check(index), "get") {
                return;
            }
            let mut ev: VecDeque<Event> = self.log(self.id_of(inst)).into();
            let filled = self.fill(inst, &mut ev, index, &[]);
            assert!(ev.is_empty(), "get({index}) made more source calls: {ev:?}");
            match filled {
                Ok(()) => return self.keep(inst, res.expect("get of a page the model can fill"), hold),
                Err(f) => self.fill_failed(m, &res, index, f),
            }
        }
    }

    /// `find_get`: a handle exactly on the pages the model has cached; no
    /// source call.
    pub(super) fn find_get(&mut self, pick: usize, index: u64, hold: bool) {
        let (inst, m) = self.mapping(pick);
        let res = m.find_get(index);
        if self.refused(inst, &res, index_check(index), "find_get") {
            return;
        }
        self.no_calls("find_get");
        let cached = self.model.insts[inst].cached.contains(&index);
        match res.expect("find_get on a live mapping") {
            Some(h) => {
                assert!(cached, "find_get({index}) found a page the model has not cached");
                self.keep(inst, h, hold);
            }
            None => assert!(!cached, "find_get({index}) missed a cached page"),
        }
    }

    /// Check a fresh handle's page against the model and against the other
    /// handles on it, then hold it (up to `MAX_HELD`) or drop it.
    fn keep(&mut self, inst: usize, h: PageHandle<'a>, hold: bool) {
        let index = h.index();
        check_page(&h, &self.model.bytes(inst, index), "a fresh handle");
        for o in self.held.iter().filter(|o| o.inst == inst && o.index == index && o.frozen.is_none()) {
            assert_eq!(o.h.pfn(), h.pfn(), "two handles on page {index} of one mapping name two frames");
        }
        if hold && self.held.len() < MAX_HELD {
            self.held.push(Held { h, inst, index, frozen: None });
        }
    }

    /// `read`: the model's bytes of every page of the range, each page not
    /// cached read in once, in order; a failed fill fails the read.
    pub(super) fn read(&mut self, pick: usize, pos: u64, len: usize) {
        let (inst, m) = self.mapping(pick);
        let mut buf = vec![0xee; len];
        let res = m.read(pos, &mut buf);
        let pages = chunks(pos, len);
        let bad = pages.is_none().then_some(PageCacheError::RangeTooLarge { pos, len: len as u64 });
        if self.refused(inst, &res, bad, "read") {
            return;
        }
        let mut ev: VecDeque<Event> = self.log(self.id_of(inst)).into();
        let mut want = vec![0; len];
        let pages = pages.unwrap();
        let indexes: Vec<u64> = pages.iter().map(|p| p.0).collect();
        for (k, (index, off, r)) in pages.into_iter().enumerate() {
            if let Err(f) = self.fill(inst, &mut ev, index, &indexes[k + 1..]) {
                assert!(ev.is_empty(), "read went on after a failed fill: {ev:?}");
                return self.fill_failed(m, &res, index, f);
            }
            want[r.clone()].copy_from_slice(&self.model.bytes(inst, index)[off..off + r.len()]);
        }
        assert!(ev.is_empty(), "read made more source calls: {ev:?}");
        assert_eq!(res.expect("read of a live mapping"), len);
        assert!(buf == want, "read({pos:#x}, {len}) returned other bytes than the model's");
    }

    /// `write`: page by page, each filled first if not cached, then its
    /// part written and dirty; a failed fill stops the write there (earlier
    /// pages keep their new bytes).
    pub(super) fn write(&mut self, pick: usize, pos: u64, len: usize, seed: u8) {
        let (inst, m) = self.mapping(pick);
        let data = pattern(seed, len);
        let res = m.write(pos, &data);
        let pages = chunks(pos, len);
        let bad = pages.is_none().then_some(PageCacheError::RangeTooLarge { pos, len: len as u64 });
        if self.refused(inst, &res, bad, "write") {
            return;
        }
        let mut ev: VecDeque<Event> = self.log(self.id_of(inst)).into();
        let pages = pages.unwrap();
        let indexes: Vec<u64> = pages.iter().map(|p| p.0).collect();
        for (k, (index, off, r)) in pages.into_iter().enumerate() {
            if let Err(f) = self.fill(inst, &mut ev, index, &indexes[k + 1..]) {
                assert!(ev.is_empty(), "write went on after a failed fill: {ev:?}");
                return self.fill_failed(m, &res, index, f);
            }
            let mut page: Bytes = self.model.bytes(inst, index);
            page[off..off + r.len()].copy_from_slice(&data[r]);
            self.model.insts[inst].dirty.insert(index, page);
        }
        assert!(ev.is_empty(), "write made source calls besides fills: {ev:?}");
        assert_eq!(res.expect("write of a live mapping"), len);
    }

    /// `delete`: true exactly for a cached page (never past `MAX_INDEX`,
    /// never on a removed mapping); its dirty data is dropped unwritten.
    pub(super) fn delete(&mut self, pick: usize, index: u64) {
        let (inst, m) = self.mapping(pick);
        let cached = self.model.insts[inst].cached.contains(&index);
        assert_eq!(m.delete(index), cached, "delete({index})");
        if cached {
            self.detach(inst, Some(index));
            self.model.drop_page(inst, index);
        }
        assert!(!m.is_cached(index));
        self.no_calls("delete");
    }

    /// `truncate`: every page dropped, dirty data unwritten; a pending
    /// writeback error stays for the next fsync. Nothing on a removed
    /// mapping.
    pub(super) fn truncate(&mut self, pick: usize) {
        let (inst, m) = self.mapping(pick);
        m.truncate();
        self.detach(inst, None);
        let i = &mut self.model.insts[inst];
        i.cached.clear();
        i.dirty.clear();
        self.no_calls("truncate");
    }

    /// `fsync`: a writeback of exactly the dirty pages, in index order, with
    /// the model's bytes; then the first writeback error since the last
    /// fsync if there was one (and no `sync`), else the `sync`'s answer.
    /// Pages whose writeback failed stay dirty for the next fsync.
    pub(super) fn fsync(&mut self, pick: usize) {
        let (inst, m) = self.mapping(pick);
        let res = m.fsync();
        if self.refused(inst, &res, None, "fsync") {
            return;
        }
        let mut ev = self.log(self.id_of(inst)).into_iter();
        let dirty: Vec<u64> = self.model.insts[inst].dirty.keys().copied().collect();
        for index in dirty {
            let e = ev.next().unwrap_or_else(|| panic!("fsync left dirty page {index} unwritten"));
            assert_eq!((e.call, e.index), (Call::Write, index), "fsync's writebacks: {e:?}");
            self.model.written_back(inst, &e);
        }
        if let Some(f) = self.model.insts[inst].pending.take() {
            let e = res.as_ref().expect_err("fsync hid a writeback error");
            assert!(is_injected(e, Call::Write, f), "fsync after a {f:?} writeback reported {e:?}");
            let more = ev.next();
            assert!(more.is_none(), "fsync called the source after a writeback error: {more:?}");
            return;
        }
        let e = ev.next().expect("fsync did not sync");
        assert_eq!(e.call, Call::Sync, "fsync's calls after the writebacks: {e:?}");
        assert!(ev.next().is_none(), "fsync called the source after sync");
        match (e.fault, &res) {
            (None, r) => assert!(r.is_ok(), "fsync failed with nothing failing: {r:?}"),
            (Some(f), Err(err)) => assert!(is_injected(err, Call::Sync, f), "sync failed by {f:?}: {err:?}"),
            (Some(f), Ok(())) => panic!("fsync hid a {f:?} of sync"),
        }
    }

    /// `shrink`: its writebacks checked as fsync's; the pages that left
    /// (read back with `is_cached`) were clean and unheld, and are as many
    /// as it reports freed.
    pub(super) fn shrink(&mut self, nr: u64) {
        let freed = self.pc().shrink(nr);
        for id in 0..self.sources.len() as u64 {
            for e in self.log(id) {
                let inst = self.model.current[id as usize].expect("reclaim wrote a page of a removed mapping");
                self.model.written_back(inst, &e);
            }
        }
        let mut gone = 0;
        for inst in 0..self.model.insts.len() {
            let m = self.arena[self.handle_of[inst]].get().unwrap();
            let left: Vec<u64> = self.model.insts[inst].cached.iter().copied().filter(|&i| !m.is_cached(i)).collect();
            for index in left {
                assert!(!self.model.insts[inst].dirty.contains_key(&index), "reclaim dropped dirty page {index}");
                let held = self.held.iter().any(|h| h.inst == inst && h.index == index && h.frozen.is_none());
                assert!(!held, "reclaim took page {index}, which a handle holds");
                self.model.insts[inst].cached.remove(&index);
                gone += 1;
            }
        }
        assert_eq!(freed, gone, "shrink({nr}) reported other pages freed than left the cache");
    }

    /// `PageHandle::read` at any offset: clamped to the page (0 bytes at or
    /// past its end), the bytes the page holds, the rest of `buf` untouched;
    /// the page may have left its mapping (its bytes are then frozen).
    pub(super) fn handle_read(&mut self, pick: usize, off: usize, len: usize) {
        if self.held.is_empty() {
            return;
        }
        let held = &self.held[pick % self.held.len()];
        let want = held.frozen.clone().unwrap_or_else(|| self.model.bytes(held.inst, held.index));
        let mut buf = vec![0xee; len];
        let n = len.min(PAGE_SIZE.saturating_sub(off));
        assert_eq!(held.h.read(off, &mut buf), n, "read({off}, {len}) of a handle");
        assert!(buf[..n] == want[off.min(PAGE_SIZE)..][..n], "a handle read other bytes than the model's");
        assert!(buf[n..].iter().all(|&b| b == 0xee), "a handle read wrote past what it returned");
        self.no_calls("a handle's read");
    }
}
