// runtime/cuda/step_run_parts.hpp: the plan, the kernel and the seeded batch of a step's shape.
#include "runtime/cuda/step_run_parts.hpp"

#include <stdexcept>

#include "core/errors.hpp"
#include "kernels/testdata.cuh"
#include "runtime/reference_layer.hpp"
#include "runtime/reference_step.hpp"

namespace ulysses::runtime::cuda {

KernelChoice kernel_of(const StepShape& shape, const std::string& origin) {
  try {
    return parse_kernel_choice(shape.attn_implementation);
  } catch (const std::invalid_argument& e) {
    throw core::InputError(origin, "plan.attn_implementation", e.what());
  }
}

StepPlan plan_of(const StepShape& shape) {  // the optimizer: AdamW with HF's defaults (runtime/reference_adam.hpp)
  StepPlan plan;
  plan.checkpoint = shape.checkpoint, plan.logits_shards = shape.logits_shards;
  plan.offload_checkpoints = shape.offload_checkpoints;
  plan.offload_optimizer = shape.offload_optimizer;
  plan.offload_params = shape.offload_params;
  return plan;
}

StepBatch seeded_batch(const StepShape& shape, std::uint64_t seed) {
  const StepDims& d = shape.dims;
  const std::int64_t T = d.layer.T * shape.sp;
  StepBatch b;
  b.tokens.resize(static_cast<std::size_t>(T));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t)
    b.tokens[t] = static_cast<std::int64_t>(kernels::splitmix64(seed ^ (0xA5A5ull << 40) ^ static_cast<std::uint64_t>(t)) %
                                            static_cast<std::uint64_t>(d.V)),
    pos[t] = t;
  b.labels = shift_labels(b.tokens);
  rope_tables(T, d.layer.D, pos.data(), shape.rope_theta, b.cos, b.sin);
  return b;
}

StepBatch rank_rows(const StepBatch& b, int r, int P) {
  const std::int64_t T = static_cast<std::int64_t>(b.tokens.size()), T_l = T / P, half_D = static_cast<std::int64_t>(b.cos.size()) / T;
  if (T_l * P != T) throw std::invalid_argument("rank_rows: the tokens are not a multiple of the ranks");
  auto cut = [&](const auto& v, std::int64_t width) {
    return std::decay_t<decltype(v)>(v.begin() + r * T_l * width, v.begin() + (r + 1) * T_l * width);
  };
  return {cut(b.tokens, 1), cut(b.labels, 1), cut(b.cos, half_D), cut(b.sin, half_D)};
}

std::int64_t valid_labels(const std::vector<std::int64_t>& labels) {
  std::int64_t n = 0;
  for (const std::int64_t l : labels) n += l != kIgnoreLabel;
  return n;
}

}  // namespace ulysses::runtime::cuda
