#!/usr/bin/env python3
"""eval/scripts/host_lead.py on synthetic inputs: a memory history with one deferred free and one host
wait (the lag, the allocations between, the wait with its frames), a profiler trace whose launch is
held until a GPU op issued a known number of stream commands earlier finishes (the queue depth), and
exit 2 with one line on an unreadable input."""
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "eval", "scripts", "host_lead.py")
MiB = 1 << 20


def ev(action, addr, size, t_us, frames=None):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t_us,
            "frames": frames or []}


def run(args):
    p = subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class HostLead(unittest.TestCase):
    def test_history(self):
        emb = [{"filename": "/x/torch/nn/modules/sparse.py", "line": 1, "name": "forward"}]
        loss = [{"filename": "/x/deepspeed/runtime/sequence_parallel/ulysses_sp.py", "line": 1229, "name": "backward"}]
        evs = [ev("alloc", 1, 32 * MiB, 0, emb),
               ev("alloc", 2, 20 * MiB, 1000),
               ev("free_requested", 2, 20 * MiB, 2000),      # waits for another stream
               ev("alloc", 3, 64 * MiB, 3000),
               ev("alloc", 4, 1 * MiB, 4000),
               ev("alloc", 5, 32 * MiB, 60000, loss),        # the host waited 56 ms
               ev("free_completed", 2, 20 * MiB, 60000),
               ev("free_requested", 3, 64 * MiB, 61000),     # completed at once: not deferred
               ev("free_completed", 3, 64 * MiB, 61000)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "h.pickle")
            with open(path, "wb") as f:
                pickle.dump({"device_traces": [evs], "segments": []}, f)
            rc, out, err = run(["--history", path, "--wait-ms", "20"])
        self.assertEqual(rc, 0, err)
        self.assertIn("1 deferred frees of 16 MiB and more", out)
        self.assertIn("median 58.0 ms, max 58.0 ms", out)
        self.assertIn("16 MiB and more between: median 2, max 2", out)   # the 64 and the second 32 MiB
        self.assertIn("after a host wait > 20 ms: 1", out)
        self.assertIn("host wait    56.0 ms before alloc", out)
        self.assertIn("ulysses_sp.py:1229 backward", out)

    def test_cupti_queue_depth(self):
        rt = [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 5, "args": {"correlation": 1}}]
        rt += [{"cat": "cuda_runtime", "name": n, "ts": 10 + i, "dur": 1, "args": {"correlation": 2 + i}}
               for i, n in enumerate(["cudaLaunchKernel", "cudaEventRecordWithFlags", "cudaStreamWaitEvent",
                                      "cudaEventQuery", "cudaMemsetAsync"])]   # 4 commands, one query
        rt.append({"cat": "cuda_runtime", "name": "cudaMemsetAsync", "ts": 100, "dur": 9900, "args": {"correlation": 9}})
        rt.append({"cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 20000, "dur": 8000, "args": {"correlation": 10}})
        gpu = [{"cat": "kernel", "name": "long_attention_kernel", "ts": 0, "dur": 9998, "args": {"correlation": 1}}]
        ops = [{"cat": "cpu_op", "name": "aten::mm", "ts": 90, "dur": 10000, "tid": 1},
               {"cat": "cpu_op", "name": "aten::item", "ts": 19990, "dur": 8100, "tid": 1}]
        for e in rt:
            e["tid"] = 1
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(path, "w") as f:
                json.dump({"traceEvents": rt + gpu + ops}, f)
            rc, out, err = run(["--cupti", path])
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(len(lines), 2, out)
        self.assertIn("cudaMemsetAsync", lines[0])
        self.assertIn("held     9.9 ms in aten::mm", lines[0])
        self.assertIn("released by long_attention_kernel (10.0 ms), 4 stream commands after its launch", lines[0])
        self.assertIn("cudaStreamSynchronize", lines[1])
        self.assertNotIn("released by", lines[1])   # a synchronization, not a full queue

    def test_timed_trace(self):
        # a 20 MiB block freed while another stream used it: requested at 2 ms, completed at the malloc of 60 ms,
        # two allocations of 16 MiB and more between; a 64 MiB one completed at once (no malloc between): not deferred
        lines = ["# ulysses allocator trace v1: 9 events from x; reserved peak 0 bytes",
                 f"a 0 {32 * MiB} 0 # t=0", f"a 1 {20 * MiB} 0 # t=1000", f"a 2 {64 * MiB} 0 # t=3000",
                 f"a 3 {1 * MiB} 0 # t=4000", f"a 4 {32 * MiB} 0 # t=60000", "f 1 # t=60000 req=2000",
                 "f 2 # t=61000 req=61000", f"m {128 * MiB} 0"]
        with tempfile.TemporaryDirectory() as d:
            import gzip
            path = os.path.join(d, "t.txt.gz")
            with gzip.open(path, "wt") as f:
                f.write("\n".join(lines) + "\n")
            rc, out, err = run(["--trace", path, "--rows", "3"])
            self.assertEqual(rc, 0, err)
            self.assertIn("1 deferred frees of 16 MiB and more", out)
            self.assertIn("median 58.0 ms, max 58.0 ms", out)
            self.assertIn("allocations of 16 MiB and more between: median 2, max 2", out)
            self.assertIn("20.0 MiB  requested        2.0 ms  completed       60.0 ms  lag    58.0 ms", out)
            # a trace without host clocks: one line, exit 2
            plain = os.path.join(d, "plain.txt")
            with open(plain, "w") as f:
                f.write(f"a 0 {32 * MiB} 0\nf 0\n")
            rc, out, err = run(["--trace", plain])
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1)
            self.assertIn("not a timed trace", err)

    def test_unreadable(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.json")
            with open(path, "w") as f:
                f.write("{}")
            rc, out, err = run(["--cupti", path])
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
