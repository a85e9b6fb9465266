#!/usr/bin/env python3
"""Plots for `ulysses report`: reads DIR/report_data.json (written by the report command) and
writes PNGs into DIR, printing each file name (relative to DIR) on its own line.

  plot_report.py DATA.json OUTDIR

- ablation_<model>_<profile>.png: longest sequence vs GPU count, one line per label
- memory_<model>_<profile>_<n>gpu.png: stacked GPU and host memory terms at the longest
  sequence, one bar per label
- sweep_<name>.png: the sweep's metrics against its main numeric axis
"""
import csv
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = float(1 << 30)


def slug(text):
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def tokens_label(n, _pos=None):
    if n >= (1 << 20):
        return f"{n / (1 << 20):.3g}M"
    if n >= 1024:
        return f"{n / 1024:.3g}K"
    return f"{n:g}"


def group_plans(results):
    groups = {}
    for r in results:
        if r.get("command") != "plan":
            continue
        sc = r["scenario"]
        key = (sc["model"]["name"], sc["profile"]["name"])
        groups.setdefault(key, []).append(r)
    return groups


def labels_in_order(rows):
    labels = []
    for r in rows:
        lab = r.get("label", "plan")
        if lab not in labels:
            labels.append(lab)
    return labels


def plot_ablation(key, rows, outdir):
    model, profile = key
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for lab in labels_in_order(rows):
        pts = sorted((r["scenario"]["gpus"], r["seq_len"]) for r in rows if r.get("label", "plan") == lab)
        xs = [g for g, s in pts if s > 0]
        ys = [s for g, s in pts if s > 0]
        if xs:
            ax.plot(xs, ys, marker="o", label=lab)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(tokens_label))
    ax.set_xlabel("GPUs")
    ax.set_ylabel("longest sequence that fits (tokens)")
    ax.set_title(f"{model} on {profile}: longest sequence by feature")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    name = f"ablation_{slug(model)}_{slug(profile)}.png"
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, name), dpi=110)
    plt.close(fig)
    return name


def stacked(ax, rows, field, labels, title):
    terms = []
    for r in rows:
        for t in r[field]:
            if t != "total" and t not in terms:
                terms.append(t)
    bottoms = [0.0] * len(rows)
    cmap = plt.get_cmap("tab20")
    for i, t in enumerate(terms):
        vals = [r[field].get(t, 0) / GIB for r in rows]
        if not any(vals):
            continue
        ax.bar(range(len(rows)), vals, bottom=bottoms, label=t, color=cmap(i % 20))
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("GiB")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=4)


def plot_memory(key, rows, outdir):
    model, profile = key
    gpus = sorted({r["scenario"]["gpus"] for r in rows})
    n = 8 if 8 in gpus else gpus[-1]
    sel = [r for r in rows if r["scenario"]["gpus"] == n and r["seq_len"] > 0]
    if not sel:
        return None
    labels = [f'{r.get("label", "plan")}\n{tokens_label(r["seq_len"])}' for r in sel]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 7))
    stacked(a1, sel, "gpu_memory_bytes", labels, f"GPU memory per GPU at the longest sequence ({n} GPUs)")
    cap = sel[0]["gpu_capacity_bytes"] / GIB
    a1.axhline(cap, color="k", ls="--", lw=1)
    stacked(a2, sel, "host_memory_bytes_per_node", labels, "host RAM per node at the longest sequence")
    a2.axhline(sel[0]["host_capacity_bytes_per_node"] / GIB, color="k", ls="--", lw=1)
    fig.suptitle(f"{model} on {profile}")
    fig.tight_layout()
    name = f"memory_{slug(model)}_{slug(profile)}_{n}gpu.png"
    fig.savefig(os.path.join(outdir, name), dpi=110)
    plt.close(fig)
    return name


def as_number(text):
    try:
        return float(text)
    except ValueError:
        return None


def plot_sweep(summary, outdir):
    with open(summary["csv"], newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["valid"] == "1"]
    if not rows:
        return None
    axes = [a["key"] for a in summary["axes"]]
    values = {k: list(dict.fromkeys(r[k] for r in rows)) for k in axes}
    numeric = [k for k in axes if all(as_number(v) is not None for v in values[k]) and len(values[k]) > 1]
    preferred = "plan.seq_len" if summary["mode"] == "predict" else "gpus"
    if preferred in numeric:
        x = preferred
    elif numeric:
        x = max(numeric, key=lambda k: len(values[k]))
    else:
        x = max(axes, key=lambda k: len(values[k]))
    others = [k for k in axes if k != x and len(values[k]) > 1]
    # one series per value of the other axis with the most values (at most 8); the rest fixed at
    # their first value
    small = [k for k in others if len(values[k]) <= 8]
    series_axis = max(small, key=lambda k: len(values[k])) if small else None
    if series_axis is None and others:
        series_axis = min(others, key=lambda k: len(values[k]))
    fixed = {k: values[k][0] for k in others if k != series_axis}
    sel = [r for r in rows if all(r[k] == v for k, v in fixed.items())]
    if summary["mode"] == "plan":
        metrics = [("seq_len", "longest sequence (tokens)", True), ("step_time_s", "step time (s)", True)]
    else:
        metrics = [("gpu_total_GiB", "GPU memory (GiB)", True), ("step_time_s", "step time (s)", True),
                   ("tokens_per_s", "tokens/s", False)]
    fig, axs = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4.5))
    xnum = x in numeric
    for ax, (col, ylabel, logy) in zip(axs, metrics):
        for sv in (values[series_axis] if series_axis else [None]):
            pts = [r for r in sel if series_axis is None or r[series_axis] == sv]
            if not pts:
                continue
            if xnum:
                pts.sort(key=lambda r: float(r[x]))
            xs = [float(r[x]) if xnum else r[x] for r in pts]
            ys = [float(r[col]) for r in pts]
            lab = f"{series_axis}={sv}" if series_axis else None
            ax.plot(xs, ys, marker=".", label=lab)
        if xnum and len(values[x]) > 2 and min(float(v) for v in values[x]) > 0:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        if col == "seq_len":
            ax.set_yscale("log", base=2)
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(tokens_label))
        if x == "plan.seq_len":
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(tokens_label))
        if col == "gpu_total_GiB":
            ax.axhline(summary["base"]["profile"]["hbm_bytes"] / GIB, color="k", ls="--", lw=1, label="HBM")
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        if series_axis or col == "gpu_total_GiB":
            ax.legend(fontsize=7)
    title = f"sweep {summary['name']} ({summary['mode']})"
    if fixed:
        title += ": " + ", ".join(f"{k}={v}" for k, v in fixed.items())
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    name = f"sweep_{slug(summary['name'])}.png"
    fig.savefig(os.path.join(outdir, name), dpi=110)
    plt.close(fig)
    return name


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_report.py DATA.json OUTDIR")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    outdir = sys.argv[2]
    names = []
    for key, rows in group_plans(data["results"]).items():
        names.append(plot_ablation(key, rows, outdir))
        names.append(plot_memory(key, rows, outdir))
    for s in data["sweeps"]:
        names.append(plot_sweep(s, outdir))
    for n in names:
        if n:
            print(n)


if __name__ == "__main__":
    main()
