#pragma once
// Flash attention backward main kernel on Hopper warpgroup MMA (wgmma, sm_90a), head dim 128: the
// shared-memory layout and the step's pieces, used by the kernel in attention_flash_bwd_sm90a.cu and by its
// TMA form (attention_flash_bwd_sm90a_tma.cuh). Include from a file built for sm_90a.
// The preprocess (delta, lse2) and the dq conversion are attention_flash_bwd.cu's.
//
// One CTA per (128-key tile n0, kv head, batch): 2 warpgroups (256 threads), warpgroup wg owns
// keys n0 + 64wg .. n0 + 64wg + 63. It walks the q heads of the kv head's group and their 64-row
// q tiles (causal: from the tile holding key n0 on). Per q tile (m0):
//   S^T  [64 keys x 64 q]  = K_wg Q^T          wgmma SS, K-major A (K) and B (Q),  8 k-steps over d
//   dP^T [64 keys x 64 q]  = V_wg dO^T         wgmma SS, same, issued right behind S^T
//   P^T = exp2(S^T * scale*log2e - lse2[q]) (masked), dS^T = P^T o (dP^T - delta[q])  registers
//   dV_wg [64 keys x 128] += P^T dO           wgmma RS: A = P^T from registers, B = dO N-major
//   dK_wg [64 keys x 128] += dS^T Q           wgmma RS: A = dS^T from registers, B = Q N-major
//   dS^T -> shared memory (bf16, stmatrix), barrier
//   dQ [64 q x 64 d (half wg)] = dS K[:, 64wg..]  wgmma SS: A = dS M-major, B = K N-major; then
//   added to the fp32 dq_accum with float2 atomics.
// Q and dO tiles double-buffered by cp.async (next tile's copies issued at the top of a step).
// dK (times scale) and dV leave the accumulators once per CTA.
//
// Shared memory (bytes; every tile 1024-aligned, rows of 64 bf16 = 128 B, 128B-swizzled as in
// kernels/wgmma.cuh; a 128-wide tile is two 64-wide halves, half h at + h * rows * 128):
//   K   [2 halves][128 keys][64]   32768      V  [2][128][64]  32768
//   Q   [2 buf][2 halves][64 q][64] 32768     dO [2][2][64][64] 32768
//   dS^T [128 keys][64 q]           16384     lse2 [2 buf][64] fp32, delta [2 buf][64] fp32
//
// Operand views of the same tiles (wgmma.cuh gives the descriptor rules):
//   K as A of S^T (m = key, k = d): K-major;  K as B of dQ (k = key, n = d): N-major
//   Q as B of S^T (n = q, k = d):   K-major;  Q as B of dK (k = q, n = d):   N-major, LBO 8192
//   dS^T as A of dQ (m = q, k = key): M-major
#include "kernels/attention_flash_sm90a.hpp"

#include <cstdint>

#include "kernels/attention_flash_common.cuh"
#include "kernels/wgmma.cuh"

namespace ulysses::kernels::flash {
namespace {

constexpr int kD = 128, kBN = 128, kBM = 64, kNT = 256;

struct Sm90Smem {
  static constexpr int K = 0;
  static constexpr int V = K + kBN * kD * 2;
  static constexpr int Q = V + kBN * kD * 2;          // buffer b at Q + b * kBM * kD * 2
  static constexpr int dO = Q + 2 * kBM * kD * 2;
  static constexpr int dS = dO + 2 * kBM * kD * 2;    // [kBN][kBM]
  static constexpr int L = dS + kBN * kBM * 2;        // [2][kBM] fp32
  static constexpr int Dl = L + 2 * kBM * 4;          // [2][kBM] fp32
  static constexpr int bytes = Dl + 2 * kBM * 4;
  static_assert(K % 1024 == 0 && V % 1024 == 0 && Q % 1024 == 0 && dO % 1024 == 0 && dS % 1024 == 0,
                "wgmma tiles must be 1024-byte aligned");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

// S^T = K_wg Q^T, then dP^T = V_wg dO^T into st, dp (wgmma D layout): two commit groups, the
// softmax overlaps the second. The functions below take the kernel's scalars by value and its
// arrays by reference and declare no array of their own: so the kernel's SASS is the same as
// with their code in its body (checked with bench/attn/cubin_sections.py).
__device__ __forceinline__ void sm90a_issue_st_dp(float (&st)[32], float (&dp)[32], const std::uint32_t sbase,
                                                  const std::uint32_t qs, const std::uint32_t dos, const int wg) {
  using L = Sm90Smem;
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const std::uint32_t off = (kk & 3) * 32;
    const std::uint64_t da = wgmma::desc(sbase + L::K + (kk >> 2) * kBN * 128 + wg * 64 * 128 + off, 16, 1024);
    const std::uint64_t db = wgmma::desc(qs + (kk >> 2) * kBM * 128 + off, 16, 1024);
    wgmma::m64n64k16_ss<0, 0>(st, da, db, kk > 0);
  }
  wgmma::commit();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const std::uint32_t off = (kk & 3) * 32;
    const std::uint64_t da = wgmma::desc(sbase + L::V + (kk >> 2) * kBN * 128 + wg * 64 * 128 + off, 16, 1024);
    const std::uint64_t db = wgmma::desc(dos + (kk >> 2) * kBM * 128 + off, 16, 1024);
    wgmma::m64n64k16_ss<0, 0>(dp, da, db, kk > 0);
  }
  wgmma::commit();
}

// P^T = exp2(S^T * scale*log2e - lse2) in st [64 keys x N/2 q] (N = 32: 64-row q tiles; 64: the D = 64 kernel's
// 128-row tiles); need_mask: 0 for keys beyond S and, causal, keys after the query (key of st[4j + 0/1]: key_base,
// of st[4j + 2/3]: key_base + 8; q m0 + 8j + 2t + 0/1)
template <bool CAUSAL, int N>
__device__ __forceinline__ void sm90a_softmax(float (&st)[N], const BwdArgs& a, const float* lse2, const int t,
                                              const bool need_mask, const int key_base, const int m0,
                                              const int S) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    const float2 l2 = *reinterpret_cast<const float2*>(lse2 + j * 8 + 2 * t);
#pragma unroll
    for (int e = 0; e < 4; ++e) st[4 * j + e] = ex2_approx(fmaf(st[4 * j + e], a.scale_log2, -((e & 1) ? l2.y : l2.x)));
  }
  if (need_mask) {
#pragma unroll
    for (int j = 0; j < N / 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key_base + (e >> 1) * 8;
        const int q = m0 + j * 8 + 2 * t + (e & 1);
        if (key >= S || (CAUSAL && key > q)) st[4 * j + e] = 0.f;
      }
  }
}

