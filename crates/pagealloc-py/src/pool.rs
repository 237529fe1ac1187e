//! `BlockPool` and `Block`: the Python face of [`crate::pool_core`]. A
//! `Block` is a handle (pool, id, kind), like vLLM's `KVCacheBlock`: it owns
//! nothing, so a stale handle is harmless; the pool checks every handle it
//! is given (this pool's, held, enough references) before changing anything.

use crate::allocator::Allocator;
use crate::pool_core::{Core, Key, Kind, Kinds, PoolError};
use crate::{non_negative, ConfigError, InvalidFree, InvariantError, OutOfMemory};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Pool ids, unique in the process, so a block of one pool is recognised
/// in another. Relaxed: only uniqueness matters.
static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

fn pool_err(e: PoolError) -> PyErr {
    match e {
        PoolError::OutOfMemory(m) => OutOfMemory::new_err(m),
        PoolError::InvalidFree(m) => InvalidFree::new_err(m),
        PoolError::Invalid(m) => PyValueError::new_err(m),
    }
}

/// A KV-cache block: `id` (its first frame number: with `backing="none"`,
/// the index of the block's first unit in your own tensor), `kind`, `order`.
#[pyclass(module = "pagealloc._native", frozen)]
pub struct Block {
    pool: u64,
    #[pyo3(get)]
    id: u64,
    #[pyo3(get)]
    order: u32,
    /// The kind's index: it names the pool's shard for the block.
    kind: u8,
    frames: u64,
    /// The kind's name: a reference, not the pool's table, because a
    /// reference count costs less than an `Arc`'s atomic one, and a block is
    /// made and dropped on every request.
    name: Py<PyString>,
}

#[pymethods]
impl Block {
    /// The kind's name.
    #[getter]
    fn kind(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
    }

    /// Frames (allocator pages) in the block: `2**order`, or fewer for an
    /// exact kind (the first frames of an order-`order` block).
    #[getter]
    fn frames(&self) -> u64 {
        self.frames
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Block(id={}, kind={}, order={})", self.id, self.name.bind(py), self.order)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Block>().is_ok_and(|o| o.get().pool == self.pool && o.get().id == self.id)
    }

    fn __hash__(&self) -> u64 {
        self.id ^ self.pool.rotate_left(40)
    }
}

/// A pool of KV-cache blocks of several kinds, one buddy order each, from one allocator.
#[pyclass(module = "pagealloc._native", subclass, frozen)]
pub struct BlockPool {
    core: Arc<Core>,
    id: u64,
    names: Arc<[Py<PyString>]>,
    allocator: Py<Allocator>,
    /// Counted in the allocator's pools until `close` (a pool dropped
    /// unclosed stays counted: raw frees stay refused, the safe side).
    serving: std::sync::atomic::AtomicBool,
}

impl BlockPool {
    fn kind_index(&self, kind: &Bound<'_, PyAny>) -> PyResult<u8> {
        if let Ok(s) = kind.cast::<PyString>() {
            // Interned names compare by pointer first; then by value.
            for (i, n) in self.names.iter().enumerate() {
                if n.is(s) || n.bind(kind.py()).as_any().eq(s)? {
                    return Ok(i as u8);
                }
            }
            let known: Vec<&str> = self.core.kinds.iter().map(|k| k.name.as_str()).collect();
            return Err(PyValueError::new_err(format!("unknown block kind {s}: this pool has {known:?}")));
        }
        Err(PyTypeError::new_err("kind must be a str (one of the pool's kinds)"))
    }

