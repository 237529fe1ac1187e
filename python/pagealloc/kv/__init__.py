"""A KV-cache block pool in vLLM's shape, with a block size per kind.

Each kind of layer group (full attention, sliding window, cross attention,
an indexer cache, a Mamba/GDN recurrent state) gets blocks of its own size:
a buddy order over one arena of frames, or, for a state page that is not a
power of two of frames, the smallest order that holds it with the tail
given back (``pool_for(..., exact=True)``). vLLM 0.33's own interface is
:mod:`pagealloc.kv.vllm`. With ``backing="none"`` a frame is an abstract unit of your own KV
tensor (``unit_bytes`` of it), and a block's ``id`` is the index of its first
unit, so a block of order k covers units ``[id, id + 2**k)``. Nothing is padded
to the largest kind, and memory moves between kinds as demand changes: a
freed block merges with its buddies into larger ones.

The hot operations (``get_new_blocks``, ``free_blocks``, ``touch``, the cache)
run in Rust. Blocks are reference counted; a full block can be published under
its block hash (``cache_full_blocks``) and found again (``get_cached_block``);
when no request uses it any more it stays cached on an LRU list until the
allocator's shrinker (or a failed allocation) evicts it, oldest first.

A block that no request uses and no hash names waits on its kind's free
list (as the kernel's per-CPU page lists hold freed pages), so that most
requests and frees make no allocator call; the lists refill and spill a
batch at a time, and are given back in full (``drain``) by the shrinker
when memory is short, so a larger kind can still have their frames.

>>> from pagealloc.kv import pool_for
>>> pool = pool_for({"full": 64 << 10, "cross": 16 << 10}, unit_bytes=16 << 10, capacity_bytes=64 << 20)
>>> blocks = pool.get_new_blocks(4, "full")
>>> pool.free_blocks(blocks)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Tuple

from .. import Allocator, _native
from .._native import Block

__all__ = ["Block", "BlockPool", "PoolStats", "exact_kind", "order_for", "pool_for"]

PAGEBLOCK_BYTES_UNITS = 512
"""Frames in a pageblock: the arena is a whole number of them."""


def order_for(block_bytes: int, unit_bytes: int) -> int:
    """The buddy order of a block of ``block_bytes`` in frames of ``unit_bytes``:
    the smallest k with ``unit_bytes << k >= block_bytes``."""
    if block_bytes <= 0 or unit_bytes <= 0:
        raise ValueError(f"block_bytes and unit_bytes must be > 0, got {block_bytes} and {unit_bytes}")
    units = -(-block_bytes // unit_bytes)
    order = (units - 1).bit_length()
    if order > _native.MAX_ORDER:
        raise ValueError(f"a block of {block_bytes} bytes is {units} units: above the largest order {_native.MAX_ORDER}")
    return order


@dataclass(frozen=True)
class PoolStats:
    """A pool's sizes (in blocks and frames) and counters."""

    kinds: Dict[str, Tuple[int, int, int]]
    """Per kind: (blocks held, blocks in use, frames held)."""
    cached_blocks: int
    lru_blocks: int
    """Cached blocks that no request uses (evictable)."""
    lru_frames: int
    free_list_frames: int
    """Frames of the free blocks on the per-kind free lists: free to the pool
    (not in ``kinds``' frames held), still allocated in the allocator until
    a drain gives them back."""
    queries: int
    hits: int
    evicted: int
    evicted_frames: int
    shrinker_scans: int
    own_evictions: int
    total_frames: int
    free_frames: int

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0

    @property
    def usage(self) -> float:
        """Fraction of the arena held by blocks in use (vLLM's ``get_usage``)."""
        held = sum(f for _, _, f in self.kinds.values()) - self.lru_frames
        return held / self.total_frames if self.total_frames else 0.0


class BlockPool(_native.BlockPool):
    """``BlockPool(allocator, {"full": 4, "sliding": 4, "cross": 2})``: kinds and
    their buddy orders, blocks from ``allocator``. See :func:`pool_for` to build
    one from block sizes in bytes.

    Errors: ``OutOfMemory`` when even evicting every unused cached block leaves
    no room; ``InvalidFree`` for a block of another pool, not held, or freed
    more often than referenced; ``ValueError`` for an unknown kind or a
    negative count. Nothing changes when an operation raises.
    """

    def stats(self) -> PoolStats:
        return PoolStats(**self._usage())

    def get_num_free_blocks(self, kind: str) -> int:
        """Blocks of ``kind`` that free, listed and evictable frames would hold
        if they were contiguous (an upper bound: fragmentation may allow fewer)."""
        s = self.stats()
        order = self.kinds[kind]
        return (s.free_frames + s.free_list_frames + s.lru_frames) >> order

    def get_usage(self) -> float:
        return self.stats().usage

    def __iter__(self):
        """Iterate over (kind, order)."""
        return iter(self.kinds.items())


def exact_kind(block_bytes: int, unit_bytes: int):
    """The pool kind for a block of ``block_bytes``: an order when the block
    is a power of two of units, else ``(order, frames)``: the block's frames,
    at the start of an order-``order`` block whose tail stays free."""
    if isinstance(block_bytes, bool) or not isinstance(block_bytes, int):
        raise TypeError(f"block_bytes must be an int, got {type(block_bytes).__name__}")
    order = order_for(block_bytes, unit_bytes)
    frames = -(-block_bytes // unit_bytes)
    return order if frames == 1 << order else (order, frames)


def pool_for(
    kinds: Mapping[str, int], unit_bytes: int, capacity_bytes: int, free_list_frames: int = 256, exact: bool = False,
    **allocator_args
) -> BlockPool:
    """A pool for block sizes in bytes (``kinds``: name -> bytes per block) on a
    new allocator without backing: frames of ``unit_bytes``, ``capacity_bytes``
    of them in all (rounded down to whole pageblocks of 512 frames).
    Per-CPU lists and thread caches are off so that every free frame is in
    the buddy lists, where it can merge for a larger kind, and the watermark
    reserve is 0 (nothing else allocates from this arena). The pool's own
    free lists (``free_list_frames`` a kind) take their place: they are
    given back whenever an allocation runs short.

    ``exact``: a kind whose block is not a power of two of units (a
    recurrent-state page of a hybrid model) takes the smallest order that
    holds it and gives the rest of that block back (:func:`exact_kind`);
    otherwise every block is rounded up to its order."""
    if capacity_bytes <= 0 or unit_bytes <= 0:
        raise ValueError(f"capacity_bytes and unit_bytes must be > 0, got {capacity_bytes} and {unit_bytes}")
    orders = {k: exact_kind(b, unit_bytes) if exact else order_for(b, unit_bytes) for k, b in kinds.items()}
    frames = capacity_bytes // unit_bytes // PAGEBLOCK_BYTES_UNITS * PAGEBLOCK_BYTES_UNITS
    if frames == 0:
        raise ValueError(f"capacity {capacity_bytes} bytes is less than one pageblock of {PAGEBLOCK_BYTES_UNITS} units")
    args = dict(backing="none", pcp_lists=False, front_cache=False, min_free_kbytes=0)
    args.update(allocator_args)
    alloc = Allocator(arena_bytes=frames * _native.PAGE_SIZE, **args)
    return BlockPool(alloc, orders, free_list_frames)
