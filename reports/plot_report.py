#!/usr/bin/env python3
"""Plots for `ulysses report`: reads DIR/report_data.json (written by the report command) and
writes PNGs into DIR, printing one line per plot: its file name (relative to DIR), a tab, a caption.

  plot_report.py DATA.json OUTDIR

- ablation_<model>_<profile>.png: longest sequence vs GPU count, one line per label; counts where
  nothing fits are marked at the bottom of the axis
- memory_<model>_<profile>_<n>gpu.png: GPU and host memory at the longest sequence, stacked by
  family (the term -> family table comes from report_data.json, i.e. sim/memory_families.hpp),
  one bar per label, capacities labelled
- sweep_<name>.png: the sweep's metrics against its main numeric axis; points that do not fit are
  grey x markers (predict mode) or marked at the bottom (plan mode: nothing fits)

Tokens are written in decimal units (1M = 1,000,000), like the Markdown summary.
"""
import csv
import json
import math
import os
import re
import signal
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from png_out import save_png  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

GIB = float(1 << 30)
FAMILY_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#7f7f7f"]
NOFIT = dict(marker="x", color="0.45", linestyle="none", markersize=7, mew=1.6)


def slug(text):
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def round3(n):
    """n rounded to 3 significant digits (as reports/report_md.cpp tokens_text)."""
    if not n > 0 or math.isinf(n):
        return n
    scale = 10.0 ** (math.floor(math.log10(n)) - 2)
    return round(n / scale) * scale


def tokens_label(n, _pos=None):
    """Decimal count (tokens; also used for seconds and GiB ticks): 950, 500K, 1M, 4.5M (1M = 1,000,000)."""
    r = round3(n)
    if r >= 1e6:
        return f"{r / 1e6:g}M"
    if r >= 1e3:
        return f"{r / 1e3:g}K"
    return f"{r:g}"


def value_axis(axis, values, formatter):
    """Labelled ticks on a value axis: log scale with ticks at 1-2-5 steps (finer steps when the data
    span less than a decade), or a linear scale when they span less than half a decade,
    so that every plot has at least two labelled ticks."""
    vals = [v for v in values if v > 0]
    span = math.log10(max(vals) / min(vals)) if vals else 2
    if span < 0.5:
        axis.set_major_formatter(FuncFormatter(formatter))
        return
    subs = (1.0,) if span > 4 else (1.0, 2.0, 5.0) if span > 1 else (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
    if axis is axis.axes.xaxis:
        axis.axes.set_xscale("log")
    else:
        axis.axes.set_yscale("log")
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_formatter(NullFormatter())


def gpus_axis(ax, values):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


NOFIT_STRIP = 0.22  # the bottom of a value axis kept free for the nothing-fits marks (axes fraction)


def reserve_strip(ax, lo, hi):
    """y limits that put the data (lo..hi) above the nothing-fits strip (log or linear axis), and
    a dotted line over the strip."""
    log = ax.get_yscale() == "log"
    f, inv = (math.log10, lambda v: 10 ** v) if log else (float, float)
    top = f(hi) + (0.1 if log else 0.05 * (hi - lo or hi))
    frac = NOFIT_STRIP + 0.04  # where the lowest data point sits
    bottom = (f(lo) - frac * top) / (1 - frac)
    ax.set_ylim(inv(bottom), inv(top))
    edge = inv(bottom + NOFIT_STRIP * (top - bottom))
    ax.axhline(edge, color="0.6", lw=0.8, ls=":")
    label = ax.yaxis.get_major_formatter()
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos: label(v, pos) if v >= edge else ""))  # no values in the strip
    ax.annotate("nothing fits", (0.99, NOFIT_STRIP - 0.01), xycoords="axes fraction", ha="right", va="top",
                fontsize=8, color="0.3")


def mark_nothing_fits(ax, xs, color, offset):
    """Points where nothing fits: hollow triangles in the strip at the bottom of the axis (axes
    coordinates for y), shown whatever the data range. offset spreads series apart."""
    if xs:
        ax.plot(xs, [0.025 + 0.028 * (offset % 7)] * len(xs), transform=ax.get_xaxis_transform(), marker="v",
                linestyle="none", markerfacecolor="none", markeredgecolor=color, markersize=7, clip_on=False)


def save(fig, outdir, name, caption):
    ok = save_png(fig, os.path.join(outdir, name), 110)
    plt.close(fig)
    if not ok:
        sys.exit(1)  # `ulysses report` then fails and writes no summary.md
    return f"{name}\t{caption}"


def group_plans(results):
    groups = {}
    for r in results:
        if r.get("command") != "plan":
            continue
        sc = r["scenario"]
        groups.setdefault((sc["model"]["name"], sc["profile"]["name"]), []).append(r)
    return groups


def labels_in_order(rows):
    labels = []
    for r in rows:
        if r.get("label", "plan") not in labels:
            labels.append(r.get("label", "plan"))
    return labels


