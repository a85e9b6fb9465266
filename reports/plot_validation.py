#!/usr/bin/env python3
"""Plots of a validation record (`ulysses validate --out FILE.json`, or the re-predicted
`ulysses validate --stored FILE --json OUT.json`):

  <prefix>-pred-vs-meas.png   predicted vs measured time per phase (log-log) with the y = x line
  <prefix>-error.png          signed error per phase (each dot a case; bar = median, band = +-5 %)
  <prefix>-memory.png         predicted vs measured peak memory with y = x (and the signed error)

Usage: python3 reports/plot_validation.py records/validation/h200.json [--prefix records/validation/h200]
Error = (predicted - measured) / measured * 100; exchanges at P = 1 are not scored.
"""
import argparse
import json
import os
import statistics
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from png_out import save_png  # noqa: E402

PHASES = ["a2a.qkv.fwd", "attn.fwd", "a2a.out.fwd", "a2a.out.bwd", "attn.bwd", "a2a.qkv.bwd"]
COLORS = dict(zip(PHASES, ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"]))


def wrapped(title, fig):
    """The record's device line is long: wrapped to the figure's width (about 11.5 characters of the
    9-point title per inch), not cut at its edge."""
    return textwrap.fill(title, int(fig.get_figwidth() * 11.5))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("record")
    ap.add_argument("--prefix", help="output path prefix (default: the record without .json)")
    a = ap.parse_args()
    rec = json.load(open(a.record))
    prefix = a.prefix or os.path.splitext(a.record)[0]
    cases = rec["cases"]
    title = f"{rec.get('set_name', rec.get('record', ''))}: {rec.get('device', '')}".strip(": ")
    ok = True

    # 1. predicted vs measured
    fig, ax = plt.subplots(figsize=(6.5, 6))
    lo, hi = float("inf"), 0.0
    for ph in PHASES:
        xs, ys = [], []
        for c in cases:
            p = next(x for x in c["phases"] if x["name"] == ph)
            if not p.get("scored", True):
                continue
            xs.append(p["measured_s"] * 1e6)
            ys.append(p["predicted_s"] * 1e6)
        if xs:
            ax.scatter(xs, ys, s=18, label=ph, color=COLORS[ph], alpha=0.8)
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
    ax.plot([lo / 1.5, hi * 1.5], [lo / 1.5, hi * 1.5], "k-", lw=0.8, label="y = x")
    ax.plot([lo / 1.5, hi * 1.5], [lo / 1.5 * 1.15, hi * 1.5 * 1.15], "k:", lw=0.6, label="+-15 %")
    ax.plot([lo / 1.5, hi * 1.5], [lo / 1.5 / 1.15, hi * 1.5 / 1.15], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (us, median over iterations, max over ranks)")
    ax.set_ylabel("predicted (us)")
    ax.set_title(f"predicted vs measured per phase\n{wrapped(title, fig)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    ok = save_png(fig, prefix + "-pred-vs-meas.png", 130) and ok

    # 2. signed error per phase
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, ph in enumerate(PHASES + ["peak memory"]):
        if ph == "peak memory":
            errs = [c["peak_memory"]["error_pct"] for c in cases]
        else:
            errs = [p["error_pct"] for c in cases for p in c["phases"] if p["name"] == ph and p.get("scored", True)]
        if not errs:
            continue
        xs = [i + (k % 7 - 3) * 0.04 for k in range(len(errs))]
        ax.scatter(xs, errs, s=14, color=COLORS.get(ph, "#555555"), alpha=0.8)
        ax.hlines(statistics.median(errs), i - 0.3, i + 0.3, color="k", lw=1.5)
    ax.axhspan(-5, 5, color="#2ca02c", alpha=0.08, label="+-5 % (median target)")
    ax.axhline(15, color="r", lw=0.6, ls=":", label="+-15 % (max target)")
    ax.axhline(-15, color="r", lw=0.6, ls=":")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(range(len(PHASES) + 1))
    ax.set_xticklabels(PHASES + ["peak memory"], fontsize=8)
    ax.set_ylabel("signed error (%) = (pred - meas) / meas")
    ax.set_title(f"signed error per phase (bar = median)\n{wrapped(title, fig)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", lw=0.3)
    fig.tight_layout()
    ok = save_png(fig, prefix + "-error.png", 130) and ok

    # 3. memory
    fig, ax = plt.subplots(figsize=(6, 5.5))
    m = [c["peak_memory"]["measured_bytes"] / 2**30 for c in cases]
    p = [c["peak_memory"]["predicted_bytes"] / 2**30 for c in cases]
    ax.scatter(m, p, s=18, color="#555555")
    top = max(m + p) * 1.3
    bot = min(m + p) / 1.3
    ax.plot([bot, top], [bot, top], "k-", lw=0.8, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured peak per rank (GiB)")
    ax.set_ylabel("predicted block_peak_bytes (GiB)")
    ax.set_title(f"peak memory of the block\n{wrapped(title, fig)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    ok = save_png(fig, prefix + "-memory.png", 130) and ok
    if not ok:
        return 1
    print("wrote", prefix + "-pred-vs-meas.png", prefix + "-error.png", prefix + "-memory.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
