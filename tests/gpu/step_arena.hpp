#pragma once
// The step arena's peak the GPU step tests expect: the mirror (sim/step_runtime_memory.hpp) without the
// GEMM workspace (the tests' Gemm owns its own), with the RMSNorm backward's dw partials as the kernel sizes
// them (by the device's resident blocks, kernels/layer_ops.cu rmsnorm_bwd_workspace_bytes) instead of the
// model's kRmsNormBwdBlocks rows: the layer norm's rows of h, and with Qwen3's head norms their rows of D.
#include <algorithm>
#include <cstdint>

#include "kernels/layer_ops.hpp"
#include "runtime/reference_decoder_layer.hpp"
#include "sim/step_runtime_memory.hpp"

namespace ulysses::gputest {

inline std::int64_t expected_arena_peak(const StepRuntimeBytes& mirror, const runtime::DecoderLayerDims& d) {
  const std::int64_t T = d.T;
  std::int64_t model = std::min<std::int64_t>(T, kRmsNormBwdBlocks) * d.h * 4;
  auto kernel = static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(T, d.h));
  if (d.qk_norm) {
    model += std::min<std::int64_t>(T * d.H, kRmsNormBwdBlocks) * d.D * 4;
    kernel += static_cast<std::int64_t>(kernels::rmsnorm_bwd_workspace_bytes(T * d.H, d.D));
  }
  std::printf("  rmsnorm_bwd workspace %lld bytes (model %lld)\n", (long long)kernel, (long long)model);
  return mirror.total() - mirror.gemm_workspace - model + kernel;
}

}  // namespace ulysses::gputest