def plot_ablation(key, rows, outdir):
    model, profile = key
    fig, ax = plt.subplots(figsize=(9.5, 5.2))
    colors = plt.get_cmap("tab10")
    labels = labels_in_order(rows)
    any_nofit = False
    for i, lab in enumerate(labels):
        pts = sorted((r["scenario"]["gpus"], r["seq_len"]) for r in rows if r.get("label", "plan") == lab)
        fit = [(g, s) for g, s in pts if s > 0]
        if fit:
            ax.plot([g for g, _ in fit], [s for _, s in fit], marker="o", color=colors(i % 10), label=lab)
        else:
            ax.plot([], [], marker="o", color=colors(i % 10), label=f"{lab} (nothing fits anywhere)")
        nofit = [g for g, s in pts if s <= 0]
        any_nofit = any_nofit or bool(nofit)
        mark_nothing_fits(ax, nofit, colors(i % 10), i)
    gpus_axis(ax, [r["scenario"]["gpus"] for r in rows])
    seqs = [r["seq_len"] for r in rows if r["seq_len"] > 0]
    if seqs:
        value_axis(ax.yaxis, seqs, tokens_label)
        if any_nofit:
            reserve_strip(ax, min(seqs), max(seqs))
    handles, names = ax.get_legend_handles_labels()
    if any_nofit:
        handles.append(Line2D([], [], marker="v", linestyle="none", markerfacecolor="none", markeredgecolor="k"))
        names.append("nothing fits (at the bottom)")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("longest sequence that fits (tokens, 1M = 10^6)")
    ax.set_title(f"{model} on {profile}: longest sequence by feature")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(handles, names, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # off the lines
    fig.tight_layout()
    return save(fig, outdir, f"ablation_{slug(model)}_{slug(profile)}.png",
                f"{model} on {profile}: longest sequence vs GPUs by feature")


def family_sums(breakdown, families):
    sums = {f: 0.0 for f in families["order"]}
    for term, b in breakdown.items():
        if term != "total":
            sums[families["terms"][term]] += b / GIB
    return sums


def stacked(ax, rows, field, labels, families):
    sums = [family_sums(r[field], families) for r in rows]
    bottoms = [0.0] * len(rows)
    for i, fam in enumerate(families["order"]):
        vals = [s[fam] for s in sums]
        if any(vals):
            ax.bar(range(len(rows)), vals, bottom=bottoms, color=FAMILY_COLORS[i % len(FAMILY_COLORS)], width=0.7)
            bottoms = [b + v for b, v in zip(bottoms, vals)]
    for x, top in enumerate(bottoms):
        ax.annotate(f"{top:.1f}", (x, top), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("GiB")


def capacity_line(ax, value, text, style):
    return ax.axhline(value, color="k", ls=style, lw=1.2, label=text)


def plot_memory(key, rows, outdir, families):
    model, profile = key
    gpus = sorted({r["scenario"]["gpus"] for r in rows})
    n = 8 if 8 in gpus else gpus[-1]
    sel = [r for r in rows if r["scenario"]["gpus"] == n and r["seq_len"] > 0]
    if not sel:
        return None
    labels = [f'{r.get("label", "plan")}\n{tokens_label(r["seq_len"])}' for r in sel]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 6))
    stacked(a1, sel, "gpu_memory_bytes", labels, families)
    cap = sel[0]["gpu_capacity_bytes"] / GIB
    caps = [capacity_line(a1, cap, f"HBM capacity: {cap:.1f} GiB per GPU ({profile})", "--")]
    a1.set_ylim(0, cap * 1.15)
    a1.set_title(f"GPU memory per GPU ({n} GPUs)", fontsize=10)
    stacked(a2, sel, "host_memory_bytes_per_node", labels, families)
    host = sel[0]["host_capacity_bytes_per_node"] / GIB
    caps.append(capacity_line(a2, host, f"host RAM capacity: {host:.1f} GiB per node", ":"))
    a2.set_ylim(0, host * 1.15)
    a2.set_title("host RAM per node", fontsize=10)
    used = [f for f in families["order"]
            if any(family_sums(r[field], families)[f] for r in sel for field in ("gpu_memory_bytes", "host_memory_bytes_per_node"))]
    handles = [Patch(color=FAMILY_COLORS[families["order"].index(f) % len(FAMILY_COLORS)], label=f) for f in reversed(used)]
    fig.legend(handles=handles + caps, loc="center right", fontsize=9, title="memory family", frameon=False)
    fig.suptitle(f"{model} on {profile}: memory at the longest sequence, by family (terms: summary.md)")
    fig.tight_layout(rect=(0, 0, 0.74, 0.95))
    return save(fig, outdir, f"memory_{slug(model)}_{slug(profile)}_{n}gpu.png",
                f"{model} on {profile}: memory at the longest sequence by family, {n} GPUs")


def as_number(text):
    try:
        return float(text)
    except ValueError:
        return None


