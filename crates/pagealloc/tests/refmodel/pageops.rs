//! Step functions for the page lock, writeback and uptodate bits, the reports
//! and configuration errors.

use super::model::Model;
use pagealloc::{CancelToken, Config, ConfigError, PageAllocator, PageStateError, Pfn, WaitError, PAGEBLOCK_PAGES};
use std::time::Duration;

/// How a lock step takes the page lock.
#[derive(Clone, Copy, Debug)]
pub enum LockHow {
    /// `trylock_page`.
    Try,
    /// `lock_page` (`lock_page_timeout(0)` where the model has it locked).
    Lock,
    /// `lock_page_cancellable` with a token already cancelled.
    Cancelled,
    /// `lock_page_guard`, dropped at once (changes nothing).
    Guard,
}

impl Model {
    /// Take the lock of `p` as `how` says.
    pub fn lock(&mut self, p: u64, how: LockHow) {
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        match how {
            LockHow::Try => {
                let got = self.a.page_locks().trylock_page(pfn);
                assert_eq!(got, exp.is_ok_and(|bl| !bl.locked), "trylock_page({p:#x})");
            }
            LockHow::Lock => match exp {
                Ok(bl) if bl.locked => {
                    let got = self.a.page_locks().lock_page_timeout(pfn, Duration::ZERO);
                    assert_eq!(got, Err(WaitError::TimedOut), "lock_page_timeout({p:#x}) of a locked page");
                }
                Ok(_) => self.a.page_locks().lock_page(pfn).unwrap(),
                Err(e) => assert_eq!(self.a.page_locks().lock_page(pfn), Err(e), "lock_page({p:#x})"),
            },
            LockHow::Cancelled => {
                let t = CancelToken::new();
                t.cancel();
                let got = self.a.page_locks().lock_page_cancellable(pfn, &t);
                let want = match exp {
                    Ok(bl) if bl.locked => Err(WaitError::Cancelled),
                    Ok(_) => Ok(()),
                    Err(e) => Err(WaitError::State(e)),
                };
                assert_eq!(got, want, "lock_page_cancellable({p:#x}) with a cancelled token");
            }
            LockHow::Guard => {
                // A guard: lock and unlock on drop; nothing changes.
                match exp {
                    Ok(bl) if !bl.locked => drop(self.a.page_locks().lock_page_guard(pfn).unwrap()),
                    Ok(_) => {}
                    Err(e) => assert_eq!(self.a.page_locks().lock_page_guard(pfn).err(), Some(e)),
                }
                return;
            }
        }
        if let Some(bl) = self.blocks.get_mut(&p) {
            bl.locked = true;
        }
    }

    /// `lock_page(p)` of a page the model holds unlocked.
    pub fn lock_page(&mut self, p: Pfn) {
        assert!(self.state_expect(p.as_u64()).is_ok_and(|b| !b.locked), "lock_page({p:?}): not held unlocked");
        self.lock(p.as_u64(), LockHow::Lock);
    }

    /// `unlock_page(p)` (`unlock_page_uptodate` with `uptodate`).
    pub fn unlock(&mut self, p: u64, uptodate: bool) -> Result<(), PageStateError> {
        let pfn = Pfn::new(p);
        let got =
            if uptodate { self.a.page_locks().unlock_page_uptodate(pfn) } else { self.a.page_locks().unlock_page(pfn) };
        let exp = match self.state_expect(p) {
            Ok(bl) if bl.locked => {
                let bl = self.blocks.get_mut(&p).unwrap();
                bl.locked = false;
                bl.uptodate |= uptodate;
                Ok(())
            }
            Ok(_) => Err(PageStateError::NotLocked { pfn }),
            Err(e) => Err(e),
        };
        assert_eq!(got, exp, "unlock_page({p:#x}) uptodate={uptodate}");
        got
    }

    /// `set_page_writeback(p)` if `set`, else `end_page_writeback(p)`.
    pub fn writeback(&mut self, p: u64, set: bool) {
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        if set {
            let got = self.a.page_locks().set_page_writeback(pfn);
            assert_eq!(got, exp.map(|bl| !bl.writeback), "set_page_writeback({p:#x})");
        } else {
            let got = self.a.page_locks().end_page_writeback(pfn);
            let want = match exp {
                Ok(bl) if bl.writeback => Ok(()),
                Ok(_) => Err(PageStateError::NotWriteback { pfn }),
                Err(e) => Err(e),
            };
            assert_eq!(got, want, "end_page_writeback({p:#x})");
        }
        if let Some(bl) = self.blocks.get_mut(&p) {
            bl.writeback = set;
        }
    }

