#pragma once
// Single-rank scaled dot-product attention, forward and backward, with GQA and an optional
// causal mask: the one fp64 oracle (of both backends' block checks, the kernel tests in
// tests/gpu and bench/attn/attn_check.cu) and the local attention of the CPU backend.
// T = float (fp32 accumulation, what the CPU backend runs) or double (fp64 oracle).
// Plain C++17 (no CUDA, no fmt): nvcc-compiled files may include it.
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
#include <vector>

#include "core/bf16.hpp"

#include "core/flops.hpp"

namespace ulysses::runtime {

struct AttnDims {
  std::int64_t B = 1, S = 0, H = 0, H_kv = 0, D = 0;
  bool causal = true;
};

// FLOPs of the forward and the backward (core/flops.hpp).
inline double attention_fwd_flops(const AttnDims& a) { return core::attention_flops(a.B, a.S, a.H, a.D, a.causal); }
inline double attention_bwd_flops(const AttnDims& a) { return core::attention_flops(a.B, a.S, a.H, a.D, a.causal, core::Pass::bwd); }

// threads > 1: the (b, h) pairs of the forward and the (b, kv head) groups of the backward are
// spread over that many threads; every element is computed in the same order as with one, so
// the results are the same bits.
template <class T>
void attention_forward(const AttnDims& a, const T* q, const T* k, const T* v, T* o, T* lse, int threads = 1);

// o and lse as returned by the forward (o may be the rounded copy a backend stored).
template <class T>
void attention_backward(const AttnDims& a, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* dout, T* dq, T* dk, T* dv, int threads = 1);

// The kernel checks' and the oracles' tests' inputs: n values of N(0,1) (std::mt19937_64 seeded with
// `seed`, std::normal_distribution<float>) times `scale`, rounded to bf16.
std::vector<core::bf16> random_bf16(std::int64_t n, std::uint64_t seed, float scale = 1.f);

// The fp64 oracle of one attention call on bf16 inputs (shapes above): the forward, then the
// backward from the unrounded fp64 o; on every hardware thread.
struct AttnReference {
  std::vector<double> o, lse, dq, dk, dv;
};
AttnReference attention_reference(const AttnDims& a, const std::vector<core::bf16>& q, const std::vector<core::bf16>& k,
                                  const std::vector<core::bf16>& v, const std::vector<core::bf16>& dout);

// max_i |got_i - want_i| (got as bf16 bits or fp32); +inf when a got_i is not finite (poison
// left behind by a kernel).
double max_abs_err(const std::vector<core::bf16>& got, const std::vector<double>& want);
double max_abs_err(const std::vector<float>& got, const std::vector<double>& want);

}  // namespace ulysses::runtime
