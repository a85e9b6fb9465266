#pragma once
// Flash attention forward on Hopper warpgroup MMA (wgmma, sm_90a), head dim 128: the kernel
// template and its launch, and the step's pieces (issue_s, issue_pv, softmax_tile, rescale) and the epilogue
// (store_o_lse) that the TMA form (attention_flash_fwd_sm90a_tma.cuh, the D=128 default since 2026-12-03) reuses; the lab
// (bench/attn/attn_flash_fwd_sm90a_lab.cu) builds every form of this template: plain, pipelined,
// ping-pong. Include from a file built for sm_90a.
//
// One CTA per (128 query rows m0, q head, batch): 2 warpgroups (256 threads), warpgroup wg owns
// rows m0 + 64wg .. m0 + 64wg + 63. It walks the key tiles (128 keys, n0); causal CTAs run the
// longest rows first and stop at the diagonal. Per key tile:
//   S  [64 rows x 128 keys] = Q_wg K^T   wgmma SS, K-major A (Q) and B (K), 8 k-steps over d
//   masks (ragged last tile; causal tiles crossing the warpgroup's diagonal), online softmax in
//   registers (exp2 with scale*log2e folded in; row max over the quad of a row)
//   O  [64 rows x 128 d]   += P V        wgmma RS: A = P from registers (bf16), B = V N-major
// K and V tiles double-buffered by cp.async: the next tile's copies are issued right after the
// step's barrier. Epilogue: O /= l, lse = m*scale + ln(l), O stored from the accumulators.
//
// Shared memory (bytes; 1024-aligned tiles of 64-bf16 rows, 128B-swizzled, kernels/wgmma.cuh):
//   Q [2 halves][128 rows][64] 32768;  K [2 buf][2 halves][128 keys][64] 65536;  V same, 65536
// Operand views: Q as A of S (m = row, k = d) K-major; K as B of S (n = key, k = d) K-major;
//   V as B of O (k = key, n = d) N-major, LBO = half stride 16384.
#include <cmath>
#include <cstdint>

#include "kernels/attention_flash_common.cuh"
#include "kernels/attention_flash_sm90a.hpp"
#include "kernels/wgmma.cuh"

namespace ulysses::kernels::flash {
namespace {

constexpr int kD = 128, kBM = 128, kBN = 128, kNT = 256;

struct FwdSmem {
  static constexpr int Q = 0;                      // [2][kBM][64]
  static constexpr int K = Q + kBM * kD * 2;       // buffer b at K + b * kBN * kD * 2
  static constexpr int V = K + 2 * kBN * kD * 2;
  static constexpr int bytes = V + 2 * kBN * kD * 2;
  static_assert(K % 1024 == 0 && V % 1024 == 0, "wgmma tiles must be 1024-byte aligned");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// S = Q_wg K^T into s (D/16 SS k-steps, one commit group); ks: the K tile's shared address. D: head dim,
// 128 (two 64-column halves) or 64 (one; the TMA form's D=64 instance). BN: keys per tile, 128, or 176 (the
// lab's producer TMA form with forward bit 1024: N = 176, s[88], the K tile's halves BN rows apart)
template <int D = kD, int BN = kBN>
__device__ __forceinline__ void issue_s(float (&s)[BN / 2], std::uint32_t qs_wg, std::uint32_t ks) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const std::uint32_t off = (kk & 3) * 32;
    const std::uint64_t da = wgmma::desc(qs_wg + (kk >> 2) * kBM * 128 + off, 16, 1024);
    const std::uint64_t db = wgmma::desc(ks + (kk >> 2) * BN * 128 + off, 16, 1024);
    if constexpr (BN == 128) {
      wgmma::m64n128k16_ss<0, 0>(s, da, db, kk > 0);
    } else {
      static_assert(BN == 176, "key tiles of 128 or 176");
      wgmma::m64n176k16_ss<0, 0>(s, da, db, kk > 0);
    }
  }
  wgmma::commit();
}

// O [64 rows x D] += P V (BN/16 RS k-steps, one commit group): k-step kk covers keys 16kk.., A = pp[4kk..4kk+3];
// D = 128: N = 128 over V's two 64-column halves (LBO = the half stride, BN rows); D = 64: N = 64, one half
template <int D = kD, int BN = kBN>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const std::uint32_t (&pp)[BN / 4], std::uint32_t vs) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    if constexpr (D == 128) {
      wgmma::m64n128k16_rs<1>(o, pp + 4 * kk, wgmma::desc(vs + kk * 16 * 128, BN * 128, 1024));
    } else {
      static_assert(D == 64, "head dim 64 or 128");
      wgmma::m64n64k16_rs<1>(o, pp + 4 * kk, wgmma::desc(vs + kk * 16 * 128, BN * 128, 1024));
    }
  }
  wgmma::commit();
}

