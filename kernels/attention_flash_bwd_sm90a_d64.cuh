#pragma once
// Flash attention backward main kernel on Hopper warpgroup MMA (wgmma, sm_90a), head dim 64, loads on TMA
// (backward variants 16384, 20480, its KSPLIT dQ form, and 114688, its DQ_BULK form, below; kernels/ build 16384,
// 114688 and 245760, 114688 with 128-row q tiles (attention_flash_bwd_sm90a_d64_q128.cuh, the D = 64 default since
// 2026-12-06c); the lab builds 20480, bench/attn/attn_flash_bwd_sm90a_d64_lab.cu; which one is the default:
// attention_flash_defaults.hpp):
// the D = 128 TMA form (attention_flash_bwd_sm90a_tma.cuh, variant 8192) step for step at half the head
// dim. It reuses that kernel's softmax, dS^T packing and dS^T store (attention_flash_bwd_sm90a.cuh: their
// shapes depend on the 64-row q tile and the 64 keys of a warpgroup only). Its step pieces (issue_st_dp, issue_rs,
// issue_dq, softmax_ds, dq_bulk_issue, dq_bulk_reduce, start) and launch (launch_bwd_d64) serve the 128-row q tile
// kernel too (BM = kBMq). Include from a file built for sm_90a.
// Measured, and checked against fp64: docs/ATTENTION.md, "The D = 64 wgmma backward".
//
// One CTA per (128-key tile n0, kv head, batch): 2 warpgroups (256 threads), warpgroup wg owns keys
// n0 + 64wg .. + 63; the steps walk the q heads of the kv head's group and their 64-row q tiles (causal:
// from the tile holding key n0 on). Per step (q tile m0):
//   S^T  [64 keys x 64 q] = K_wg Q^T      wgmma SS m64n64k16, K-major A (K) and B (Q), 4 k-steps over d
//   dP^T [64 keys x 64 q] = V_wg dO^T     the same, issued right behind S^T
//   P^T, dS^T in registers (sm90a_softmax, sm90a_ds_pack), dS^T -> shared memory (stmatrix)
//   dV_wg [64 keys x 64 d] += P^T dO      wgmma RS m64n64k16: A = P^T from registers, B = dO N-major
//   dK_wg [64 keys x 64 d] += dS^T Q      wgmma RS m64n64k16: A = dS^T from registers, B = Q N-major
//   barrier (dS^T of both warpgroups)
//   dQ [64 q x 32 d (cols 32wg..)] = dS K[:, 32wg..]   wgmma SS m64n32k16 over the 128 keys: A = dS^T
//     M-major, B = K N-major starting 64 bytes into K's rows for wg 1 (kernels/wgmma.cuh); fp32 float2
//     atomics into dq_accum.
// DQ_BULK (variant 114688; D = 128's 106496 at this head dim): FlashAttention-3's step order (dV issued before the
//   barrier, dQ and then dK after it) and dQ path: while dK runs, each thread stores its 8 dQ pairs into its
//   warpgroup's 8 KiB staging block in fragment order; after dK's wait one thread per warpgroup adds the block to
//   dq_accum with one cp.reduce.async.bulk .add.f32 (dq_accum in the fragment layout of dq_frag_block<64>, a last
//   partial q tile by atomics into its tail rows; run_bwd's bwd_convert_dq_frag<64> undoes it). The next step waits
//   for the block to have been read (cp.async.bulk.wait_group.read) before its barrier, after which it is rewritten.
//   ptxas 13.0: 184 / 186 registers (full / causal; 16384: 174 / 178), no spills, 129.6 KiB shared memory with three
//   stages (16384: 113.6 KiB); a run-time named barrier id, so all 16 hardware barriers reserved (as 20480).
// Registers per thread: S^T 32 + dP^T 32 + dK 32 + dV 32 + P^T/dS^T packed 16 + 16 + dQ 16 fp32.
// Loads: K and V once by TMA (one mbarrier); Q, dO by TMA and the lse2/delta rows by 1-D bulk copies into
// STAGES mbarrier-guarded stages (full/empty per stage, thread 0 loading step it + STAGES - 1 once step it's
// dQ wgmma has completed), dS^T double-buffered: one __syncthreads per step (as variant 8192).
//
// Shared memory (bytes; every tile 1024-aligned, rows of 64 bf16 = 128 B, 128B-swizzled as in kernels/wgmma.cuh):
//   K [128 keys][64] 16384, V [128][64] 16384, STAGES x {Q [64 q][64] 8192, dO [64][64] 8192},
//   dS^T [2 buf][128 keys][64 q] 32768, STAGES x {lse2 [64], delta [64]} fp32, mbarriers kv, full[STAGES],
//   empty[STAGES]; DQ_BULK: the staging blocks [2 wg][64 q x 32 d] fp32 16384 (128-byte aligned).
#include "kernels/attention_flash_bwd_sm90a.cuh"
#include "kernels/tma.cuh"

