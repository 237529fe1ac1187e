//! `Allocator`: a `PageAllocator` built from keyword arguments, with owned
//! pages ([`crate::page::Page`]), raw pfns, bulk allocation into a list or a
//! writable `uint64` buffer (a numpy array), and the /proc reports.
//!
//! The GIL is released (`Python::detach`) around every call that may wait:
//! an allocation may reclaim (shrinkers), compact or wait for the zone lock;
//! a free may wait for the zone lock. The reports and `check_invariants`
//! walk the zones and run detached too.

use crate::page::{raw_free_err, Owners, Page};
use crate::{alloc_err, free_err, gfp_arg, non_negative, order_arg, ConfigError, InvariantError};
use pagealloc::{Backing, Config, PageAllocator, Pfn, MAX_ORDER};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The Linux page allocator over an arena: `Allocator(arena_bytes=..., backing=..., nodes=...)`.
#[pyclass(module = "pagealloc._native", subclass, frozen)]
pub struct Allocator {
    pub(crate) inner: PageAllocator,
    /// Set by `close()` / leaving the `with` block: no allocation after it.
    /// Relaxed: it orders nothing, it only refuses later calls.
    closed: AtomicBool,
    /// The blocks its `Page` objects own, which raw frees refuse, and the
    /// block pools it serves.
    pub(crate) owners: Arc<Owners>,
}

pub(crate) fn backing_arg(s: &str) -> PyResult<Backing> {
    Ok(match s {
        "anonymous" => Backing::Anonymous,
        "hugepages" => Backing::HugePages,
        "resident" => Backing::Resident,
        "none" => Backing::None,
        _ => {
            return Err(PyValueError::new_err(format!(
                "backing must be 'anonymous', 'hugepages', 'resident' or 'none', got {s:?}"
            )))
        }
    })
}

fn backing_name(b: Backing) -> &'static str {
    match b {
        Backing::Anonymous => "anonymous",
        Backing::HugePages => "hugepages",
        Backing::Resident => "resident",
        Backing::None => "none",
    }
}

/// A pfn argument: a frame number, 0 or more (an i64, so never `u64::MAX`,
/// the one value `Pfn::new` refuses).
pub(crate) fn pfn_arg(pfn: i64) -> PyResult<Pfn> {
    Ok(Pfn::new(non_negative("pfn", pfn)?))
}

impl Allocator {
    pub(crate) fn live(&self) -> PyResult<&PageAllocator> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(PyValueError::new_err("the allocator is closed"));
        }
        Ok(&self.inner)
    }
}

