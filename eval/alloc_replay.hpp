#pragma once
// A recorded allocator trace (eval/scripts/allocator_history.py --trace) replayed through the allocator
// simulation (sim/caching_allocator.hpp): the simulation's reserved bytes next to what PyTorch mapped in
// the same run. The check of the simulation against the allocator itself, alone (docs/MODEL.md
// "Reserved memory"); nothing of the step model is involved.
#include <cstdint>
#include <string>

namespace ulysses::eval {

struct AllocReplay {
  std::int64_t events = 0, allocs = 0;
  std::int64_t measured_peak_reserved = 0;   // from the trace's own map / unmap lines
  std::int64_t simulated_peak_reserved = 0;
  std::int64_t simulated_peak_allocated = 0;
  std::int64_t releases = 0;                 // runs of unmap lines, each replayed as one empty_cache()
  std::int64_t measured_reserved_end = 0, simulated_reserved_end = 0;
  std::int64_t max_reserved_gap = 0;        // largest |simulated - measured| reserved bytes after any line
};

// Reads and replays one trace. InputError (file, line N, rule) on a malformed line. min_bytes > 0: the
// allocations smaller than that (and their frees) are left out of the replay, to see how much of the
// sequence a prediction must know (docs/MODEL.md "Reserved memory").
AllocReplay replay_alloc_trace(const std::string& path, std::int64_t min_bytes = 0);

}  // namespace ulysses::eval