namespace ulysses::kernels::flash {
namespace {
namespace d64 {  // the D = 128 pieces' tile constants (kD, kBM, kBN) are the enclosing namespace's

constexpr int kD = 64, kBN = 128, kBM = 64, kNT = 256;
static_assert(kBM == flash::kBM && kNT == flash::kNT, "sm90a_softmax / sm90a_ds_pack / sm90a_store_ds assume these");
constexpr int kBMq = 128;  // q rows per step of bwd_kernel_q128 (attention_flash_bwd_sm90a_d64_q128.cuh)

// One SS k-step d [64 x N] (+)= A B, N = 32, 64 or 128 (wgmma m64nNk16; d: N / 2 fp32 per thread)
template <int N, int TA, int TB>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], const std::uint64_t da, const std::uint64_t db, const int acc) {
  if constexpr (N == 32) {
    wgmma::m64n32k16_ss<TA, TB>(d, da, db, acc);
  } else if constexpr (N == 64) {
    wgmma::m64n64k16_ss<TA, TB>(d, da, db, acc);
  } else {
    static_assert(N == 128, "m64n32k16, m64n64k16 or m64n128k16");
    wgmma::m64n128k16_ss<TA, TB>(d, da, db, acc);
  }
}

template <int STAGES, bool DQ_BULK = false>
struct Smem {
  static constexpr int K = 0;                    // [kBN][kD]
  static constexpr int V = K + kBN * kD * 2;     // [kBN][kD]
  static constexpr int stage_bytes = 2 * kBM * kD * 2;        // Q [kBM][kD] then dO [kBM][kD]
  static constexpr int Stages = V + kBN * kD * 2;             // stage s at Stages + s * stage_bytes
  static constexpr int dS = Stages + STAGES * stage_bytes;    // [2][kBN][kBM], buffer u at dS + u * kBN * kBM * 2
  static constexpr int Rows = dS + 2 * kBN * kBM * 2;         // stage s: lse2 [kBM] at Rows + s * 512, delta at + 256
  static constexpr int kv = Rows + STAGES * 2 * kBM * 4;      // mbarrier of the K, V loads
  static constexpr int full = kv + 8, empty = full + 8 * STAGES;
  // DQ_BULK: warpgroup wg's dQ share [64 q x 32 d] fp32 in fragment order at DqStage + wg * kBM * 32 * 4
  static constexpr int DqStage = (empty + 8 * STAGES + 127) / 128 * 128;
  static constexpr int bytes = DQ_BULK ? DqStage + 2 * kBM * 32 * 4 : empty + 8 * STAGES;
  static constexpr std::uint32_t tx_bytes = stage_bytes + 2 * kBM * 4;
  static constexpr std::uint32_t kv_bytes = 2 * kBN * kD * 2;
  static_assert(V % 1024 == 0 && Stages % 1024 == 0 && stage_bytes % 1024 == 0 && dS % 1024 == 0,
                "wgmma tiles must be 1024-byte aligned");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

// S^T = K_wg Q^T into st, then dP^T = V_wg dO^T into dp (both [64 keys x BM q], wgmma D layout; BM = kBM, or kBMq:
// bwd_kernel_q128): two commit groups, the softmax overlaps the second. k_wg, v_wg: the warpgroup's 64 rows of K, V;
// qs, dos: Q, dO tiles [BM q][64 d].
template <int BM = kBM>
__device__ __forceinline__ void issue_st_dp(float (&st)[BM / 2], float (&dp)[BM / 2], const std::uint32_t k_wg,
                                            const std::uint32_t v_wg, const std::uint32_t qs, const std::uint32_t dos) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    mma_ss<BM, 0, 0>(st, wgmma::desc(k_wg + kk * 32, 16, 1024), wgmma::desc(qs + kk * 32, 16, 1024), kk > 0);
  }
  wgmma::commit();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    mma_ss<BM, 0, 0>(dp, wgmma::desc(v_wg + kk * 32, 16, 1024), wgmma::desc(dos + kk * 32, 16, 1024), kk > 0);
  }
  wgmma::commit();
}

