#!/usr/bin/env python3
"""Compare SQLite test-file results with pagealloc's cache against pcache1's.

usage: compare.py OUT_DIR ALLOWLIST FILE...

OUT_DIR holds one log (and FILE.rc, the exit code) per mode and test file:
OUT_DIR/{pcache1,pagealloc,small}/FILE. A log ends with tester.tcl's
summary: "N errors out of M tests ..." and "!Failures on these tests: ...".

For each file and each of the modes pagealloc and small, the differences
from pcache1 are: a test that fails only there, or passes only there (by
name), "#count" (a different number of tests; "#count-fault" when only
fault-injection tests, named ...oom..., ...malloc..., ...ioerr...,
...fault... or do_malloc_test's ....transient.N and ....persistent.N,
ran a different number of times), "#crash" (no summary: the run died or
timed out, where pcache1's had one or exited otherwise; a file that ends
without a summary under both, as the win32 tests on Linux, is alike) and "#leak" (an exit line of the cache, in
FILE.stats, one per process, shows frames held with no cache open: a
process that exits with connections open holds their frames). Each must match an
allowlist line: MODE FILE TEST-GLOB REASON, MODE being "any" (both
pagealloc modes) or "small" (the small budget only), TEST-GLOB an
fnmatch pattern of test names (or a #-name). Prints a table; exits 1 on
a difference not on the allowlist. Allowlist lines that matched nothing
are listed (stale entries to remove), not failed: a test may differ in
one run and not the next. Files whose runs the cache served no fetch
(their tests read no page) are counted, not failed.
"""
import fnmatch
import os
import re
import sys

MODES = ("pagealloc", "small")


def stats_of(out, mode, name):
    """The cache's exit lines of one run (one per process that opened a
    database), summed: fetches, overdraft charges; the most frames any
    process held at exit and the highest overdraft peak. None if none."""
    try:
        lines = open(os.path.join(out, mode, name + ".stats")).read().splitlines()
    except FileNotFoundError:
        return None
    total = {"fetches": 0, "used_frames": 0, "overdraft_peak": 0, "overdraft_times": 0, "processes": 0}
    for line in lines:
        words = line.split()[1:]
        f = {k: int(v) for k, v in zip(words[::2], words[1::2]) if v.isdigit()}
        total["processes"] += 1
        total["fetches"] += f.get("fetches", 0)
        total["overdraft_times"] += f.get("overdraft_times", 0)
        total["overdraft_peak"] = max(total["overdraft_peak"], f.get("overdraft_peak", 0))
        if f.get("open_caches", 0) == 0:
            total["used_frames"] = max(total["used_frames"], f.get("used_frames", 0))
    return total


FAULT = re.compile(r"oom|malloc|ioerr|fault|transient|persistent", re.I)


def groups(out, mode, name):
    """How many tests of each name ran, a trailing ".N" dropped (fault
    injection numbers its runs), from the log's "NAME..." lines."""
    try:
        text = open(os.path.join(out, mode, name), errors="replace").read()
    except FileNotFoundError:
        return {}
    counts = {}
    for t in re.findall(r"^(\S+)\.\.\.", text, re.M):
        g = re.sub(r"\.\d+$", "", t)
        counts[g] = counts.get(g, 0) + 1
    return counts


def count_diff(out, mode, name):
    """"#count-fault" when the tests that ran a different number of times
    are all fault-injection runs, else "#count"."""
    a, b = groups(out, mode, name), groups(out, "pcache1", name)
    differ = [g for g in set(a) | set(b) if a.get(g, 0) != b.get(g, 0)]
    return "#count-fault" if differ and all(FAULT.search(g) for g in differ) else "#count"


def parse(out, mode, name):
    """(tests, failures, ok, stats) of one run: ok is False when the
    summary is missing; stats from `stats_of`."""
    path = os.path.join(out, mode, name)
    fields = stats_of(out, mode, name)
    try:
        text = open(path, errors="replace").read()
    except FileNotFoundError:
        return 0, set(), False, fields
    summary = re.findall(r"^(\d+) errors out of (\d+) tests", text, re.M)
    fails = re.findall(r"^!Failures on these tests: (.*)$", text, re.M)
    if not summary:
        return 0, set(), False, fields
    failures = set(fails[-1].split()) if fails else set()
    return int(summary[-1][1]), failures, True, fields


def load_allowlist(path):
    entries = []
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("# ") or line == "#":
            continue
        parts = line.split(None, 3)
        if len(parts) < 4 or parts[0] not in ("any", "small"):
            sys.exit(f"{path}:{n}: want MODE FILE TEST-GLOB REASON, MODE any or small: {line}")
        entries.append({"mode": parts[0], "file": parts[1], "glob": parts[2], "reason": parts[3], "used": 0, "line": n})
    return entries


