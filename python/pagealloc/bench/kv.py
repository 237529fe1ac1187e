"""``python -m pagealloc.bench.kv``: hybrid models' KV cache on one pool,
vLLM 0.33 as it is against pagealloc, and the pools' operation times.

Memory: each shape of :mod:`pagealloc.bench.shapes` (from ``transformers``'
config classes) served by :mod:`pagealloc.bench.hybrid` with vLLM's layout
on vLLM's own ``BlockPool`` (with and without its mitigation for hybrid
models) and pagealloc's layout on pagealloc's pool, at the same memory.
Timing: :mod:`pagealloc.bench.timing`; threads: :mod:`pagealloc.bench.threads`.
vLLM's code comes from its wheel (``pip download --no-deps vllm==0.33.0``,
cached; ``PAGEALLOC_VLLM_WHEEL`` names a file instead).

Prints tables, writes ``results.json`` and SVG charts to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from . import hybrid, shapes, svg, threads, timing, vllm_ref


def memory(requests: int, seed: int, names=None, wheel=None) -> dict:
    out = {}
    for make in shapes.SHAPES:
        s = make()
        if names and s.name not in names:
            continue
        out[s.name] = dict(hybrid.run_shape(s, requests, seed, wheel=wheel), memory_gib=s.memory_gib, source=s.source)
    return out


def print_memory(mem: dict) -> None:
    print(f"{'model':22} {'strategy':10} {'max running':>11} {'vs vLLM':>8} {'hit rate':>8} {'waste':>6} "
          f"{'preempt':>7}  layout")
    for model, rows in mem.items():
        base = rows["vllm"]["max_running"]
        for s, r in rows.items():
            if not isinstance(r, dict):
                continue
            hit = "-" if r["hit_rate"] is None else f"{r['hit_rate']:.1%}"
            print(f"{model:22} {s:10} {r['max_running']:11d} {r['max_running'] / base:7.2f}x {hit:>8} "
                  f"{r['waste']:6.1%} {r['preemptions']:7d}  {r['layout']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200, help="requests per trace (default 200)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    p.add_argument("--rounds", type=int, default=15, help="timing rounds per pool (alternating)")
    p.add_argument("--iters", type=int, default=2000, help="operations per timing round")
    p.add_argument("--threads", default="1,2,4", help="thread counts for the threaded pairs ('' skips them)")
    p.add_argument("--out", default="bench-report/kv", help="folder for results.json and the SVG charts")
    p.add_argument("--timing-only", action="store_true", help="time the pools only (no memory tables)")
    args = p.parse_args(argv)
    t0 = time.time()
    wheel = vllm_ref.find_wheel()
    if wheel is None:
        print(f"vLLM {vllm_ref.VERSION}'s wheel could not be downloaded: no vLLM figures")
    names = [n for n in args.shapes.split(",") if n]
    mem = {} if args.timing_only or wheel is None else memory(args.requests, args.seed, names, wheel)
    if mem:
        print_memory(mem)
    tm = timing.time_ops(args.rounds, args.iters, wheel)
    print(f"\nMicroseconds an operation, median of {tm['rounds']} alternating rounds of {tm['iters']}:")
    for pool, ops in tm["us"].items():
        sp = tm["speedup_vs_vllm"].get(pool, {})
        cells = "  ".join(f"{op} {us:6.2f}" + (f" ({sp[op]:.2f}x vLLM)" if op in sp else "") for op, us in ops.items())
        print(f"  {pool:10} {cells}")
    th = {}
    if args.threads:
        counts = [int(x) for x in args.threads.split(",")]
        for kinds in ("own", "same"):
            th[kinds] = threads.run(counts, kinds=kinds)
            print(f"threaded pairs a second, {kinds} kind per thread: "
                  + ", ".join(f"{t}: {v:,.0f}" for t, v in th[kinds].items()))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(dict(memory=mem, timing=tm, threads=th, args=vars(args), vllm=vllm_ref.VERSION), f, indent=2)
    for key, title, scale, unit in [("max_running", "Most requests running at once", 1, ""),
                                    ("hit_rate", "Prefix hit rate of shared tokens (%)", 100, "%")]:
        groups = {m: [round((rows.get(s, {}).get(key) or 0) * scale, 1) for s in hybrid.STRATEGIES]
                  for m, rows in mem.items()}
        if groups:
            with open(os.path.join(args.out, f"{key}.svg"), "w") as f:
                f.write(svg.bars(title, groups, hybrid.STRATEGIES, unit))
    print(f"wrote {args.out}/results.json and the SVG charts in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
