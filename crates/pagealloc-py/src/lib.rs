//! `pagealloc._native`: the Python extension module (PyO3). The pure-Python
//! package `pagealloc` (python/pagealloc) re-exports these classes and adds
//! dataclass reports, the `Gfp` flags and the benchmark.
//!
//! Layers: `allocator` wraps a `PageAllocator` (config from keyword
//! arguments, raw pfns, bulk, reports); `page` is one owned buddy block
//! exported through the buffer protocol; `pool` and `pool_core` are the
//! KV-cache block pool (the Python class, then its state in plain Rust, with
//! the shrinker). Every class is `frozen` and keeps its mutable state behind a
//! lock or an atomic, so the module is declared free-threading ready
//! (`gil_used = false`).
//!
//! Errors: the library's typed errors become Python exceptions
//! ([`OutOfMemory`] subclasses `MemoryError`, the misuse errors `ValueError`),
//! never panics: a panic inside a method would surface as PyO3's
//! `PanicException`, which the tests treat as a failure.

mod allocator;
mod free_lists;
mod page;
mod pool;
mod pool_core;
mod reports;

use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

create_exception!(
    _native,
    OutOfMemory,
    PyMemoryError,
    "No free block of the order asked for, even after reclaim and eviction."
);
create_exception!(
    _native,
    InvalidFree,
    PyValueError,
    "A free of memory that is not an allocated block of this allocator or pool (double free, wrong order, foreign block)."
);
create_exception!(_native, ConfigError, PyValueError, "An allocator or pool setting out of its range.");
create_exception!(
    _native,
    InvariantError,
    PyRuntimeError,
    "The allocator's or pool's internal identities do not hold."
);

/// A non-negative integer argument, with a message naming it (PyO3's own
/// conversion of a negative int to an unsigned one says only "can't convert").
pub(crate) fn non_negative(name: &str, v: i64) -> PyResult<u64> {
    u64::try_from(v).map_err(|_| PyValueError::new_err(format!("{name} must be >= 0, got {v}")))
}

/// An order argument: 0..=MAX_ORDER.
pub(crate) fn order_arg(order: i64) -> PyResult<u32> {
    match u32::try_from(order) {
        Ok(o) if o <= pagealloc::MAX_ORDER => Ok(o),
        _ => Err(PyValueError::new_err(format!("order must be in 0..={}, got {order}", pagealloc::MAX_ORDER))),
    }
}

/// Allocation flags from their bits; unknown bits are an error.
pub(crate) fn gfp_arg(bits: i64) -> PyResult<pagealloc::Gfp> {
    u32::try_from(bits)
        .ok()
        .and_then(pagealloc::Gfp::from_bits)
        .ok_or_else(|| PyValueError::new_err(format!("gfp {bits:#x} has bits that are not allocation flags")))
}

pub(crate) fn alloc_err(e: pagealloc::AllocError) -> PyErr {
    match e {
        pagealloc::AllocError::NoMemory { .. } | pagealloc::AllocError::WouldBlock { .. } => {
            OutOfMemory::new_err(e.to_string())
        }
        _ => PyValueError::new_err(e.to_string()),
    }
}

pub(crate) fn free_err(e: impl std::fmt::Display) -> PyErr {
    InvalidFree::new_err(e.to_string())
}

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<allocator::Allocator>()?;
    m.add_class::<page::Page>()?;
    m.add_class::<pool::BlockPool>()?;
    m.add_class::<pool::Block>()?;
    m.add("OutOfMemory", py.get_type::<OutOfMemory>())?;
    m.add("InvalidFree", py.get_type::<InvalidFree>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("InvariantError", py.get_type::<InvariantError>())?;
    m.add("PAGE_SIZE", pagealloc::PAGE_SIZE)?;
    m.add("MAX_ORDER", pagealloc::MAX_ORDER)?;
    m.add("PAGEBLOCK_ORDER", pagealloc::PAGEBLOCK_ORDER)?;
    Ok(())
}