def allowed(entries, mode, name, test):
    for e in entries:
        if e["mode"] in ("any", mode) and fnmatch.fnmatch(name, e["file"]) and fnmatch.fnmatch(test, e["glob"]):
            e["used"] += 1
            return e
    return None


def differences(out, mode, name, base):
    """The differences of one file in one mode from pcache1's run."""
    tests, fails, ok, stats = parse(out, mode, name)
    btests, bfails, bok, _ = parse(out, "pcache1", name)
    diffs = []
    if not ok:
        if bok or rc(out, mode, name)[0] != rc(out, "pcache1", name)[0]:
            diffs.append(("#crash", "no summary (exit %s)" % rc(out, mode, name)[0]))
    else:
        diffs += [(t, "fails only here") for t in sorted(fails - bfails)]
        diffs += [(t, "fails only with pcache1") for t in sorted(bfails - fails)] if bok else []
        if bok and tests != btests:
            diffs.append((count_diff(out, mode, name), f"{tests} tests, pcache1 {btests}"))
    if stats and stats["used_frames"] != 0:
        diffs.append(("#leak", f"{stats['used_frames']} frames held at exit with no cache open"))
    return tests, len(fails), diffs, stats


def rc(out, mode, name):
    """(exit code, seconds) of one run."""
    try:
        words = open(os.path.join(out, mode, name + ".rc")).read().split()
        return words[0], int(words[1])
    except (FileNotFoundError, IndexError, ValueError):
        return "?", 0


def main():
    out, allowlist, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    entries = load_allowlist(allowlist)
    bad, allowed_n, totals = [], 0, {m: 0 for m in ("pcache1",) + MODES}
    secs = {m: 0 for m in ("pcache1",) + MODES}
    over = {m: [0, 0, 0, 0] for m in MODES}  # peak, times, fetches, files unused
    print(f"{'file':<24} {'pcache1 fail/tests s':>22} {'pagealloc':>14} {'small':>14}  differences")
    for name in names:
        btests, bfails, bok, _ = parse(out, "pcache1", name)
        totals["pcache1"] += btests
        secs["pcache1"] += rc(out, "pcache1", name)[1]
        cols = [(f"{len(bfails)}/{btests}" if bok else "crash") + f" {rc(out, 'pcache1', name)[1]:>4}"]
        notes = []
        for mode in MODES:
            tests, nfail, diffs, stats = differences(out, mode, name, btests)
            totals[mode] += tests
            t = rc(out, mode, name)[1]
            secs[mode] += t
            cols.append((f"{nfail}/{tests}" if not any(d[0] == "#crash" for d in diffs) else "crash") + f" {t:>4}")
            if stats:
                over[mode][0] = max(over[mode][0], stats["overdraft_peak"])
                over[mode][1] += stats["overdraft_times"]
                over[mode][2] += stats["fetches"]
            if not stats or stats["fetches"] == 0:
                over[mode][3] += 1
            for test, why in diffs:
                e = allowed(entries, mode, name, test)
                if e:
                    allowed_n += 1
                    notes.append(f"{mode}:{test} (allowed, line {e['line']})")
                else:
                    bad.append(f"{name} [{mode}] {test}: {why}")
                    notes.append(f"{mode}:{test} NOT ALLOWED ({why})")
        print(f"{name:<24} {cols[0]:>22} {cols[1]:>14} {cols[2]:>14}  {'; '.join(notes)}")
    print(
        f"sqlite-testsuite: {len(names)} files; tests run: pcache1 {totals['pcache1']}, "
        f"pagealloc {totals['pagealloc']}, small budget {totals['small']}; {allowed_n} allowlisted differences; "
        f"seconds: pcache1 {secs['pcache1']}, pagealloc {secs['pagealloc']}, small {secs['small']}"
    )
    for mode in MODES:
        print(
            f"sqlite-testsuite: {mode}: {over[mode][2]} fetches served; overdraft peak {over[mode][0]} bytes, "
            f"{over[mode][1]} charges over budget; {over[mode][3]} files read no page through the cache"
        )
    if over["pagealloc"][2] == 0:
        bad.append("the cache served no fetch in any file: was it installed?")
    stale = [e for e in entries if e["used"] == 0 and any(fnmatch.fnmatch(n, e["file"]) for n in names)]
    for e in stale:
        print(f"sqlite-testsuite: note: allowlist line {e['line']} matched nothing this run: {e['file']} {e['glob']}")
    if bad:
        print("sqlite-testsuite: FAIL: differences from pcache1 not on the allowlist:")
        for b in bad:
            print("  " + b)
        sys.exit(1)
    print("sqlite-testsuite: PASS")


if __name__ == "__main__":
    main()
