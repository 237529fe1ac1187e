"""The two KV layouts the hybrid simulation compares, each on its own pool.

``vllm_layout``: vLLM 0.33's plan (:mod:`pagealloc.bench.vllm_plan`) on
vLLM's own ``BlockPool`` (loaded unchanged): one pool, one block size, every
group's ids from it, an id costing ``plan.bytes_per_block``.

``pagealloc_layout``: each layer spec's layers split into groups of a power
of two of layers (the binary digits of its layer count), so that every
group's block is a power-of-two multiple of one unit and nothing is padded:
attention groups take 16-token blocks (64 for MLA, FlashMLA's page), a
state group takes the first ``frames`` frames of the order that holds its
state (an exact kind: the tail goes back), and a state group is at most 2^10
units (the largest order). All on one ``pagealloc.kv.BlockPool``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import List, Optional

from .. import Allocator, OutOfMemory
from .._native import MAX_ORDER, PAGE_SIZE
from ..kv import BlockPool
from . import vllm_plan, vllm_ref
from .shapes import Layer, Shape
from .vllm_plan import cdiv

PAGEBLOCK = 512


class Full(Exception):
    """The pool cannot give the blocks asked for."""


@dataclass
class GroupLayout:
    layer: Layer
    layers: int
    """Real layers behind one block table."""
    tokens: int
    """Tokens a block holds (attention)."""
    block_bytes: int
    """Memory one block costs."""
    useful_token_bytes: int = 0
    """Bytes a held token needs in this group (attention)."""
    useful_state_bytes: int = 0
    """Bytes one state copy needs in this group."""
    kind: str = ""
    """The pool's kind name (pagealloc) or group id (vLLM)."""


class _Pools:
    """What both pools share: reference counting on ``self.pool``."""

    pool = None

    def free(self, blocks):
        self.pool.free_blocks(blocks)

    def touch(self, blocks):
        self.pool.touch(blocks)


