#pragma once
// A decoder layer's elementwise kernels outside attention and the GEMMs (issue 13's whole step): eager
// HF semantics (runtime/reference_layer.hpp has the formulas and is their fp64 oracle), bf16 tensors,
// fp32 math, one rounding per output. Plain C++ header: includable from .cpp (g++) and .cu (nvcc).
//
// Shapes (T tokens = B * S_l rows, row-major):
//   x, out, dout, dx : [T, h] bf16     w : [h] bf16     rstd : [T] fp32     dw : [h] fp32
//   qk (q or k)      : [T, H, D] bf16, rotated in place     cos, sin : [T, D/2] bf16
//   gate, up, act, dact, dgate, dup : [T, F] bf16 (n = T * F elements)
// Each launcher returns cudaSuccess or the launch error; a shape it does not take returns
// cudaErrorInvalidValue (h or F odd, D not a multiple of 4, T < 1, h > 16384 or no workspace for
// rmsnorm_bwd).
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::kernels {

// out = w * bf16(x * rstd); rstd = 1/sqrt(mean(x^2) + eps) per row (kept for the backward).
cudaError_t rmsnorm_fwd(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, float* rstd,
                        std::int64_t T, std::int64_t h, float eps, cudaStream_t stream);
// dx (bf16) and dw (fp32, overwritten) from dout, x, w and the forward's rstd. `workspace` holds the
// per-block partial sums of dw: rmsnorm_bwd_workspace_bytes(T, h) bytes, at most min(T, the current
// device's resident blocks) rows of h floats (0 for a shape rmsnorm_bwd refuses). dw is summed in a
// fixed order (no atomics): the same inputs give the same bits on the same device every run.
std::size_t rmsnorm_bwd_workspace_bytes(std::int64_t T, std::int64_t h);
cudaError_t rmsnorm_bwd(const __nv_bfloat16* dout, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        const float* rstd, __nv_bfloat16* dx, float* dw, void* workspace, std::int64_t T,
                        std::int64_t h, cudaStream_t stream);

// The rotation of every head of qk by its token's angles (backward = true: the transposed rotation,
// which maps the output's gradient to the input's), in place.
cudaError_t rope(__nv_bfloat16* qk, const __nv_bfloat16* cos, const __nv_bfloat16* sin, std::int64_t T,
                 std::int64_t H, std::int64_t D, bool backward, cudaStream_t stream);

// act = silu(gate) * up; and its backward (dgate, dup from dact).
cudaError_t swiglu_fwd(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* act, std::int64_t n,
                       cudaStream_t stream);
cudaError_t swiglu_bwd(const __nv_bfloat16* dact, const __nv_bfloat16* gate, const __nv_bfloat16* up,
                       __nv_bfloat16* dgate, __nv_bfloat16* dup, std::int64_t n, cudaStream_t stream);

// out = a + b (the residual adds); out may alias a.
cudaError_t add(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, std::int64_t n,
                cudaStream_t stream);
// out = a + b in fp32 (ZeRO-3's fp32 gradients summed over ranks); out may alias a; any n >= 1.
cudaError_t add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream);

}  // namespace ulysses::kernels
