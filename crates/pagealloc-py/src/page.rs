//! `Page`: one allocated buddy block, owned by a Python object and exported
//! through the buffer protocol (`memoryview(page)`, `numpy.frombuffer(page,
//! dtype)`), zero-copy.
//!
//! Invariants (under `state`'s lock):
//! - `exports` counts the buffer views handed out and not yet released; a
//!   page with `exports > 0` is never freed (`free` raises `BufferError`, as
//!   `bytearray` refuses to resize with exports). A view holds a reference
//!   to its page (`Py_buffer.obj`), so the page object outlives every view
//!   and its drop never sees `exports > 0`.
//! - `block` holds the block from allocation until it is freed or
//!   detached; it is freed exactly once: by `free`, or by the drop of a page
//!   still holding it.
//! - The arena stays mapped while the page lives: the block holds a clone
//!   of the allocator, whose last clone unmaps it.
//! - The block is an [`OwnedBlock`]: the allocator marks it owned in the
//!   store that allocates it, and its raw-pfn frees (`free_pfn`,
//!   `free_bulk`) refuse it, so a raw free of a page with live views cannot
//!   hand their memory to the next allocation.
//! - While a `BlockPool` is built on the allocator, raw frees (and raw
//!   allocations and `detach`, whose blocks could then never be freed) are
//!   refused outright: the pool's blocks are plain ids, and a raw free of
//!   one would give a block two owners. [`Owners`] counts the pools, and a
//!   raw free runs under its lock, so none slips in as a pool starts.

use crate::free_err;
use pagealloc::{FreeError, OwnedBlock, PageAllocator, Pfn, PAGE_SIZE};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{ffi, IntoPyObjectExt};
use std::os::raw::c_int;
use std::sync::Arc;
use std::sync::Mutex;

struct State {
    block: Option<OwnedBlock>,
    exports: u32,
}

/// How many block pools an allocator serves (see the module doc).
#[derive(Default)]
pub(crate) struct Owners(Mutex<usize>);

impl Owners {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        // One count: a panic elsewhere leaves it whole.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A block pool starts (`true`) or stops serving from this allocator.
    pub(crate) fn pool(&self, starts: bool) {
        let mut pools = self.lock();
        *pools = if starts { *pools + 1 } else { pools.saturating_sub(1) };
    }

    /// Refuse raw-pfn calls while a pool serves from this allocator.
    fn raw_allowed(pools: usize) -> PyResult<()> {
        if pools > 0 {
            return Err(crate::InvalidFree::new_err(
                "a BlockPool allocates from this allocator: raw-pfn allocation and frees are refused \
                 (free blocks through the pool, or use Page objects)",
            ));
        }
        Ok(())
    }

    /// Refuse a raw allocation while a pool serves from this allocator (its
    /// block could not be freed). Checked, not held: a raw block that a
    /// pool starting meanwhile finds in the arena only waits for the pool.
    pub(crate) fn alloc_raw_allowed(&self) -> PyResult<()> {
        Self::raw_allowed(*self.lock())
    }

    /// Free raw pfns with `free`, unless a pool serves from this allocator
    /// or one of them is a page's block (all or nothing: a page's block is
    /// refused by the allocator anyway, this keeps the others too).
    pub(crate) fn free_raw<T>(&self, a: &PageAllocator, pfns: &[Pfn], free: impl FnOnce() -> T) -> PyResult<T> {
        let pools = self.lock();
        Self::raw_allowed(*pools)?;
        if let Some(p) = pfns.iter().find(|&&p| a.page_locks().page_owned_racy(p)) {
            return Err(page_owned(*p));
        }
        Ok(free())
    }
}

/// The error for a raw free of a page's block.
fn page_owned(p: Pfn) -> PyErr {
    crate::InvalidFree::new_err(format!(
        "pfn {} belongs to a Page object: free the Page (or detach it first)",
        p.as_u64()
    ))
}

/// A raw free's error: a page's block named as such.
pub(crate) fn raw_free_err(e: FreeError) -> PyErr {
    match e {
        FreeError::Owned { pfn } => page_owned(pfn),
        e => free_err(e),
    }
}

/// One allocated block of `2**order` pages.
#[pyclass(module = "pagealloc._native", frozen, weakref)]
pub struct Page {
    alloc: PageAllocator,
    /// The pools the allocator serves: `detach` is refused while there are.
    owners: Arc<Owners>,
    pfn: Pfn,
    order: u32,
    /// The block's first byte in the arena; `None` without backing memory.
    /// A plain address so the page stays `Send + Sync` (the pointer is
    /// only dereferenced by Python through a view).
    addr: Option<usize>,
    state: Mutex<State>,
}

impl Page {
    /// A page for `block`, from `alloc`.
    pub(crate) fn new(alloc: PageAllocator, owners: Arc<Owners>, block: OwnedBlock) -> Self {
        let (pfn, order) = (block.pfn(), block.order());
        let addr = alloc.page_address(pfn).map(|p| p.as_ptr() as usize);
        Page { alloc, owners, pfn, order, addr, state: Mutex::new(State { block: Some(block), exports: 0 }) }
    }

