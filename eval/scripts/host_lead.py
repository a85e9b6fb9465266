#!/usr/bin/env python3
"""How far the host ran ahead of the GPU in a recorded run: the input of a model of WHEN a free that
waits for another stream (record_stream) completes (docs/MODEL.md "Reserved memory", issue 12).

Two inputs, either or both:
--history FILE.pickle  a torch memory history (ULYSSES_MEMORY_HISTORY; every event has the host clock
    `time_us`; a free is `free_requested` then `free_completed`, the latter at the first malloc after
    the GPU finished the streams that used the block). Prints per deferred free of 16 MiB and more (a
    malloc came between request and completion) the host time between the two and the allocations of
    16 MiB and more issued meanwhile, and the host's waits (> --wait-ms between two events) in the last
    step with the Python frames around them.
--trace FILE.txt[.gz]  a replay trace written with the host clock (`ALLOC_TRACE_TIMES=1 run_alst_gpu.sh
    alloc-trace`: allocator_history.py --trace-times; the histories themselves are not kept). Prints the same
    summary of the deferred frees as --history (no frames, no host waits: the trace has no Python frames of
    frees), and with --rows N the N longest, each with its size and when it was requested and completed.
--cupti FILE.json      a torch profiler trace with CUDA activity (`ulysses compare --trace`). Prints
    every runtime/driver call that held the host more than --wait-ms, the op it ran in, and for an
    asynchronous call (a launch, memset, event record: it blocks only when the launch queue is full)
    the stream commands issued between the GPU op whose completion released it and the call: the
    depth of the queue the host can run ahead by.
No torch needed. Exit 2 with one line on an unreadable input.
"""
import argparse
import bisect
import gzip
import json
import pickle
import statistics
import sys

MB = 1 << 20
ASYNC = ("cudaLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel", "cudaMemsetAsync", "cudaEventRecordWithFlags",
         "cudaEventRecord", "cudaStreamWaitEvent")
# stream commands: what occupies the GPU's queue (cudaMemcpyAsync too; queries and capture checks do not)
COMMANDS = ASYNC + ("cudaMemcpyAsync",)
PLUMBING = ("torch/nn/modules/module.py", "torch/autograd/function.py", "nvtx.py")


def frames(ev, k=3):
    out = []
    for f in ev.get("frames", []) or []:
        name = f.get("filename", "?")
        if any(p in name for p in PLUMBING) or name.startswith("<"):
            continue
        out.append(f"{name.split('/')[-1]}:{f.get('line', '?')} {f.get('name', '?')}")
        if len(out) >= k:
            break
    return " <- ".join(out)


def deferred_summary(path, lags, larges):
    """The one line both inputs print about their deferred frees (lags in ms, allocations of 16 MiB and more between)."""
    return (f"{path}: {len(lags)} deferred frees of 16 MiB and more; host time request -> completion median "
            f"{statistics.median(lags):.1f} ms, max {max(lags):.1f} ms; allocations of 16 MiB and more between: median "
            f"{statistics.median(larges):.0f}, max {max(larges)}")


def history(path, wait_ms):
    with open(path, "rb") as f:
        evs = next(e for e in pickle.load(f)["device_traces"] if e)
    requested, rows = {}, []
    for i, ev in enumerate(evs):
        if ev["action"] == "free_requested":
            requested[ev["addr"]] = i
        elif ev["action"] == "free_completed":
            r = requested.pop(ev["addr"], None)
            if r is None or ev["size"] < 16 * MB or not any(e["action"] == "alloc" for e in evs[r:i]):
                continue
            large = sum(1 for e in evs[r:i] if e["action"] == "alloc" and e["size"] >= 16 * MB)
            waited = any(evs[j]["time_us"] - evs[j - 1]["time_us"] > wait_ms * 1e3 for j in range(max(r + 1, i - 20), i + 1))
            rows.append(((ev["time_us"] - evs[r]["time_us"]) / 1e3, large, waited))
    if rows:
        print(deferred_summary(path, [r[0] for r in rows], [r[1] for r in rows]) +
              f"; completed within 20 events after a host wait > {wait_ms:g} ms: {sum(r[2] for r in rows)}")
    # the last step: from the last embedding output (torch/nn/modules/sparse.py)
    starts = [i for i, e in enumerate(evs) if e["action"] == "alloc" and any("sparse.py" in f["filename"] for f in e.get("frames") or [])]
    for i in range(max(1, starts[-1] if starts else 1), len(evs)):
        dt = (evs[i]["time_us"] - evs[i - 1]["time_us"]) / 1e3
        if dt > wait_ms:
            print(f"   host wait {dt:7.1f} ms before {evs[i]['action']:<15} {frames(evs[i])}   (after {frames(evs[i - 1], 2)})")