def pick_axes(summary, rows):
    """The x axis (the main numeric one), the series axis and the other axes fixed at a value."""
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
    series = max(small, key=lambda k: len(values[k])) if small else None
    if series is None and others:
        series = min(others, key=lambda k: len(values[k]))
    fixed = {k: values[k][0] for k in others if k != series}
    return x, x in numeric, series, values, fixed


def plot_sweep(summary, outdir):
    with open(summary["csv"], newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["valid"] == "1"]
    if not rows:
        return None
    x, xnum, series, values, fixed = pick_axes(summary, rows)
    sel = [r for r in rows if all(r[k] == v for k, v in fixed.items())]
    plan = summary["mode"] == "plan"
    if plan:
        metrics = [("seq_len", "longest sequence (tokens, 1M = 10^6)", tokens_label),
                   ("step_time_s", "step time (s)", tokens_label)]
    else:
        metrics = [("gpu_total_GiB", "GPU memory per GPU (GiB)", tokens_label), ("step_time_s", "step time (s)", tokens_label),
                   ("tokens_per_s", "tokens/s", None)]
    colors = plt.get_cmap("tab10")
    svals = values[series] if series else [None]
    fig, axs = plt.subplots(1, len(metrics), figsize=(5.4 * len(metrics), 4.8))
    xs_all = [float(r[x]) for r in sel] if xnum else []
    any_nofit = any(r["fits"] != "true" for r in sel)
    for ax, (col, ylabel, fmt) in zip(axs, metrics):
        for i, sv in enumerate(svals):
            pts = [r for r in sel if series is None or r[series] == sv]
            if not pts:
                continue
            if xnum:
                pts.sort(key=lambda r: float(r[x]))
            xv = (lambda r: float(r[x])) if xnum else (lambda r: r[x])
            fit = [r for r in pts if r["fits"] == "true"]
            nofit = [r for r in pts if r["fits"] != "true"]
            ax.plot([xv(r) for r in fit], [float(r[col]) for r in fit], marker=".", color=colors(i % 10),
                    label=f"{series}={sv}" if series else None)
            if plan:  # nothing fits: no sequence, no step time
                mark_nothing_fits(ax, [xv(r) for r in nofit], colors(i % 10), i)
            elif nofit:
                ax.plot([xv(r) for r in pts], [float(r[col]) for r in pts], color=colors(i % 10), lw=0.8, ls=":")
                ax.plot([xv(r) for r in nofit], [float(r[col]) for r in nofit], **NOFIT)
        if col == "gpu_total_GiB":
            profiles = [sv for sv in svals] if series == "profile" else \
                [sel[0]["profile"]] if "profile" in sel[0] else [summary["base"]["profile"]["name"]]
            for i, prof in enumerate(profiles):
                cap = summary["hbm_bytes_by_profile"][prof] / GIB
                ax.axhline(cap, color=colors(i % 10) if series == "profile" else "k", ls="--", lw=1,
                           label=f"HBM {prof} ({cap:.1f} GiB)")
        if x == "gpus":
            gpus_axis(ax, xs_all)
        elif xnum and len(values[x]) > 2 and min(float(v) for v in values[x]) > 0:
            if x == "plan.seq_len":
                value_axis(ax.xaxis, xs_all, tokens_label)
            else:
                ax.set_xscale("log", base=2)
        ys = [float(r[col]) for r in sel if plan is False or r["fits"] == "true"]
        if fmt is not None and ys and min(ys) > 0:
            value_axis(ax.yaxis, ys, fmt)
            if plan and any_nofit:
                reserve_strip(ax, min(ys), max(ys))
        elif col == "tokens_per_s":
            ax.yaxis.set_major_formatter(FuncFormatter(tokens_label))
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        handles, names = ax.get_legend_handles_labels()
        if any_nofit:
            handles.append(Line2D([], [], marker="v", linestyle="none", markerfacecolor="none", markeredgecolor="k")
                           if plan else Line2D([], [], **NOFIT))
            names.append("nothing fits (at the bottom)" if plan else "does not fit")
        if handles:
            ax.legend(handles, names, fontsize=7)
    title = f"sweep {summary['name']} ({summary['mode']})"
    if fixed:
        title += ": " + ", ".join(f"{k}={v}" for k, v in fixed.items())
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, outdir, f"sweep_{slug(summary['name'])}.png", f"sweep {summary['name']} ({summary['mode']} mode)")


def main():
    # a SIGTERM unwinds like Ctrl-C, so that png_out removes the PNG it was writing (report removes the rest)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if len(sys.argv) != 3:
        sys.exit("usage: plot_report.py DATA.json OUTDIR")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    outdir = sys.argv[2]

    def emit(line):  # each plot's Markdown line as soon as its PNG exists (the caller removes them on a stop)
        if line:
            print(line, flush=True)

    for key, rows in group_plans(data["results"]).items():
        emit(plot_ablation(key, rows, outdir))
        emit(plot_memory(key, rows, outdir, data["memory_families"]))
    for s in data["sweeps"]:
        emit(plot_sweep(s, outdir))


if __name__ == "__main__":
    main()
