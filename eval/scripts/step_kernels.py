#!/usr/bin/env python3
"""Kernel time per phase of our runtime's traced step: `ulysses compare --backend cuda --scope step --trace F`
writes the traced step's CUPTI records as process 3 (cat "gpu": kernels, memcpy, memset) beside its phase windows
(cat "phase"). Each record is attributed to the phase window holding its midpoint; prints the (phase, kernel) pairs
above --min-ms with their count and total, then each phase's kernel total. Usage: step_kernels.py TRACE.json[.gz]
[--min-ms X]. Exit 2 when the file holds no traced step."""
import argparse
import bisect
import collections
import gzip
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--min-ms", type=float, default=0.2)
    a = ap.parse_args()
    try:
        with (gzip.open if a.trace.endswith(".gz") else open)(a.trace, "rt") as f:
            ev = json.load(f)["traceEvents"]
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:  # unreadable, truncated, no JSON, no events
        print(f"{a.trace}: not a Perfetto trace of compare --trace ({e})", file=sys.stderr)
        return 2
    gpu = [e for e in ev if e.get("pid") == 3 and e.get("cat") == "gpu" and e.get("ph") == "X"]
    phases = sorted((e for e in ev if e.get("pid") == 3 and e.get("cat") == "phase" and e.get("ph") == "X"),
                    key=lambda e: e["ts"])
    if not gpu or not phases:
        print(f"{a.trace}: no traced step (process 3 with gpu records and phase windows)", file=sys.stderr)
        return 2
    starts = [p["ts"] for p in phases]
    agg = collections.defaultdict(lambda: [0, 0.0])
    for k in gpu:
        mid = k["ts"] + k["dur"] / 2
        i = bisect.bisect_right(starts, mid) - 1
        name = phases[i]["name"] if i >= 0 and mid < phases[i]["ts"] + phases[i]["dur"] else "(between phases)"
        agg[(name, k["name"])][0] += 1
        agg[(name, k["name"])][1] += k["dur"]
    total = collections.defaultdict(float)
    print(f"#  {'phase':22s} {'count':>5s} {'total':>9s}  kernel")
    print(f"#  {'':22s} {'':>5s} {'(ms)':>9s}")
    for (p, n), (c, us) in sorted(agg.items(), key=lambda x: -x[1][1]):
        total[p] += us
        if us >= a.min_ms * 1e3:
            print(f"   {p:22s} {c:5d} {us / 1e3:9.2f}  {n[:100]}")
    print(f"#  {'phase':22s} {'kernels (ms)':>15s}")
    for p, us in sorted(total.items(), key=lambda x: -x[1]):
        print(f"   {p:22s} {us / 1e3:15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