// Online-softmax step on a fresh S tile (keys n0..): masks, new running max, P = exp2(S*c - m*c)
// packed as bf16 A fragments into pp, row sums into l_run; returns the rescale factors of the
// old O rows in corr (applied by the caller once the previous P V has finished). BN keys per tile (128; 176:
// s[88], pp[44]).
template <bool CAUSAL, int BN = kBN>
__device__ __forceinline__ void softmax_tile(float (&s)[BN / 2], std::uint32_t (&pp)[BN / 4], float (&m_run)[2],
                                             float (&l_run)[2], float (&corr)[2], int n0, int row0, int wg_first,
                                             int S, int t, float scale_log2) {
  const bool need_mask = (n0 + BN > S) || (CAUSAL && n0 + BN - 1 > wg_first);
  if (need_mask) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + j * 8 + 2 * t + (e & 1);
        const int row = row0 + (e >> 1) * 8;
        if (key >= S || (CAUSAL && key > row)) s[4 * j + e] = -INFINITY;
      }
  }
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float mx = m_run[hr];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * hr], s[4 * j + 2 * hr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_use = (mx == -INFINITY) ? 0.f : mx;  // fully masked row so far
    corr[hr] = ex2_approx((m_run[hr] - m_use) * scale_log2);
    m_run[hr] = mx;
    const float bias = m_use * scale_log2;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const float p0 = ex2_approx(fmaf(s[4 * j + 2 * hr], scale_log2, -bias));
      const float p1 = ex2_approx(fmaf(s[4 * j + 2 * hr + 1], scale_log2, -bias));
      s[4 * j + 2 * hr] = p0, s[4 * j + 2 * hr + 1] = p1;
      sum += p0 + p1;
    }
    l_run[hr] = l_run[hr] * corr[hr] + sum;  // per-thread partial; quad-reduced at the end
  }
#pragma unroll
  for (int i = 0; i < BN / 4; ++i) pp[i] = pack_bf16(s[2 * i], s[2 * i + 1]);
}

template <int D = kD>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&corr)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * j + e] *= corr[e >> 1];
  }
}

// Epilogue: O /= l, lse = m*scale + ln(l) (l: the row sums l_run summed over the row's 4 threads), stored straight
// from the accumulators o [64 rows of wg x D] (rows row0, row0 + 8; rows past S skipped) into a.o [B, S, H, D] and
// a.lse [B, H, S] (head h)
template <int D = kD>
__device__ __forceinline__ void store_o_lse(const float (&o)[D / 2], const float (&m_run)[2], const float (&l_run)[2],
                                            const FwdArgs& a, const int b, const int h, const int S, const int row0,
                                            const int t) {
  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * D;
  const std::int64_t lse_base = (static_cast<std::int64_t>(b) * a.H + h) * S;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float l = l_run[hr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = row0 + hr * 8;
    if (row < S) {
      __nv_bfloat16* dst = a.o + (static_cast<std::int64_t>(b) * S + row) * ldq + h * D + 2 * t;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        *reinterpret_cast<std::uint32_t*>(dst + j * 8) = pack_bf16(o[4 * j + 2 * hr] * inv, o[4 * j + 2 * hr + 1] * inv);
      }
      if (t == 0) a.lse[lse_base + row] = l > 0.f ? m_run[hr] * a.scale + logf(l) : INFINITY;
    }
  }
}