    /// The ids of `blocks` (an iterable of `Block`s of this pool) and
    /// their kinds.
    fn ids(&self, blocks: &Bound<'_, PyAny>) -> PyResult<(Vec<u64>, Kinds)> {
        // A list's length is known: one allocation, not a doubling series.
        let mut out = Vec::with_capacity(blocks.cast::<PyList>().map_or(0, |l| l.len()));
        let mut kinds = None;
        let mut push = |b: &Bound<'_, PyAny>| -> PyResult<()> {
            let b = b.cast::<Block>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "expected a Block, got {}",
                    b.get_type().name().map_or("?".into(), |n| n.to_string())
                ))
            })?;
            let b = b.get();
            if b.pool != self.id {
                return Err(InvalidFree::new_err(format!("block {} belongs to another pool", b.id)));
            }
            kinds = match kinds.take() {
                None => Some(Kinds::One(b.kind)),
                Some(Kinds::One(k)) if k == b.kind => Some(Kinds::One(k)),
                Some(Kinds::One(k)) => {
                    let mut each = vec![k; out.len()];
                    each.push(b.kind);
                    Some(Kinds::Each(each))
                }
                Some(Kinds::Each(mut each)) => {
                    each.push(b.kind);
                    Some(Kinds::Each(each))
                }
            };
            out.push(b.id);
            Ok(())
        };
        if let Ok(l) = blocks.cast::<PyList>() {
            for b in l.iter() {
                push(&b)?;
            }
        } else {
            for b in blocks.try_iter()? {
                push(&b?)?;
            }
        }
        Ok((out, kinds.unwrap_or(Kinds::One(0))))
    }

    fn block(&self, py: Python<'_>, id: u64, kind: u8) -> Block {
        let k = &self.core.kinds[usize::from(kind)];
        let name = self.names[usize::from(kind)].clone_ref(py);
        Block { pool: self.id, id, order: k.order, kind, frames: k.frames, name }
    }
}

fn key_arg(h: &Bound<'_, PyAny>) -> PyResult<Key> {
    if let Ok(b) = h.cast::<PyBytes>() {
        return Ok(Key::Bytes(b.as_bytes().into()));
    }
    if h.is_instance_of::<PyInt>() {
        return h
            .extract::<i128>()
            .map(Key::Int)
            .map_err(|_| PyValueError::new_err("an int block hash must fit in 128 bits"));
    }
    Err(PyTypeError::new_err("a block hash must be an int or bytes"))
}

#[pymethods]
impl BlockPool {
    /// `BlockPool(allocator, {"full": 4, "sliding": 4, "cross": 2})`: kind
    /// names and their buddy orders (a block of order k is `2**k` frames).
    /// A kind given as `(order, frames)` is exact: each block holds the first
    /// `frames` frames of an order-`order` block (more than half of it) and
    /// the tail stays free, for a recurrent-state page of a hybrid model.
    /// `free_list_frames`: the most frames each kind's list of free blocks
    /// keeps (at most 1/32 of the arena; 0: no lists, every free goes
    /// straight back to the allocator).
    #[new]
    #[pyo3(signature = (allocator, kinds, free_list_frames = 256))]
    fn new(
        py: Python<'_>,
        allocator: Py<Allocator>,
        kinds: &Bound<'_, PyDict>,
        free_list_frames: i64,
    ) -> PyResult<Self> {
        let list_frames = non_negative("free_list_frames", free_list_frames)?;
        if kinds.is_empty() || kinds.len() > 64 {
            return Err(ConfigError::new_err(format!("a pool needs 1..=64 kinds, got {}", kinds.len())));
        }
        let mut ks = Vec::new();
        let mut names = Vec::new();
        for (name, order) in kinds.iter() {
            let name = name.cast::<PyString>().map_err(|_| PyTypeError::new_err("kind names must be str"))?.clone();
            // An int is an order; a pair (order, frames) an exact kind whose
            // blocks hold `frames` frames of an order-`order` block.
            let (order, frames) = match order.extract::<(i64, i64)>() {
                Ok((o, f)) => (o, Some(f)),
                Err(_) => (order.extract::<i64>()?, None),
            };
            let order = crate::order_arg(order).map_err(|e| ConfigError::new_err(format!("kind {name}: {e}")))?;
            let frames = match frames {
                None => 1 << order,
                Some(f) if f > 1 << (order.max(1) - 1) && f <= 1 << order => f as u64,
                Some(f) => {
                    return Err(ConfigError::new_err(format!(
                        "kind {name}: {f} frames is not more than half of an order-{order} block and at most all of it"
                    )))
                }
            };
            ks.push(Kind { name: name.to_string(), order, frames });
            names.push(name.unbind());
        }
        let a = allocator.get().live()?.clone();
        // From here raw frees on the allocator are refused: they could free
        // one of this pool's blocks.
        allocator.get().owners.pool(true);
        let core = py.detach(|| Core::new(a, ks, list_frames));
        let id = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
        Ok(BlockPool { core, id, names: names.into(), allocator, serving: true.into() })
    }