// dV [64 keys x 64 d] += P^T dO, dK [64 keys x 64 d] += dS^T Q (A from registers, B N-major: k = q rows,
// one 64-wide n block, so LBO is unused); one commit group
__device__ __forceinline__ void issue_dkv(float (&dk)[32], float (&dv)[32], std::uint32_t (&pp)[16],
                                          std::uint32_t (&ss)[16], const std::uint32_t qs, const std::uint32_t dos) {
#pragma unroll
  for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kBM / 16; ++kk) wgmma::m64n64k16_rs<1>(dv, pp + 4 * kk, wgmma::desc(dos + kk * 16 * 128, 16, 1024));
#pragma unroll
  for (int kk = 0; kk < kBM / 16; ++kk) wgmma::m64n64k16_rs<1>(dk, ss + 4 * kk, wgmma::desc(qs + kk * 16 * 128, 16, 1024));
  wgmma::commit();
}

// DQ_BULK's step order (dV, barrier, dQ, dK): dV += P^T dO or dK += dS^T Q alone over BM q (acc [64 keys x 64 d];
// A = frag, P^T or dS^T packed, from registers, BM / 16 k-steps; B = b_tile, dO or Q [BM q][64 d] N-major as issue_dkv:
// k-step kk at + 16 kk rows), one commit group, not waited for
template <int BM = kBM>
__device__ __forceinline__ void issue_rs(float (&acc)[32], std::uint32_t (&frag)[BM / 4], const std::uint32_t b_tile) {
#pragma unroll
  for (int i = 0; i < BM / 4; ++i) wgmma::fence_reg(frag[i]);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk) wgmma::m64n64k16_rs<1>(acc, frag + 4 * kk, wgmma::desc(b_tile + kk * 16 * 128, 16, 1024));
  wgmma::commit();
}

// dQ [64 q x N d] = dS K into dq over k = 128 keys (A = dS^T [128 keys][64 q] M-major at ds, B = K [128 keys] N-major
// at k_col), one commit group; N = 32: dQ[:, 32wg..32wg+31] (k_col = K + 64 wg bytes, column 32wg; dq_wgmma waits
// for it); N = 64: bwd_kernel_q128's dQ of q rows 64 wg .. (ds at dS^T's half wg, k_col = K)
template <int N = 32>
__device__ __forceinline__ void issue_dq(float (&dq)[N / 2], const std::uint32_t ds, const std::uint32_t k_col) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {
    mma_ss<N, 1, 1>(dq, wgmma::desc(ds + kk * 16 * 128, 16, 1024), wgmma::desc(k_col + kk * 16 * 128, 16, 1024), kk > 0);
  }
  wgmma::commit();
}
__device__ __forceinline__ void dq_wgmma(float (&dq)[16], const std::uint32_t ds, const std::uint32_t k_col) {
  issue_dq(dq, ds, k_col);
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < 16; ++i) wgmma::fence_reg(dq[i]);
}

