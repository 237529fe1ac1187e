"""A drop-in for vLLM 0.33's ``BlockPool`` (``vllm/v1/core/block_pool.py``).

Same constructor, methods and semantics, so that vLLM takes it with one
assignment, before its engine starts::

    import vllm.v1.core.kv_cache_coordinator as coordinator
    from pagealloc.kv.vllm import BlockPool
    coordinator.BlockPool = BlockPool

What is the same (checked by ``python/tests/test_vllm_pool.py``, vLLM's own
block-pool tests rewritten, run against vLLM's pool and this one):

- block ids ``0 .. num_gpu_blocks - 1``; block 0 is the null block, taken
  at construction, never freed (``free_blocks`` and ``touch`` skip it);
- ``get_new_blocks(n)`` raises ``ValueError`` when ``n`` exceeds the free
  blocks, else returns ``n`` blocks with one reference each, evicting the
  cached ones it reuses;
- the eviction order: blocks freed without a hash are reused first, last
  freed first (vLLM prepends them to its free queue); then blocks never
  used, by id; then cached blocks, least recently freed first;
- ``free_blocks`` takes blocks in eviction order, ``touch`` takes a cached
  block back from the free blocks, ``get_num_free_blocks`` is exact, and
  ``get_usage`` leaves the null block out;
- ``cache_full_blocks(request, blocks, num_cached_blocks, num_full_blocks,
  block_size, kv_cache_group_id, block_mask=None)`` reads
  ``request.block_hashes`` at ``hash_block_size``; ``get_cached_block(hash,
  group_ids)`` returns a block per group or None; several blocks may be
  cached under one hash (vLLM's ``BlockHashToBlockMap``);
- ``evict_blocks``, ``reset_prefix_cache``, ``is_block_writable``,
  ``take_events`` (always ``[]``: events are not offered).

What differs: vLLM keeps its free blocks on a doubly linked list of block
objects (``FreeKVCacheBlockQueue``); here they are a stack (the blocks freed
without a hash), a counter (the never-used ids) and an insertion-ordered
dict (the cached ones), whose operations run in C. Misuse is an exception
that changes nothing: a block freed more often than referenced (vLLM 0.33
drives its count negative), a block of another pool, a count that is not
an int. Refused, with ``NotImplementedError``: KV events, hash lookahead,
partial-block entries (``cache_partial_block``, ``move_block_hashes``) and
``unpin_blocks``. A metrics collector is told what vLLM's pool tells it.

vLLM's pool has one block size. For a hybrid model whose layer groups need
pages of different sizes, use :class:`pagealloc.kv.BlockPool` (one kind per
group, each at its own buddy order) or :mod:`pagealloc.kv.hybrid`.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Union

__all__ = ["BlockPool", "KVCacheBlock", "make_block_hash_with_group_id"]

MEDIUM_GPU = "GPU"


def make_block_hash_with_group_id(block_hash: bytes, group_id: int) -> bytes:
    """vLLM's ``BlockHashWithGroupId``: the hash then the group id in 4 big-endian bytes."""
    return block_hash + group_id.to_bytes(4, "big", signed=False)


class KVCacheBlock:
    """A block's metadata, with the fields vLLM's managers read."""

    __slots__ = ("block_id", "ref_cnt", "_block_hash", "_block_hash_num_tokens", "is_null", "pool")

    def __init__(self, block_id: int, ref_cnt: int = 0, pool: "Optional[BlockPool]" = None):
        self.block_id = block_id
        self.ref_cnt = ref_cnt
        self._block_hash: Optional[bytes] = None
        self._block_hash_num_tokens: Optional[int] = None
        self.is_null = False
        self.pool = pool

    @property
    def block_hash(self) -> Optional[bytes]:
        return self._block_hash

    @property
    def block_hash_num_tokens(self) -> Optional[int]:
        return self._block_hash_num_tokens

    def set_block_hash(self, block_hash: bytes, num_tokens: Optional[int] = None) -> None:
        if self._block_hash is not None:
            raise ValueError(f"block {self.block_id} already has a hash")
        self._block_hash = block_hash
        self._block_hash_num_tokens = num_tokens

    def reset_hash(self) -> None:
        self._block_hash = None
        self._block_hash_num_tokens = None

    def __repr__(self) -> str:
        return f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, _block_hash={self._block_hash!r})"


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    return v