// dS^T = P^T o (dP^T - delta) in dp; pp, ss: P^T, dS^T as packed bf16 pairs, pp[i] = (P^T[2i],
// P^T[2i+1]) (k-step kk of dV/dK uses pp[4kk..4kk+3], ss likewise); N as sm90a_softmax's
template <int N>
__device__ __forceinline__ void sm90a_ds_pack(float (&st)[N], float (&dp)[N], const float* delta, const int t,
                                              std::uint32_t (&pp)[N / 2], std::uint32_t (&ss)[N / 2]) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    const float2 dl = *reinterpret_cast<const float2*>(delta + j * 8 + 2 * t);
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[4 * j + e] = st[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? dl.y : dl.x));
  }
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    pp[i] = pack_bf16(st[2 * i], st[2 * i + 1]);
    ss[i] = pack_bf16(dp[2 * i], dp[2 * i + 1]);
  }
}

// dS^T to shared memory for dQ (4 stmatrix.x4: q chunks 2jp, 2jp+1 of the warp's 16 keys; st_base,
// st_cb: the lane's row address and chunk offset)
__device__ __forceinline__ void sm90a_store_ds(std::uint32_t (&ss)[16], const std::uint32_t st_base, const int st_cb,
                                               const int lane) {
#pragma unroll
  for (int jp = 0; jp < 4; ++jp) {
    const std::uint32_t addr = st_base + ((((2 * jp + st_cb) ^ (lane & 7))) << 4);
    stsm_x4(addr, ss[4 * jp], ss[4 * jp + 1], ss[4 * jp + 2], ss[4 * jp + 3]);
  }
}

// dV += P^T dO, dK += dS^T Q (A from registers, B N-major: k = q rows, LBO = half stride); one
// commit group
__device__ __forceinline__ void sm90a_issue_dkv(float (&dk)[64], float (&dv)[64], std::uint32_t (&pp)[16],
                                                std::uint32_t (&ss)[16], const std::uint32_t qs,
                                                const std::uint32_t dos) {
#pragma unroll
  for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kBM / 16; ++kk) {
    wgmma::m64n128k16_rs<1>(dv, pp + 4 * kk, wgmma::desc(dos + kk * 16 * 128, kBM * 128, 1024));
  }
#pragma unroll
  for (int kk = 0; kk < kBM / 16; ++kk) {
    wgmma::m64n128k16_rs<1>(dk, ss + 4 * kk, wgmma::desc(qs + kk * 16 * 128, kBM * 128, 1024));
  }
  wgmma::commit();
}

// The same three products one at a time, each its own commit group and none waited for (variant 40960's step
// order: dV, barrier, dQ, dK): dV += P^T dO and dK += dS^T Q by sm90a_issue_rs (A the packed fragments, B dO or
// Q), dQ = dS K by sm90a_issue_dq (as sm90a_dq without its wait).
__device__ __forceinline__ void sm90a_issue_rs(float (&acc)[64], std::uint32_t (&frag)[16], const std::uint32_t b_tile) {
#pragma unroll
  for (int i = 0; i < 16; ++i) wgmma::fence_reg(frag[i]);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kBM / 16; ++kk) wgmma::m64n128k16_rs<1>(acc, frag + 4 * kk, wgmma::desc(b_tile + kk * 16 * 128, kBM * 128, 1024));
  wgmma::commit();
}
__device__ __forceinline__ void sm90a_issue_dq(float (&dq)[32], const std::uint32_t sbase, const std::uint32_t k_wg) {
  using L = Sm90Smem;
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {
    const std::uint64_t da = wgmma::desc(sbase + L::dS + kk * 16 * 128, kBN * 128, 1024);
    const std::uint64_t db = wgmma::desc(k_wg + kk * 16 * 128, kBN * 128, 1024);
    wgmma::m64n64k16_ss<1, 1>(dq, da, db, kk > 0);
  }
  wgmma::commit();
}

