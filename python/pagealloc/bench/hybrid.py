"""Serving a hybrid model from one KV pool: vLLM's layout on vLLM's pool
against pagealloc's on pagealloc's, at the same memory.

Requests arrive (Poisson), are admitted first come first served while their
blocks can be had (prefix hits taken first), decode ``step`` tokens a step
and leave; a request that cannot grow preempts the newest (its blocks
freed, itself requeued, as vLLM's recompute preemption). Per group:

- full attention: a block per ``tokens`` tokens; every full block is cached
  under its prefix's key (shared while it is inside the family's prefix);
- sliding window: only the blocks that overlap the window are held
  (``SlidingWindowManager.remove_skipped_blocks``);
- cross attention: the image's encoder tokens, shared by a family;
- state: ``1 + num_spec`` running copies, and checkpoints cached at block
  boundaries (vLLM's ``align`` mode): at the last boundary of the prompt
  (vLLM only), and, with ``junction``, where the shared prefix ends (vLLM offers that
  with ``enable_mamba_shared_prefix_checkpoint``, 0.33 only with EAGLE;
  pagealloc's layout always does it).

A hit of ``L`` tokens needs every full-attention block below ``L``, the
window's blocks before ``L`` and a state checkpoint at exactly ``L``; it
stops one token short of the prompt (the last token is always computed).

Figures: the most requests running at once, the prefix hit rate (hit
tokens over the tokens of shared prefixes), and waste: the bytes of blocks
held by running requests that hold no KV the model needs (padding, tokens
outside the window, the empty tail of a last block), sampled every step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, List, Optional

from .layouts import Full, GroupLayout, pagealloc_layout, vllm_layout
from .shapes import Shape
from .vllm_plan import cdiv


@dataclass
class Req:
    rid: int
    arrival: int
    family: int
    prefix: int
    prompt: int
    output: int
    image: bool


def make_trace(shape: Shape, n: int, seed: int) -> List[Req]:
    t = shape.trace
    rng = random.Random(seed)
    fams = t.get("families", 8)
    weights = [1.0 / (i + 1) for i in range(fams)]
    out, arrival = [], 0.0
    for rid in range(n):
        arrival += rng.expovariate(t.get("rate", 16.0))
        fam = rng.choices(range(fams), weights)[0]
        prompt = rng.randint(*t["prompt"])
        shared = rng.random() < t.get("prefix_share", 0.5)
        prefix = min(t.get("prefix", 0), prompt) if shared else 0
        out.append(Req(rid, int(arrival), fam if shared else -1 - rid, prefix, prompt,
                       rng.randint(*t["output"]), rng.random() < t.get("image_share", 0.0)))
    return out


class Running:
    def __init__(self, req: Req, ngroups: int):
        self.req = req
        self.tokens = req.prompt
        self.blocks: List[List] = [[] for _ in range(ngroups)]
        self.hits = [0] * ngroups
        """Per group, the blocks below this index came from the cache."""
        """Attention: block j holds tokens [j*T, (j+1)*T) (None once released).
        State: the running copies, then checkpoints."""


class Sim:
    def __init__(self, shape: Shape, groups: List[GroupLayout], pools, junction: bool, step: int,
                 hit_unit: Optional[int] = None, release_checkpoints: bool = False):
        self.shape, self.groups, self.pools, self.junction, self.step = shape, groups, pools, junction, step
        self.release_checkpoints = release_checkpoints
        self.copies = 1 + shape.num_spec
        self.hit_tokens = self.shared_tokens = 0
        self.useful = self.held = 0
        self.max_running = self.preemptions = self.rejected = 0
        self.T = groups[0].tokens if groups else 16
        self.H = hit_unit or self.T
        """Tokens a hit can end on: the block, or vLLM's ``--prefix-match-unit``."""

    def key(self, r: Running, kind: str, pos: int) -> bytes:
        """The prefix key of ``pos`` tokens: shared within the family's prefix."""
        owner = r.req.family if pos <= r.req.prefix else f"r{r.req.rid}"
        return f"{owner}|{kind}|{pos}".encode()

    def image_key(self, r: Running, g: GroupLayout, j: int) -> bytes:
        """A family shares its image (the encoder's tokens)."""
        return f"img{r.req.family}|{g.kind}|{j}".encode()

    def span(self, g: GroupLayout, r: Running) -> range:
        if g.layer.kind == "cross":
            return range(0, cdiv(self.shape.encoder_tokens, g.tokens) if r.req.image else 0)
        first = max(0, r.tokens - g.layer.window) // g.tokens if g.layer.window else 0
        return range(first, cdiv(r.tokens, g.tokens))

    def hit_length(self, r: Running) -> tuple:
        """(tokens hit, tokens the attention groups alone would hit)."""
        T, H, req = self.T, self.H, r.req
        top = (req.prompt - 1) // H * H
        attn = None
        for g in self.groups:
            if g.layer.kind == "full":
                n = 0
                while (n + 1) * H <= top and self.pools.lookup(g, self.key(r, g.kind, (n + 1) * H)) is not None:
                    n += 1
                attn = n * H if attn is None else min(attn, n * H)
        attn = attn or 0
        # Per sliding group, missing[j]: blocks below j not cached (a prefix
        # sum, so that each candidate's window is checked in O(1)).
        missing = {}
        for g in self.groups:
            if g.layer.kind == "sliding":
                m = [0]
                for j in range(attn // T):
                    m.append(m[-1] + (self.pools.lookup(g, self.key(r, g.kind, (j + 1) * T)) is None))
                missing[g.kind] = m
        for L in range(attn, 0, -H):
            if all(self.pools.lookup(g, self.key(r, g.kind, L)) is not None
                   for g in self.groups if g.layer.kind == "state"):
                if all(missing[g.kind][L // T] == missing[g.kind][max(0, L - g.layer.window) // T]
                       for g in self.groups if g.layer.kind == "sliding"):
                    return L, attn
        return 0, attn

    def admit(self, r: Running) -> bool:
        L, attn = self.hit_length(r)
        taken: List[list] = []
        # Every group's hits are taken (touched) before any allocation, as
        # vLLM's coordinator does: an allocation may evict cached blocks.
        hits_of: List[list] = []
        for i, g in enumerate(self.groups):
            if g.layer.kind == "state":
                hits = [self.pools.lookup(g, self.key(r, g.kind, L))] if L else []
            elif g.layer.kind == "cross":
                hits = []
                for j in self.span(g, r):
                    b = self.pools.lookup(g, self.image_key(r, g, j))
                    if b is None:
                        break
                    hits.append(b)
            else:
                # Whole blocks below L are shared; a block L ends inside is
                # the request's own copy (vLLM's partial hit).
                span = self.span(g, r)
                hits = [self.pools.lookup(g, self.key(r, g.kind, (j + 1) * g.tokens))
                        for j in range(span.start, min(span.stop, L // g.tokens))]
            self.pools.touch(hits)
            taken.append(hits)
            hits_of.append(hits)
        try:
            for i, g in enumerate(self.groups):
                hits = hits_of[i]
                if g.layer.kind == "state":
                    new = self.pools.new(g, self.copies)
                    taken.append(new)
                    r.blocks[i] = new + hits
                    continue
                span = self.span(g, r)
                r.hits[i] = span.start + len(hits)
                new = self.pools.new(g, len(span) - len(hits))
                taken.append(new)
                r.blocks[i] = [None] * span.start + hits + new
            self.cache_prompt(r, L, attn)
        except Full:
            for blocks in taken:
                self.pools.free(blocks)
            r.blocks = [[] for _ in self.groups]
            return False
        if r.req.prefix:
            self.shared_tokens += r.req.prefix
            self.hit_tokens += min(L, r.req.prefix)
        return True

    def cache_prompt(self, r: Running, L: int, attn: int) -> None:
        """Publish the prompt's full blocks and the state checkpoints."""
        T, P = self.T, r.req.prompt
        for i, g in enumerate(self.groups):
            blocks = r.blocks[i]
            if g.layer.kind == "state":
                # vLLM's align mode keeps the state at the prompt's last block
                # boundary (it writes it there anyway); pagealloc's layout
                # keeps only the junction's: with 16-token blocks a
                # prompt's last boundary is its own (a unique suffix), a copy
                # no later request finds.
                marks = set() if self.release_checkpoints else {P // T * T}
                if self.junction and attn > L:
                    marks.add(attn)
                for m in sorted(x for x in marks if x > L):
                    if self.pools.lookup(g, self.key(r, g.kind, m)) is not None:
                        continue
                    ck = self.pools.new(g, 1)
                    self.pools.cache(g, ck, [self.key(r, g.kind, m)])
                    if self.release_checkpoints:
                        # A copy of the state at the boundary: the request
                        # runs on, the copy waits on the LRU list.
                        self.pools.free(ck)
                    else:
                        blocks.extend(ck)
            elif g.layer.kind == "cross":
                new = blocks[r.hits[i]:]
                if new:
                    self.pools.cache(g, new, [self.image_key(r, g, j) for j in range(r.hits[i], len(blocks))])
            else:
                full = [(j, b) for j, b in enumerate(blocks[: P // g.tokens]) if b is not None and j >= r.hits[i]]
                if full:
                    self.pools.cache(g, [b for _, b in full], [self.key(r, g.kind, (j + 1) * g.tokens) for j, _ in full])
                if self.H < g.tokens and g.layer.kind == "full":
                    for pos in range((L // self.H + 1) * self.H, P + 1, self.H):
                        b = blocks[(pos - 1) // g.tokens] if (pos - 1) // g.tokens < len(blocks) else None
                        if pos % g.tokens and b is not None:
                            self.pools.cache_partial(g, b, self.key(r, g.kind, pos), pos)

    def release(self, r: Running) -> None:
        for blocks in r.blocks:
            self.pools.free([b for b in reversed(blocks) if b is not None])
        r.blocks = [[] for _ in self.groups]

    def grow(self, r: Running, running: List[Running], waiting: List[Running]) -> bool:
        for i, g in enumerate(self.groups):
            if g.layer.kind in ("state", "cross"):
                continue
            span, blocks = self.span(g, r), r.blocks[i]
            if g.layer.window is not None:
                old = [b for b in blocks[: span.start] if b is not None]
                if old:
                    self.pools.free(old[::-1])
                    blocks[: span.start] = [None] * min(span.start, len(blocks))
            while len(blocks) < span.stop:
                try:
                    blocks.extend(self.pools.new(g, span.stop - len(blocks)))
                except Full:
                    victim = running[-1]
                    self.preempt(victim, running, waiting)
                    if victim is r:
                        return False
        return True

    def preempt(self, r, running, waiting):
        self.release(r)
        running.remove(r)
        r.tokens = r.req.prompt
        waiting.insert(0, r)
        self.preemptions += 1

    def sample(self, running: List[Running]) -> None:
        for r in running:
            for g, blocks in zip(self.groups, r.blocks):
                for j, b in enumerate(blocks):
                    if b is None:
                        continue
                    self.held += g.block_bytes
                    if g.layer.kind == "state":
                        self.useful += g.useful_state_bytes
                        continue
                    stop = self.shape.encoder_tokens if g.layer.kind == "cross" else r.tokens
                    lo = max(0, r.tokens - g.layer.window) if g.layer.window else 0
                    a, z = max(j * g.tokens, lo), min((j + 1) * g.tokens, stop)
                    self.useful += max(0, z - a) * g.useful_token_bytes

    def run(self, trace: List[Req]) -> dict:
        pending, waiting, running = list(trace), [], []
        done = step = 0
        while done + self.rejected < len(trace):
            while pending and pending[0].arrival <= step:
                waiting.append(Running(pending.pop(0), len(self.groups)))
            while waiting and self.admit(waiting[0]):
                running.append(waiting.pop(0))
            if waiting and not running:
                self.rejected += 1
                waiting.pop(0)
            self.max_running = max(self.max_running, len(running))
            self.sample(running)
            for r in list(running):
                if r not in running:
                    continue
                r.tokens = min(r.tokens + self.step, r.req.prompt + r.req.output)
                if r.tokens == r.req.prompt + r.req.output:
                    self.release(r)
                    running.remove(r)
                    done += 1
                else:
                    self.grow(r, running, waiting)
            step += 1
        self.pools.check()
        return dict(steps=step, max_running=self.max_running, preemptions=self.preemptions, rejected=self.rejected,
                    waste=1 - self.useful / self.held if self.held else 0.0,
                    hit_rate=self.hit_tokens / self.shared_tokens if self.shared_tokens else None)


STRATEGIES = ["vllm", "vllm+pmu", "pagealloc"]
"""vLLM's layout and pool; the same with its 0.33 mitigation for hybrid
models (``--prefix-match-unit 16``: hits inside a block, and
``enable_mamba_shared_prefix_checkpoint``: a state checkpoint where the
shared prefix ends; 0.33 takes the second only with EAGLE); pagealloc's
layout and pool (16-token blocks, 64 for MLA; a checkpoint at the junction
only, released to the LRU list at once)."""


def run_shape(shape: Shape, requests: int, seed: int, step: int = 16, wheel: Optional[str] = None,
              strategies: Optional[List[str]] = None) -> Dict[str, dict]:
    trace = make_trace(shape, requests, seed)
    memory = int(shape.memory_gib * (1 << 30))
    out = {}
    for s in strategies or STRATEGIES:
        if s == "vllm+pmu" and not shape.hybrid:
            continue
        if s.startswith("vllm"):
            plan, groups, pools = vllm_layout(shape, memory, wheel, hash_tokens=16 if s == "vllm+pmu" else None)
            desc = plan.describe()
        else:
            unit, groups, pools = pagealloc_layout(shape, memory)
            desc = f"{len(groups)} groups, unit {unit} B, {pools.frames} frames"
        res = Sim(shape, groups, pools, junction=s != "vllm", step=step, hit_unit=16 if s == "vllm+pmu" else None,
                  release_checkpoints=s == "pagealloc").run(trace)
        res["layout"] = desc
        out[s] = res
    return out
