"""The phase clock's arithmetic and the CUPTI kernel attribution, without torch (tested in CI).

A step is a list of boundaries (t, charged): the time t (s, from the step's first boundary) of a
push or pop and the phase that was innermost just before it (None: no phase open, 'other'). The
time between two consecutive boundaries belongs to the second one's `charged` phase: exclusive, so
the phases of a step sum to the step.
"""

OTHER = "other"


def totals(boundaries):
    """phase -> seconds over the step."""
    out = {}
    for (t0, _), (t1, name) in zip(boundaries, boundaries[1:]):
        key = name or OTHER
        out[key] = out.get(key, 0.0) + (t1 - t0)
    return out


def segments(boundaries):
    """[[phase, start s, duration s]] in time order, consecutive pieces of one phase joined."""
    out = []
    for (t0, _), (t1, name) in zip(boundaries, boundaries[1:]):
        name = name or OTHER
        if out and out[-1][0] == name and abs(out[-1][1] + out[-1][2] - t0) < 1e-12:
            out[-1][2] += t1 - t0
        else:
            out.append([name, t0, t1 - t0])
    return out


def attribute_kernels(events):
    """Kernel time per phase from Chrome-trace events of torch.profiler (Kineto/CUPTI): a kernel
    belongs to the launch with its correlation id, the launch to the innermost of our ranges
    (user_annotation) open on the launching thread at that moment; none: 'other'."""
    ann, launch = {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "user_annotation":
            ann.setdefault(e.get("tid"), []).append((e["ts"], e["ts"] + e.get("dur", 0), e["name"]))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = (e.get("tid"), e["ts"])
    out = {}
    for e in events:
        if e.get("cat") != "kernel" or e.get("ph") != "X":
            continue
        name = OTHER
        where = launch.get(e.get("args", {}).get("correlation"))
        if where is not None:
            best = None
            for a0, a1, n in ann.get(where[0], ()):
                if a0 <= where[1] <= a1 and (best is None or a1 - a0 < best[1] - best[0]):
                    best = (a0, a1, n)
            if best:
                name = best[2]
        d = out.setdefault(name, {"kernel_s": 0.0, "kernels": 0})
        d["kernel_s"] += e.get("dur", 0) * 1e-6
        d["kernels"] += 1
    return out
