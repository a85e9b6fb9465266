#!/usr/bin/env python3
"""Entry point of the deepspeed backend's worker (launched by `ulysses run|compare|capacity
--backend deepspeed`, through torchrun when the scenario has more than one GPU).

Usage: worker.py JOB.json
Exit codes: 0 ok (result written), 2 bad job (one line), 3 the stack is not installed (one line
naming the install script), 4 out of GPU memory (result written with status "oom"), 1 other error.
Each rank writes <out>.rank<R>.json atomically (temporary file, then rename).
"""
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ulysses_worker import job as jobmod  # noqa: E402


def write(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, allow_nan=False)  # strict JSON: a non-finite value is an error here
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 2:
        print("usage: worker.py JOB.json", file=sys.stderr)
        return 2
    try:
        job = jobmod.load(argv[1])
    except jobmod.JobError as e:
        print(e, file=sys.stderr)
        return 2
    for mod in ("torch", "transformers", "accelerate", "deepspeed"):
        try:
            __import__(mod)
        except ImportError as e:
            print(f"deepspeed backend: cannot import {mod} ({e}); install the stack with "
                  f"runtime/deepspeed/install-stack.sh (docs/DEEPSPEED_BACKEND.md)", file=sys.stderr)
            return 3
    import torch
    from ulysses_worker import step
    rank = int(os.environ.get("RANK", "0"))
    out = f"{job['out']}.rank{rank}.json"
    trace = job["run"].get("trace", "")
    trace = f"{trace}.rank{rank}.json" if trace else ""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        res = step.run_job(job, trace)
        write(out, res)
        if res.get("oom_at") and world > 1:
            # a probe ran out of memory on this rank: its peers wait in a collective for it;
            # exit now so that torchrun ends them (the launcher reads this rank's file)
            os._exit(4)
        return 0
    except torch.cuda.OutOfMemoryError as e:
        write(out, {"status": "oom", "rank": rank, "message": str(e).splitlines()[0][:300]})
        print(f"deepspeed backend: out of GPU memory at seq_len {job['plan']['seq_len']}", file=sys.stderr)
        if world > 1:
            sys.stderr.flush()
            os._exit(4)  # as above: do not wait for the peers
        return 4
    except Exception as e:  # noqa: BLE001 - reported in one line, the traceback on stderr
        traceback.print_exc()
        print(f"deepspeed backend: the worker failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
