#!/usr/bin/env python3
"""Where the caching allocator's reserved bytes come from, read from a recorded history.

Input: PREFIX.rank<R>.pickle written by the deepspeed backend's worker under
ULYSSES_MEMORY_HISTORY=PREFIX (runtime/deepspeed/ulysses_worker/allocator.py): torch's
memory._snapshot() with every alloc / free / segment map of the run.
Output (text): the reserved high-water mark and what was live then, per stream; each growth of the
reserved bytes (segment alloc or map) with the request that caused it and its Python frames; the
allocated peak, and what stays mapped under memory pressure at that peak: the 20 MiB granules
(the large pool's expandable-segment granule, c10/cuda/CUDACachingAllocator.cpp kLargeBuffer) that the
live blocks touch, less the live bytes (docs/MODEL.md "Fixed costs and fragmentation"). No torch needed.

Usage: allocator_history.py FILE.pickle [--growths N] [--frames K] [--trace OUT.txt]
--trace writes the allocations and frees of the history in the replay format of
sim/caching_allocator.hpp (read by `ulysses allocator-replay` and tests/sim): the input of the
allocator simulation's check against the allocator itself (docs/MODEL.md "Reserved memory").
Exit 2 with one line on a file that is not such a history.
"""
import argparse
import os
import pickle
import sys

GiB = float(1 << 30)
GRANULE = 20 << 20
GROW = ("segment_alloc", "segment_map")
SHRINK = ("segment_free", "segment_unmap")


PLUMBING = ("torch/nn/modules/module.py", "torch/utils/_contextlib.py", "torch/_compile.py", "torch/_dynamo/")


def frames_of(ev, k):
    """The first k Python frames of an event, innermost first, without torch's own plumbing (the
    module call wrappers, decorators); the frames of torch's functional and autograd code stay."""
    out = []
    for f in ev.get("frames", []) or []:
        name = f.get("filename", "?")
        if any(p in name for p in PLUMBING) or name.startswith("<"):
            continue
        out.append(f"{name.split('site-packages/')[-1]}:{f.get('line', '?')} {f.get('name', '?')}")
        if len(out) >= k:
            break
    return out


