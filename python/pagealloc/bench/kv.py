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


def memory_table(requests: int, seed: int) -> Dict[str, Dict[str, dict]]:
    out: Dict[str, Dict[str, dict]] = {}
    for m in MODELS:
        trace = make_trace(m, requests, seed, rate=m.trace.get("rate", 8.0))
        step = 256 if m.context > 20000 else 32
        out[m.name] = {}
        for s in STRATEGIES:
            out[m.name][s] = Sim(m, build(s, m, trace), step).run(trace)
    return out


def time_ops(n: int, rounds: int, iters: int, per_cpu: bool = True) -> dict:
    """get_new_blocks(n) + free_blocks of them, alternating the two pools
    round by round; the median round of each. ``per_cpu``: the allocator's
    per-CPU lists and thread cache on (its defaults) or off (as ``pool_for``
    builds it, so that every free frame can merge at once)."""
    a = Allocator(arena_bytes=64 << 20, backing="none", pcp_lists=per_cpu, front_cache=per_cpu, min_free_kbytes=0)
    ours = BlockPool(a, {"full": 0, "sliding": 0})
    theirs = PyBlockPool(a.nr_pages)
    res: Dict[str, List[float]] = {"pagealloc": [], "python": []}
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            ours.free_blocks(ours.get_new_blocks(n, "full"))
        t1 = time.perf_counter()
        for _ in range(iters):
            theirs.free_blocks(theirs.get_new_blocks(n))
        t2 = time.perf_counter()
        res["pagealloc"].append((t1 - t0) / iters * 1e6)
        res["python"].append((t2 - t1) / iters * 1e6)
    ours.check_invariants()
    med = {k: statistics.median(v) for k, v in res.items()}
    return dict(blocks=n, per_cpu=per_cpu, us_per_pair=med, speedup=med["python"] / med["pagealloc"], rounds=rounds,
                iters=iters)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=300, help="requests per trace (default 300)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=15, help="timing rounds per pool (alternating)")
    p.add_argument("--out", default="bench-report/kv", help="folder for results.json and the SVG charts")
    args = p.parse_args(argv)
    t0 = time.time()
    mem = memory_table(args.requests, args.seed)
    timing = [time_ops(16, args.rounds, 2000, per_cpu) for per_cpu in (True, False)]
    print(f"{'model':14} {'strategy':8} {'waste':>7} {'max conc':>8} {'hit rate':>8} {'preempt':>7} {'steps':>6}")
    for model, rows in mem.items():
        for s, r in rows.items():
            print(f"{model:14} {s:8} {r['waste']:7.1%} {r['max_running']:8d} {r['hit_rate']:8.1%} "
                  f"{r['preemptions']:7d} {r['steps']:6d}")
        ratio = rows["mixed"]["max_running"] / max(1, rows["padded"]["max_running"])
        print(f"{model:14} mixed/padded concurrency {ratio:.2f}x")
    for t in timing:
        us = t["us_per_pair"]
        print(f"get_new_blocks(16) + free_blocks, per-CPU lists {'on ' if t['per_cpu'] else 'off'}: "
              f"pagealloc {us['pagealloc']:.2f} us, pure Python {us['python']:.2f} us, "
              f"{t['speedup']:.2f}x (median of {t['rounds']} alternating rounds)")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(dict(memory=mem, timing=timing, args=vars(args)), f, indent=2)
    for key, title, scale, unit in [("waste", "KV memory wasted (%)", 100, "%"),
                                    ("max_running", "Max concurrent requests", 1, "")]:
        groups = {m: [round(rows[s][key] * scale, 1) for s in STRATEGIES] for m, rows in mem.items()}
        with open(os.path.join(args.out, f"{key}.svg"), "w") as f:
            f.write(svg.bars(title, groups, STRATEGIES, unit))
    print(f"wrote {args.out}/results.json, waste.svg, max_running.svg in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
