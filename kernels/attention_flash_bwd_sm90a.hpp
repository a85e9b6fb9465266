#pragma once
// The backward main kernel on Hopper warpgroup MMA (attention_flash_bwd_sm90a.cu), shared with
// the mma.sync backward (attention_flash_bwd.cu), which runs its preprocess and dq conversion
// around either main kernel. Private to kernels/.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::kernels::flash {

// Arguments of a backward main kernel (layouts: kernels/attention.hpp; workspace rows padded
// to S_pad, a multiple of 128, padding rows lse2 = +inf, delta = 0).
struct BwdArgs {
  const __nv_bfloat16* q;     // [B, S, Hq, D]
  const __nv_bfloat16* k;     // [B, S, Hkv, D]
  const __nv_bfloat16* v;     // [B, S, Hkv, D]
  const __nv_bfloat16* dout;  // [B, S, Hq, D]
  const float* lse2;          // [B, Hq, S_pad]  lse * log2(e)
  const float* delta;         // [B, Hq, S_pad]  rowsum(dO * O)
  float* dq_accum;            // [B, S, Hq, D]   zeroed; receives dS K (unscaled)
  __nv_bfloat16* dk;          // [B, S, Hkv, D]
  __nv_bfloat16* dv;          // [B, S, Hkv, D]
  int S, S_pad, Hq, Hkv;
  float scale, scale_log2;
};

// Backward variant id of the wgmma kernel (flash_tuning::kBwdVariants); D = 128 only.
inline constexpr int kBwdVariantSm90a = 2048;

// True when this build holds the sm_90a kernel and the current device is compute capability 9.0.
bool bwd_sm90a_usable();

// Launch the wgmma main kernel for head dim 128 on `stream` (B = gridDim.z).
cudaError_t launch_bwd_main_sm90a(const BwdArgs& a, int B, bool causal, cudaStream_t stream);

}  // namespace ulysses::kernels::flash