#[pymethods]
impl Allocator {
    #[new]
    #[pyo3(signature = (arena_bytes = 64 << 20, backing = "anonymous", nodes = 1, *, movable_zone_bytes = 0,
        min_free_kbytes = None, nr_cpus = None, pcp_lists = true, front_cache = true, page_reporting = false,
        init_on_alloc = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        arena_bytes: i64,
        backing: &str,
        nodes: i64,
        movable_zone_bytes: i64,
        min_free_kbytes: Option<i64>,
        nr_cpus: Option<i64>,
        pcp_lists: bool,
        front_cache: bool,
        page_reporting: bool,
        init_on_alloc: bool,
    ) -> PyResult<Self> {
        let mut cfg = Config::new()
            .arena_bytes(non_negative("arena_bytes", arena_bytes)?)
            .backing(backing_arg(backing)?)
            .nodes(u32::try_from(non_negative("nodes", nodes)?).unwrap_or(u32::MAX))
            .movable_zone_bytes(non_negative("movable_zone_bytes", movable_zone_bytes)?)
            .pcp_lists(pcp_lists)
            .front_cache(front_cache)
            .page_reporting(page_reporting)
            .init_on_alloc(init_on_alloc);
        if let Some(k) = min_free_kbytes {
            cfg = cfg.min_free_kbytes(Some(non_negative("min_free_kbytes", k)?));
        }
        if let Some(n) = nr_cpus {
            cfg = cfg.nr_cpus(Some(usize::try_from(non_negative("nr_cpus", n)?).unwrap_or(usize::MAX)));
        }
        // Building maps (and with Resident backing populates) the arena: detached.
        let inner = py.detach(|| PageAllocator::new(cfg)).map_err(|e| ConfigError::new_err(e.to_string()))?;
        Ok(Allocator { inner, closed: AtomicBool::new(false), owners: Arc::default() })
    }

    /// Allocate a block of `2**order` pages, owned by the returned `Page`
    /// (freed by `page.free()`, its `with` block, or its collection).
    #[pyo3(signature = (order = 0, gfp = 0))]
    fn alloc(&self, py: Python<'_>, order: i64, gfp: i64) -> PyResult<Page> {
        let (order, gfp) = (order_arg(order)?, gfp_arg(gfp)?);
        let a = self.live()?;
        // An owned block: the raw frees refuse it (see `page`).
        let block = py.detach(|| a.alloc_owned(gfp, order)).map_err(alloc_err)?;
        Ok(Page::new(a.clone(), self.owners.clone(), block))
    }

    /// Allocate a block and return its first pfn; free it with `free_pfn`.
    #[pyo3(signature = (order = 0, gfp = 0))]
    fn alloc_pfn(&self, py: Python<'_>, order: i64, gfp: i64) -> PyResult<u64> {
        let (order, gfp) = (order_arg(order)?, gfp_arg(gfp)?);
        let a = self.live()?;
        self.owners.alloc_raw_allowed()?;
        py.detach(|| a.alloc_pages(gfp, order)).map(Pfn::as_u64).map_err(alloc_err)
    }

    /// Free the block of `2**order` pages at `pfn` (from `alloc_pfn` or `alloc_bulk`).
    #[pyo3(signature = (pfn, order = 0))]
    fn free_pfn(&self, py: Python<'_>, pfn: i64, order: i64) -> PyResult<()> {
        let (pfn, order) = (pfn_arg(pfn)?, order_arg(order)?);
        let a = &self.inner;
        py.detach(|| self.owners.free_raw(a, &[pfn], || a.free_pages(pfn, order)))?.map_err(raw_free_err)
    }

    /// Free a `Page` (as `page.free()`).
    fn free(&self, page: &Page) -> PyResult<()> {
        page.free_checked(&self.inner)
    }

    /// Allocate up to `n` order-0 pages at once. Without `out`, returns the
    /// list of their pfns; with `out` (a writable C-contiguous buffer of
    /// uint64, such as `numpy.zeros(n, numpy.uint64)`), writes them to its
    /// first slots and returns how many. Fewer than `n` means memory ran out.
    #[pyo3(signature = (n, gfp = 0, out = None))]
    fn alloc_bulk<'py>(
        &self,
        py: Python<'py>,
        n: i64,
        gfp: i64,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = usize::try_from(non_negative("n", n)?).unwrap_or(usize::MAX);
        let gfp = gfp_arg(gfp)?;
        let a = self.live()?;
        self.owners.alloc_raw_allowed()?;
        let buf = match out {
            Some(o) => Some(writable_u64(o)?),
            None => None,
        };
        if let Some(b) = &buf {
            if b.item_count() < n {
                return Err(PyValueError::new_err(format!("out holds {} items, fewer than n = {n}", b.item_count())));
            }
        }
        let n = n.min(usize::try_from(a.nr_pages()).unwrap_or(usize::MAX));
        let mut got = Vec::with_capacity(n);
        py.detach(|| a.alloc_pages_bulk_list(gfp, n, &mut got));
        let raw: Vec<u64> = got.iter().map(|p| p.as_u64()).collect();
        match buf {
            None => Ok(PyList::new(py, raw)?.into_any()),
            Some(b) => {
                // `b` is writable and C-contiguous with at least n >= raw.len()
                // items (checked above); copy_from_slice wants exactly its length.
                let mut all = b.to_vec(py)?;
                all[..raw.len()].copy_from_slice(&raw);
                b.copy_from_slice(py, &all)?;
                Ok(raw.len().into_pyobject(py)?.into_any())
            }
        }
    }

    /// Free order-0 pages given as an iterable of pfns or a uint64 buffer.
    /// Every valid pfn is freed; if any was not an allocated order-0 page,
    /// raises `InvalidFree` naming them after freeing the rest.
    fn free_bulk(&self, py: Python<'_>, pfns: &Bound<'_, PyAny>) -> PyResult<()> {
        let raw: Vec<u64> = match PyBuffer::<u64>::get(pfns) {
            Ok(b) => b.to_vec(py)?,
            Err(_) => pfns.try_iter()?.map(|x| x?.extract::<u64>()).collect::<PyResult<_>>()?,
        };
        if let Some(i) = raw.iter().position(|&p| p == u64::MAX) {
            return Err(PyValueError::new_err(format!("pfn {} at index {i} is not a frame number", u64::MAX)));
        }
        let pfns: Vec<Pfn> = raw.into_iter().map(Pfn::new).collect();
        let a = &self.inner;
        py.detach(|| self.owners.free_raw(a, &pfns, || a.free_pages_bulk(&pfns)))?.map_err(free_err)
    }

    /// Check every identity of the allocator's zones; raises `InvariantError`.
    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.check_invariants()).map_err(|e| InvariantError::new_err(e.to_string()))
    }

    /// Compact every zone (moves only pages registered movable: none from Python).
    fn compact(&self, py: Python<'_>) -> (u64, u64, u64) {
        let o = py.detach(|| self.inner.compaction().compact_memory());
        (o.migrated, o.migrate_scanned, o.free_scanned)
    }

    /// Return every per-CPU and thread-cached free page to the buddy lists.
    fn drain(&self, py: Python<'_>) {
        py.detach(|| self.inner.drain_all_pages());
    }

    /// Pages in the arena.
    #[getter]
    fn nr_pages(&self) -> u64 {
        self.inner.nr_pages()
    }

    /// Pages the allocator manages (the arena less its descriptors' share, if any).
    #[getter]
    fn managed_pages(&self) -> u64 {
        self.inner.managed_pages()
    }

    /// Free pages now (buddy lists and per-CPU caches).
    #[getter]
    fn nr_free_pages(&self) -> u64 {
        self.inner.nr_free_pages()
    }

    #[getter]
    fn nr_nodes(&self) -> u32 {
        self.inner.nr_nodes()
    }

    #[getter]
    fn backing(&self) -> &'static str {
        backing_name(self.inner.config().backing)
    }

    #[getter]
    fn arena_bytes(&self) -> u64 {
        self.inner.config().arena_bytes
    }

    #[getter]
    fn max_order(&self) -> u32 {
        MAX_ORDER
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Refuse further allocations. Memory is returned when the last page and
    /// pool using the arena are gone (they keep it alive, never dangle).
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    /// A report as `(kernel text, plain data)`: "buddyinfo", "pagetypeinfo",
    /// "zoneinfo", "vmstat" or "pcpstat". The package wraps the data in dataclasses.
    fn _report<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(String, Bound<'py, PyAny>)> {
        crate::reports::report(py, &self.inner, name)
    }

    fn __repr__(&self) -> String {
        let a = &self.inner;
        format!(
            "Allocator(arena_bytes={}, backing={:?}, nodes={}, free_pages={}/{}{})",
            a.config().arena_bytes,
            backing_name(a.config().backing),
            a.nr_nodes(),
            a.nr_free_pages(),
            a.managed_pages(),
            if self.closed() { ", closed" } else { "" }
        )
    }
}

/// A writable, C-contiguous buffer of u64 (numpy uint64), or a clear error.
fn writable_u64(o: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u64>> {
    let b = PyBuffer::<u64>::get(o)
        .map_err(|e| PyValueError::new_err(format!("out must be a buffer of uint64 (numpy.uint64): {e}")))?;
    if b.readonly() || !b.is_c_contiguous() {
        return Err(PyValueError::new_err("out must be writable and C-contiguous"));
    }
    Ok(b)
}
