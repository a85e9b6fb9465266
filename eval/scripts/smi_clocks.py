#!/usr/bin/env python3
"""SM clock, power and energy per part of a device call: bench/runs/step_clocks.sh samples `nvidia-smi
--query-gpu=timestamp,index,clocks.sm,...,power.draw --format=csv -lms 50` into smi.csv and writes each part's start and
end into marks.txt ("YYYY/MM/DD HH:MM:SS.mmm NAME start|end", the samples' clock). For each part: its seconds, the
samples with the GPU loaded (power >= --busy-w, default 40 % of --limit-w), their median and lowest SM clock, mean
power, the share of loaded samples within 3 % of --limit-w (the board's enforced power limit, `nvidia-smi -q -d
POWER`), and the energy over the whole part (trapezoids over every sample in it). The loaded and at-cap rules are
`bench step`'s (runtime/power_sampler.hpp kLoadedFraction, kAtCapFraction). One GPU per run: with an `index` column
and samples of several GPUs, --gpu picks one. Usage: smi_clocks.py SMI.csv MARKS.txt [--busy-w W] [--limit-w W]
[--gpu N]. Exit 2 with one line when a file is unreadable, lacks a needed column, holds several GPUs and no --gpu, or a
part has no samples."""
import argparse
import csv
import datetime
import statistics
import sys

FMT = "%Y/%m/%d %H:%M:%S.%f"
LOADED_FRACTION, AT_CAP_FRACTION = 0.4, 0.97  # runtime/power_sampler.hpp kLoadedFraction, kAtCapFraction


class Bad(Exception):
    pass


def number(cell):
    """'1980 MHz' -> 1980.0, '121.91 W' -> 121.91; None for '[N/A]' or an empty cell."""
    head = cell.strip().split(" ")[0]
    try:
        return float(head)
    except ValueError:
        return None


def read_samples(path, gpu):
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError as e:
        raise Bad(f"{path}: not text ({e.reason} at byte {e.start})")
    if not rows:
        raise Bad(f"{path}: empty")
    head = [h.strip() for h in rows[0]]
    need = {"timestamp": None, "clocks.current.sm [MHz]": None, "power.draw [W]": None}
    for key in need:
        if key not in head:
            raise Bad(f"{path}: header: no column '{key}' (nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw)")
        need[key] = head.index(key)
    col = head.index("index") if "index" in head else None
    if col is None and gpu is not None:
        raise Bad(f"{path}: header: no column 'index' to pick --gpu {gpu} by")
    out, seen = [], set()
    for n, r in enumerate(rows[1:], start=2):
        if len(r) < len(head):
            continue  # a line cut by the sampler's kill
        if col is not None:
            seen.add(r[col].strip())
            if gpu is not None and r[col].strip() != str(gpu):
                continue
        try:
            t = datetime.datetime.strptime(r[need["timestamp"]].strip(), FMT)
        except ValueError:
            raise Bad(f"{path}:{n}: timestamp: not YYYY/MM/DD HH:MM:SS.mmm ({r[need['timestamp']].strip()!r})")
        sm, w = number(r[need["clocks.current.sm [MHz]"]]), number(r[need["power.draw [W]"]])
        if sm is not None and w is not None:
            out.append((t, sm, w))
    if gpu is None and len(seen) > 1:
        raise Bad(f"{path}: samples of {len(seen)} GPUs (index {', '.join(sorted(seen))}): pick one with --gpu")
    if gpu is not None and str(gpu) not in seen:
        raise Bad(f"--gpu: no sample of GPU {gpu} in {path}")
    return out


def read_parts(path):
    """[(name, start, end)] in file order; a part without its end is an error (the call stopped inside it)."""
    open_at, parts = {}, []
    try:
        with open(path) as f:
            lines = f.readlines()
    except UnicodeDecodeError as e:
        raise Bad(f"{path}: not text ({e.reason} at byte {e.start})")
    for n, line in enumerate(lines, start=1):
        words = line.split()
        if not words:
            continue
        if len(words) < 4 or words[-1] not in ("start", "end"):
            raise Bad(f"{path}:{n}: want 'YYYY/MM/DD HH:MM:SS.mmm NAME start|end'")
        try:
            t = datetime.datetime.strptime(words[0] + " " + words[1], FMT)
        except ValueError:
            raise Bad(f"{path}:{n}: timestamp: not YYYY/MM/DD HH:MM:SS.mmm")
        name = " ".join(words[2:-1])
        if words[-1] == "start":
            open_at[name] = t
        elif name not in open_at:
            raise Bad(f"{path}:{n}: '{name} end' without its start")
        else:
            parts.append((name, open_at.pop(name), t))
    if open_at:
        raise Bad(f"{path}: '{next(iter(open_at))}' has a start and no end")
    if not parts:
        raise Bad(f"{path}: no part (a start and an end line)")
    return parts


def energy_j(samples):
    return sum((b[0] - a[0]).total_seconds() * (a[2] + b[2]) / 2 for a, b in zip(samples, samples[1:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("smi")
    ap.add_argument("marks")
    ap.add_argument("--busy-w", type=float, default=None)
    ap.add_argument("--limit-w", type=float, default=700.0)
    ap.add_argument("--gpu", type=int, default=None)
    a = ap.parse_args()
    if a.busy_w is None:
        a.busy_w = LOADED_FRACTION * a.limit_w
    try:
        if not 0 < a.busy_w < a.limit_w:
            raise Bad(f"--busy-w: must be in (0, --limit-w) (got {a.busy_w}, limit {a.limit_w})")
        samples, parts = read_samples(a.smi, a.gpu), read_parts(a.marks)
        rows = []
        for name, t0, t1 in parts:
            inside = [s for s in samples if t0 <= s[0] <= t1]
            if len(inside) < 2:
                raise Bad(f"{a.smi}: part '{name}': {len(inside)} sample(s) between its marks")
            busy = [s for s in inside if s[2] >= a.busy_w]
            rows.append((name, (t1 - t0).total_seconds(), len(inside), busy, energy_j(inside)))
    except OSError as e:
        print(f"{e.filename or a.smi}: unreadable ({e.strerror or e})", file=sys.stderr)
        return 2
    except Bad as e:
        print(e, file=sys.stderr)
        return 2
    print(f"#  {'part':24s} {'time':>7s} {'samples':>7s} {'loaded':>6s} {'sm clock':>8s} {'lowest':>6s} "
          f"{'power':>6s} {'at cap':>6s} {'energy':>8s}")
    print(f"#  {'':24s} {'(s)':>7s} {'':>7s} {'':>6s} {'(MHz)':>8s} {'(MHz)':>6s} {'(W)':>6s} {'(%)':>6s} {'(J)':>8s}")
    for name, sec, n, busy, j in rows:
        if busy:
            clk = f"{statistics.median(s[1] for s in busy):8.0f} {min(s[1] for s in busy):6.0f}"
            pw = f"{statistics.fmean(s[2] for s in busy):6.1f}"
            cap = f"{100 * sum(s[2] >= AT_CAP_FRACTION * a.limit_w for s in busy) / len(busy):6.1f}"
        else:
            clk, pw, cap = f"{'-':>8s} {'-':>6s}", f"{'-':>6s}", f"{'-':>6s}"
        print(f"   {name:24s} {sec:7.2f} {n:7d} {len(busy):6d} {clk} {pw} {cap} {j:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