// KSPLIT form (variant 20480): this warpgroup's share of the whole dQ [64 q x 64 d] = dS[:, keys of wg]
// K[keys of wg, :] (k = its 64 keys; A = its rows of dS^T M-major at ds_wg, B = its rows of K N-major at k_wg:
// all descriptors at 1024-byte aligned tiles), waited for
__device__ __forceinline__ void dq_wgmma(float (&dq)[32], const std::uint32_t ds_wg, const std::uint32_t k_wg) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < 64 / 16; ++kk) {
    wgmma::m64n64k16_ss<1, 1>(dq, wgmma::desc(ds_wg + kk * 16 * 128, 16, 1024), wgmma::desc(k_wg + kk * 16 * 128, 16, 1024),
                              kk > 0);
  }
  wgmma::commit();
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < 32; ++i) wgmma::fence_reg(dq[i]);
}

// dq [64 q x 8 NJ d] into dq_accum [B, S, H, 64] (head hq): rows m0 + 16 w4 + g (+8), cols col0 + 8 j + 2t; rows
// past S (zero dQ: P = 0 there) go to row S-1, so there is no branch
template <int NJ>
__device__ __forceinline__ void dq_atomics(float (&dq)[4 * NJ], const BwdArgs& a, const int b, const int S,
                                           const std::int64_t ldq, const int hq, const int col0, const int w4,
                                           const int g, const int t, const int m0) {
  float* base = a.dq_accum + static_cast<std::int64_t>(b) * S * ldq + hq * kD + col0 + 2 * t;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int row = min(m0 + w4 * 16 + g + hr * 8, S - 1);
    float* dst = base + row * ldq;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(dq[4 * j + 2 * hr], dq[4 * j + 2 * hr + 1]));
    }
  }
}

// dK (times scale), dV [B, S, H_kv, 64]: straight from the accumulators (rows key_base, key_base + 8)
__device__ __forceinline__ void store_dkv(float (&dk)[32], float (&dv)[32], const BwdArgs& a, const int b, const int S,
                                          const std::int64_t ldk, const int hk, const int t, const int key_base) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int key = key_base + hr * 8;
    if (key < S) {
      const std::int64_t off = (static_cast<std::int64_t>(b) * S + key) * ldk + hk * kD + 2 * t;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<std::uint32_t*>(a.dk + off + j * 8) =
            pack_bf16(dk[4 * j + 2 * hr] * a.scale, dk[4 * j + 2 * hr + 1] * a.scale);
        *reinterpret_cast<std::uint32_t*>(a.dv + off + j * 8) = pack_bf16(dv[4 * j + 2 * hr], dv[4 * j + 2 * hr + 1]);
      }
    }
  }
}

// bwd_kernel_q128's tail atomics (defined in attention_flash_bwd_sm90a_d64_q128.cuh)
__device__ __forceinline__ void dq_atomics_tail_q128(const float (&dq)[32], const BwdArgs& a, int b, int S, int hq, int wg,
                                                     int w4, int g, int t, int m0);

// Step middle (BM q: kBM, or kBMq: bwd_kernel_q128): wait for S^T, P^T (softmax, masked where need_mask: keys
// beyond S, causal keys after the query; key of st[4j + 0/1]: key_base), wait for dP^T, dS^T; pp, ss: P^T, dS^T
// packed (A fragments of dV, dK). st, dp [64 keys x BM q] (wgmma D layout); lse2, delta: the step's rows [BM].
// need_mask is the caller's: computed here, it changed the causal 16384 kernel's SASS.
template <bool CAUSAL, int BM = kBM>
__device__ __forceinline__ void softmax_ds(float (&st)[BM / 2], float (&dp)[BM / 2], const BwdArgs& a,
                                           const float* lse2, const float* delta, const int t, const bool need_mask,
                                           const int key_base, const int m0, const int S, std::uint32_t (&pp)[BM / 4],
                                           std::uint32_t (&ss)[BM / 4]) {
  wgmma::wait<1>();
#pragma unroll
  for (int i = 0; i < BM / 2; ++i) wgmma::fence_reg(st[i]);
  sm90a_softmax<CAUSAL>(st, a, lse2, t, need_mask, key_base, m0, S);
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < BM / 2; ++i) wgmma::fence_reg(dp[i]);
  sm90a_ds_pack(st, dp, delta, t, pp, ss);
}

