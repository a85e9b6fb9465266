#pragma once
// FlashAttention-2-style kernels for Hopper (sm_90): bf16 in, fp32 accumulate, causal or not,
// MHA and GQA (kv heads read once per group), head dims 64 and 128, any S.
// Layouts and parameters: kernels/attention.hpp. Notes and measurements: docs/ATTENTION.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "kernels/attention.hpp"

namespace ulysses::kernels {

// Forward: writes o and lse. Returns cudaErrorInvalidValue for unsupported shapes
// (D not 64/128, H % H_kv != 0, S < 1) or the launch error.
cudaError_t attn_fwd_flash(const AttnFwdParams& p, cudaStream_t stream);

// Backward: writes dq, dk, dv; needs attn_bwd_flash_workspace_bytes(...) bytes of workspace
// (fp32 dq accumulator and per-row delta = rowsum(dO * O)); its content on entry is ignored.
cudaError_t attn_bwd_flash(const AttnBwdParams& p, cudaStream_t stream);

std::size_t attn_bwd_flash_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t H,
                                           std::int64_t H_kv, std::int64_t D);

// What runs at this head dim on the current device, for device lines and reports, e.g.
// "wgmma sm_90a fwd 1471 / bwd 368640" or "mma.sync fwd 1471 / bwd 1117" (the default variants as they run at this
// head dim; their numbers: bench/attn/attn_tuning.hpp).
std::string attn_flash_kernels_in_use(int head_dim);

}  // namespace ulysses::kernels
