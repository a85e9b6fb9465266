#!/usr/bin/env python3
"""Attention phases of a step record re-predicted with their clocks: does a phase miss by the clock alone? For each
attention phase (attn.fwd, attn.recompute, attn.bwd) with at least --min-samples NVML samples, its prediction times
(the SM clock of the calibration point the model reads) / (the SM clock the step ran it at), against the
measurement. The calibration point: the curve of --key at the case's S, or at the curve's last S below it (the model
holds a curve flat beyond its last point); its clock from a raw calibration file written by `calibrate --backend cuda
--json` since the fifteenth session (attention[i].sm_mhz). docs/STEP_POWER.md "The whole record: NVML's clock per
phase". Usage: clock_scaled_attention.py REPREDICTED.json CALIBRATION.json [--key ulysses_flash@d128.causal.h32]
[--min-samples 3]. REPREDICTED: `ulysses validate --stored RECORD --json OUT`. Exit 2 with one line when a file is
unreadable or lacks what is needed (a case without plan.seq_len, a curve without clocks)."""
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


def calibration_clocks(cal, path, key):
    pts = sorted((a["S"], a["sm_mhz"]) for a in cal.get("attention", []) if a.get("key") == key and "sm_mhz" in a)
    if not pts:
        raise Bad(f"{path}: attention: no point of key '{key}' with sm_mhz (written by calibrate --json since 2026-12-07)")
    return pts


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
    re, cal = load(a.repredicted), load(a.calibration)
    pts = calibration_clocks(cal, a.calibration, a.key)
    rows = []
    for c in re.get("cases", []):
        try:  # the case's keys: [[key, value as text], ...]
            S = float(dict(c.get("keys", [])).get("plan.seq_len", "nan"))
        except (TypeError, ValueError):
            S = float("nan")
        if not S > 0:
            raise Bad(f"{a.repredicted}: case {c.get('name', '?')}: keys plan.seq_len: missing or not a positive number")
        f_cal = clock_at(pts, S)
        for p in c["comparison"]["phases"]:
            if not p["name"].startswith("attn.") or p.get("sm_samples", 0) < a.min_samples:
                continue
            scaled = (p["predicted"] * f_cal / p["sm_mhz"] / p["measured"] - 1) * 100
            rows.append((c["name"], p["name"], p["error_pct"], p["sm_mhz"], p["sm_samples"], f_cal, scaled))
    if not rows:
        raise Bad(f"{a.repredicted}: no attention phase with >= {a.min_samples} clock samples")
    print(f"# attention phases with >= {a.min_samples} NVML samples; calibration clocks: {a.calibration} key {a.key}")
    print(f"#  {'case':<26} {'phase':<15} {'error':>6} {'step clock':>10} {'samples':>7} {'cal clock':>9} {'scaled':>7}")
    print(f"#  {'':<26} {'':<15} {'(%)':>6} {'(MHz)':>10} {'':>7} {'(MHz)':>9} {'(%)':>7}")
    for name, ph, err, f, n, fc, sc in rows:
        print(f"   {name:<26} {ph:<15} {err:6.1f} {f:10.0f} {n:7d} {fc:9.0f} {sc:7.1f}")
    print(f"median |error| over {len(rows)} phases: {statistics.median(abs(r[2]) for r in rows):.1f} %, "
          f"clock-scaled {statistics.median(abs(r[6]) for r in rows):.1f} %")


if __name__ == "__main__":
    try:
        main()
    except Bad as e:
        print(f"clock_scaled_attention.py: {e}", file=sys.stderr)
        sys.exit(2)