def granule_bytes(live, base):
    """Bytes of the granules that the live blocks (addr -> (size, stream, index)) touch; granules are
    counted from each stream's lowest mapped address."""
    touched = set()
    for addr, (size, st, _) in live.items():
        b = base.get(st, 0)
        for g in range((addr - b) // GRANULE, (addr + size - 1 - b) // GRANULE + 1):
            touched.add((st, g))
    return len(touched) * GRANULE


def write_trace(path, evs, source, frames_min=0, frames=3, times=False):
    """Replay trace: one line per event, in order. `a ID BYTES STREAM` an allocation (the requested
    size; the allocator rounds it), `f ID` its block returned to the pool (free_completed), `m BYTES
    STREAM` / `u BYTES STREAM` a mapping grown / released (the measurement the replay is checked
    against). IDs number the allocations; streams are numbered in order of first use (0 = the first).
    frames_min > 0: an allocation of at least that many bytes carries its Python frames after ' # '
    (where in DeepSpeed / transformers / torch it came from); the readers ignore them.
    times: every allocation and free also carries the host's clock after ' # ' (`t=` microseconds since
    the first event; a free `t=` when it completed and `req=` when it was requested): how far the host
    ran ahead of the GPU where a free waited for another stream (docs/MODEL.md "Reserved memory")."""
    ids, streams, lines = {}, {}, []
    requested = {}
    t0 = evs[0].get("time_us", 0) if evs else 0
    n = 0
    res = peak = 0
    for ev in evs:
        act, size = ev["action"], int(ev.get("size", 0))
        st = streams.setdefault(int(ev.get("stream", 0)), len(streams))
        if act == "alloc":
            ids[ev["addr"]] = n
            where = " <- ".join(frames_of(ev, frames)) if frames_min and size >= frames_min else ""
            if times:
                where = f"t={ev.get('time_us', t0) - t0}" + (f" {where}" if where else "")
            lines.append(f"a {n} {size} {st}" + (f" # {where}" if where else ""))
            n += 1
        elif act == "free_requested":
            requested[ev["addr"]] = ev.get("time_us", t0) - t0
        elif act == "free_completed" and ev["addr"] in ids:
            when = (f" # t={ev.get('time_us', t0) - t0} req={requested.pop(ev['addr'], -1)}" if times else "")
            lines.append(f"f {ids.pop(ev['addr'])}{when}")
        elif act in GROW:
            res += size
            peak = max(peak, res)
            lines.append(f"m {size} {st}")
        elif act in SHRINK:
            res -= size
            lines.append(f"u {size} {st}")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"# ulysses allocator trace v1: {len(lines)} events from {source}; reserved peak {peak} bytes\n")
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--growths", type=int, default=40, help="growth events to list (largest first)")
    ap.add_argument("--frames", type=int, default=4, help="Python frames per event")
    ap.add_argument("--blocks", type=int, default=12, help="live blocks to list at each peak (largest first)")
    ap.add_argument("--trace", help="also write the replay trace of device 0 to this file")
    ap.add_argument("--trace-frames-min", type=int, default=0,
                    help="in the trace, the frames of every allocation of at least this many bytes")
    ap.add_argument("--trace-times", action="store_true",
                    help="in the trace, the host clock of every allocation and free (and when a free was requested)")
    a = ap.parse_args(argv)
    try:
        with open(a.file, "rb") as f:
            snap = pickle.load(f)
        traces = snap["device_traces"]
    except (OSError, pickle.UnpicklingError, EOFError, KeyError, TypeError) as e:
        print(f"{a.file}: not a torch memory history ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if a.trace:
        evs = next((e for e in traces if e), [])
        write_trace(a.trace, evs, a.file, a.trace_frames_min, a.frames, a.trace_times)
    for dev, evs in enumerate(traces):
        if not evs:
            continue
        reserved = allocated = 0
        peak_res = peak_alloc = 0
        at_res = at_alloc = -1
        live = {}         # addr -> (size, stream, event index)
        res_stream = {}   # stream -> reserved bytes
        growths = []      # (size, stream, event index of the growth, index of the request that caused it)
        pending = []
        base = {}         # stream -> lowest mapped address
        mapped_at_peak = 0
        live_at_alloc_peak = {}
        for i, ev in enumerate(evs):
            act, size, st = ev["action"], int(ev.get("size", 0)), int(ev.get("stream", 0))
            if act in GROW:
                base[st] = min(base.get(st, ev["addr"]), ev["addr"])
                reserved += size
                res_stream[st] = res_stream.get(st, 0) + size
                pending.append((size, st, i))
            elif act in SHRINK:
                reserved -= size
                res_stream[st] = res_stream.get(st, 0) - size
            elif act == "alloc":
                allocated += size
                live[ev["addr"]] = (size, st, i)
                for g in pending:
                    growths.append(g + (i,))
                pending = []
            elif act == "free_completed":
                allocated -= size
                live.pop(ev["addr"], None)
            if reserved > peak_res:
                peak_res, at_res = reserved, i
                res_at_peak = dict(res_stream)
            if allocated > peak_alloc:
                peak_alloc, at_alloc = allocated, i
                mapped_at_peak = granule_bytes(live, base)
                live_at_alloc_peak = dict(live)
        print(f"device {dev}: {len(evs)} events; reserved peak {peak_res / GiB:.3f} GiB at event {at_res}, "
              f"allocated peak {peak_alloc / GiB:.3f} GiB at event {at_alloc}")
        print(f"under pressure at the allocated peak: {mapped_at_peak / GiB:.3f} GiB of granules touched by live blocks, "
              f"{(mapped_at_peak - peak_alloc) / GiB:.3f} GiB ({(mapped_at_peak - peak_alloc) / GRANULE:.1f} granules) above the live bytes")
        # what was live when the reserved bytes peaked
        alloc_then = {}
        live_then = {}
        for i, ev in enumerate(evs[:at_res + 1]):
            act, size, st = ev["action"], int(ev.get("size", 0)), int(ev.get("stream", 0))
            if act == "alloc":
                live_then[ev["addr"]] = (size, st, i)
            elif act == "free_completed":
                live_then.pop(ev["addr"], None)
        for size, st, i in live_then.values():
            alloc_then[st] = alloc_then.get(st, 0) + size
        print("#  stream   reserved  allocated   (at the reserved peak)")
        print("#              (GiB)      (GiB)")
        for st in sorted(set(res_at_peak) | set(alloc_then)):
            print(f"   {st:>6}  {res_at_peak.get(st, 0) / GiB:9.3f}  {alloc_then.get(st, 0) / GiB:9.3f}")
        big = sorted(live_then.values(), reverse=True)[:a.blocks]
        print("largest live blocks at the reserved peak:")
        for size, st, i in big:
            print(f"   {size / GiB:8.3f} GiB stream {st} event {i}: " + " <- ".join(frames_of(evs[i], a.frames)))
        print("largest live blocks at the allocated peak:")
        for size, st, i in sorted(live_at_alloc_peak.values(), reverse=True)[:a.blocks]:
            print(f"   {size / GiB:8.3f} GiB stream {st} event {i}: " + " <- ".join(frames_of(evs[i], a.frames)))
        print(f"growths of the reserved bytes ({len(growths)}; the {a.growths} largest):")
        for size, st, i, req in sorted(growths, reverse=True)[:a.growths]:
            r = evs[req]
            print(f"   +{size / GiB:7.3f} GiB stream {st} event {i} for a {int(r.get('size', 0)) / GiB:.3f} GiB request: "
                  + " <- ".join(frames_of(r, a.frames)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
