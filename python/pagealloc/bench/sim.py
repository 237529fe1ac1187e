"""The serving simulation: requests arrive, are admitted FCFS while their
prompt's blocks can be had (prefix-cache hits reused), decode some tokens a
step, and leave; when a running request cannot grow, the most recently
admitted one is preempted (its blocks freed, itself requeued, as vLLM's
recompute preemption does). Every strategy runs on `pagealloc.kv.BlockPool`,
so they differ only in block sizes, memory split and sliding-window release:

- ``padded``: one block size, 16 tokens of the largest group's per-token
  size, for every group; every layer keeps every token (vLLM before its
  hybrid allocator treated sliding-window layers as full attention).
- ``static``: each group its own exact block size and its own fixed share of
  the memory (proportional to the trace's mean need), windows released.
- ``mixed``: each group its own exact block size, all from one arena
  (pagealloc's buddy orders), windows released.

Waste is measured over the blocks in use: bytes allocated that hold no KV
the model needs (padding, tokens outside a window, empty slots of a last block).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional

from .. import Allocator, OutOfMemory
from ..kv import BlockPool
from .models import Group, Model
from .trace import Request

MIN_TOKENS = 16
"""Tokens a block holds at least (vLLM's default block_size)."""
PAGEBLOCK = 512


@dataclass
class Layout:
    group: Group
    tokens: int
    block_bytes: int
    order: int
    window: Optional[int]
    """Release blocks older than this many tokens (None: keep all)."""
    pool: Optional[BlockPool] = None


def _pool(memory: int, unit: int, orders: Dict[str, int]) -> BlockPool:
    frames = max(PAGEBLOCK, memory // unit // PAGEBLOCK * PAGEBLOCK)
    a = Allocator(arena_bytes=frames * 4096, backing="none", pcp_lists=False, front_cache=False, min_free_kbytes=0)
    return BlockPool(a, orders)


def exact_layouts(model: Model) -> List[Layout]:
    """Each group's smallest block of >= 16 tokens whose size is the unit
    (one token of every group, lcm) times a power of two: no padding."""
    unit = math.lcm(*(g.token_bytes for g in model.groups))
    out = []
    for g in model.groups:
        ratio = unit // g.token_bytes
        k = max(0, math.ceil(math.log2(MIN_TOKENS / ratio))) if ratio < MIN_TOKENS else 0
        out.append(Layout(g, ratio << k, unit << k, k, g.window))
    return out


def mean_need(model: Model, g: Group, trace: List[Request]) -> float:
    if g.kind == "cross":
        return sum(model.encoder_tokens for r in trace if r.image) / len(trace)
    lens = [r.prompt + r.output / 2 for r in trace]
    return sum(min(n, g.window) if g.window else n for n in lens) / len(trace)


def build(strategy: str, model: Model, trace: List[Request]) -> List[Layout]:
    memory = model.memory_gib << 30
    if strategy == "padded":
        block = MIN_TOKENS * max(g.token_bytes for g in model.groups)
        lays = [Layout(g, MIN_TOKENS, block, 0, None) for g in model.groups]
        pool = _pool(memory, block, {g.name: 0 for g in model.groups})
        for lay in lays:
            lay.pool = pool
        return lays
    lays = exact_layouts(model)
    unit = lays[0].block_bytes >> lays[0].order
    if strategy == "mixed":
        pool = _pool(memory, unit, {lay.group.name: lay.order for lay in lays})
        for lay in lays:
            lay.pool = pool
    else:
        need = [lay.group.token_bytes * mean_need(model, lay.group, trace) for lay in lays]
        for lay, n in zip(lays, need):
            lay.pool = _pool(int(memory * n / sum(need)), unit, {lay.group.name: lay.order})
    return lays


class Running:
    def __init__(self, req: Request, layouts: List[Layout]):
        self.req = req
        self.tokens = req.prompt
        self.blocks: List[List] = [[] for _ in layouts]
        """Per group, block j holds tokens [j*T, (j+1)*T); None once released."""


class Sim:
    def __init__(self, model: Model, layouts: List[Layout], step_tokens: int):
        self.model, self.layouts, self.step_tokens = model, layouts, step_tokens
        self.preemptions = 0
        self.hit_tokens = 0
        self.lookup_tokens = 0
        self.useful = 0
        self.allocated = 0
        self.max_running = 0
        self.rejected = 0

    def _span(self, lay: Layout, r: Running) -> range:
        """Indexes of the blocks group `lay` needs now."""
        if lay.group.kind == "cross":
            n = self.model.encoder_tokens if r.req.image else 0
            return range(0, -(-n // lay.tokens))
        first = max(0, r.tokens - lay.window) // lay.tokens if lay.window else 0
        return range(first, -(-r.tokens // lay.tokens))

    def _hash(self, lay: Layout, r: Running, j: int):
        return hash((r.req.family, lay.group.name, j))

    def admit(self, r: Running) -> bool:
        """Take the prompt's blocks (prefix hits first); all or nothing."""
        taken: List[tuple] = []
        try:
            for i, lay in enumerate(self.layouts):
                span = self._span(lay, r)
                shared = (self.model.encoder_tokens if lay.group.kind == "cross" else r.req.prefix) // lay.tokens
                # Prefix hits: the shared blocks the request needs, in a run
                # from the first (for a sliding window, the first block in
                # the window: the blocks before it are never needed).
                hits = []
                for j in range(span.start, min(span.stop, shared)):
                    b = lay.pool.get_cached_block(self._hash(lay, r, j), lay.group.name)
                    if b is None:
                        break
                    hits.append(b)
                lay.pool.touch(hits)
                taken.append((lay, hits))
                new = lay.pool.get_new_blocks(len(span) - len(hits), lay.group.name)
                taken.append((lay, new))
                r.blocks[i] = [None] * span.start + hits + new
                first_new = span.start + len(hits)
                top = min(span.stop, shared)
                if top > first_new:
                    lay.pool.cache_full_blocks(r.blocks[i][first_new:top],
                                               [self._hash(lay, r, j) for j in range(first_new, top)])
                if i == 0:
                    self.hit_tokens += len(hits) * lay.tokens
                    self.lookup_tokens += r.req.prompt
        except OutOfMemory:
            for lay, blocks in taken:
                lay.pool.free_blocks(blocks)
            r.blocks = [[] for _ in self.layouts]
            return False
        return True

    def release(self, r: Running) -> None:
        for lay, blocks in zip(self.layouts, r.blocks):
            lay.pool.free_blocks([b for b in reversed(blocks) if b is not None])
        r.blocks = [[] for _ in self.layouts]

    def grow(self, r: Running, running: List[Running], waiting: List[Running]) -> bool:
        """Add the blocks `r` needs after its last step; preempt others (or
        `r` itself) when memory runs out. False if `r` was preempted."""
        for i, lay in enumerate(self.layouts):
            span = self._span(lay, r)
            blocks = r.blocks[i]
            # Blocks that slid out of the window go first, so the new ones
            # can reuse them (vLLM frees skipped blocks before it allocates).
            if lay.window is not None:
                old = [b for b in blocks[: span.start] if b is not None]
                if old:
                    lay.pool.free_blocks(old[::-1])
                    blocks[: span.start] = [None] * min(span.start, len(blocks))
            while len(blocks) < span.stop:
                try:
                    blocks.extend(lay.pool.get_new_blocks(span.stop - len(blocks), lay.group.name))
                except OutOfMemory:
                    victim = running[-1]
                    self.preempt(victim, running, waiting)
                    if victim is r:
                        return False
        return True

    def preempt(self, r: Running, running: List[Running], waiting: List[Running]) -> None:
        self.release(r)
        running.remove(r)
        r.tokens = r.req.prompt
        waiting.insert(0, r)
        self.preemptions += 1

    def sample(self, running: List[Running]) -> None:
        seen = {}
        for r in running:
            for lay, blocks in zip(self.layouts, r.blocks):
                span = self._span(lay, r)
                stop = self.model.encoder_tokens if lay.group.kind == "cross" else r.tokens
                lo = span.start * 0 + (max(0, r.tokens - lay.group.window) if lay.group.window else 0)
                for j, b in enumerate(blocks):
                    if b is None:
                        continue
                    a, z = max(j * lay.tokens, lo), min((j + 1) * lay.tokens, stop)
                    seen[(lay.group.name, b.id)] = (lay.block_bytes, max(0, z - a) * lay.group.token_bytes)
        for block, useful in seen.values():
            self.allocated += block
            self.useful += useful

    def run(self, trace: List[Request], sample_every: int = 4) -> dict:
        pending = list(trace)
        waiting: List[Running] = []
        running: List[Running] = []
        done = 0
        step = 0
        while done + self.rejected < len(trace):
            while pending and pending[0].arrival <= step:
                waiting.append(Running(pending.pop(0), self.layouts))
            while waiting and self.admit(waiting[0]):
                running.append(waiting.pop(0))
            if waiting and not running:
                self.rejected += 1
                waiting.pop(0)
            self.max_running = max(self.max_running, len(running))
            if step % sample_every == 0:
                self.sample(running)
            for r in list(running):
                if r not in running:
                    continue
                r.tokens = min(r.tokens + self.step_tokens, r.req.prompt + r.req.output)
                if r.tokens == r.req.prompt + r.req.output:
                    self.release(r)
                    running.remove(r)
                    done += 1
                else:
                    self.grow(r, running, waiting)
            step += 1
        for lay in self.layouts:
            lay.pool.check_invariants()
        return dict(
            steps=step,
            max_running=self.max_running,
            preemptions=self.preemptions,
            rejected=self.rejected,
            waste=1 - self.useful / self.allocated if self.allocated else 0.0,
            hit_rate=self.hit_tokens / self.lookup_tokens if self.lookup_tokens else 0.0,
        )
