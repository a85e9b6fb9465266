#pragma once
// The optimizer step's kernels (issue 13): the global gradient norm and the clipping coefficient, and
// AdamW on fp32 master weights with bf16 parameters written back, as DeepSpeed's bf16 ZeRO step does it
// (runtime/reference_adam.hpp is their fp64 oracle and says where each formula comes from).
// Plain C++ header: includable from .cpp (g++) and .cu (nvcc).
//
// Shapes (n elements of one parameter tensor):
//   grad [n] bf16 or fp32        param [n] bf16        master, m, v [n] fp32
//   partials [kNormBlocks] fp32 per tensor; norm_coef [2] fp32: the global norm, then the coefficient
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::kernels {

inline constexpr int kNormBlocks = 128;  // partial sums of squares per tensor (fixed: the sum's order is too)

// partials[b] = sum of grad[i]^2 over the elements block b visits (b < kNormBlocks; the rest zero).
cudaError_t grad_sq_partials(const __nv_bfloat16* grad, std::int64_t n, float* partials, cudaStream_t stream);
cudaError_t grad_sq_partials(const float* grad, std::int64_t n, float* partials, cudaStream_t stream);

// norm_coef[0] = sqrt(sum of partials[0..count)) (summed in fp64 in a fixed order: per thread a strided
// sum, then a tree over the threads; the same bits every run); norm_coef[1] = the
// gradients' scale: 1 / clip when clip = (norm + 1e-6) / max_norm exceeds 1, else 1 (max_norm <= 0: 1).
cudaError_t clip_coefficient(const float* partials, std::int64_t count, float max_norm, float* norm_coef,
                             cudaStream_t stream);

struct AdamStep {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^t of this step t
};

// With g = grad * (*coef): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// master -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * master); param = bf16(master).
cudaError_t adamw_step(__nv_bfloat16* param, float* master, float* m, float* v, const __nv_bfloat16* grad,
                       std::int64_t n, const AdamStep& hp, const float* coef, cudaStream_t stream);
cudaError_t adamw_step(__nv_bfloat16* param, float* master, float* m, float* v, const float* grad,
                       std::int64_t n, const AdamStep& hp, const float* coef, cudaStream_t stream);

// y[i] = float(x[i]) (the fp32 master weights from the bf16 parameters).
cudaError_t widen_bf16(const __nv_bfloat16* x, float* y, std::int64_t n, cudaStream_t stream);

}  // namespace ulysses::kernels
