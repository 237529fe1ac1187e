//! Readahead workers: threads that read the asynchronous windows readers
//! start (see `readahead`), so that a reader goes on with the pages it has
//! while its next window is read.
//!
//! Invariants: a window handed to the pool is read exactly once, by a worker
//! or, when the pool has no worker, inline by the submitter; the queue, the
//! worker count and the stop flag share one lock, and a worker leaves only
//! with the queue empty and stop set, so no window is left queued with its
//! pages locked and nobody to read them. Workers hold the cache strongly
//! only while reading a window or waiting (`PageCache`'s drop stops them
//! before it tears the mappings down).

use super::mapping::MappingInner;
use super::ra_state::{Readahead, RA_MAX_PAGES};
use super::readahead::read_window;
use super::CacheInner;
use pagealloc_core::sync::{AtomicU64, Ordering};
use pagealloc_core::types::Pfn;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// The smallest read a window is cut into for several workers.
const MIN_CHUNK: usize = 16;

/// One window (or part of one) to read.
struct Job {
    m: Arc<MappingInner>,
    start: u64,
    pages: Vec<Pfn>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Workers running (they take jobs).
    workers: usize,
    stop: bool,
}

pub(crate) struct RaPool {
    max_pages: AtomicU64,
    q: Mutex<Queue>,
    cv: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Windows started at a marker (racy; tests and benches).
    pub(crate) async_windows: AtomicU64,
}

impl RaPool {
    pub(crate) fn new() -> Self {
        Self {
            max_pages: AtomicU64::new(RA_MAX_PAGES),
            q: Mutex::new(Queue::default()),
            cv: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            async_windows: AtomicU64::new(0),
        }
    }

    pub(crate) fn max_pages(&self) -> u64 {
        self.max_pages.load(Ordering::Relaxed)
    }

    /// The settings now.
    pub(crate) fn settings(&self) -> Readahead {
        Readahead { max_pages: self.max_pages(), workers: self.q.lock().workers }
    }

    /// Read the locked window `pages` (indexes `start..`) of `m`: queued for
    /// the workers, or inline when there are none. With several workers the
    /// window is cut into one read per worker (at least [`MIN_CHUNK`] pages
    /// each), read at once, as the kernel submits a window as several bios:
    /// a device with a queue (and `O_DIRECT`, where the kernel reads nothing
    /// ahead) then has more than one read in flight.
    pub(crate) fn submit(&self, c: &Arc<CacheInner>, m: &Arc<MappingInner>, start: u64, pages: Vec<Pfn>) {
        let mut q = self.q.lock();
        if q.workers > 0 {
            let chunk = pages.len().div_ceil(q.workers).max(MIN_CHUNK);
            let mut at = start;
            for part in pages.chunks(chunk) {
                q.jobs.push_back(Job { m: m.clone(), start: at, pages: part.to_vec() });
                at += part.len() as u64;
            }
            drop(q);
            self.cv.notify_all();
            return;
        }
        drop(q);
        let _ = read_window(c, m, start, &pages, None);
    }

    /// Stop the workers (each leaves once the queue is empty).
    pub(crate) fn stop(&self) {
        self.q.lock().stop = true;
        self.cv.notify_all();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let mut q = self.q.lock();
        q.stop = false;
        debug_assert!(q.jobs.is_empty() && q.workers == 0);
    }
}

/// Apply `ra` to cache `c`: the window size, and `ra.workers` fresh workers
/// (the old ones stopped first).
pub(crate) fn configure(c: &Arc<CacheInner>, ra: Readahead) {
    let p = &c.ra;
    p.stop();
    p.max_pages.store(ra.max_pages, Ordering::Relaxed);
    if cfg!(loom) {
        return;
    }
    let mut ts = p.threads.lock();
    for k in 0..ra.workers {
        let weak = Arc::downgrade(c);
        p.q.lock().workers += 1;
        let t = std::thread::Builder::new().name(format!("readahead{k}")).spawn(move || {
            pagealloc_core::cpu::block_async_signals();
            run(&weak);
        });
        match t {
            Ok(t) => ts.push(t),
            Err(_) => p.q.lock().workers -= 1,
        }
    }
}

fn run(weak: &Weak<CacheInner>) {
    loop {
        let Some(c) = weak.upgrade() else { return };
        let job = {
            let mut q = c.ra.q.lock();
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break Some(j);
                }
                if q.stop {
                    q.workers -= 1;
                    break None;
                }
                c.ra.cv.wait_for(&mut q, Duration::from_millis(100));
            }
        };
        let Some(j) = job else { return };
        let _ = read_window(&c, &j.m, j.start, &j.pages, None);
    }
}