// DQ_BULK's step from dV on, its issues (BM = kBM: variant 114688, dq [64 q x 32 d] = dQ[:, 32wg..]; kBMq:
// bwd_kernel_q128, dq [64 q x 64 d] = dQ of q rows m0 + 64 wg ..): dV += P^T dO; the barrier (dS^T of both warpgroups;
// the last step's reduction has read the staging block by then); dQ (A = ds, B = k_col as issue_dq) and dK += dS^T Q.
// Two helpers around the caller's dq: one for the whole step changed both kernels' SASS.
template <int BM = kBM, int N = BM == kBM ? 32 : kD>
__device__ __forceinline__ void dq_bulk_issue(float (&dq)[N / 2], float (&dk)[32], float (&dv)[32],
                                              std::uint32_t (&pp)[BM / 4], std::uint32_t (&ss)[BM / 4],
                                              const std::uint32_t qs, const std::uint32_t dos, const std::uint32_t ds,
                                              const std::uint32_t k_col) {
  issue_rs<BM>(dv, pp, dos);  // dV += P^T dO
  // the last step's reduction has read the staging block before the barrier after which it is rewritten; every
  // thread waits on its own bulk groups (none but the issuing thread's): no branch while dV is in flight
  tma::bulk_wait_read<0>();
  wgmma::fence_proxy_async();  // the dS^T stores before the dQ wgmmas' reads
  __syncthreads();             // dS^T of both warpgroups in shared memory
  issue_dq<N>(dq, ds, k_col);
  issue_rs<BM>(dk, ss, qs);  // dK += dS^T Q
}

// ... and its dQ path: dq staged at stage in fragment order while dK runs; then one bulk reduction of the block per
// warpgroup (thread tw 0) into dq_accum, or a last partial q tile by atomics into its tail rows
template <int BM = kBM, int N = BM == kBM ? 32 : kD>
__device__ __forceinline__ void dq_bulk_reduce(float (&dq)[N / 2], std::uint32_t (&pp)[BM / 4],
                                               std::uint32_t (&ss)[BM / 4], const std::uint32_t stage, const BwdArgs& a,
                                               const int b, const int S, const int hq, const int m0, const int tw,
                                               const int wg, const int w4, const int g, const int t) {
  wgmma::wait<1>();  // dV and dQ done; dK still in the tensor cores
#pragma unroll
  for (int i = 0; i < N / 2; ++i) wgmma::fence_reg(dq[i]);
  sm90a_stage_dq(dq, stage, tw);  // branch-free while dK runs
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < BM / 4; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
  if (m0 + BM <= S) {
    wgmma::fence_proxy_async();  // the staging stores before the bulk reduction's reads
    wg_named_sync(wg);
    if (tw == 0) {
      const std::int64_t block = BM == kBM ? dq_frag_block<kD>(b, hq, m0 / BM, wg, a.H, S)
                                           : dq_frag_q128_block(b, hq, m0 / BM, wg, a.H, S);
      tma::bulk_reduce_add_f32(a.dq_accum + block, stage, 64 * N * 4);
      tma::bulk_commit();
    }
  } else if constexpr (BM == kBM) {
    sm90a_dq_atomics_tail<kD>(dq, a, b, S, hq, wg, w4, g, t, m0);
  } else {
    dq_atomics_tail_q128(dq, a, b, S, hq, wg, w4, g, t, m0);
  }
}

