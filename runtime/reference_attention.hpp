#pragma once
// Single-rank scaled dot-product attention, forward and backward, with GQA and an optional
// causal mask: the oracle of both backends' tests and the local attention of the CPU backend.
// T = float (fp32 accumulation, what the CPU backend runs) or double (fp64 oracle).
//
// Shapes (head-sharded layout of core/layout.hpp with P = 1, i.e. the full tensors):
//   q, o, dout, dq: [B, S, H, D]      k, v, dk, dv: [B, S, H_kv, D]      lse: [B, H, S]
// q head h reads kv head h / (H / H_kv). scale = 1/sqrt(D).
//   s_ij = scale * q_i . k_j  (j <= i when causal)        lse_i = log sum_j exp(s_ij)
//   p_ij = exp(s_ij - lse_i)                               o_i = sum_j p_ij v_j
// Backward, with Dsum_i = dout_i . o_i:
//   dv_j += p_ij dout_i    dp_ij = dout_i . v_j    ds_ij = p_ij (dp_ij - Dsum_i)
//   dq_i += scale ds_ij k_j                         dk_j += scale ds_ij q_i
// dk, dv sum over the H/H_kv query heads of a group (in ascending head order).
#include <cstdint>

#include "core/flops.hpp"

namespace ulysses::runtime {

struct AttnDims {
  std::int64_t B = 1, S = 0, H = 0, H_kv = 0, D = 0;
  bool causal = true;
};

// FLOPs of the forward and the backward (core/flops.hpp).
inline double attention_fwd_flops(const AttnDims& a) { return core::attention_flops(a.B, a.S, a.H, a.D, a.causal); }
inline double attention_bwd_flops(const AttnDims& a) { return core::attention_flops(a.B, a.S, a.H, a.D, a.causal, core::Pass::bwd); }

template <class T>
void attention_forward(const AttnDims& a, const T* q, const T* k, const T* v, T* o, T* lse);

// o and lse as returned by the forward (o may be the rounded copy a backend stored).
template <class T>
void attention_backward(const AttnDims& a, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* dout, T* dq, T* dk, T* dv);

}  // namespace ulysses::runtime
