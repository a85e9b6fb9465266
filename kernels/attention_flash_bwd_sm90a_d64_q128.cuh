#pragma once
// Flash attention backward main kernel at head dim 64 with 128-row q tiles (variant 245760: 114688 with
// FlashAttention-3's D = 64 tile; the D = 64 default since 2026-12-06c, attention_flash_bwd_sm90a_d64.cu, which the lab runs too). It reuses
// the D = 64 kernel's tile constants, loads, step pieces at BM = kBMq (issue_st_dp, issue_rs, issue_dq, softmax_ds,
// dq_bulk_issue, dq_bulk_reduce, start), dK/dV store and launch (attention_flash_bwd_sm90a_d64.cuh, which calls this
// file's dq_atomics_tail_q128; softmax and dS^T packing: attention_flash_bwd_sm90a.cuh's, at 128 q). Include from a file built for sm_90a.
#include "kernels/attention_flash_bwd_sm90a_d64.cuh"

namespace ulysses::kernels::flash {
namespace {
namespace d64 {

// One CTA per (128-key tile n0, kv head, batch), 2 warpgroups of 64 keys as above; each step takes a 128-row q tile
// (causal: from the tile holding key n0 on, m0 = n0). Per step and warpgroup wg (keys n0 + 64 wg ..):
//   S^T, dP^T [64 keys x 128 q]  wgmma SS m64n128k16, 4 k-steps over d (K-major, B = Q / dO [128 q][64 d])
//   P^T, dS^T                    registers (sm90a_softmax, sm90a_ds_pack at N = 64); dS^T -> shared memory (store_ds_q128),
//                                [2 halves of 64 q][128 keys][64 q] per buffer
//   dV [64 keys x 64 d] += P^T dO   wgmma RS m64n64k16, 8 k-steps over the 128 q (B = dO N-major)
//   barrier (dS^T of both warpgroups)
//   dQ [64 q (rows m0 + 64 wg ..) x 64 d] = dS K   wgmma SS m64n64k16, 8 k-steps over the 128 keys (A = dS^T's half
//                                wg, M-major; B = K N-major): each dQ element from one warpgroup, no column split
//   dK [64 keys x 64 d] += dS^T Q   wgmma RS m64n64k16, 8 k-steps (B = Q N-major)
//   dQ staged in fragment order while dK runs (16 KiB per warpgroup), one 16 KiB cp.reduce.async.bulk per
//   warpgroup and step into dq_frag_q128_block; a last partial q tile by atomics into the tail rows.
// Registers per thread: S^T 64 + dP^T 64 + dK 32 + dV 32 (the peak, before the packing), then P^T/dS^T packed
// 32 + 32 + dQ 32 fp32. FA3's hdim-64 configuration (hopper/flash_bwd_launch_template.h: kBlockM = kBlockN = 128,
// SdP_swapAB, dK/dV RS, dQ split by q rows between two MMA warpgroups, two Q/dO stages, two dS stages) without its
// producer warp: thread 0 issues step it + STAGES - 1's loads right behind step it's S^T/dP^T wgmmas (its stage was
// released by every thread at the end of step it - 1), so with two stages the loads have a whole step to land.
// Shared memory (bytes, tiles 1024-aligned, 128B-swizzled): K [128][64] 16384, V 16384, STAGES x {Q [128][64] 16384,
// dO 16384}, dS^T [2 buf][2 halves][128 keys][64 q] 65536, dQ staging [2 wg][64 q x 64 d] fp32 32768, STAGES x
// {lse2 [128], delta [128]} fp32, mbarriers kv, full[STAGES], empty[STAGES]: 194.0 KiB with two stages (three need
// 227 KiB + 56 bytes: over the limit).

template <int STAGES>
struct SmemQ128 {
  static constexpr int K = 0;                           // [kBN][kD]
  static constexpr int V = K + kBN * kD * 2;            // [kBN][kD]
  static constexpr int stage_bytes = 2 * kBMq * kD * 2;  // Q [kBMq][kD] then dO [kBMq][kD]
  static constexpr int Stages = V + kBN * kD * 2;        // stage s at Stages + s * stage_bytes
  static constexpr int ds_half = kBN * 64 * 2;           // dS^T [kBN keys][64 q] (q 64 hf .. of the tile)
  static constexpr int dS = Stages + STAGES * stage_bytes;  // buffer u, half hf at dS + u * 2 * ds_half + hf * ds_half
  static constexpr int DqStage = dS + 2 * 2 * ds_half;      // warpgroup wg's [64 q x 64 d] fp32 at + wg * 16384
  static constexpr int Rows = DqStage + 2 * 64 * kD * 4;   // stage s: lse2 [kBMq] at Rows + s * 1024, delta at + 512
  static constexpr int kv = Rows + STAGES * 2 * kBMq * 4;   // mbarrier of the K, V loads
  static constexpr int full = kv + 8, empty = full + 8 * STAGES;
  static constexpr int bytes = empty + 8 * STAGES;
  static constexpr std::uint32_t tx_bytes = stage_bytes + 2 * kBMq * 4;
  static constexpr std::uint32_t kv_bytes = 2 * kBN * kD * 2;
  static_assert(V % 1024 == 0 && Stages % 1024 == 0 && stage_bytes % 1024 == 0 && dS % 1024 == 0 &&
                    ds_half % 1024 == 0 && DqStage % 16 == 0 && Rows % 16 == 0,
                "wgmma tiles 1024-byte aligned, bulk copies 16-byte aligned");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

// dS^T to shared memory for dQ (8 stmatrix.x4: q chunks 2jp, 2jp + 1 of the warp's 16 keys; jp < 4 into half 0,
// q 0..63, jp >= 4 into half 1 at + ds_half); st_base, st_cb: the lane's row address in half 0 and chunk offset
__device__ __forceinline__ void store_ds_q128(std::uint32_t (&ss)[32], const std::uint32_t st_base, const int st_cb,
                                              const int lane) {
#pragma unroll
  for (int jp = 0; jp < 8; ++jp) {
    const std::uint32_t addr = st_base + (jp >> 2) * (kBN * 64 * 2) + ((((2 * (jp & 3) + st_cb) ^ (lane & 7))) << 4);
    stsm_x4(addr, ss[4 * jp], ss[4 * jp + 1], ss[4 * jp + 2], ss[4 * jp + 3]);
  }
}

// The last partial q tile (m0 + 128 > S): dq [64 q x 64 d] of wg by atomics into the tail rows of the fragment layout
// (dq_frag_q128_tail_row: rows m0 + 64 wg + 16 w4 + g (+8) - 128 (S / 128), cols 8 j + 2t); rows past S skipped
__device__ __forceinline__ void dq_atomics_tail_q128(const float (&dq)[32], const BwdArgs& a, const int b, const int S,
                                                     const int hq, const int wg, const int w4, const int g, const int t,
                                                     const int m0) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = m0 + wg * 64 + w4 * 16 + g + hr * 8 - (S / kBMq) * kBMq;
    if (r < S % kBMq) {
      float* dst = a.dq_accum + dq_frag_q128_tail_row(b, hq, r, static_cast<int>(gridDim.z), a.H, S) + 2 * t;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(dq[4 * j + 2 * hr], dq[4 * j + 2 * hr + 1]));
      }
    }
  }
}

