"""What PyTorch's caching allocator holds, by stream and pool (the reserved side of the memory).

- `segments()`: torch.cuda.memory_snapshot() summed per (stream, pool): reserved (segment sizes),
  allocated and the largest free block; the counters of memory_stats() that say how the allocator
  got there (retries, device allocations). Cheap: called once, after the memory step.
- `start_history()` / `dump_history(rank)`: with ULYSSES_MEMORY_HISTORY=PREFIX in the environment,
  every allocation, free and segment map of the run is recorded (torch.cuda.memory._record_memory_history,
  Python stacks) and dumped to PREFIX.rank<R>.pickle at the end: the input of
  eval/scripts/allocator_history.py, which finds the moment the reserved bytes peak and what
  was live in each stream then. A diagnostic: slow, off by default.
"""
import os
import pickle

import torch

_HISTORY = os.environ.get("ULYSSES_MEMORY_HISTORY", "")


def segments():
    by = {}
    for seg in torch.cuda.memory_snapshot():
        key = f"{seg.get('stream', 0)}:{seg.get('segment_type', '?')}"
        e = by.setdefault(key, {"stream": int(seg.get("stream", 0)), "pool": seg.get("segment_type", "?"),
                                "segments": 0, "reserved_bytes": 0, "allocated_bytes": 0,
                                "largest_free_block_bytes": 0})
        e["segments"] += 1
        e["reserved_bytes"] += int(seg["total_size"])
        e["allocated_bytes"] += int(seg["allocated_size"])
        for b in seg.get("blocks", []):
            if b.get("state") == "inactive":
                e["largest_free_block_bytes"] = max(e["largest_free_block_bytes"], int(b["size"]))
    st = torch.cuda.memory_stats()
    counters = {k: int(st.get(k, 0)) for k in ("num_alloc_retries", "num_ooms", "num_device_alloc",
                                                 "num_device_free", "num_sync_all_streams")}
    return {"pools": sorted(by.values(), key=lambda e: -e["reserved_bytes"]), "counters": counters}


def start_history():
    if _HISTORY:
        torch.cuda.memory._record_memory_history(max_entries=4_000_000, context="alloc", stacks="python")


def dump_history(rank):
    if not _HISTORY:
        return
    path = f"{_HISTORY}.rank{rank}.pickle"
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
    os.replace(tmp, path)
    torch.cuda.memory._record_memory_history(enabled=None)
