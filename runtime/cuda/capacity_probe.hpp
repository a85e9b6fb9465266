#pragma once
// Does the Ulysses attention block of a shape fit on the GPUs? The block runner allocates every
// buffer up front (block_runner.hpp), so "fits" is decided by allocating them for real on every
// rank: an out-of-memory (runtime/backend.hpp OutOfMemory) on any rank means it does not. With
// run_phases, the ranks that all fit then run the given phases once (BlockPhase order: 0, 2, 3,
// 5 are the exchanges, 1 and 4 attention) so that lazily allocated NCCL and kernel memory is
// exercised too. Used by `ulysses capacity --backend cuda` (cli/cmd_capacity.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend.hpp"

namespace ulysses::runtime::cuda {

struct FitProbe {
  bool fits = false;
  std::vector<std::int64_t> arena_bytes;       // per rank: bytes allocated (all buffers when it fits)
  std::vector<std::int64_t> free_before_bytes; // per rank: cudaMemGetInfo free before allocating
  std::vector<std::int64_t> free_after_bytes;  // per rank: cudaMemGetInfo free with everything allocated / after the phases
  double phases_s = 0;                         // wall time of the phases run (max over ranks)
  std::string note;                            // the out-of-memory message of the first rank that failed
};

FitProbe probe_block_fit(const BlockShape& s, const std::vector<int>& run_phases, double timeout_s);

}  // namespace ulysses::runtime::cuda
