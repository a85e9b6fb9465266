#pragma once
// Attention launchers (forward/backward) shared by the CUDA backend, tests and benchmarks.
// Plain C++ header: includable from .cpp (g++) and .cu (nvcc); no Boost/fmt here.
//
// Layout (head-sharded, what the Ulysses exchange delivers; B batch, S full sequence,
// H local query heads, H_kv local kv heads, D head dim, H % H_kv == 0, q head h reads kv head
// h / (H/H_kv)):
//   q, o, dq, do : [B, S, H, D] bf16, row stride H*D elements per position
//   k, v, dk, dv : [B, S, H_kv, D] bf16
//   lse          : [B, H, S] fp32, natural-log log-sum-exp of the scaled scores per row
// Causal: query position i attends to key positions j <= i (same global positions: the
// sequence is whole after the exchange).
// scale: usually 1/sqrt(D).
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/attn_impls.hpp"

namespace ulysses::kernels {

struct AttnFwdParams {
  const __nv_bfloat16* q = nullptr;  // [B, S, H, D]
  const __nv_bfloat16* k = nullptr;  // [B, S, H_kv, D]
  const __nv_bfloat16* v = nullptr;  // [B, S, H_kv, D]
  __nv_bfloat16* o = nullptr;        // [B, S, H, D]
  float* lse = nullptr;              // [B, H, S]
  std::int64_t B = 1, S = 0, H = 0, H_kv = 0, D = 0;
  bool causal = true;
  float scale = 0.f;
};

struct AttnBwdParams {
  const __nv_bfloat16* q = nullptr;   // [B, S, H, D]
  const __nv_bfloat16* k = nullptr;   // [B, S, H_kv, D]
  const __nv_bfloat16* v = nullptr;   // [B, S, H_kv, D]
  const __nv_bfloat16* o = nullptr;   // [B, S, H, D]
  const __nv_bfloat16* dout = nullptr;// [B, S, H, D]
  const float* lse = nullptr;         // [B, H, S]
  __nv_bfloat16* dq = nullptr;        // [B, S, H, D]
  __nv_bfloat16* dk = nullptr;        // [B, S, H_kv, D]
  __nv_bfloat16* dv = nullptr;        // [B, S, H_kv, D]
  void* workspace = nullptr;          // attn_bwd_workspace_bytes(...) bytes, any content
  std::int64_t B = 1, S = 0, H = 0, H_kv = 0, D = 0;
  bool causal = true;
  float scale = 0.f;
};

// Implementations: "reference" (simple tiled kernel, correct first) and "flash" (fast path).
// Each returns cudaSuccess or the launch error; unsupported shapes return cudaErrorInvalidValue.
using AttnKernel = core::AttnKernel;  // the kernels of the table core/attn_impls.hpp

std::size_t attn_bwd_workspace_bytes(AttnKernel kind, std::int64_t B, std::int64_t S, std::int64_t H,
                                     std::int64_t H_kv, std::int64_t D);
cudaError_t attn_fwd(AttnKernel kind, const AttnFwdParams& p, cudaStream_t stream);
cudaError_t attn_bwd(AttnKernel kind, const AttnBwdParams& p, cudaStream_t stream);

}  // namespace ulysses::kernels