def trace(path, rows_shown):
    opener = gzip.open if path.endswith(".gz") else open
    times, large_before, sizes, rows = [], [0], {}, []  # per allocation in order: host time (us); allocations >= 16 MiB before
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            body, _, note = line.partition(" # ")
            p = body.split()
            kv = dict(x.split("=", 1) for x in note.split() if "=" in x and x.split("=", 1)[0] in ("t", "req"))
            if p[0] == "a":
                if "t" not in kv:
                    raise ValueError("an allocation without a host clock (t=): not a timed trace (ALLOC_TRACE_TIMES=1)")
                sizes[p[1]] = int(p[2])
                times.append(int(kv["t"]))
                large_before.append(large_before[-1] + (int(p[2]) >= 16 * MB))
            elif p[0] == "f" and "req" in kv:
                t, req, size = int(kv["t"]), int(kv["req"]), sizes.pop(p[1], 0)
                lo, hi = bisect.bisect_right(times, req), bisect.bisect_right(times, t)  # allocations in (req, t]
                if size < 16 * MB or req < 0 or hi == lo:
                    continue
                rows.append(((t - req) / 1e3, large_before[hi] - large_before[lo], size, req / 1e3, t / 1e3))
    if not times:
        raise ValueError("no allocation with a host clock (`a ID BYTES STREAM # t=...`): not a timed trace")
    if rows:
        print(deferred_summary(path, [r[0] for r in rows], [r[1] for r in rows]))
    else:
        print(f"{path}: no deferred free of 16 MiB and more")
    for lag, large, size, req, t in sorted(rows, reverse=True)[:rows_shown]:
        print(f"   {size / MB:8.1f} MiB  requested {req:10.1f} ms  completed {t:10.1f} ms  lag {lag:7.1f} ms  "
              f"{large} allocations of 16 MiB and more between")


def cupti(path, wait_ms):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    rt = sorted((e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")), key=lambda e: e["ts"])
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    ops = [e for e in ev if e.get("cat") in ("cpu_op", "user_annotation") and "dur" in e]
    at = {e.get("args", {}).get("correlation"): i for i, e in enumerate(rt)}
    t0 = min(e["ts"] for e in ops)
    for i, call in enumerate(rt):
        if call.get("dur", 0) <= wait_ms * 1e3:
            continue
        end = call["ts"] + call["dur"]
        inside = sorted((o for o in ops if o["ts"] <= call["ts"] and o["ts"] + o["dur"] >= end and o.get("tid") == call.get("tid")),
                        key=lambda o: o["dur"])
        line = (f"{(call['ts'] - t0) / 1e3:9.1f} ms {call['name']:<26} held {call['dur'] / 1e3:7.1f} ms in "
                + " < ".join(o["name"][:36] for o in inside[:4]))
        if call["name"] in ASYNC:
            done = [g for g in gpu if g["ts"] + g["dur"] <= end + 5]
            g = max(done, key=lambda g: g["ts"] + g["dur"]) if done else {}
            j = at.get(g.get("args", {}).get("correlation"))
            if j is not None:
                depth = sum(1 for e in rt[j + 1:i] if e["name"] in COMMANDS)
                line += f"; released by {g['name'][:40]} ({g['dur'] / 1e3:.1f} ms), {depth} stream commands after its launch"
        print(line)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history")
    ap.add_argument("--cupti")
    ap.add_argument("--trace")
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--wait-ms", type=float, default=5.0)
    a = ap.parse_args(argv)
    try:
        if a.history:
            history(a.history, a.wait_ms)
        if a.trace:
            trace(a.trace, a.rows)
        if a.cupti:
            cupti(a.cupti, a.wait_ms)
    except (OSError, KeyError, ValueError, IndexError, StopIteration, pickle.UnpicklingError, EOFError) as e:
        print(f"not a memory history / profiler trace / timed replay trace: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