// dQ[:, 64wg..64wg+63] = dS K[:, 64wg..] into dq (k = 128 keys; A M-major, B N-major), waited for;
// k_wg: K's half of this warpgroup, sbase + L::K + wg * kBN * 128 (summed by the caller: summed
// here, from wg, the address arithmetic came out in another order and so did the SASS)
__device__ __forceinline__ void sm90a_dq(float (&dq)[32], const std::uint32_t sbase, const std::uint32_t k_wg) {
  sm90a_issue_dq(dq, sbase, k_wg);
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < 32; ++i) wgmma::fence_reg(dq[i]);
}

// dq into dq_accum (head hq): rows m0 + 16 w4 + g (+8), cols 64 wg + 8 j + 2t; rows past S (zero
// dQ: P = 0 there) go to row S-1, so there is no branch
__device__ __forceinline__ void sm90a_dq_atomics(float (&dq)[32], const BwdArgs& a, const int b, const int S,
                                                 const std::int64_t ldq, const int hq, const int wg, const int w4,
                                                 const int g, const int t, const int m0) {
  float* base = a.dq_accum + static_cast<std::int64_t>(b) * S * ldq + hq * kD + wg * 64 + 2 * t;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int row = min(m0 + w4 * 16 + g + hr * 8, S - 1);
    float* dst = base + row * ldq;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(dq[4 * j + 2 * hr], dq[4 * j + 2 * hr + 1]));
    }
  }
}

// Variant 106496 (N = 32; the D = 64 kernel's 114688: N = 16): this thread's N / 2 dq pairs into its warpgroup's
// staging block `stage` (shared, N / 2 KiB) in fragment order, pair p at stage + (p * 128 + tw) * 8 (consecutive
// threads, consecutive 8 bytes: no bank conflicts)
template <int N>
__device__ __forceinline__ void sm90a_stage_dq(const float (&dq)[N], const std::uint32_t stage, const int tw) {
#pragma unroll
  for (int p = 0; p < N / 2; ++p) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(stage + (p * 128 + tw) * 8), "f"(dq[2 * p]), "f"(dq[2 * p + 1])
                 : "memory");
  }
}

// the 128 threads of warpgroup wg meet (named barrier 1 + wg; 0 is __syncthreads')
__device__ __forceinline__ void wg_named_sync(const int wg) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory"); }

// The last partial q tile (m0 + 64 > S) of variants 106496 (D = 128) and 114688 (D = 64): warpgroup wg's dQ share
// dq [64 q x D/2 d] by atomics into the tail rows of the fragment layout (dq_frag_tail_row<D>: rows m0 + 16 w4 + g
// (+8) - 64 (S / 64), cols (D/2) wg + 8 j + 2t); rows past S skipped
template <int D = 128>
__device__ __forceinline__ void sm90a_dq_atomics_tail(const float (&dq)[D / 4], const BwdArgs& a, const int b, const int S,
                                                      const int hq, const int wg, const int w4, const int g, const int t,
                                                      const int m0) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = m0 + w4 * 16 + g + hr * 8 - (S / kBM) * kBM;
    if (r < S % kBM) {
      float* dst = a.dq_accum + dq_frag_tail_row<D>(b, hq, r, static_cast<int>(gridDim.z), a.H, S) + wg * (D / 2) + 2 * t;
#pragma unroll
      for (int j = 0; j < D / 16; ++j) atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(dq[4 * j + 2 * hr], dq[4 * j + 2 * hr + 1]));
    }
  }
}

// dK (times scale), dV: straight from the accumulators (rows key_base, key_base + 8)
__device__ __forceinline__ void sm90a_store_dkv(float (&dk)[64], float (&dv)[64], const BwdArgs& a, const int b,
                                                const int S, const std::int64_t ldk, const int hk, const int t,
                                                const int key_base) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int key = key_base + hr * 8;
    if (key < S) {
      const std::int64_t off = (static_cast<std::int64_t>(b) * S + key) * ldk + hk * kD + 2 * t;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        *reinterpret_cast<std::uint32_t*>(a.dk + off + j * 8) =
            pack_bf16(dk[4 * j + 2 * hr] * a.scale, dk[4 * j + 2 * hr + 1] * a.scale);
        *reinterpret_cast<std::uint32_t*>(a.dv + off + j * 8) = pack_bf16(dv[4 * j + 2 * hr], dv[4 * j + 2 * hr + 1]);
      }
    }
  }
}

}  // namespace

}  // namespace ulysses::kernels::flash