class VllmPools(_Pools):
    """vLLM's own pool, one id space for every group. ``hash_tokens``: its
    ``hash_block_size`` (``--prefix-match-unit``), a divisor of the block."""

    def __init__(self, num_blocks: int, block_tokens: int, wheel: Optional[str] = None,
                 hash_tokens: Optional[int] = None):
        v = vllm_ref.load(wheel)
        self.hash_tokens = hash_tokens or block_tokens
        self.pool = v.BlockPool(num_blocks, True, self.hash_tokens)
        self.block_tokens = block_tokens
        self.scale = block_tokens // self.hash_tokens

    def new(self, g: GroupLayout, n: int):
        try:
            return self.pool.get_new_blocks(n)
        except ValueError as e:
            raise Full(str(e)) from None

    def cache(self, g: GroupLayout, blocks, keys):
        # vLLM names a block by the hash of its last hash unit.
        hashes = [b""] * (len(keys) * self.scale)
        for j, k in enumerate(keys):
            hashes[(j + 1) * self.scale - 1] = k
        self.pool.cache_full_blocks(SimpleNamespace(block_hashes=hashes), blocks, 0, len(blocks), self.block_tokens,
                                    int(g.kind))

    def cache_partial(self, g: GroupLayout, block, key, tokens: int):
        """A prefix entry ending inside ``block`` (``cache_partial_block``)."""
        hashes = [b""] * (tokens // self.hash_tokens)
        hashes[-1] = key
        self.pool.cache_partial_block(SimpleNamespace(block_hashes=hashes, all_token_ids=[], mm_features=[]), block,
                                      tokens, int(g.kind), self.block_tokens)

    def lookup(self, g: GroupLayout, key):
        got = self.pool.get_cached_block(key, [int(g.kind)])
        return got[0] if got else None

    def check(self):
        pass


class NativePools(_Pools):
    """pagealloc's pool: a kind per group, each at its own order."""

    def __init__(self, unit: int, memory: int, kinds: dict):
        frames = max(PAGEBLOCK, memory // unit // PAGEBLOCK * PAGEBLOCK)
        a = Allocator(arena_bytes=frames * PAGE_SIZE, backing="none", pcp_lists=False, front_cache=False,
                      min_free_kbytes=0)
        self.pool = BlockPool(a, kinds)
        self.frames = frames

    def new(self, g: GroupLayout, n: int):
        try:
            return self.pool.get_new_blocks(n, g.kind)
        except OutOfMemory as e:
            raise Full(str(e)) from None

    def cache(self, g: GroupLayout, blocks, keys):
        self.pool.cache_full_blocks(blocks, keys)

    def lookup(self, g: GroupLayout, key):
        return self.pool.get_cached_block(key, g.kind)

    def check(self):
        self.pool.check_invariants()


def vllm_layout(shape: Shape, memory: int, wheel: Optional[str] = None, hash_tokens: Optional[int] = None):
    plan = vllm_plan.plan(shape, memory)
    groups = []
    for i, g in enumerate(plan.groups):
        if len({x.block_tokens for x in plan.groups}) != 1:
            raise NotImplementedError(f"{shape.name}: groups of different block sizes")
        rider = sum(n * ly.token_bytes / ly.tokens_per_state for ly, n in shape.layers.items() if ly.kind == "indexer")
        rider_per_layer = rider / max(1, sum(n for ly, n in shape.layers.items() if ly.kind == "indexer"))
        tb = g.layers * (g.layer.token_bytes + (rider_per_layer if g.rider_page else 0))
        groups.append(GroupLayout(g.layer, g.layers, g.block_tokens, plan.bytes_per_block,
                                  useful_token_bytes=int(tb), useful_state_bytes=g.layers * g.layer.state_bytes,
                                  kind=str(i)))
    return plan, groups, VllmPools(plan.num_blocks, plan.block_tokens, wheel, hash_tokens)


def _pow2_split(n: int, limit: int) -> List[int]:
    """``n`` as powers of two, largest first, none above ``limit``."""
    out = []
    for bit in range(limit.bit_length(), -1, -1):
        size = 1 << bit
        if size > limit:
            continue
        while n >= size:
            out.append(size)
            n -= size
    return out


def state_split(n: int, layer_bytes: int, unit: int) -> List[int]:
    """``n`` state layers as groups (layer counts) whose buddy blocks add up
    to the fewest frames: each group takes the order that holds its
    states, so a group whose states fill its order well leaves little
    tail (that its tail is given back helps only if other kinds can use
    it). At most the largest order per group; fewer groups on a tie."""
    best = {0: (0, [])}
    for m in range(1, n + 1):
        options = []
        for size in range(1, m + 1):
            frames = cdiv(size * layer_bytes, unit)
            if frames > 1 << MAX_ORDER:
                break
            cost = 1 << (frames - 1).bit_length()
            prev_cost, prev = best[m - size]
            options.append((prev_cost + cost, len(prev) + 1, [size] + prev))
        if not options:
            raise NotImplementedError("one layer's state is above the largest order")
        cost, _, split = min(options, key=lambda o: (o[0], o[1]))
        best[m] = (cost, split)
    return sorted(best[n][1], reverse=True)


def pagealloc_layout(shape: Shape, memory: int):
    mla = any(ly.mla for ly in shape.layers)
    tokens = 64 if mla else 16
    rider = {ly: n for ly, n in shape.layers.items() if ly.kind == "indexer"}
    rider_block = sum(cdiv(tokens, ly.tokens_per_state) * ly.token_bytes for ly in rider)  # per layer
    attn = {ly: n for ly, n in shape.layers.items() if ly.kind in ("full", "sliding", "cross")}
    per_layer_block = {ly: tokens * ly.token_bytes + (rider_block if ly.mla else 0) for ly in attn}
    unit = min(per_layer_block.values())
    groups: List[GroupLayout] = []
    kinds = {}
    for ly, n in attn.items():
        ratio = per_layer_block[ly] // unit
        if per_layer_block[ly] % unit or ratio & (ratio - 1):
            raise NotImplementedError(f"{shape.name}: block of {ly} is not a power-of-two of units")
        for size in _pow2_split(n, 1 << MAX_ORDER):
            order = (size * ratio).bit_length() - 1
            name = f"g{len(groups)}"
            kinds[name] = order
            per_tok = size * (ly.token_bytes + (rider_block / tokens if ly.mla else 0))
            groups.append(GroupLayout(ly, size, tokens, (1 << order) * unit, useful_token_bytes=int(per_tok), kind=name))
    for ly, n in shape.layers.items():
        if ly.kind != "state":
            continue
        for size in state_split(n, ly.state_bytes, unit):
            frames = cdiv(size * ly.state_bytes, unit)
            order = (frames - 1).bit_length()
            name = f"g{len(groups)}"
            kinds[name] = order if frames == 1 << order else (order, frames)
            groups.append(GroupLayout(ly, size, tokens, frames * unit, useful_state_bytes=size * ly.state_bytes,
                                      kind=name))
    return unit, groups, NativePools(unit, memory, kinds)