// Step j's loads into stage st = j % STAGES (thread 0; BM q rows per step, layout L): once the stage's release by
// step j - STAGES has completed, Q, dO [BM q x 64] of q head h from row m0 by TMA and the lse2, delta rows [BM] by
// bulk copies (lse2 at L::Rows + st * 8 BM, delta 4 BM after it), all completing on the stage's full barrier.
template <class L, int STAGES, int BM>
__device__ __forceinline__ void load_step(const std::uint32_t sbase, const CUtensorMap& tq, const CUtensorMap& tdo,
                                          const BwdArgs& a, const int b, const int h, const int m0, const int j) {
  const int st = j % STAGES;
  const std::uint32_t full = sbase + L::full + 8 * st, dst = sbase + L::Stages + st * L::stage_bytes;
  // a fresh barrier's "previous phase" has completed
  tma::mbar_wait(sbase + L::empty + 8 * st, (static_cast<std::uint32_t>(j / STAGES) & 1u) ^ 1u);
  tma::mbar_expect_tx(full, L::tx_bytes);
  tma::tma_load_3d(dst, &tq, full, h * kD, m0, b);
  tma::tma_load_3d(dst + BM * kD * 2, &tdo, full, h * kD, m0, b);
  const std::int64_t row_off = (static_cast<std::int64_t>(b) * a.H + h) * a.S_pad + m0;  // m0 + BM <= S_pad
  tma::bulk_load(sbase + L::Rows + st * (8 * BM), a.lse2 + row_off, BM * 4, full);
  tma::bulk_load(sbase + L::Rows + st * (8 * BM) + 4 * BM, a.delta + row_off, BM * 4, full);
}

// Thread 0's prologue: the mbarriers (K/V; full and empty per stage, the empty ones released by every thread), K and
// V [128 keys x 64] of kv head hk from key n0 by TMA (rows past S read as zeros), the first STAGES - 1 steps' loads
template <class L, int STAGES, class Load>
__device__ __forceinline__ void prologue(const std::uint32_t sbase, const CUtensorMap& tk, const CUtensorMap& tv,
                                         const int hk, const int n0, const int b, const int steps, Load& load) {
  tma::mbar_init(sbase + L::kv, 1);
  for (int s = 0; s < STAGES; ++s) {
    tma::mbar_init(sbase + L::full + 8 * s, 1);
    tma::mbar_init(sbase + L::empty + 8 * s, kNT);
  }
  tma::fence_barrier_init();
  tma::mbar_expect_tx(sbase + L::kv, L::kv_bytes);
  tma::tma_load_3d(sbase + L::K, &tk, sbase + L::kv, hk * kD, n0, b);
  tma::tma_load_3d(sbase + L::V, &tv, sbase + L::kv, hk * kD, n0, b);
  for (int j = 0; j < STAGES - 1 && j < steps; ++j) load(j);
}

// The CTA's start (both D = 64 kernels, every thread): thread 0's prologue; the mbarriers' existence and K, V waited
// for; the accumulators dk, dv [64 keys of wg x 64 d] zeroed
template <class L, int STAGES, class Load>
__device__ __forceinline__ void start(const int tid, const std::uint32_t sbase, const CUtensorMap& tk,
                                      const CUtensorMap& tv, const int hk, const int n0, const int b, const int steps,
                                      Load& load, float (&dk)[32], float (&dv)[32]) {
  if (tid == 0) prologue<L, STAGES>(sbase, tk, tv, hk, n0, b, steps, load);
  __syncthreads();  // the mbarriers exist
  tma::mbar_wait(sbase + L::kv, 0);
#pragma unroll
  for (int i = 0; i < 32; ++i) dk[i] = dv[i] = 0.f;
}

