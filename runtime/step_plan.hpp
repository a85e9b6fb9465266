#pragma once
// What our runtime's whole step (--backend cuda --scope step, runtime/cuda/step_runner.hpp) runs of a
// scenario: the model's shapes and the plan's features it has so far, or one InputError line naming
// the key it does not run yet. GPU-free, so that the mapping is tested in CI.
#include <cstdint>
#include <string>

#include "runtime/reference_step.hpp"
#include "sim/scenario.hpp"

namespace ulysses::runtime {

struct StepShape {
  StepDims dims;                   // T = B * S_l tokens of one rank (the whole sequence at sp 1)
  std::int64_t sp = 1;             // plan.sp_size: the ranks the sequence and ZeRO-3 are split over
  bool checkpoint = true;          // plan.activation_checkpointing
  bool offload_checkpoints = false;  // plan.offload_checkpoints (TiledMLP: dims.layer.mlp_shards)
  bool offload_optimizer = false;    // plan.offload_optimizer: AdamW on the host
  bool offload_params = false;       // plan.offload_params: ZeRO-3's parameter parts in pinned host memory
  std::int64_t logits_shards = 1;  // plan.tiled_logits: the step model's shard rule (sim/memory.cpp derive_dims)
  std::string attn_implementation;
  double rope_theta = 0;           // the model's RoPE base (sim/model.hpp rope_theta_of); dims.layer.eps its norm epsilon
};

// Throws core::InputError(origin, key, rule) for what the step runtime does not run yet: dp > 1, gpus other
// than sp_size; at sp > 1 a ZeRO stage other than 3, a seq_len not a multiple of sp, heads sp
// cannot split, a hidden size (or head_dim with q/k norms) not a multiple of 8 sp; micro_batch_size > 1,
// offload_params without offload_optimizer, q/k/v biases, kv_strategy
// send_once, an attention implementation not in core/attn_impls.hpp, head dims other than 64 and 128,
// hidden above 16384 (or not a multiple of 128 with tiled logits or TiledMLP).
StepShape step_shape_of(const Scenario& sc, const std::string& origin);

}  // namespace ulysses::runtime
