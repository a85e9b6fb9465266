#!/usr/bin/env python3
"""eval/scripts/allocator_history.py on synthetic histories (torch's memory._snapshot() shape):
the reserved and allocated peaks, the per-stream split, the granule slack, the growth list, and one
line with exit 2 on a file that is not a history."""
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "eval", "scripts", "allocator_history.py")
MiB = 1 << 20


def ev(action, addr, size, stream=0, frames=None):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "frames": frames or []}


def run(obj, raw=None):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "h.pickle")
        with open(path, "wb") as f:
            if raw is not None:
                f.write(raw)
            else:
                pickle.dump(obj, f)
        p = subprocess.run([sys.executable, TOOL, path], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr


class AllocatorHistory(unittest.TestCase):
    def test_peaks_streams_and_granules(self):
        B = 1 << 40
        evs = [
            ev("segment_map", B, 100 * MiB),
            ev("alloc", B, 30 * MiB, frames=[{"filename": "/x/site-packages/deepspeed/a.py", "line": 7, "name": "f"}]),
            ev("alloc", B + 30 * MiB, 25 * MiB),          # live: 55 MiB in granules 0..2 -> 60 MiB touched
            ev("segment_map", 2 * B, 40 * MiB, stream=5),   # a side stream's own pool
            ev("alloc", 2 * B, 10 * MiB, stream=5),
            ev("free_completed", 2 * B, 10 * MiB, stream=5),
            ev("free_completed", B, 30 * MiB),
        ]
        rc, out, err = run({"device_traces": [evs], "segments": []})
        self.assertEqual(rc, 0, err)
        self.assertIn("reserved peak 0.137 GiB", out)            # 140 MiB
        # the allocated peak is 65 MiB (55 + 10 on stream 5): granules 0..2 of stream 0 and 0 of stream 5
        self.assertIn("allocated peak 0.063 GiB at event 4", out)
        self.assertRegex(out, r"\n\s+0\s+0\.098\s+0\.054")     # at the reserved peak (event 3): 55 MiB live on stream 0
        self.assertIn("0.078 GiB of granules touched", out)      # 4 x 20 MiB = 80 MiB
        self.assertIn("(0.8 granules) above the live bytes", out)  # 15 MiB / 20 MiB
        self.assertRegex(out, r"\n\s+5\s+0\.039\s+0\.000")     # stream 5 reserved 40 MiB, nothing live at the peak
        self.assertIn("deepspeed/a.py:7 f", out)

    def test_trace_times(self):
        # --trace-times: the host clock of each allocation, and of each free's completion and request
        B = 1 << 40
        evs = [dict(ev("segment_map", B, 40 * MiB), time_us=1000),
               dict(ev("alloc", B, 20 * MiB), time_us=1005),
               dict(ev("free_requested", B, 20 * MiB), time_us=1100),
               dict(ev("alloc", B + 20 * MiB, 20 * MiB), time_us=1250),
               dict(ev("free_completed", B, 20 * MiB), time_us=1250)]
        with tempfile.TemporaryDirectory() as d:
            path, trace = os.path.join(d, "h.pickle"), os.path.join(d, "t.txt")
            with open(path, "wb") as f:
                pickle.dump({"device_traces": [evs], "segments": []}, f)
            for times in (False, True):
                p = subprocess.run([sys.executable, TOOL, path, "--trace", trace] + (["--trace-times"] if times else []),
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                with open(trace) as f:
                    lines = f.read().splitlines()[1:]
                if times:
                    self.assertEqual(lines, ["m 41943040 0", "a 0 20971520 0 # t=5", "a 1 20971520 0 # t=250",
                                             "f 0 # t=250 req=100"])
                else:
                    self.assertEqual(lines, ["m 41943040 0", "a 0 20971520 0", "a 1 20971520 0", "f 0"])

    def test_not_a_history(self):
        rc, out, err = run(None, raw=b"not a pickle")
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.strip().splitlines()), 1)
        self.assertIn("not a torch memory history", err)
        rc, out, err = run({"segments": []})
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