// tq, tdo: maps of q, dout [B, S, H, 64] (boxes of 128 rows); tk, tv: of k, v [B, S, H_kv, 64] (128 rows).
template <bool CAUSAL, int STAGES>
__global__ void __launch_bounds__(kNT, 1)
    bwd_kernel_q128(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
                    const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv, const BwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  static_assert(STAGES >= 2, "step it's loads wait for the stage step it - 1 releases");
  using L = SmemQ128<STAGES>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors and the 128-byte swizzle assume 1024-byte aligned tiles

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, w4 = warp & 3, tw = tid & 127;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kBN, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int group = a.H / a.H_kv;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * kD;
  const int m_first = CAUSAL ? n0 / kBMq : 0;
  const int m_count = (S + kBMq - 1) / kBMq - m_first;
  const int steps = group * m_count;
  auto parity = [&](int j) { return static_cast<std::uint32_t>(j / STAGES) & 1u; };

  // step j's Q, dO, lse2, delta into stage j % STAGES (thread 0); waits for the stage's release by step j - STAGES
  auto load = [&](int j) {
    load_step<L, STAGES, kBMq>(sbase, tq, tdo, a, b, hk * group + j / m_count, (m_first + j % m_count) * kBMq, j);
  };

  float dk[32], dv[32];  // [64 keys of wg x 64 d] accumulators (wgmma D layout)
  start<L, STAGES>(tid, sbase, tk, tv, hk, n0, b, steps, load, dk, dv);
  // stmatrix lane address of dS^T, buffer 0, half 0 (buffer u at + u * 2 * ds_half, half 1 at + ds_half)
  const int st_row = wg * 64 + w4 * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
  const std::uint32_t st_base0 = sbase + L::dS + st_row * 128;
  const int st_cb = lane >> 4;
  const int key_base = n0 + wg * 64 + w4 * 16 + g;  // key of d[4j + 0/1]; +8 for d[4j + 2/3]
  const std::uint32_t k_wg = sbase + L::K + wg * 64 * 128, v_wg = sbase + L::V + wg * 64 * 128;
  const std::uint32_t stage = sbase + L::DqStage + wg * (64 * kD * 4);  // [64 q x 64 d] fp32, fragment order
  int h = hk * group, mi = 0;
  for (int it = 0; it < steps; ++it) {
    const int st = it % STAGES, u = it & 1;
    const int m0 = (m_first + mi) * kBMq, hq = h;  // this step's q tile and q head
    if (++mi == m_count) mi = 0, ++h;
    tma::mbar_wait(sbase + L::full + 8 * st, parity(it));
    const std::uint32_t qs = sbase + L::Stages + st * L::stage_bytes, dos = qs + kBMq * kD * 2;
    const float* lse2 = reinterpret_cast<const float*>(smem_raw + L::Rows + st * 1024);
    const float* delta = lse2 + kBMq;

    float st_acc[64], dp[64];  // S^T, dP^T [64 keys x 128 q] (wgmma D layout)
    issue_st_dp<kBMq>(st_acc, dp, k_wg, v_wg, qs, dos);
    // step it + STAGES - 1's loads into the stage step it - 1 released (every thread arrived at its end)
    if (tid == 0 && it + STAGES - 1 < steps) load(it + STAGES - 1);
    const bool need_mask = (n0 + kBN > S) || (CAUSAL && m0 < n0 + kBN - 1);
    std::uint32_t pp[32], ss[32];  // P^T, dS^T packed bf16 pairs (A fragments of dV, dK)
    softmax_ds<CAUSAL, kBMq>(st_acc, dp, a, lse2, delta, t, need_mask, key_base, m0, S, pp, ss);
    const std::uint32_t ds_buf = sbase + L::dS + u * 2 * L::ds_half;
    store_ds_q128(ss, st_base0 + u * 2 * L::ds_half, st_cb, lane);
    float dq[32];  // dQ [64 q (rows m0 + 64 wg ..) x 64 d] (wgmma D layout)
    dq_bulk_issue<kBMq>(dq, dk, dv, pp, ss, qs, dos, ds_buf + wg * L::ds_half, sbase + L::K);
    dq_bulk_reduce<kBMq>(dq, pp, ss, stage, a, b, S, hq, m0, tw, wg, w4, g, t);
    tma::mbar_arrive(sbase + L::empty + 8 * st);  // every wgmma of the step has completed: Q, dO, rows free
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) wgmma::fence_reg(dk[i]), wgmma::fence_reg(dv[i]);
  if (tw == 0) tma::bulk_wait_read<0>();  // the staging block stays until the last reduction has read it
  store_dkv(dk, dv, a, b, S, ldk, hk, t, key_base);
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

}  // namespace d64

// Launch d64::bwd_kernel_q128<CAUSAL, STAGES> (variant 245760; dq_accum in dq_frag_q128_block's layout) on `stream`
template <bool CAUSAL, int STAGES>
cudaError_t launch_bwd_main_sm90a_d64_q128_form(const BwdArgs& a, int B, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  if (((reinterpret_cast<std::uintptr_t>(a.lse2) | reinterpret_cast<std::uintptr_t>(a.delta) |
        reinterpret_cast<std::uintptr_t>(a.dq_accum)) &
       15u) != 0)
    return cudaErrorInvalidValue;  // the bulk copies and reductions need 16-byte aligned rows and blocks
  return launch_bwd_d64<d64::kBMq>(d64::bwd_kernel_q128<CAUSAL, STAGES>, d64::SmemQ128<STAGES>::bytes, a, B, stream);
}

}  // namespace
}  // namespace ulysses::kernels::flash