// tq, tdo: maps of q, dout [B, S, H, 64] (boxes of 64 rows); tk, tv: of k, v [B, S, H_kv, 64] (128 rows).
// KSPLIT (variant 20480): each warpgroup computes the whole dQ tile over its own 64 keys (twice the atomics,
// no 64-byte descriptor offset) and the dS^T exchange is a warpgroup barrier instead of __syncthreads.
// DQ_BULK (variant 114688, not with KSPLIT): FlashAttention-3's step order and dQ path (file comment).
template <bool CAUSAL, int STAGES, bool KSPLIT, bool DQ_BULK = false>
__global__ void __launch_bounds__(kNT, 1)
    bwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
               const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv, const BwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  static_assert(!(KSPLIT && DQ_BULK), "the bulk dQ path stages the column split's [64 q x 32 d] shares");
  using L = Smem<STAGES, DQ_BULK>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors and the 128-byte swizzle assume 1024-byte aligned tiles

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, w4 = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kBN, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int group = a.H / a.H_kv;
  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * kD;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * kD;
  const int m_first = CAUSAL ? n0 / kBM : 0;
  const int m_count = (S + kBM - 1) / kBM - m_first;
  const int steps = group * m_count;
  auto parity = [&](int j) { return static_cast<std::uint32_t>(j / STAGES) & 1u; };

  // step j's Q, dO, lse2, delta into stage j % STAGES (thread 0)
  auto load = [&](int j) {
    load_step<L, STAGES, kBM>(sbase, tq, tdo, a, b, hk * group + j / m_count, (m_first + j % m_count) * kBM, j);
  };

  float dk[32], dv[32];  // [64 keys of wg x 64 d] accumulators (wgmma D layout)
  start<L, STAGES>(tid, sbase, tk, tv, hk, n0, b, steps, load, dk, dv);
  // stmatrix lane address of dS^T (as the D = 128 kernels), buffer 0; buffer 1 at + kBN * kBM * 2
  const int st_row = wg * 64 + w4 * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
  const std::uint32_t st_base0 = sbase + L::dS + st_row * 128;
  const int st_cb = lane >> 4;
  const int key_base = n0 + wg * 64 + w4 * 16 + g;  // key of d[4j + 0/1]; +8 for d[4j + 2/3]
  const std::uint32_t k_wg = sbase + L::K + wg * 64 * 128, v_wg = sbase + L::V + wg * 64 * 128;
  int h = hk * group, mi = 0;
  for (int it = 0; it < steps; ++it) {
    const int st = it % STAGES, u = it & 1;
    const int m0 = (m_first + mi) * kBM, hq = h;  // this step's q tile and q head
    if (++mi == m_count) mi = 0, ++h;
    tma::mbar_wait(sbase + L::full + 8 * st, parity(it));
    const std::uint32_t qs = sbase + L::Stages + st * L::stage_bytes, dos = qs + kBM * kD * 2;
    const float* lse2 = reinterpret_cast<const float*>(smem_raw + L::Rows + st * 512);
    const float* delta = lse2 + kBM;

    float st_acc[32], dp[32];  // S^T, dP^T [64 keys x 64 q] (wgmma D layout)
    issue_st_dp(st_acc, dp, k_wg, v_wg, qs, dos);
    const bool need_mask = (n0 + kBN > S) || (CAUSAL && m0 < n0 + kBN - 1);
    std::uint32_t pp[16], ss[16];  // P^T, dS^T packed bf16 pairs (A fragments of dV, dK)
    softmax_ds<CAUSAL>(st_acc, dp, a, lse2, delta, t, need_mask, key_base, m0, S, pp, ss);
    sm90a_store_ds(ss, st_base0 + u * kBN * kBM * 2, st_cb, lane);
    if constexpr (DQ_BULK) {
      float dq[16];  // dQ[:, 32wg..32wg+31] [64 q x 32 d] (wgmma D layout)
      dq_bulk_issue(dq, dk, dv, pp, ss, qs, dos, sbase + L::dS + u * kBN * kBM * 2, sbase + L::K + wg * 64);
      const std::uint32_t stage = sbase + L::DqStage + wg * (kBM * 32 * 4);  // [64 q x 32 d] fp32, fragment order
      dq_bulk_reduce(dq, pp, ss, stage, a, b, S, hq, m0, tid & 127, wg, w4, g, t);
      tma::mbar_arrive(sbase + L::empty + 8 * st);  // every wgmma of the step has completed: Q, dO, rows free
      if (tid == 0 && it + STAGES - 1 < steps) load(it + STAGES - 1);
      continue;
    }
    issue_dkv(dk, dv, pp, ss, qs, dos);
    wgmma::fence_proxy_async();
    if constexpr (KSPLIT) {
      wg_named_sync(wg);  // dS^T of this warpgroup's 4 warps in shared memory
    } else {
      __syncthreads();  // dS^T of both warpgroups in shared memory
    }
    // dQ[:, 32wg..32wg+31] [64 q x 32 d]; KSPLIT: this warpgroup's keys' share of dQ [64 q x 64 d] (wgmma D layout)
    float dq[KSPLIT ? 32 : 16];
    if constexpr (KSPLIT) {
      dq_wgmma(dq, sbase + L::dS + u * kBN * kBM * 2 + wg * 64 * 128, k_wg);
    } else {
      dq_wgmma(dq, sbase + L::dS + u * kBN * kBM * 2, sbase + L::K + wg * 64);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
    tma::mbar_arrive(sbase + L::empty + 8 * st);  // every wgmma of the step has completed: Q, dO, rows free
    if (tid == 0 && it + STAGES - 1 < steps) load(it + STAGES - 1);
    if constexpr (KSPLIT) {
      dq_atomics<8>(dq, a, b, S, ldq, hq, 0, w4, g, t, m0);
    } else {
      dq_atomics<4>(dq, a, b, S, ldq, hq, wg * 32, w4, g, t, m0);
    }
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) wgmma::fence_reg(dk[i]), wgmma::fence_reg(dv[i]);
  if constexpr (DQ_BULK) {
    if ((tid & 127) == 0) tma::bulk_wait_read<0>();  // the staging block stays until the last reduction has read it
  }
  store_dkv(dk, dv, a, b, S, ldk, hk, t, key_base);
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

}  // namespace d64

