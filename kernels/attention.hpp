#pragma once
// Attention launchers (forward/backward) shared by the CUDA backend, tests and benchmarks.
// Plain C++ header: includable from .cpp (g++) and .cu (nvcc); no Boost/fmt here.
//
// Layout (head-sharded, what the Ulysses exchange delivers; B batch, S full sequence,
// Hq local query heads, Hkv local kv heads, D head dim, Hq % Hkv == 0, q head h reads kv head
// h / (Hq/Hkv)):
//   q, o, dq, do : [B, S, Hq,  D] bf16, row stride Hq*D elements per position
//   k, v, dk, dv : [B, S, Hkv, D] bf16
//   lse          : [B, Hq, S] fp32, natural-log log-sum-exp of the scaled scores per row
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
  const __nv_bfloat16* q = nullptr;  // [B, S, Hq, D]
  const __nv_bfloat16* k = nullptr;  // [B, S, Hkv, D]
  const __nv_bfloat16* v = nullptr;  // [B, S, Hkv, D]
  __nv_bfloat16* o = nullptr;        // [B, S, Hq, D]
  float* lse = nullptr;              // [B, Hq, S]
  std::int64_t B = 1, S = 0, Hq = 0, Hkv = 0, D = 0;
  bool causal = true;
  float scale = 0.f;
};

struct AttnBwdParams {
  const __nv_bfloat16* q = nullptr;   // [B, S, Hq, D]
  const __nv_bfloat16* k = nullptr;   // [B, S, Hkv, D]
  const __nv_bfloat16* v = nullptr;   // [B, S, Hkv, D]
  const __nv_bfloat16* o = nullptr;   // [B, S, Hq, D]
  const __nv_bfloat16* dout = nullptr;// [B, S, Hq, D]
  const float* lse = nullptr;         // [B, Hq, S]
  __nv_bfloat16* dq = nullptr;        // [B, S, Hq, D]
  __nv_bfloat16* dk = nullptr;        // [B, S, Hkv, D]
  __nv_bfloat16* dv = nullptr;        // [B, S, Hkv, D]
  void* workspace = nullptr;          // attn_bwd_workspace_bytes(...) bytes, any content
  std::int64_t B = 1, S = 0, Hq = 0, Hkv = 0, D = 0;
  bool causal = true;
  float scale = 0.f;
};

// Implementations: "reference" (simple tiled kernel, correct first) and "flash" (fast path).
// Each returns cudaSuccess or the launch error; unsupported shapes return cudaErrorInvalidValue.
using AttnKernel = core::AttnKernel;  // the kernels of the table core/attn_impls.hpp

std::size_t attn_bwd_workspace_bytes(AttnKernel kind, std::int64_t B, std::int64_t S, std::int64_t Hq,
                                     std::int64_t Hkv, std::int64_t D);
cudaError_t attn_fwd(AttnKernel kind, const AttnFwdParams& p, cudaStream_t stream);
cudaError_t attn_bwd(AttnKernel kind, const AttnBwdParams& p, cudaStream_t stream);

}  // namespace ulysses::kernels
