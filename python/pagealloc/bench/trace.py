"""A request trace: Poisson arrivals, prompts that share prefixes (a few
popular system prompts or documents, Zipf-like), varied prompt and output
lengths within the model's context. Seeded: every strategy sees the same."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List

from .models import Model


@dataclass
class Request:
    rid: int
    arrival: int
    """Step at which it arrives."""
    family: int
    """Requests of one family share their first `prefix` tokens (and image)."""
    prefix: int
    prompt: int
    output: int
    image: bool


def make_trace(model: Model, n: int, seed: int, families: int = 8, rate: float = 2.0,
               kind: str = "default") -> List[Request]:
    """``kind``: "default" (the model's trace), "long" (prompts near the
    model's context) or "long-unshared" (the same, no shared prefixes)."""
    if kind not in ("default", "long", "long-unshared"):
        raise ValueError(f"unknown trace kind {kind!r}")
    rng = random.Random(seed)
    t = model.trace if kind == "default" else model.long_trace(shared=kind == "long")
    lo, hi = t["prompt"]
    fam_prefix = [rng.randint(lo // 2, lo) for _ in range(families)]
    weights = [1.0 / (i + 1) for i in range(families)]
    out: List[Request] = []
    arrival = 0.0
    for rid in range(n):
        arrival += rng.expovariate(rate)
        fam = rng.choices(range(families), weights)[0]
        prompt = rng.randint(lo, hi)
        output = rng.randint(*t["output"])
        output = max(1, min(output, model.context - prompt))
        shared = rng.random() < t.get("prefix_share", 0.5)
        prefix = min(fam_prefix[fam], prompt) if shared else 0
        image = rng.random() < t.get("image_share", 0.0)
        out.append(Request(rid, int(arrival), fam if shared else -1 - rid, prefix, prompt, output, image))
    return out