// Both D = 64 kernels' launch: the maps (q, dout [B, S, H, 64] in boxes of BM rows, k, v [B, S, H_kv, 64] of kBN), smem
// bytes of dynamic shared memory, grid (key tiles, H_kv, B), kNT threads, on `stream`
template <int BM, class Kern>
cudaError_t launch_bwd_d64(Kern kern, const int smem, const BwdArgs& a, int B, cudaStream_t stream) {
  CUtensorMap tq, tdo, tk, tv;
  cudaError_t err = tma::encode_bshd_map(&tq, a.q, B, a.S, a.H, BM, d64::kD);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tdo, a.dout, B, a.S, a.H, BM, d64::kD);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tk, a.k, B, a.S, a.H_kv, d64::kBN, d64::kD);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tv, a.v, B, a.S, a.H_kv, d64::kBN, d64::kD);
  if (err != cudaSuccess) return err;
  err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.S + d64::kBN - 1) / d64::kBN), static_cast<unsigned>(a.H_kv),
                  static_cast<unsigned>(B));
  kern<<<grid, d64::kNT, smem, stream>>>(tq, tdo, tk, tv, a);
  return cudaGetLastError();
}

// Launch d64::bwd_kernel<CAUSAL, STAGES, KSPLIT, DQ_BULK> (head dim 64) on `stream` (B = gridDim.z)
template <bool CAUSAL, int STAGES, bool KSPLIT, bool DQ_BULK = false>
cudaError_t launch_bwd_main_sm90a_d64_form(const BwdArgs& a, int B, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  if (((reinterpret_cast<std::uintptr_t>(a.lse2) | reinterpret_cast<std::uintptr_t>(a.delta)) & 15u) != 0)
    return cudaErrorInvalidValue;  // the bulk copies need 16-byte aligned rows (S_pad is a multiple of 128)
  if (DQ_BULK && (reinterpret_cast<std::uintptr_t>(a.dq_accum) & 15u) != 0) return cudaErrorInvalidValue;
  return launch_bwd_d64<d64::kBM>(d64::bwd_kernel<CAUSAL, STAGES, KSPLIT, DQ_BULK>, d64::Smem<STAGES, DQ_BULK>::bytes, a,
                                  B, stream);
}

}  // namespace

}  // namespace ulysses::kernels::flash