// PIPE (forward variant bit 4): FlashAttention-3's intra-warpgroup overlap: S of tile n+1 is
// issued before P V of tile n, and its softmax runs while P V is in the tensor cores (K is
// loaded two tiles ahead, V one). Without PIPE: S, wait, softmax, P V, wait.
// PING (forward variant bit 8, with PIPE): the two warpgroups take turns at issuing their wgmmas
// (FlashAttention-3's ping-pong, on named barriers 1 and 2): warpgroup 0 issues, then
// warpgroup 1, each time, so the tensor cores run one warpgroup's GEMMs while the other one's
// softmax runs on the MUFU units instead of both warpgroups issuing, then exponentiating, together.
template <bool CAUSAL, bool PIPE, bool PING>
__global__ void __launch_bounds__(kNT, 1) fwd_kernel_sm90a(const FwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  using L = FwdSmem;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors assume 1024-byte aligned tiles (base_offset 0)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, w4 = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  const int m_block = CAUSAL ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;  // long rows first
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.H / a.H_kv);
  const int S = a.S;
  const int m0 = m_block * kBM;

  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * kD;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * kD;
  const __nv_bfloat16* qg = a.q + (static_cast<std::int64_t>(b) * S + m0) * ldq + h * kD;
  const __nv_bfloat16* kg = a.k + static_cast<std::int64_t>(b) * S * ldk + hk * kD;
  const __nv_bfloat16* vg = a.v + static_cast<std::int64_t>(b) * S * ldk + hk * kD;

  const int kv_end = CAUSAL ? min(S, m0 + kBM) : S;  // keys [0, kv_end) can matter
  const int n_tiles = (kv_end + kBN - 1) / kBN;

  float o[64];  // [64 rows of wg x 128 d] (wgmma D layout)
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // rows g, g+8 of the warp
  const int row0 = m0 + wg * 64 + w4 * 16 + g;                     // row of o[4j + 0/1]; +8: 4j + 2/3
  const int wg_first = m0 + wg * 64;                                // warpgroup's first row
  const std::uint32_t qs_wg = sbase + L::Q + wg * 64 * 128;
  // PING: issue point i of n_tiles + 1 (prologue S_0, the loop's steps, the last P V). Warpgroup
  // 0 waits for warpgroup 1's previous issue (barrier 1) except at the first point and then
  // releases warpgroup 1 (barrier 2); warpgroup 1 waits on 2 and releases 0 except at the last.
  auto turn_take = [&](int i) {
    if constexpr (PING) {
      if (wg == 0 && i > 0) named_bar_sync(1, kNT);
      if (wg == 1) named_bar_sync(2, kNT);
    }
  };
  auto turn_give = [&](int i) {
    if constexpr (PING) {
      if (wg == 0) named_bar_arrive(2, kNT);
      if (wg == 1 && i < n_tiles) named_bar_arrive(1, kNT);
    }
  };
  auto k_at = [&](int buf) { return sbase + L::K + buf * kBN * kD * 2; };
  auto v_at = [&](int buf) { return sbase + L::V + buf * kBN * kD * 2; };
  auto load_k = [&](int n, int buf) {
    load_tile_sw128<kBN>(k_at(buf), kg + static_cast<std::int64_t>(n) * kBN * ldk, ldk, S - n * kBN, tid);
  };
  auto load_v = [&](int n, int buf) {
    load_tile_sw128<kBN>(v_at(buf), vg + static_cast<std::int64_t>(n) * kBN * ldk, ldk, S - n * kBN, tid);
  };

  load_tile_sw128<kBM>(sbase + L::Q, qg, ldq, S - m0, tid);
  load_k(0, 0);
  load_v(0, 0);
  if (PIPE && n_tiles > 1) load_k(1, 1);
  cp_async_commit();

  if constexpr (PIPE) {
    // prologue: S_0 and its softmax
    std::uint32_t pp[32];
    float corr[2];
    {
      cp_async_wait<0>();
      wgmma::fence_proxy_async();
      __syncthreads();
      float s[64];
      turn_take(0);
      wgmma::fence();
      issue_s(s, qs_wg, k_at(0));
      turn_give(0);
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(s[i]);
      softmax_tile<CAUSAL>(s, pp, m_run, l_run, corr, 0, row0, wg_first, S, t, a.scale_log2);
    }
    // steps 0..n_tiles-2: S_{n+1} and P V_n in flight together, softmax of S_{n+1} under P V_n
    for (int n = 0; n + 1 < n_tiles; ++n) {
      cp_async_wait<0>();
      wgmma::fence_proxy_async();
      __syncthreads();  // K[n+1], V[n] landed; every warpgroup is done with S_n (K[n]) and P V_{n-1}
      // K[n+2] into K_n's buffer, V[n+1] into V_{n-1}'s (both free: waited for in step n-1)
      if (n + 2 < n_tiles) load_k(n + 2, n & 1);
      load_v(n + 1, (n + 1) & 1);
      cp_async_commit();
      float s[64];
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(pp[i]);
      turn_take(n + 1);
      wgmma::fence();
      issue_s(s, qs_wg, k_at((n + 1) & 1));
      issue_pv(o, pp, v_at(n & 1));
      turn_give(n + 1);
      wgmma::wait<1>();  // S_{n+1} done; P V_n still running
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(s[i]);
      std::uint32_t pn[32];
      float cn[2];
      softmax_tile<CAUSAL>(s, pn, m_run, l_run, cn, (n + 1) * kBN, row0, wg_first, S, t, a.scale_log2);
      wgmma::wait<0>();  // P V_n done: O may be rescaled, pp and V[n] are free
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(pp[i]);
      rescale(o, cn);
#pragma unroll
      for (int i = 0; i < 32; ++i) pp[i] = pn[i];
    }
    // last step: P V only
    cp_async_wait<0>();
    wgmma::fence_proxy_async();
    __syncthreads();  // V[n_tiles-1] landed
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(pp[i]);
    turn_take(n_tiles);
    wgmma::fence();
    issue_pv(o, pp, v_at((n_tiles - 1) & 1));
    turn_give(n_tiles);
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(pp[i]);
  } else {
    for (int n = 0; n < n_tiles; ++n) {
      const int buf = n & 1;
      cp_async_wait<0>();
      wgmma::fence_proxy_async();
      __syncthreads();  // K[n], V[n] landed; every warpgroup is done with tile n-1 (buffer buf^1)
      if (n + 1 < n_tiles) {
        load_k(n + 1, buf ^ 1);
        load_v(n + 1, buf ^ 1);
      }
      cp_async_commit();
      float s[64];
      wgmma::fence();
      issue_s(s, qs_wg, k_at(buf));
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(s[i]);
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
      std::uint32_t pp[32];
      float corr[2];
      softmax_tile<CAUSAL>(s, pp, m_run, l_run, corr, n * kBN, row0, wg_first, S, t, a.scale_log2);
      rescale(o, corr);
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(pp[i]);
#pragma unroll
      for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);
      wgmma::fence();
      issue_pv(o, pp, v_at(buf));
      wgmma::wait<0>();  // V[n] and pp are free again before the next barrier
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(pp[i]);
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int i = 0; i < 64; ++i) wgmma::fence_reg(o[i]);

  store_o_lse(o, m_run, l_run, a, b, h, S, row0, t);  // epilogue: O /= l, lse = m*scale + ln(l)
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

// Launch fwd_kernel_sm90a<CAUSAL, PIPE, PING> for head dim 128 on `stream` (B = gridDim.z)
template <bool CAUSAL, bool PIPE, bool PING>
cudaError_t launch_fwd_sm90a_form(const FwdArgs& a, int B, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  constexpr int smem = FwdSmem::bytes;
  auto kern = fwd_kernel_sm90a<CAUSAL, PIPE, PING>;
  cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.S + kBM - 1) / kBM), static_cast<unsigned>(a.H),
                  static_cast<unsigned>(B));
  kern<<<grid, kNT, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

}  // namespace ulysses::kernels::flash