    fn size(&self) -> usize {
        PAGE_SIZE << self.order
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the two fields are
        // always consistent (each update is one store or take).
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Take the block (for `free` or `detach`): refused while views live
    /// or when the block is no longer ours.
    fn disown(&self) -> PyResult<OwnedBlock> {
        let mut st = self.lock();
        if st.exports > 0 {
            return Err(PyBufferError::new_err(format!(
                "page at pfn {} has {} live buffer view(s) (memoryview/numpy); release them before freeing it",
                self.pfn.as_u64(),
                st.exports
            )));
        }
        st.block.take().ok_or_else(|| {
            crate::InvalidFree::new_err(format!("page at pfn {} was already freed or detached", self.pfn.as_u64()))
        })
    }

    /// `Allocator.free(page)`: the page must come from that allocator.
    pub(crate) fn free_checked(&self, alloc: &PageAllocator) -> PyResult<()> {
        if !same_allocator(alloc, &self.alloc) {
            return Err(crate::InvalidFree::new_err(format!(
                "page at pfn {} belongs to another allocator",
                self.pfn.as_u64()
            )));
        }
        self.do_free()
    }

    fn do_free(&self) -> PyResult<()> {
        self.disown()?.free().map_err(free_err)
    }
}

/// Whether two handles are clones of one allocator: clones share one core,
/// so their configurations are the same object.
fn same_allocator(a: &PageAllocator, b: &PageAllocator) -> bool {
    std::ptr::eq(a.config(), b.config())
}

#[pymethods]
impl Page {
    /// Free the block. Raises `BufferError` while a view of it lives and
    /// `InvalidFree` if it was already freed.
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let block = self.disown()?;
        py.detach(|| block.free()).map_err(free_err)
    }

    /// Give the block up without freeing it and return its pfn: from now on
    /// the caller frees it with `Allocator.free_pfn(pfn, order)`.
    fn detach(&self) -> PyResult<u64> {
        // A raw pfn could not be freed while a pool serves (see `Owners`).
        self.owners.alloc_raw_allowed()?;
        Ok(self.disown()?.into_pfn().as_u64())
    }

    #[getter]
    fn pfn(&self) -> u64 {
        self.pfn.as_u64()
    }

    #[getter]
    fn order(&self) -> u32 {
        self.order
    }

    /// Bytes in the block (`PAGE_SIZE << order`), with or without backing memory.
    #[getter]
    fn nbytes(&self) -> usize {
        self.size()
    }

    /// The block's address in this process, or `None` with `backing="none"`.
    #[getter]
    fn address(&self) -> Option<usize> {
        self.addr
    }

    /// True until the block is freed or detached.
    #[getter]
    fn owned(&self) -> bool {
        self.lock().block.is_some()
    }

    /// Buffer views of the page alive now.
    #[getter]
    fn exports(&self) -> u32 {
        self.lock().exports
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Free on leaving the `with` block (if still owned).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.owned() {
            self.free(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let st = self.lock();
        let state = if st.block.is_some() { "" } else { ", freed" };
        format!("Page(pfn={}, order={}, nbytes={}{state})", self.pfn.as_u64(), self.order, self.size())
    }

    /// Pages compare by (allocator, pfn, order).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        match other.cast::<Page>() {
            Ok(o) => {
                let o = o.get();
                (same_allocator(&self.alloc, &o.alloc) && self.pfn == o.pfn && self.order == o.order).into_py_any(py)
            }
            Err(_) => Ok(py.NotImplemented()),
        }
    }

    fn __hash__(&self) -> u64 {
        self.pfn.as_u64() ^ (u64::from(self.order) << 58)
    }

    /// # Safety
    /// Called by CPython with a `view` to fill, per the buffer protocol.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let page = slf.get();
        let Some(addr) = page.addr else {
            return Err(PyBufferError::new_err(
                "a page of an allocator with backing='none' has no memory: its pfn indexes your own storage",
            ));
        };
        let mut st = page.lock();
        if st.block.is_none() {
            return Err(PyBufferError::new_err(format!("page at pfn {} was freed", page.pfn.as_u64())));
        }
        // SAFETY: `view` is CPython's to fill; [addr, addr + nbytes) is our
        // allocated block, which stays allocated while `exports > 0` (free
        // refuses) and mapped while the page lives (`view.obj` keeps a
        // reference to it). FillInfo takes that reference on success.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                addr as *mut std::ffi::c_void,
                page.size() as ffi::Py_ssize_t,
                0,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        st.exports += 1;
        Ok(())
    }

    /// # Safety
    /// Called by CPython once for each view `__getbuffer__` filled.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        let mut st = self.lock();
        st.exports = st.exports.saturating_sub(1);
    }
}
