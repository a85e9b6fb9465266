#!/usr/bin/env python3
"""eval/scripts/step_kernels.py on a synthetic trace: each record goes to the phase window holding its midpoint
(one straddling two windows to the one with its middle, one outside every window to "(between phases)"),
counts and totals per (phase, kernel) and per phase, the --min-ms cut, and exit 2 with one line for a file
that is no trace or holds no traced step."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "eval", "scripts", "step_kernels.py")


def phase(name, ts, dur):
    return {"name": name, "cat": "phase", "ph": "X", "pid": 3, "tid": 1, "ts": ts, "dur": dur}


def kernel(name, ts, dur, pid=3):
    return {"name": name, "cat": "gpu", "ph": "X", "pid": pid, "tid": 2, "ts": ts, "dur": dur}


class StepKernels(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def run_tool(self, events, *args, gz=False):
        path = os.path.join(self.dir.name, "t.json" + (".gz" if gz else ""))
        with (gzip.open if gz else open)(path, "wt") as f:
            json.dump({"traceEvents": events}, f)
        return subprocess.run([sys.executable, TOOL, path, *args], capture_output=True, text=True)

    def rows(self, out):
        return [line.split() for line in out.splitlines() if line and not line.startswith("#")]

    def test_attribution_and_totals(self):
        ev = [phase("attn.fwd", 0, 10000), phase("logits.fwd", 10000, 10000),
              kernel("flash_fwd", 100, 4000), kernel("flash_fwd", 5000, 4000),
              kernel("gemm", 8000, 3000),        # midpoint 9500: attn.fwd
              kernel("gemm", 9000, 4000),        # midpoint 11000: logits.fwd
              kernel("cross_entropy", 15000, 500),
              kernel("memset", 30000, 100),      # after every window
              kernel("other_process", 100, 9000, pid=2),  # not the traced step's
              phase("attn.fwd", 0, 10000) | {"pid": 2}]
        r = self.run_tool(ev, "--min-ms", "0", gz=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.rows(r.stdout)
        pairs = {(x[0], x[3]): (int(x[1]), float(x[2])) for x in rows if len(x) == 4}
        self.assertEqual(pairs[("attn.fwd", "flash_fwd")], (2, 8.0))
        self.assertEqual(pairs[("attn.fwd", "gemm")], (1, 3.0))
        self.assertEqual(pairs[("logits.fwd", "gemm")], (1, 4.0))
        self.assertEqual(pairs[("logits.fwd", "cross_entropy")], (1, 0.5))
        self.assertNotIn(("attn.fwd", "other_process"), pairs)
        totals = {x[0]: float(x[1]) for x in rows if len(x) == 2}
        self.assertEqual(totals["attn.fwd"], 11.0)
        self.assertEqual(totals["logits.fwd"], 4.5)
        between = [x for x in rows if x[0] == "(between" ]
        self.assertTrue(between, r.stdout)  # the memset after the last window

    def test_min_ms_cuts_pairs_not_totals(self):
        ev = [phase("a", 0, 1000), kernel("big", 0, 600), kernel("small", 600, 100)]
        r = self.run_tool(ev, "--min-ms", "0.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("big", r.stdout)
        self.assertNotIn("small", r.stdout)
        totals = {x[0]: float(x[1]) for x in self.rows(r.stdout) if len(x) == 2}
        self.assertEqual(totals["a"], 0.7)

    def test_refusals(self):
        r = self.run_tool([phase("a", 0, 10)])  # no gpu records
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        bad = os.path.join(self.dir.name, "bad.json")
        with open(bad, "w") as f:
            f.write("not json")
        r = subprocess.run([sys.executable, TOOL, bad], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("bad.json", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
