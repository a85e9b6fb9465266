#pragma once
// The allocations of a training run on the PyTorch runtime (HF Transformers + Accelerate + DeepSpeed
// ZeRO-3), in the order the run makes them, emitted into the allocator simulation
// (sim/caching_allocator.hpp): what decides the reserved bytes of a run with room to spare
// (docs/MODEL.md "Reserved memory"). Every tensor of 16 MiB and more (smaller ones move the reserved
// peak by <= 0.04 %, tests/eval/test_alloc_replay.cpp). The order is the one the allocator recorded
// for this stack (records/validation/alloc-traces, with the frames each step below names); every size
// is the model's (sim/model.hpp).
//
// Built so far: DeepSpeed's engine construction. Not yet: the steps (forward, loss, backward, the
// gradient path on the reduce stream, the optimizer step); docs/STATUS.md "Open work on issue 12".
#include <cstdint>

#include "sim/caching_allocator.hpp"
#include "sim/scenario.hpp"

namespace ulysses {

// Allocations below this many bytes are left out (the small pool and the small large-pool blocks).
inline constexpr std::int64_t kStepAllocsMinBytes = std::int64_t{16} << 20;

// The ZeRO-3 engine's construction (deepspeed.initialize under Accelerate, zero.Init) on one partition
// (plan.zero_stage 3, zero_group 1) without parameter offload; what stays allocated stays in `a`.
// Returns false (emitting nothing) for a plan it does not cover.
bool deepspeed_construction(const Scenario& sc, CachingAllocatorSim& a);

}  // namespace ulysses
