#pragma once
// A decoder layer's elementwise ops outside attention, forward and backward, as HF Transformers defines
// them (LlamaRMSNorm, apply_rotary_pos_emb with rotate_half, LlamaMLP's SwiGLU): the fp64 oracle of the
// CUDA kernels (kernels/layer_ops.hpp, tests/gpu/test_layer_ops.cpp) and the CPU backend's step.
// Inputs are bf16 bits (what the GPU holds), outputs double: the kernels' results are compared against
// these within the tolerance their own bf16 rounding allows. Plain C++17 (nvcc may include it).
//
// Shapes (T tokens = B * S_l rows):
//   x, out, dout, dx : [T, h]         w : [h]          rstd : [T]
//   qk (q or k)      : [T, H, D]      positions : [T]  (RoPE: D even, rotate_half pairs i and i + D/2)
//   gate, up, dgate, dup, act : [T, F]
// RMSNorm:  rstd_t = 1 / sqrt(mean_j x_tj^2 + eps)   n_tj = x_tj rstd_t   out_tj = w_j bf16(n_tj)
//   backward: dw_j = sum_t dout_tj bf16(n_tj)   g_tj = dout_tj w_j
//             dx_tj = rstd_t (g_tj - n_tj mean_k(g_tk n_tk))
// RoPE:     angle_ti = pos_t theta^(-2i/D) (i < D/2), c = bf16(cos), s = bf16(sin) (HF casts them)
//   out_i = x_i c_i - x_{i+D/2} s_i        out_{i+D/2} = x_{i+D/2} c_i + x_i s_i
//   backward (the transposed rotation): dx_i = d_i c_i + d_{i+D/2} s_i, dx_{i+D/2} = d_{i+D/2} c_i - d_i s_i
// SwiGLU:   act = silu(gate) * up, silu(g) = g sigmoid(g)
//   backward: dup = dact silu(gate)   dgate = dact up sigmoid(g) (1 + g (1 - sigmoid(g)))
#include <cstdint>
#include <vector>

#include "core/bf16.hpp"

namespace ulysses::runtime {

// In: core::bf16 (bits, what the kernels read) or double (a layer's fp64 intermediates).
// round_n = false: the normalized value is not rounded to bf16 (the smooth function the backward
// differentiates; HF rounds it, and autograd passes the gradient through the rounding unchanged)
template <class In>
void rmsnorm_forward(std::int64_t T, std::int64_t h, const In* x, const In* w, double eps, double* out, double* rstd,
                     bool round_n = true);
template <class In>
void rmsnorm_backward(std::int64_t T, std::int64_t h, const In* dout, const In* x, const In* w, double eps, double* dx,
                      double* dw, bool round_n = true);

// RMSNorm given a kernel's own fp32 rstd [T]: n_tj = bf16(float(x_tj) * rstd_t) rounded as the kernel
// rounds it, then out_tj = bf16(float(w_j) * n_tj) (bits, out [T, h]) and dw_j = sum_t dout_tj n_tj in fp64
// (dw [h]; dw_abs [h]: sum_t |dout_tj n_tj|, the scale of its summation error). Where x * rstd lies within
// fp32 error of a bf16 rounding boundary (about 5e-5 of the elements) the fp64 oracle rounds the other way,
// moving that term by a bf16 ulp (up to 2^-7 relative): over thousands of rows no tight bound on dw holds
// against the oracle, so the kernels' tests check out's bits and dw's summation against this, and rstd
// against the fp64 oracle.
void rmsnorm_given_rstd(std::int64_t T, std::int64_t h, const core::bf16* x, const core::bf16* w,
                        const core::bf16* dout, const float* rstd, core::bf16* out, double* dw, double* dw_abs);

// The bf16 cos and sin tables HF's rotary embedding hands the layers: [T, D/2] each.
void rope_tables(std::int64_t T, std::int64_t D, const std::int64_t* positions, double theta,
                 std::vector<core::bf16>& cos, std::vector<core::bf16>& sin);
// backward = false: out = rope(x); true: out = rope's transpose applied to x (the gradient).
template <class In>
void rope_apply(std::int64_t T, std::int64_t H, std::int64_t D, const In* x, const core::bf16* cos,
                const core::bf16* sin, bool backward, double* out);

template <class In>
void swiglu_forward(std::int64_t n, const In* gate, const In* up, double* act);
template <class In>
void swiglu_backward(std::int64_t n, const In* dact, const In* gate, const In* up, double* dgate, double* dup);

}  // namespace ulysses::runtime