class BlockPool:
    """vLLM 0.33's ``BlockPool`` interface and semantics (see the module doc)."""

    def __init__(self, num_gpu_blocks: int, enable_caching: bool, hash_block_size: int,
                 enable_kv_cache_events: bool = False, metrics_collector=None,
                 num_hash_lookahead_tokens: int = 0, medium: str = MEDIUM_GPU):
        self.num_gpu_blocks = _positive_int("num_gpu_blocks", num_gpu_blocks)
        self.hash_block_size = _positive_int("hash_block_size", hash_block_size)
        if enable_kv_cache_events or num_hash_lookahead_tokens:
            raise NotImplementedError("KV events and hash lookahead are not offered")
        # vLLM's KVCacheMetricsCollector, told what vLLM's pool tells it.
        self.metrics_collector = metrics_collector
        self.enable_caching = bool(enable_caching)
        self.enable_kv_cache_events = False
        self.num_hash_lookahead_tokens = 0
        self.medium = medium
        self.blocks: List[KVCacheBlock] = [KVCacheBlock(i, pool=self) for i in range(num_gpu_blocks)]
        # The free blocks in vLLM's queue order: `_front` (a stack, its top
        # the queue's head), then ids `_fresh ..` never used, then `_lru`.
        self._front: List[KVCacheBlock] = []
        self._fresh = 0
        self._lru: Dict[int, KVCacheBlock] = {}
        self._num_free = num_gpu_blocks
        self.cached_block_hash_to_block: Dict[bytes, Union[KVCacheBlock, Dict[int, KVCacheBlock]]] = {}
        self._suffix: Dict[int, bytes] = {}
        """A group id's 4 bytes, as ``make_block_hash_with_group_id`` appends them."""
        self.null_block = self._pop(1)[0]
        self.null_block.is_null = True

    # The queue -------------------------------------------------------------

    def _pop(self, n: int) -> List[KVCacheBlock]:
        """The queue's first ``n`` blocks, off it (the caller checked there are ``n``)."""
        front = self._front
        if n == 0:
            return []
        if len(front) >= n:
            out = front[-n:]
            del front[-n:]
            out.reverse()
        else:
            out = front[::-1]
            front.clear()
            k = min(n - len(out), self.num_gpu_blocks - self._fresh)
            out.extend(self.blocks[self._fresh:self._fresh + k])
            self._fresh += k
            lru = self._lru
            for _ in range(n - len(out)):
                bid = next(iter(lru))
                out.append(lru.pop(bid))
        self._num_free -= n
        return out

    def get_num_free_blocks(self) -> int:
        return self._num_free

    def get_usage(self) -> float:
        total = self.num_gpu_blocks - 1
        return 1.0 - self._num_free / total if total else 0

    # Allocation --------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> List[KVCacheBlock]:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int):
            raise TypeError(f"num_blocks must be an int, got {type(num_blocks).__name__}")
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if num_blocks > self._num_free:
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        ret = self._pop(num_blocks)
        m = self.metrics_collector
        for block in ret:
            if m is not None and self.enable_caching:
                m.on_block_evicted(block)
            if block._block_hash is not None:
                self._evict_hash(block)
            block.ref_cnt = 1
            if m is not None:
                m.on_block_allocated(block)
        return ret

    def _refuse(self, blocks: List, done: int, step: int, why: Exception):
        """Undo ``step`` on the first ``done`` blocks, then raise for ``why``."""
        for b in blocks[:done]:
            if not b.is_null:
                b.ref_cnt -= step
        if isinstance(why, AttributeError):
            raise TypeError(f"expected KVCacheBlocks of this pool: {why}") from None
        raise why

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        blocks = ordered_blocks if type(ordered_blocks) is list else list(ordered_blocks)
        first: List[KVCacheBlock] = []
        last: List[KVCacheBlock] = []
        caching = self.enable_caching
        done = 0
        # One pass that undoes itself on misuse (a block of another pool,
        # one freed more often than referenced: vLLM 0.33 would drive its
        # count negative), so that nothing changes when it raises.
        try:
            for b in blocks:
                if b.pool is not self:
                    raise NotImplementedError(f"block {b.block_id} belongs to another pool")
                if not b.is_null:
                    rc = b.ref_cnt - 1
                    if rc < 0:
                        raise ValueError(f"block {b.block_id} is freed more often than referenced (double free?)")
                    b.ref_cnt = rc
                    if rc == 0:
                        (last if caching and b._block_hash is not None else first).append(b)
                done += 1
        except (AttributeError, ValueError, NotImplementedError) as e:
            self._refuse(blocks, done, -1, e)
        if first:
            first.reverse()
            self._front.extend(first)
        lru = self._lru
        for b in last:
            lru[b.block_id] = b
        self._num_free += len(first) + len(last)

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        blocks = blocks if type(blocks) is list else list(blocks)
        for b in blocks:
            if getattr(b, "pool", None) is not self:
                self._refuse(blocks, 0, 0, AttributeError(f"{b!r} is not a block of this pool"))
            if b.ref_cnt == 0 and not b.is_null and b.block_id >= self._fresh:
                raise ValueError(f"block {b.block_id} was never allocated: it cannot be touched")
        m = self.metrics_collector
        for b in blocks:
            if b.is_null:
                continue
            if b.ref_cnt == 0:
                # Off the free blocks, wherever it waits (vLLM's queue.remove).
                if self._lru.pop(b.block_id, None) is None:
                    self._front.remove(b)
                self._num_free -= 1
            b.ref_cnt += 1
            if m is not None:
                m.on_block_accessed(b)

    def is_block_writable(self, block: KVCacheBlock) -> bool:
        return not block.is_null and block.ref_cnt == 1 and block.block_hash is None

    # Prefix cache ----------------------------------------------------------

    def get_cached_block(self, block_hash: bytes, kv_cache_group_ids: List[int]) -> Optional[List[KVCacheBlock]]:
        out = []
        cache, suffix = self.cached_block_hash_to_block, self._suffix
        for gid in kv_cache_group_ids:
            sfx = suffix.get(gid)
            if sfx is None:
                sfx = suffix[gid] = gid.to_bytes(4, "big", signed=False)
            got = cache.get(block_hash + sfx)
            if got is None:
                return None
            out.append(got if got.__class__ is KVCacheBlock else next(iter(got.values())))
        return out

    def cache_full_blocks(self, request, blocks: List[KVCacheBlock], num_cached_blocks: int, num_full_blocks: int,
                          block_size: int, kv_cache_group_id: int, block_mask: Optional[List[bool]] = None) -> None:
        if num_cached_blocks >= num_full_blocks:
            return
        if block_size <= 0 or block_size % self.hash_block_size:
            raise ValueError(f"block_size {block_size} is not a multiple of hash_block_size {self.hash_block_size}")
        new = blocks[num_cached_blocks:num_full_blocks]
        if block_mask is not None and len(block_mask) != len(new):
            raise ValueError("block_mask must match the new full blocks")
        hashes = request.block_hashes
        scale = block_size // self.hash_block_size
        gid = kv_cache_group_id.to_bytes(4, "big", signed=False)
        for i, blk in enumerate(new):
            if blk.is_null or (block_mask is not None and not block_mask[i]):
                continue
            j = num_cached_blocks + i
            # A block of `scale` hash blocks is named by the hash of its last.
            key = hashes[(j + 1) * scale - 1] + gid
            ntok = (j + 1) * block_size
            if blk._block_hash is not None:
                if blk._block_hash == key:
                    continue
                self._evict_hash(blk)
            self._insert(key, blk, ntok)

    def _insert(self, key: bytes, blk: KVCacheBlock, ntok: int) -> None:
        cache = self.cached_block_hash_to_block
        have = cache.get(key)
        if have is None:
            cache[key] = blk
        elif isinstance(have, KVCacheBlock):
            if have is blk:
                return
            cache[key] = {have.block_id: have, blk.block_id: blk}
        else:
            have[blk.block_id] = blk
        blk._block_hash = key
        blk._block_hash_num_tokens = ntok

    def _evict_hash(self, blk: KVCacheBlock) -> bool:
        key = blk._block_hash
        if key is None:
            return False
        cache = self.cached_block_hash_to_block
        have = cache.get(key)
        if have is blk:
            del cache[key]
        elif isinstance(have, dict):
            have.pop(blk.block_id, None)
            if len(have) == 1:
                cache[key] = next(iter(have.values()))
            elif not have:
                del cache[key]
        blk.reset_hash()
        return True

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        return self._evict_hash(block)

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        for bid in block_ids:
            if not 0 <= bid < self.num_gpu_blocks:
                raise ValueError(f"Invalid block_id {bid} >= {self.num_gpu_blocks}")
            # A free cached block that loses its hash keeps its place in the
            # queue, in vLLM too: it stays in `_lru`.
            self._evict_hash(self.blocks[bid])

    def reset_prefix_cache(self) -> bool:
        if self.num_gpu_blocks - self._num_free != 1:
            return False
        self.cached_block_hash_to_block = {}
        for b in self.blocks:
            b.reset_hash()
        if self.metrics_collector is not None:
            self.metrics_collector.reset()
        return True

    def take_events(self) -> list:
        return []

    def cache_partial_block(self, *args, **kwargs):
        raise NotImplementedError("partial-block cache entries are not offered")

    def move_block_hashes(self, *args, **kwargs):
        raise NotImplementedError("partial-block cache entries are not offered")

    def unpin_blocks(self, *args, **kwargs):
        raise NotImplementedError("unpin_blocks is not offered")

    def emit_cached_block_events(self, *args, **kwargs) -> None:
        return None
