#!/usr/bin/env python3
"""eval/scripts/clock_scaled_attention.py on synthetic files: each attention phase with enough samples gets its
prediction times (calibration clock) / (step clock), the forward's clock for attn.fwd and attn.recompute and the
backward's for attn.bwd, from the curve point at the case's S or the last one below it; phases with too few samples
and other phases are left out; exit 2 with one line for malformed input (a top-level list, a curve without clocks,
a zero clock, a case without plan.seq_len, --min-samples 0)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "eval", "scripts", "clock_scaled_attention.py")
KEY = "ulysses_flash@d128.causal.h32"


def cal_file(points):
    """points: [(S, fwd MHz, bwd MHz)]"""
    return {"attention": [{"key": KEY, "S": S, "fwd_s": 1e-3, "bwd_s": 3e-3, "fwd_sm_mhz": f, "bwd_sm_mhz": b}
                          for S, f, b in points] + [{"key": "other@d64", "S": 8192, "fwd_sm_mhz": 1, "bwd_sm_mhz": 1}]}


def phase(name, pred, meas, mhz=None, n=0):
    p = {"name": name, "predicted": pred, "measured": meas, "error_pct": (pred / meas - 1) * 100, "scored": True}
    if mhz is not None:
        p.update(sm_mhz=mhz, sm_samples=n)
    return p


def case(name, S, phases):
    return {"name": name, "keys": [["model", "llama-3.1-8b"], ["plan.seq_len", str(S)]], "comparison": {"phases": phases}}


class ClockScaledAttention(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def run_tool(self, re, cal, *args):
        rp, cp = os.path.join(self.dir.name, "re.json"), os.path.join(self.dir.name, "cal.json")
        with open(rp, "w") as f:
            json.dump(re, f)
        with open(cp, "w") as f:
            json.dump(cal, f)
        return subprocess.run([sys.executable, TOOL, rp, cp, *args], capture_output=True, text=True)

    def rows(self, out):
        return [line.split() for line in out.splitlines() if line.startswith("   ")]

    def test_scaled_by_each_pass_clock(self):
        cal = cal_file([(16384, 1600, 1500), (32768, 1400, 1200)])
        re = {"cases": [
            case("s16k", 16384, [phase("attn.fwd", 1.0, 1.25, 1280, 5),  # 1.0 * 1600 / 1280 = 1.25: 0 %
                                 phase("attn.bwd", 3.0, 3.6, 1250, 9),   # 3.0 * 1500 / 1250 = 3.6: 0 %
                                 phase("mlp.fwd", 1.0, 1.1, 1300, 9)]),  # not attention: left out
            case("s64k", 65536, [phase("attn.recompute", 2.0, 2.0, 1400, 4),  # 32K's forward clock: 0 %
                                 phase("attn.bwd", 6.0, 5.0, 1200, 2)])]}     # 2 samples < 3: left out
        r = self.run_tool(re, cal)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.rows(r.stdout)
        self.assertEqual([x[:2] for x in rows], [["s16k", "attn.fwd"], ["s16k", "attn.bwd"], ["s64k", "attn.recompute"]])
        self.assertEqual([x[5] for x in rows], ["1600", "1500", "1400"])  # the calibration clock each read
        self.assertEqual([x[6] for x in rows], ["0.0", "0.0", "0.0"])
        self.assertEqual([x[2] for x in rows], ["-20.0", "-16.7", "0.0"])
        self.assertIn("median |error| over 3 phases (all): 16.7 %, clock-scaled 0.0 %", r.stdout)
        self.assertIn("(backwards): 16.7 %", r.stdout)
        r2 = self.run_tool(re, cal, "--min-samples", "2")  # now the 64K backward counts: 6.0 * 1200 / 1200 / 5.0
        self.assertEqual(r2.returncode, 0, r2.stderr)
        self.assertEqual(self.rows(r2.stdout)[-1][6], "20.0")

    def test_bad_input_is_one_line_exit_2(self):
        good_cal = cal_file([(16384, 1600, 1500)])
        good_re = {"cases": [case("a", 16384, [phase("attn.bwd", 3.0, 3.6, 1250, 9)])]}
        zero_clock = {"cases": [case("a", 16384, [phase("attn.bwd", 3.0, 3.6, 0, 9)])]}
        no_len = {"cases": [{"name": "a", "keys": [], "comparison": {"phases": []}}]}
        old_cal = {"attention": [{"key": KEY, "S": 16384, "sm_mhz": 1500}]}  # call1's one clock per point
        for re, cal, args, names in [([1], good_cal, [], "cases"), (good_re, [1], [], "attention"),
                                     (good_re, old_cal, [], "fwd_sm_mhz"), (zero_clock, good_cal, [], "sm_mhz"),
                                     (no_len, good_cal, [], "plan.seq_len"), (good_re, good_cal, ["--min-samples", "0"], "--min-samples"),
                                     ({"cases": [case("a", 16384, [])]}, good_cal, [], "no attention phase")]:
            r = self.run_tool(re, cal, *args)
            self.assertEqual(r.returncode, 2, (names, r.stdout, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(names, r.stderr)


if __name__ == "__main__":
    unittest.main()
