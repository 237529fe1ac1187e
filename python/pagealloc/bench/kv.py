"""``python -m pagealloc.bench.kv``: KV-cache memory of three hybrid models
under three block strategies at the same memory, and the pool's operation
times from Python against a pure-Python vLLM-shaped pool.

Prints a table, writes ``results.json`` and two SVG charts to ``--out``.
Strategies, trace and waste are defined in :mod:`pagealloc.bench.sim`;
models (with sources) in :mod:`pagealloc.bench.models`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Dict, List

from .. import Allocator
from ..kv import BlockPool
from . import svg
from .models import MODELS
from .pypool import PyBlockPool
from .sim import Sim, build
from .trace import make_trace

STRATEGIES = ["padded", "static", "mixed"]
TRACES = ["default", "long", "long-unshared"]
"""The traces: each model's default one; its long-context one (every
request near the model's maximum context); and that without shared
prefixes (the RFC's setting). See :func:`pagealloc.bench.trace.make_trace`."""


def memory_table(requests: int, seed: int, trace_kind: str = "default") -> Dict[str, Dict[str, dict]]:
    out: Dict[str, Dict[str, dict]] = {}
    for m in MODELS:
        trace = make_trace(m, requests, seed, rate=m.trace.get("rate", 8.0), kind=trace_kind)
        step = 256 if m.context > 20000 else 32
        out[m.name] = {}
        for s in STRATEGIES:
            out[m.name][s] = Sim(m, build(s, m, trace), step).run(trace)
    return out


POOLS = [
    # (label, allocator's per-CPU lists and thread cache, pool's free lists)
    ("lists", True, True),
    ("lists, no pcp", False, True),
    ("no lists", True, False),
    ("no lists, no pcp", False, False),
]
"""pagealloc configurations timed: the pool's free lists on (the default)
or off (every block one allocator call, the pool before its lists), on an
allocator with its per-CPU lists on (its default) or off (as ``pool_for``
builds it, so that every free frame can merge at once)."""


def time_ops(n: int, rounds: int, iters: int) -> dict:
    """get_new_blocks(n) + free_blocks of them on each pool of ``POOLS`` and
    the pure-Python pool, alternating pool by pool within each round (in
    reverse every other round); the median round of each (microseconds a
    pair)."""
    pools = {}
    for label, per_cpu, lists in POOLS:
        a = Allocator(arena_bytes=64 << 20, backing="none", pcp_lists=per_cpu, front_cache=per_cpu,
                      min_free_kbytes=0)
        pool = BlockPool(a, {"full": 0, "sliding": 0}, free_list_frames=256 if lists else 0)
        pools[label] = (lambda p: lambda: p.free_blocks(p.get_new_blocks(n, "full")))(pool), pool
    py = PyBlockPool(pool.allocator.nr_pages)
    pools["python"] = (lambda: py.free_blocks(py.get_new_blocks(n))), None
    res: Dict[str, List[float]] = {k: [] for k in pools}
    order = list(pools.items())
    for r in range(rounds):
        # Every other round in reverse, so no pool always runs right after
        # the same one (the shared machine's noise then falls on all alike).
        for label, (op, _) in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            for _ in range(iters):
                op()
            res[label].append((time.perf_counter() - t0) / iters * 1e6)
    for _, pool in pools.values():
        if pool is not None:
            pool.check_invariants()
    med = {k: statistics.median(v) for k, v in res.items()}
    speedup = {k: med["python"] / v for k, v in med.items() if k != "python"}
    return dict(blocks=n, us_per_pair=med, speedup=speedup, rounds=rounds, iters=iters)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=300, help="requests per trace (default 300)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=15, help="timing rounds per pool (alternating)")
    p.add_argument("--out", default="bench-report/kv", help="folder for results.json and the SVG charts")
    p.add_argument("--timing-only", action="store_true", help="time the pools only (no memory tables)")
    args = p.parse_args(argv)
    t0 = time.time()
    mems = {} if args.timing_only else {t: memory_table(args.requests, args.seed, t) for t in TRACES}
    timing = time_ops(16, args.rounds, 2000)
    for trace, mem in mems.items():
        print(f"{trace} trace:")
        print(f"{'model':14} {'strategy':8} {'waste':>7} {'max conc':>8} {'hit rate':>8} {'preempt':>7} {'steps':>6}")
        for model, rows in mem.items():
            for s, r in rows.items():
                print(f"{model:14} {s:8} {r['waste']:7.1%} {r['max_running']:8d} {r['hit_rate']:8.1%} "
                      f"{r['preemptions']:7d} {r['steps']:6d}")
            ratio = rows["mixed"]["max_running"] / max(1, rows["padded"]["max_running"])
            print(f"{model:14} mixed/padded concurrency {ratio:.2f}x")
    us = timing["us_per_pair"]
    print(f"get_new_blocks(16) + free_blocks, median of {timing['rounds']} alternating rounds: "
          f"pure Python {us['python']:.2f} us")
    for label, sp in timing["speedup"].items():
        print(f"  pagealloc, {label:17} {us[label]:.2f} us  {sp:.2f}x the pure-Python pool")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(dict(memory=mems, timing=timing, args=vars(args)), f, indent=2)
    for trace, mem in mems.items():
        prefix = "" if trace == "default" else f"{trace}-"
        for key, title, scale, unit in [("waste", "KV memory wasted (%)", 100, "%"),
                                        ("max_running", "Max concurrent requests", 1, "")]:
            groups = {m: [round(rows[s][key] * scale, 1) for s in STRATEGIES] for m, rows in mem.items()}
            with open(os.path.join(args.out, f"{prefix}{key}.svg"), "w") as f:
                f.write(svg.bars(f"{title}, {trace} trace", groups, STRATEGIES, unit))
    print(f"wrote {args.out}/results.json and the SVG charts in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
