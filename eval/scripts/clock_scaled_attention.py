#!/usr/bin/env python3
"""Attention phases of a step record re-predicted with their clocks: does a phase miss by the clock alone? For each
attention phase (attn.fwd, attn.recompute, attn.bwd) with at least --min-samples NVML samples, its prediction times
(the SM clock of the calibration timing the model reads: the forward's for attn.fwd and attn.recompute, the
backward's for attn.bwd) / (the SM clock the step ran it at), against the measurement. The calibration point: the
curve of --key at the case's S, or at the curve's last S below it (the model holds a curve flat beyond its last
point); its clocks from a raw calibration file written by `calibrate --backend cuda --json` (attention[i].fwd_sm_mhz,
bwd_sm_mhz, since the fifteenth session). docs/STEP_POWER.md "The whole record: NVML's clock per phase". Usage:
clock_scaled_attention.py REPREDICTED.json CALIBRATION.json [--key ulysses_flash@d128.causal.h32] [--min-samples 3].
REPREDICTED: `ulysses validate --stored RECORD --json OUT`. Exit 2 with one line when a file is unreadable or lacks
what is needed (a case without plan.seq_len or comparison, a curve without clocks, a clock or time not > 0)."""
import argparse
import json
import statistics
import sys


class Bad(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Bad(f"{path}: cannot read as JSON ({e})")


def positive(x, where):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0:
        raise Bad(f"{where}: not a number > 0 ({x!r})")
    return float(x)


def calibration_clocks(cal, path, key):
    """{pass: [(S, MHz), ...]} for pass fwd and bwd, S increasing."""
    if not isinstance(cal, dict) or not isinstance(cal.get("attention"), list):
        raise Bad(f"{path}: attention: missing or not a list (a raw file of calibrate --backend cuda --json?)")
    out = {"fwd": [], "bwd": []}
    for i, a in enumerate(cal["attention"]):
        if not isinstance(a, dict) or a.get("key") != key:
            continue
        for ps in out:
            if f"{ps}_sm_mhz" in a:
                out[ps].append((positive(a.get("S"), f"{path}: attention[{i}].S"),
                                positive(a[f"{ps}_sm_mhz"], f"{path}: attention[{i}].{ps}_sm_mhz")))
    for ps, pts in out.items():
        if not pts:
            raise Bad(f"{path}: attention: no point of key '{key}' with {ps}_sm_mhz (calibrate --json since 2026-12-07)")
        pts.sort()
    return out


def clock_at(pts, S):
    below = [m for s, m in pts if s <= S]
    return below[-1] if below else pts[0][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repredicted")
    ap.add_argument("calibration")
    ap.add_argument("--key", default="ulysses_flash@d128.causal.h32")
    ap.add_argument("--min-samples", type=int, default=3)
    a = ap.parse_args()
    if a.min_samples < 1:
        raise Bad(f"--min-samples: must be >= 1 ({a.min_samples})")
    re, cal = load(a.repredicted), load(a.calibration)
    clocks = calibration_clocks(cal, a.calibration, a.key)
    if not isinstance(re, dict) or not isinstance(re.get("cases"), list):
        raise Bad(f"{a.repredicted}: cases: missing or not a list (write it with ulysses validate --stored R --json OUT)")
    rows = []
    for i, c in enumerate(re["cases"]):
        where = f"{a.repredicted}: cases[{i}]"
        try:  # the case's keys: [[key, value as text], ...]
            S = float(dict(c.get("keys", [])).get("plan.seq_len", "nan"))
            phases = c["comparison"]["phases"]
            name = c["name"]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise Bad(f"{where}: keys plan.seq_len, comparison.phases or name missing or malformed ({e!r})")
        if not S > 0:
            raise Bad(f"{where}: keys plan.seq_len: not a positive number")
        for j, p in enumerate(phases if isinstance(phases, list) else []):
            if not isinstance(p, dict) or not str(p.get("name", "")).startswith("attn."):
                continue
            n = p.get("sm_samples", 0)
            if not isinstance(n, int) or n < a.min_samples:
                continue
            pw = f"{where}.comparison.phases[{j}]"
            f = positive(p.get("sm_mhz"), pw + ".sm_mhz")
            pred, meas = positive(p.get("predicted"), pw + ".predicted"), positive(p.get("measured"), pw + ".measured")
            err = p.get("error_pct")
            if isinstance(err, bool) or not isinstance(err, (int, float)):
                raise Bad(f"{pw}.error_pct: not a number ({err!r})")
            f_cal = clock_at(clocks["bwd" if p["name"] == "attn.bwd" else "fwd"], S)
            rows.append((name, p["name"], err, f, n, f_cal, (pred * f_cal / f / meas - 1) * 100))
    if not rows:
        raise Bad(f"{a.repredicted}: no attention phase with >= {a.min_samples} clock samples")
    print(f"# attention phases with >= {a.min_samples} NVML samples; calibration clocks: {a.calibration} key {a.key}")
    print(f"#  {'case':<26} {'phase':<15} {'error':>6} {'step clock':>10} {'samples':>7} {'cal clock':>9} {'scaled':>7}")
    print(f"#  {'':<26} {'':<15} {'(%)':>6} {'(MHz)':>10} {'':>7} {'(MHz)':>9} {'(%)':>7}")
    for name, ph, err, f, n, fc, sc in rows:
        print(f"   {name:<26} {ph:<15} {err:6.1f} {f:10.0f} {n:7d} {fc:9.0f} {sc:7.1f}")
    for label, sel in (("all", lambda r: True), ("forwards", lambda r: r[1] != "attn.bwd"), ("backwards", lambda r: r[1] == "attn.bwd")):
        rs = [r for r in rows if sel(r)]
        if rs:
            print(f"median |error| over {len(rs)} phases ({label}): {statistics.median(abs(r[2]) for r in rs):.1f} %, "
                  f"clock-scaled {statistics.median(abs(r[6]) for r in rs):.1f} %")


if __name__ == "__main__":
    try:
        main()
    except Bad as e:
        print(f"clock_scaled_attention.py: {e}", file=sys.stderr)
        sys.exit(2)
