#!/usr/bin/env python3
"""Join the JSON lines of `attn_check` and `bench/peers/attn_peer.py` into markdown tables.

  attn_table.py [--fwd-variant F] [--bwd-variant B] FILE...   (any mix of check and bench lines)
Correctness: per case, each quantity's max abs error for ulysses_flash (the largest over all
tuning variants checked) and torch_flash, and the worst ratio (ulysses / torch; the target is
<= 2). Benchmark: TFLOP/s of the ulysses_flash rows with the given forward variant (default 1)
and, when given, backward variant (default: any, i.e. the library's per-head-dim defaults of a
sweep run without --bwd-variant) and ratios against the torch flash (FA2) and cuDNN backends.
"""
import json
import sys


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return rows


def key(r):
    return (r["S"], r["Hq"], r["Hkv"], r["D"], r["causal"])


def check_table(rows):
    mine = {}
    for r in rows:
        if r["kind"] == "check" and r["impl"] == "ulysses_flash":
            m = mine.setdefault(r["case"], dict(r))
            for x in ("o", "lse", "dq", "dk", "dv"):
                m["err_" + x] = max(m["err_" + x], r["err_" + x])
    peer = {r["case"]: r for r in rows if r["kind"] == "check" and r["impl"] == "torch_flash"}
    if not mine:
        return
    q = ["o", "lse", "dq", "dk", "dv"]
    print("| case | " + " | ".join(f"{x} ours / torch" for x in q) + " | worst ratio |")
    print("|---|" + "---|" * (len(q) + 1))
    worst_all = 0.0
    for name in sorted(mine, key=lambda n: key(mine[n])):
        m, p = mine[name], peer.get(name)
        cells, worst = [], 0.0
        for x in q:
            a = m["err_" + x]
            if p is None:
                cells.append(f"{a:.2e} / -")
                continue
            b = p["err_" + x]
            # errors at the level of fp32 rounding are both ~0: floor the denominator at 1e-6
            ratio = a / max(b, 1e-6)
            worst = max(worst, ratio)
            cells.append(f"{a:.2e} / {b:.2e}")
        worst_all = max(worst_all, worst)
        print(f"| {name} | " + " | ".join(cells) + f" | {worst:.2f} |")
    print(f"\nworst error ratio over all cases: {worst_all:.2f} (target <= 2)\n")


def bench_table(rows, fv, bv):
    by = {}
    for r in rows:
        if r.get("impl") == "ulysses_flash" and (r.get("fwd_variant", fv) != fv or
                                                 (bv is not None and r.get("bwd_variant", bv) != bv)):
            continue
        if r["kind"] == "bench" and "fwd_tflops" in r:
            by.setdefault(key(r), {})[r["impl"]] = r
    if not by:
        return
    print("| S | H | Hkv | D | causal | ours fwd | FA2 fwd | cuDNN fwd | ours bwd | FA2 bwd | cuDNN bwd "
          "| fwd/FA2 | bwd/FA2 | fwd/cuDNN | bwd/cuDNN |")
    print("|---" * 15 + "|")
    for k in sorted(by):
        d = by[k]
        m, f, c = d.get("ulysses_flash"), d.get("torch_flash"), d.get("torch_cudnn")
        val = lambda r, x: f"{r[x]:.0f}" if r else "-"
        ratio = lambda a, b, x: f"{a[x] / b[x]:.2f}" if a and b else "-"
        S, H, Hkv, D, causal = k
        print(f"| {S // 1024}K | {H} | {Hkv} | {D} | {'yes' if causal else 'no'} | {val(m, 'fwd_tflops')} | "
              f"{val(f, 'fwd_tflops')} | {val(c, 'fwd_tflops')} | {val(m, 'bwd_tflops')} | {val(f, 'bwd_tflops')} | "
              f"{val(c, 'bwd_tflops')} | {ratio(m, f, 'fwd_tflops')} | {ratio(m, f, 'bwd_tflops')} | "
              f"{ratio(m, c, 'fwd_tflops')} | {ratio(m, c, 'bwd_tflops')} |")
    print()


def main():
    args, fv, bv = sys.argv[1:], 1, None
    while args and args[0] in ("--fwd-variant", "--bwd-variant") and len(args) >= 2:
        if args[0] == "--fwd-variant":
            fv = int(args[1])
        else:
            bv = int(args[1])
        args = args[2:]
    if not args:
        print("usage: attn_table.py [--fwd-variant F] [--bwd-variant B] FILE...", file=sys.stderr)
        sys.exit(2)
    rows = load(args)
    check_table(rows)
    bench_table(rows, fv, bv)


if __name__ == "__main__":
    main()