    /// `n` new blocks of `kind`, each with one reference; all or nothing
    /// (`OutOfMemory` when even evicting every unused cached block leaves
    /// no room). Served from the kind's free list when it holds `n`, with
    /// the GIL held (no allocator call); otherwise the allocator is called,
    /// which may reclaim and evict, with the GIL released.
    fn get_new_blocks<'py>(&self, py: Python<'py>, n: i64, kind: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let n = usize::try_from(non_negative("n", n)?).unwrap_or(usize::MAX);
        let k = self.kind_index(kind)?;
        let core = &self.core;
        let ids = match core.get_new_listed(k, n).map_err(pool_err)? {
            Some(ids) => ids,
            None => py.detach(|| core.get_new(k, n)).map_err(pool_err)?,
        };
        PyList::new(py, ids.into_iter().map(|id| self.block(py, id, k)))
    }

    /// Drop a reference from each block (vLLM's order: the blocks to evict
    /// first come first). A block no one uses goes to its kind's free list
    /// (a full list gives its oldest batch back to the allocator), or, if
    /// cached, to the LRU list. Checked before any change: `InvalidFree`
    /// for a block of another pool, not held, or freed more times than
    /// referenced. The GIL stays held: a free never waits (no reclaim, no
    /// compaction: the allocator's free path only takes its own locks).
    fn free_blocks(&self, blocks: &Bound<'_, PyAny>) -> PyResult<()> {
        let (ids, kinds) = self.ids(blocks)?;
        self.core.free_ids(&ids, &kinds).map_err(pool_err)
    }

    /// Give every kind's free list back to the allocator (as the pool's
    /// shrinker does under memory pressure); returns the frames.
    fn drain(&self, py: Python<'_>) -> u64 {
        let core = &self.core;
        py.detach(|| core.drain())
    }

    /// Add a reference to each block (after a prefix-cache hit).
    fn touch(&self, blocks: &Bound<'_, PyAny>) -> PyResult<()> {
        let (ids, kinds) = self.ids(blocks)?;
        self.core.touch(&ids, &kinds).map_err(pool_err)
    }

    /// Publish full blocks under their block hashes (ints or bytes), for
    /// `get_cached_block`. Returns how many were newly cached.
    fn cache_full_blocks(&self, blocks: &Bound<'_, PyAny>, block_hashes: &Bound<'_, PyAny>) -> PyResult<usize> {
        let (ids, kinds) = self.ids(blocks)?;
        let keys = block_hashes.try_iter()?.map(|h| key_arg(&h?)).collect::<PyResult<Vec<_>>>()?;
        if keys.len() != ids.len() {
            return Err(PyValueError::new_err(format!("{} blocks but {} hashes", ids.len(), keys.len())));
        }
        self.core.cache(&ids, &kinds, keys).map_err(pool_err)
    }

    /// The block of `kind` cached under `block_hash`, or None. Takes no
    /// reference: `touch` the blocks you use.
    fn get_cached_block(&self, block_hash: &Bound<'_, PyAny>, kind: &Bound<'_, PyAny>) -> PyResult<Option<Block>> {
        let k = self.kind_index(kind)?;
        Ok(self.core.lookup(k, key_arg(block_hash)?).map_err(pool_err)?.map(|id| self.block(block_hash.py(), id, k)))
    }

    /// Evict up to `n` unused cached blocks, oldest first; returns how many.
    fn evict(&self, py: Python<'_>, n: i64) -> PyResult<u64> {
        let n = non_negative("n", n)?;
        let core = &self.core;
        let before = core.usage().counters.evicted;
        py.detach(|| core.evict(n, u64::MAX));
        Ok(core.usage().counters.evicted - before)
    }

    /// Forget every block hash: unused cached blocks are freed now, those in
    /// use when released. Returns the blocks freed.
    fn reset_prefix_cache(&self, py: Python<'_>) -> PyResult<u64> {
        let core = &self.core;
        py.detach(|| core.reset()).map_err(pool_err)
    }

    /// References held on `block` (0: cached and unused); `InvalidFree` if
    /// the pool does not hold it.
    fn ref_count(&self, block: &Bound<'_, PyAny>) -> PyResult<u32> {
        let (ids, kinds) = self.ids(&PyTuple::new(block.py(), [block])?.into_any())?;
        let (id, kind) = (ids[0], kinds.of(0));
        self.core.refs(id, kind).ok_or_else(|| InvalidFree::new_err(format!("block {id} is not held by this pool")))
    }

    /// The kinds and their orders, in creation order.
    #[getter]
    fn kinds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for k in &self.core.kinds {
            d.set_item(&k.name, k.order)?;
        }
        Ok(d)
    }

    #[getter]
    fn allocator(&self, py: Python<'_>) -> Py<Allocator> {
        self.allocator.clone_ref(py)
    }

    /// Frames held by the pool now (in use and cached).
    #[getter]
    fn frames_held(&self) -> u64 {
        self.core.frames_held()
    }

    /// Sizes and counters as a plain dict (the package wraps it in `PoolStats`).
    fn _usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let u = self.core.usage();
        let d = PyDict::new(py);
        let kinds = PyDict::new(py);
        for (k, (held, in_use, frames)) in self.core.kinds.iter().zip(u.kinds) {
            kinds.set_item(&k.name, (held, in_use, frames))?;
        }
        d.set_item("kinds", kinds)?;
        d.set_item("cached_blocks", u.cached_blocks)?;
        d.set_item("lru_blocks", u.lru_blocks)?;
        d.set_item("lru_frames", u.lru_frames)?;
        d.set_item("free_list_frames", u.free_list_frames)?;
        let c = u.counters;
        for (n, v) in [
            ("queries", c.queries),
            ("hits", c.hits),
            ("evicted", c.evicted),
            ("evicted_frames", c.evicted_frames),
            ("shrinker_scans", c.shrinker_scans),
            ("own_evictions", c.own_evictions),
        ] {
            d.set_item(n, v)?;
        }
        d.set_item("total_frames", self.core.alloc.managed_pages())?;
        d.set_item("free_frames", self.core.alloc.nr_free_pages())?;
        Ok(d)
    }

    /// Check the pool's identities and then the allocator's; raises `InvariantError`.
    fn check_invariants(&self, py: Python<'_>) -> PyResult<()> {
        let core = &self.core;
        py.detach(|| {
            core.check()?;
            core.alloc.check_invariants().map_err(|e| e.to_string())
        })
        .map_err(InvariantError::new_err)
    }

    /// Free every block and refuse further calls.
    fn close(&self, py: Python<'_>) {
        let core = &self.core;
        py.detach(|| core.close());
        if self.serving.swap(false, Ordering::Relaxed) {
            self.allocator.get().owners.pool(false);
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let kinds: Vec<String> = self.core.kinds.iter().map(|k| format!("{}: {}", k.name, k.order)).collect();
        format!("BlockPool(kinds={{{}}}, frames_held={})", kinds.join(", "), self.core.frames_held())
    }
}