    /// Wait for the page lock (or, with `writeback`, the writeback bit) of
    /// `p`: at once where the model has it clear, a zero timeout where set.
    pub fn wait(&mut self, p: u64, writeback: bool) {
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        if !writeback {
            match exp {
                Ok(bl) if bl.locked => {
                    assert_eq!(
                        self.a.page_locks().wait_on_page_locked_timeout(pfn, Duration::ZERO),
                        Err(WaitError::TimedOut)
                    )
                }
                Ok(_) => self.a.page_locks().wait_on_page_locked(pfn).unwrap(),
                Err(e) => assert_eq!(self.a.page_locks().wait_on_page_locked(pfn), Err(e)),
            }
        } else {
            match exp {
                Ok(bl) if bl.writeback => {
                    assert_eq!(
                        self.a.page_locks().wait_on_page_writeback_timeout(pfn, Duration::ZERO),
                        Err(WaitError::TimedOut)
                    )
                }
                Ok(_) => self.a.page_locks().wait_on_page_writeback(pfn).unwrap(),
                Err(e) => assert_eq!(self.a.page_locks().wait_on_page_writeback(pfn), Err(e)),
            }
        }
    }

    /// Set (Some(true)), clear (Some(false)) or only read (None) the uptodate
    /// bit of `p`; then all three bits must read as the model has them.
    pub fn uptodate(&mut self, p: u64, set: Option<bool>) {
        let pfn = Pfn::new(p);
        let exp = self.state_expect(p);
        match set {
            Some(true) => assert_eq!(self.a.page_locks().set_page_uptodate(pfn), exp.map(|_| ())),
            Some(false) => assert_eq!(self.a.page_locks().clear_page_uptodate(pfn), exp.map(|_| ())),
            None => {}
        }
        if let (Some(v), Some(bl)) = (set, self.blocks.get_mut(&p)) {
            bl.uptodate = v;
        }
        let bl = self.blocks.get(&p).copied();
        assert_eq!(self.a.page_locks().page_uptodate(pfn), bl.is_some_and(|b| b.uptodate), "page_uptodate({p:#x})");
        assert_eq!(self.a.page_locks().page_locked_racy(pfn), bl.is_some_and(|b| b.locked), "page_locked_racy({p:#x})");
        assert_eq!(
            self.a.page_locks().page_writeback_racy(pfn),
            bl.is_some_and(|b| b.writeback),
            "page_writeback_racy({p:#x})"
        );
    }

    /// Read report `k` (0..6): buddyinfo, pagetypeinfo, zoneinfo, vmstat, a
    /// consistent snapshot, fragmentation.
    pub fn report(&mut self, k: u8) {
        match k % 6 {
            0 => assert!(self.a.stats().buddyinfo().to_string().starts_with("Node 0, zone")),
            1 => assert!(self.a.stats().pagetypeinfo().to_string().starts_with("Page block order: 9")),
            2 => assert!(!self.a.stats().zoneinfo().to_string().is_empty()),
            3 => assert!(!self.a.stats().vmstat().to_string().is_empty()),
            4 => {
                let s = self.a.stats().snapshot_consistent();
                assert!(s.consistent);
                let free: u64 = s.zones.iter().map(|z| z.nr_free_pages).sum();
                assert_eq!(free, self.a.nr_free_pages(), "snapshot NR_FREE_PAGES disagrees");
            }
            _ => {
                let f = self.a.stats().fragmentation();
                assert_eq!(f.pageblocks, self.nr_pages / PAGEBLOCK_PAGES);
            }
        }
    }

    /// Build an allocator from bad configuration `k` (0..9): refused with
    /// the error that names the problem.
    pub fn bad_config(&mut self, k: u8) {
        let base = Config::small(8 << 20);
        let (cfg, check): (Config, fn(&ConfigError) -> bool) = match k % 9 {
            0 => (base.arena_bytes((8 << 20) + 1), |e| matches!(e, ConfigError::ArenaNotPageMultiple { .. })),
            1 => (base.arena_bytes(1 << 20), |e| matches!(e, ConfigError::ArenaTooSmall { .. })),
            2 => (base.arena_bytes(1 << 46), |e| matches!(e, ConfigError::ArenaTooLarge { .. })),
            3 => (base.nodes(0), |e| matches!(e, ConfigError::TooManyNodes { .. })),
            4 => (base.nodes(5), |e| matches!(e, ConfigError::TooManyNodes { .. })),
            5 => (base.movable_zone_bytes(8 << 20), |e| matches!(e, ConfigError::EmptyZone { .. })),
            6 => (base.watermark_scale_factor(0), |e| matches!(e, ConfigError::Invalid { .. })),
            7 => (base.nr_cpus(Some(0)), |e| matches!(e, ConfigError::Invalid { .. })),
            _ => (base.percpu_pagelist_high_fraction(3), |e| matches!(e, ConfigError::Invalid { .. })),
        };
        match PageAllocator::new(cfg) {
            Ok(_) => panic!("a config that cannot work was accepted"),
            Err(e) => assert!(check(&e), "unexpected config error {e:?}"),
        }
    }
}
