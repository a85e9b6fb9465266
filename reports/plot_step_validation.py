#!/usr/bin/env python3
"""Plots of a whole-step validation record (`ulysses validate --backend deepspeed --out FILE.json`,
or the re-predicted `ulysses validate --stored FILE --json OUT.json`; docs/VALIDATION.md "Whole steps"):

  <prefix>-memory.png   predicted vs measured max_memory_allocated and max_memory_reserved per case,
                        with y = x and the +-3 % band (reserved: circles from the generated allocation
                        sequence, squares the binding bytes, hollow runs without expandable segments)
  <prefix>-phases.png   signed error per scored phase group and the step (each dot a case; bar =
                        median; band = +-5 %; clipped at +-100 %, the clipped ones marked)

Usage: python3 reports/plot_step_validation.py records/validation/h200-alst-repredicted.json [--prefix P]
Error = (predicted - measured) / measured * 100.
"""
import argparse
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from png_out import save_png  # noqa: E402

GIB = float(1 << 30)


def save(fig, path):
    return save_png(fig, path, 130)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("record")
    ap.add_argument("--prefix", help="output path prefix (default: the record without .json)")
    a = ap.parse_args()
    try:
        with open(a.record) as f:
            rec = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"{a.record}: cannot read a JSON record ({e})", file=sys.stderr)
        return 2
    cases = rec.get("cases") if isinstance(rec, dict) else None
    if not cases or "comparison" not in cases[0]:
        print(f"{a.record}: cases: not a step validation record with comparisons", file=sys.stderr)
        return 2
    prefix = a.prefix or os.path.splitext(a.record)[0]

    # points are numbered (names of nearby cases overlap); the key is the third panel
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.5), gridspec_kw={"width_ratios": [5, 5, 2.2]})
    axes[2].axis("off")
    axes[2].text(0, 1, "\n".join(f"{i + 1:2d}  {c['name']}" for i, c in enumerate(cases)), fontsize=7,
                 family="monospace", va="top", transform=axes[2].transAxes)
    for ax, key, title in ((axes[0], "max_memory_allocated", "peak allocated"),
                           (axes[1], "max_memory_reserved", "peak reserved")):
        lo, hi = 1e9, 0
        for i, c in enumerate(cases):
            r = c["comparison"][key]
            x, y = r["measured"] / GIB, r["predicted"] / GIB
            lo, hi = min(lo, x, y), max(hi, x, y)
            hollow = key == "max_memory_reserved" and not c.get("expandable_segments", True)
            square = key == "max_memory_reserved" and r.get("predicted_from") == "binding reserved bytes"
            ax.scatter([x], [y], s=36, marker="s" if square else "o", facecolors="none" if hollow else "#1f77b4",
                       edgecolors="#1f77b4")
            ax.annotate(str(i + 1), (x, y), fontsize=7, xytext=(4, -3 if i % 2 else 3), textcoords="offset points")
        xs = [lo * 0.95, hi * 1.05]
        ax.plot(xs, xs, "k-", lw=0.8, label="y = x")
        ax.fill_between(xs, [v * 0.97 for v in xs], [v * 1.03 for v in xs], color="0.85", label="+-3 %")
        if key == "max_memory_reserved":  # what the marker says (empty legend entries: drawn off the data)
            ax.scatter([], [], s=36, marker="o", color="#1f77b4", label="expandable segments: allocation sequence")
            ax.scatter([], [], s=36, marker="s", color="#1f77b4", label="expandable segments: binding bytes")
            ax.scatter([], [], s=36, marker="o", facecolors="none", edgecolors="#1f77b4",
                       label="without expandable segments (not scored)")
        ax.set_xlabel(f"measured {title} (GiB)")
        ax.set_ylabel(f"predicted {title} (GiB)")
        ax.set_title(f"{title}: predicted vs measured")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"{rec.get('record', a.record)}: whole steps on HF + Accelerate + DeepSpeed", fontsize=9)
    fig.tight_layout()
    if not save(fig, f"{prefix}-memory.png"):
        return 1

    groups = []
    for c in cases:
        for r in c["comparison"]["phases"]:
            if r["scored"] and r["name"] not in groups:
                groups.append(r["name"])
    groups.append("step")
    fig, ax = plt.subplots(figsize=(12, 5))
    for i, g in enumerate(groups):
        errs = []
        for c in cases:
            rows = [c["comparison"]["step"]] if g == "step" else [r for r in c["comparison"]["phases"] if r["name"] == g and r["scored"]]
            errs += [r["error_pct"] for r in rows]
        if not errs:
            continue
        clipped = [max(-100.0, min(100.0, e)) for e in errs]
        ax.scatter([i] * len(clipped), clipped, s=14, color="#d62728" if g == "step" else "#1f77b4", alpha=0.7)
        ax.plot([i - 0.3, i + 0.3], [statistics.median(clipped)] * 2, "k-", lw=2)
        if any(abs(e) > 100 for e in errs):
            ax.annotate("clipped", (i, 100), fontsize=6, ha="center")
    ax.axhspan(-5, 5, color="0.85")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("error (%)  = (predicted - measured) / measured")
    ax.set_ylim(-105, 105)
    ax.set_title("step model vs measured phases (per step, all layers); bar = median; band = +-5 %")
    fig.tight_layout()
    if not save(fig, f"{prefix}-phases.png"):
        return 1
    print(f"wrote {prefix}-memory.png {prefix}-phases.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
