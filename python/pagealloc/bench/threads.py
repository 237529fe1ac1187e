"""Threaded throughput of one ``pagealloc.kv.BlockPool``: each thread runs
``get_new_blocks(16)`` + ``free_blocks`` pairs for a while; pairs a second
in all, per thread count (the best of the rounds, thread counts taking
turns). ``--kinds``: threads use one kind (``same``) or one kind each
(``own``, where the pool's per-kind locks never meet).

It uses the package's public API only, so that it also runs against an
older build: ``python path/to/threads.py --threads 1,2,4`` with that
build's interpreter (how the before-and-after figures were taken).
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Dict, List

from pagealloc.kv import pool_for

N = 16


def run(threads: List[int], seconds: float = 1.0, rounds: int = 3, kinds: str = "own") -> Dict[int, float]:
    names = [f"k{i}" for i in range(max(threads))]
    pool = pool_for({n: 16 << 10 for n in names}, unit_bytes=16 << 10, capacity_bytes=64 << 20)
    best = {t: 0.0 for t in threads}
    for r in range(rounds):
        for t in threads if r % 2 == 0 else threads[::-1]:
            stop = time.perf_counter() + seconds
            counts = [0] * t

            def work(i: int) -> None:
                kind = names[i] if kinds == "own" else names[0]
                new, free = pool.get_new_blocks, pool.free_blocks
                n = 0
                while time.perf_counter() < stop:
                    for _ in range(50):
                        free(new(N, kind))
                    n += 50
                counts[i] = n

            ths = [threading.Thread(target=work, args=(i,)) for i in range(t)]
            t0 = time.perf_counter()
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            best[t] = max(best[t], sum(counts) / (time.perf_counter() - t0))
    pool.check_invariants()
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2,4", help="thread counts, comma-separated")
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kinds", choices=["own", "same"], default="own")
    args = p.parse_args(argv)
    res = run([int(x) for x in args.threads.split(",")], args.seconds, args.rounds, args.kinds)
    for t, v in res.items():
        print(f"threads {t}: {v:,.0f} pairs/s ({v / res[min(res)]:.2f}x one thread)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
