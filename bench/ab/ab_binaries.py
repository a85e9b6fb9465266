#!/usr/bin/env python3
# Same figures from two builds of `ulysses` in one call: attention and block benches, interleaved A B A B.
"""Runs the same CUDA benchmarks with two `ulysses` binaries (A = before a change, B = after) in one
device call and prints an nccl-tests style table of their medians and the ratio B/A.

Each bench validates its output before timing it (the binaries' own checks); a run whose check
fails, or that exits non-zero, counts as wrong. Rounds are interleaved (A, B, A, B, ...) so that
clock and thermal drift hit both sides alike; a figure is the median over rounds of each side.

Exit status: 0 when every figure of B is within --tol of A and nothing is wrong; 1 otherwise;
2 for bad arguments.

usage: ab_binaries.py A_BIN B_BIN [--rounds 3] [--tol 0.05] [--json OUT.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# (name, S, H, H_kv, D, causal): local heads of one rank, as `bench attention --points` takes them.
ATTN_POINTS = [
    ("attn.d128.causal.32K.h16", 32768, 16, 16, 128, 1),
    ("attn.d128.causal.32K.h32kv8", 32768, 32, 8, 128, 1),
    ("attn.d128.full.32K.h16", 32768, 16, 16, 128, 0),
    ("attn.d64.causal.32K.h16", 32768, 16, 16, 64, 1),
]
BLOCK_ARGS = ["--model", "llama-3.1-8b", "--profile", "h200-sxm-141gb", "--gpus", "1", "--sp-size", "1",
              "--seq-len", "32768", "--backend", "cuda"]


def run(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def attention_figures(binary, tmp):
    """{figure name: seconds} for every point, and the number of wrong points."""
    out = os.path.join(tmp, "attn.json")
    pts = ",".join(f"{s}:{h}:{kv}:{d}:{c}" for _, s, h, kv, d, c in ATTN_POINTS)
    rc, log = run([binary, "bench", "attention", "--points", pts, "--no-peer", "--json", out], 600)
    if rc != 0 or not os.path.exists(out):
        sys.stderr.write(log[-2000:])
        return {}, len(ATTN_POINTS)
    rows = json.load(open(out))["rows"]
    figs, wrong = {}, 0
    for (name, s, h, kv, d, c), r in zip(ATTN_POINTS, rows):
        if r.get("status") != "ok" or r.get("wrong", 1) != 0:
            wrong += 1
            continue
        figs[name + ".fwd"] = r["ours"]["fwd_ms"] * 1e-3
        figs[name + ".bwd"] = r["ours"]["bwd_ms"] * 1e-3
    os.remove(out)
    return figs, wrong


def block_figures(binary, tmp):
    out = os.path.join(tmp, "block.json")
    rc, log = run([binary, "bench", "block", *BLOCK_ARGS, "--json", out], 300)
    if rc != 0 or not os.path.exists(out):
        sys.stderr.write(log[-2000:])
        return {}, 1
    m = json.load(open(out))
    os.remove(out)
    if not m.get("correct", False):
        return {}, 1
    return {"block." + p["name"]: p["median_s"] for p in m["phases"]}, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a_bin")
    ap.add_argument("b_bin")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--json")
    a = ap.parse_args()
    for b in (a.a_bin, a.b_bin):
        if not os.access(b, os.X_OK):
            print(f"ab_binaries: {b}: not an executable file", file=sys.stderr)
            return 2
    if a.rounds < 1 or not (0 < a.tol < 1):
        print("ab_binaries: --rounds >= 1 and 0 < --tol < 1", file=sys.stderr)
        return 2
    samples = {"A": {}, "B": {}}
    wrong = {"A": 0, "B": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for side, binary in (("A", a.a_bin), ("B", a.b_bin)):
                for fn in (attention_figures, block_figures):
                    figs, w = fn(binary, tmp)
                    wrong[side] += w
                    for k, v in figs.items():
                        samples[side].setdefault(k, []).append(v)
    names = sorted(set(samples["A"]) | set(samples["B"]))
    print(f"# {'figure':<36} {'A':>10} {'B':>10} {'B/A':>7} {'ok':>3}")
    print(f"# {'':<36} {'(ms)':>10} {'(ms)':>10} {'(x)':>7} {'':>3}")
    bad = 0
    table = []
    for n in names:
        ma = statistics.median(samples["A"][n]) if n in samples["A"] else float("nan")
        mb = statistics.median(samples["B"][n]) if n in samples["B"] else float("nan")
        ratio = mb / ma if ma > 0 else float("nan")
        ok = abs(ratio - 1) <= a.tol  # False for nan (a figure one side lacks)
        # Block phases under 50 us are launch-bound noise; they are shown, not judged.
        judged = not (n.startswith("block.") and max(ma, mb) < 50e-6)
        bad += judged and not ok
        table.append({"figure": n, "a_s": ma, "b_s": mb, "ratio": ratio, "ok": ok, "judged": judged})
        print(f"  {n:<36} {ma * 1e3:>10.3f} {mb * 1e3:>10.3f} {ratio:>7.3f} {('yes' if ok else 'NO') if judged else '-':>3}")
    print(f"# #wrong: A {wrong['A']}  B {wrong['B']}   figures outside {a.tol:.0%}: {bad}   rounds: {a.rounds}")
    if a.json:
        tmpname = a.json + ".partial"
        with open(tmpname, "w") as f:
            json.dump({"rounds": a.rounds, "tol": a.tol, "wrong": wrong, "figures": table}, f, indent=1)
        os.replace(tmpname, a.json)
    return 0 if bad == 0 and wrong["A"] == 0 and wrong["B"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
