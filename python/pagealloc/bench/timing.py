"""Pool operations from Python, against vLLM 0.33's own ``BlockPool``.

Two operations, each timed on every pool in alternating rounds (every other
round in reverse, so that no pool always follows the same one):

- ``pair``: ``get_new_blocks(16)`` then ``free_blocks`` of them;
- ``hit``: a prefix hit of 16 blocks: 16 lookups by block hash, ``touch``
  of the blocks found, then ``free_blocks`` of them (they stay cached).

Pools: vLLM's (its code loaded unchanged, :mod:`pagealloc.bench.vllm_ref`),
pagealloc's native ``BlockPool`` (as ``pool_for`` builds it), the drop-in
``pagealloc.kv.vllm.BlockPool``, and ``minimal``, the pure-Python pool of
``bench/pypool.py``: a minimal pool that skips vLLM's per-block eviction
check, null block and front-of-queue placement, kept only as a labelled
floor for pure Python.

Threaded figures are in :mod:`pagealloc.bench.threads` (vLLM's pool is not
thread-safe, so it has none).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Optional

from ..kv import pool_for
from ..kv import vllm as drop_in
from . import vllm_ref
from .pypool import PyBlockPool

N = 16
POOL_BLOCKS = 4096


def _keys(n: int) -> List[bytes]:
    return [i.to_bytes(32, "big") for i in range(1, n + 1)]


def _request(keys):
    class R:
        block_hashes = keys
    return R


def _vllm_like(pool) -> Dict[str, Callable[[], None]]:
    """pair and hit on a pool with vLLM's interface (vLLM's or the drop-in)."""
    keys = _keys(N)
    blocks = pool.get_new_blocks(N)
    pool.cache_full_blocks(_request(keys), blocks, 0, N, 16, 0)
    pool.free_blocks(blocks)
    get, touch, free, new = pool.get_cached_block, pool.touch, pool.free_blocks, pool.get_new_blocks
    group = [0]

    def hit():
        got = [get(k, group)[0] for k in keys]
        touch(got)
        free(got)

    return dict(pair=lambda: free(new(N)), hit=hit)


def _native():
    pool = pool_for({"full": 16 << 10}, unit_bytes=16 << 10, capacity_bytes=POOL_BLOCKS * (16 << 10) * 2)
    keys = _keys(N)
    blocks = pool.get_new_blocks(N, "full")
    pool.cache_full_blocks(blocks, keys)
    pool.free_blocks(blocks)
    get, touch, free, new = pool.get_cached_block, pool.touch, pool.free_blocks, pool.get_new_blocks

    def hit():
        got = [get(k, "full") for k in keys]
        touch(got)
        free(got)

    return pool, dict(pair=lambda: free(new(N, "full")), hit=hit)


def _minimal():
    # Two pools: this one's frees go to the queue's tail, so pairs would
    # reach and evict the blocks the hits find.
    pool, hits = PyBlockPool(POOL_BLOCKS), PyBlockPool(POOL_BLOCKS)
    keys = _keys(N)
    blocks = hits.get_new_blocks(N)
    hits.cache_full_blocks(blocks, keys)
    hits.free_blocks(blocks)

    def hit():
        got = [hits.get_cached_block(k) for k in keys]
        hits.touch(got)
        hits.free_blocks(got)

    return dict(pair=lambda: pool.free_blocks(pool.get_new_blocks(N)), hit=hit)


def pools(wheel: Optional[str] = None) -> Dict[str, Dict[str, Callable[[], None]]]:
    out: Dict[str, Dict[str, Callable[[], None]]] = {}
    try:
        v = vllm_ref.load(wheel)
        out["vllm"] = _vllm_like(v.BlockPool(POOL_BLOCKS, True, 16))
    except FileNotFoundError:
        pass
    native, ops = _native()
    out["pagealloc"] = ops
    out["drop-in"] = _vllm_like(drop_in.BlockPool(POOL_BLOCKS, True, 16))
    out["minimal"] = _minimal()
    out["_native_pool"] = native  # kept alive; checked after timing
    return out


def time_ops(rounds: int, iters: int, wheel: Optional[str] = None) -> dict:
    """Median microseconds per operation, per pool and operation."""
    ps = pools(wheel)
    native = ps.pop("_native_pool")
    res: Dict[str, Dict[str, List[float]]] = {p: {"pair": [], "hit": []} for p in ps}
    order = list(ps.items())
    for r in range(rounds):
        for label, ops in order if r % 2 == 0 else order[::-1]:
            for op_name, op in ops.items():
                t0 = time.perf_counter()
                for _ in range(iters):
                    op()
                res[label][op_name].append((time.perf_counter() - t0) / iters * 1e6)
    native.check_invariants()
    med = {p: {o: statistics.median(v) for o, v in d.items()} for p, d in res.items()}
    base = med.get("vllm")
    speedup = {p: {o: base[o] / v for o, v in d.items()} for p, d in med.items() if base and p != "vllm"}
    return dict(blocks=N, us=med, speedup_vs_vllm=speedup, rounds=rounds, iters=iters,
                vllm=vllm_ref.VERSION if base else None)
