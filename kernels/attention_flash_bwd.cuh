#pragma once
// Flash attention backward kernels (FlashAttention-2 structure, mma.sync on sm_80+/sm_90):
// the templates, shared by kernels/attention_flash_bwd.cu (which instantiates the defaults)
// and the lab build of the tuning variants (bench/attn/attn_flash_lab.cu).
//
// 1. preprocess: delta = rowsum(dO * O) and lse2 = lse * log2(e) into the workspace, padded to
//    a multiple of BM rows (padding rows: lse2 = +inf so P = 0, delta = 0); dq_accum = 0.
// 2. main: one CTA per (BN-key tile, kv head, batch); NW = 8 warps, warp w owns keys
//    [16w, 16w+16) of the tile. It walks the q heads of the kv head's group (K and V are read
//    once per group) and their BM-row q tiles (Q, dO, lse2, delta by cp.async, double
//    buffered). Per q tile, in the transposed orientation so that P^T and dS^T are A
//    fragments straight from the accumulators:
//      S^T = K Q^T, P^T = exp2(S^T*scale*log2e - lse2), dP^T = V dO^T,
//      dV += P^T dO, dS^T = P^T o (dP^T - delta), dK += dS^T Q,
//    dS^T goes to shared memory (bf16) and dQ_tile = dS K is added to the fp32 dq_accum with
//    vector atomics. dK (times scale) and dV leave registers once, at the end.
// 3. convert: dq = bf16(dq_accum * scale).
#include <cmath>
#include <type_traits>

#include "kernels/attention_flash.hpp"
#include "kernels/attention_flash_sm90a.hpp"
#include "kernels/attention_flash_common.cuh"

namespace ulysses::kernels {
namespace flash {
namespace {

constexpr int kBwdBM = 64;   // q rows per step
constexpr int kBwdBN = 128;  // keys per CTA
constexpr int kBwdNW = 8;    // warps per CTA (16 keys each)
constexpr int kRowPad = 128; // lse2/delta rows padded to a multiple of this (>= kBwdBM)

std::int64_t padded_rows(std::int64_t S) { return (S + kRowPad - 1) / kRowPad * kRowPad; }
std::size_t round256(std::size_t n) { return (n + 255) / 256 * 256; }

struct Workspace {
  float* dq_accum;  // [B, S, Hq, D]
  float* lse2;      // [B, Hq, S_pad]
  float* delta;     // [B, Hq, S_pad]
};

std::size_t dq_accum_bytes(std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t D) {
  return round256(static_cast<std::size_t>(B * S * Hq * D) * 4);
}

Workspace carve(void* ws, std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t D) {
  auto* base = static_cast<unsigned char*>(ws);
  const std::size_t dq_bytes = dq_accum_bytes(B, S, Hq, D);
  const std::size_t row_bytes = round256(static_cast<std::size_t>(B * Hq * padded_rows(S)) * 4);
  return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + dq_bytes),
          reinterpret_cast<float*>(base + dq_bytes + row_bytes)};
}

// one warp per (b, h, row) of the padded row space
template <int D>
__global__ void bwd_preprocess(const __nv_bfloat16* __restrict__ o, const __nv_bfloat16* __restrict__ dout,
                               const float* __restrict__ lse, float* __restrict__ lse2, float* __restrict__ delta,
                               int S, int S_pad, int Hq, std::int64_t rows_total) {
  const std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= rows_total) return;
  const int s = static_cast<int>(w % S_pad);
  const std::int64_t bh = w / S_pad;  // b * Hq + h
  if (s >= S) {
    if (lane == 0) {
      lse2[w] = INFINITY;
      delta[w] = 0.f;
    }
    return;
  }
  const std::int64_t b = bh / Hq, h = bh % Hq;
  const std::int64_t off = ((b * S + s) * Hq + h) * D;
  constexpr int PER = D / 32;  // 2 or 4 elements per lane
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < PER; i += 2) {
    const __nv_bfloat162 ov = *reinterpret_cast<const __nv_bfloat162*>(o + off + lane * PER + i);
    const __nv_bfloat162 dv = *reinterpret_cast<const __nv_bfloat162*>(dout + off + lane * PER + i);
    const float2 of = __bfloat1622float2(ov), df = __bfloat1622float2(dv);
    acc += of.x * df.x + of.y * df.y;
  }
#pragma unroll
  for (int x = 16; x >= 1; x >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, x);
  if (lane == 0) {
    lse2[w] = lse[bh * S + s] * kLog2e;
    delta[w] = acc;
  }
}

__global__ void bwd_convert_dq(const float4* __restrict__ acc, uint2* __restrict__ dq, std::int64_t n4, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = acc[i];
    dq[i] = make_uint2(pack_bf16(v.x * scale, v.y * scale), pack_bf16(v.z * scale, v.w * scale));
  }
}

// Tuning variants of the main kernel (VAR bits; the table of built variants and the run-time
// choice are the lab's, bench/attn/attn_tuning.hpp; measured side by side, docs/ATTENTION.md):
//   bit 0 (1)  P^T/dS^T stored with stmatrix instead of 32-bit stores
//   bit 1 (2)  dQ added with float4 atomics (pairs of lanes swap halves) instead of float2
//   bit 2 (4)  softmax inside the dP^T pass: P^T = ex2.approx(S^T*c - lse2) is computed tile by
//              tile between the dP^T k-steps (one basic block: the MUFU work overlaps the MMAs
//              instead of following them), masking is a fix-up branch taken only by the tiles
//              that need it
//   bit 3 (8)  next step's copies issued after the S^T pass instead of right after the barrier,
//              branch-free (predicated cp.async), step (head, q tile) kept as counters instead
//              of a division per step: no integer/address work between the barrier and the
//              first ldmatrix
//   bit 4 (16) D=64 only: 128-row q tiles (FlashAttention-2's d=64 shape: half the barriers and
//              Q/dO/lse loads per MMA, 0.45 instead of 0.55 ldmatrix per MMA)
//   bit 5 (32) FA2's order after the barrier: dV, then dQ and its atomics, then dK (the atomics
//              overlap the dK MMAs) instead of dV+dK interleaved, then dQ
//   bit 6 (64) (with bit 0) the k-steps of dV/dK over the warp's own queries take P^T/dS^T as A
//              fragments from registers (the packed accumulators that stmatrix stores) and run
//              before the barrier; only the partner warp's half is read back with ldmatrix
//              (136 instead of 144 ldmatrix per warp and step at D=128; half of the dV/dK MMAs
//              move ahead of the barrier)
//   bit 7 (128) (with bits 0, 3) one __syncthreads per step instead of two: P^T/dS^T double
//              buffered, Q/dO/lse2/delta arrival signalled per thread on an mbarrier
//              (cp.async.mbarrier.arrive) and waited for with try_wait, the next step's copies
//              issued after the remaining (P^T/dS^T) barrier; warps no longer line up at the
//              top of every step
//   bit 8 (256) (with bit 3) each head's q tiles from the last to the first (FlashAttention-2's
//              order): the CTAs running together read the same Q/dO tiles and add to the same
//              dq_accum rows at about the same time (L2 reuse at long S)
//   bit 9 (512) (with bit 0, without 5/6/7) ldmatrix across both barriers: the dO^T/Q^T
//              fragments of the first dV/dK k-step before the P^T/dS^T barrier, the K fragments
//              of the first S^T k-step (K never changes) before the step's top barrier (ptxas
//              does not move loads across bar.sync; the phases otherwise start on a full
//              ldmatrix round trip with every warp queueing at once)
//   bit 10 (1024) dQ atomics without branches: a last q tile's rows beyond S, whose dQ is exactly
//              zero (P = 0 there: lse2 = +inf, Q = dO = 0), add it to row S-1 instead of being
//              skipped (4 branch regions with their address arithmetic per step before; a
//              predicated red.global became 16 branches in ptxas)
// (Tried and dropped, docs/ATTENTION.md: dQ before dK/dV, one-register XOR addressing.)
template <int D, int VAR>
struct BwdCfg {
  static constexpr bool kStsm = (VAR & 1) != 0;
  static constexpr bool kRed4 = (VAR & 2) != 0;
  static constexpr bool kSoftPipe = (VAR & 4) != 0;
  static constexpr bool kLoadMid = (VAR & 8) != 0;
  static constexpr int BM = (D == 64 && (VAR & 16) != 0) ? 128 : kBwdBM;  // q rows per step
  static constexpr bool kSplitDkv = (VAR & 32) != 0;
  static constexpr bool kOwnRegs = (VAR & 64) != 0;
  static constexpr bool kOneBar = (VAR & 128) != 0;
  static constexpr bool kTopDown = (VAR & 256) != 0;
  static constexpr bool kPrefetch = (VAR & 512) != 0;
  static constexpr bool kRedPred = (VAR & 1024) != 0;
  static_assert(!kOwnRegs || kStsm, "bit 6 packs the fragments that stmatrix stores");
  static_assert(!kOneBar || (kStsm && kLoadMid), "bit 7 builds on bits 0 and 3");
  static_assert(!kTopDown || kLoadMid, "bit 8 builds on bit 3's step counters");
  static_assert(!kPrefetch || (kStsm && !kOwnRegs && !kSplitDkv && !kOneBar), "bit 9: dV+dK-then-dQ order only");
  static_assert(!kRedPred || !kRed4, "bit 10 replaces the float2 atomics");
};

// Shared-memory layout of the main kernel (byte offsets; tiles swizzled as in load_tile)
template <int D, int BM_, bool ONEBAR = false>
struct BwdSmem {
  static constexpr int BM = BM_, BN = kBwdBN;
  static constexpr int NPD = ONEBAR ? 2 : 1;       // P^T / dS^T buffers
  static constexpr int K = 0;                      // [BN][D]
  static constexpr int V = K + BN * D * 2;         // [BN][D]
  static constexpr int Q = V + BN * D * 2;         // [2][BM][D]
  static constexpr int dO = Q + 2 * BM * D * 2;    // [2][BM][D]
  static constexpr int P = dO + 2 * BM * D * 2;    // P^T  [NPD][BN][BM] bf16
  static constexpr int dS = P + NPD * BN * BM * 2; // dS^T [NPD][BN][BM] bf16
  static constexpr int L = dS + NPD * BN * BM * 2; // lse2  [2][BM] fp32
  static constexpr int Dl = L + 2 * BM * 4;        // delta [2][BM] fp32
  static constexpr int Mb = Dl + 2 * BM * 4;       // ONEBAR: [2] mbarriers (Q/dO buffer arrival)
  static constexpr int bytes = Mb + (ONEBAR ? 16 : 0);
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

__device__ __forceinline__ void mbar_init(std::uint32_t addr, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count));
}
// arrive on the mbarrier once all of this thread's earlier cp.async copies have landed
__device__ __forceinline__ void cp_async_mbar_arrive(std::uint32_t addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr));
}
__device__ __forceinline__ void mbar_wait(std::uint32_t addr, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

// 16-byte async copy issued only when p (predicated, no branch); nothing written otherwise
__device__ __forceinline__ void cp_async16_if(std::uint32_t dst, const void* src, bool p) {
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(dst),
      "l"(src), "r"(static_cast<int>(p)));
}

// Shapes of the main kernel for head dim D and variant VAR
template <int D, int VAR>
struct BwdDims : BwdCfg<D, VAR> {
  using C = BwdCfg<D, VAR>;
  static constexpr int BM = C::BM, BN = kBwdBN, NW = kBwdNW, NT = NW * 32;
  static_assert(NW == 8 && BN == 128 && (BM == 64 || BM == 128), "warp layouts assume 8 warps, 128 keys");
  static constexpr int DH = D / 2;
  static constexpr int NJ = BM / 16;      // n8 query tiles per warp in S^T / dP^T (BM/2 queries)
  static constexpr int WQ = BM / 32;      // warps along the queries in dQ
  static constexpr int DQ = D * WQ / NW;  // dQ columns per warp
  static_assert(DQ % 16 == 0, "dQ warp tile");
  using L = BwdSmem<D, BM, C::kOneBar>;
};

// The thread's place: one CTA per (BN-key tile, kv head, batch), 8 warps
struct BwdPos {
  int tid, lane, warp;
  int g, t;              // mma fragment: row group lane / 4, column pair lane % 4
  int n_block, hk, b;    // key tile, kv head, batch
  int S, n0, group;      // sequence length, first key of the tile, q heads per kv head
  std::int64_t ldq, ldk; // row strides: Q, dO, dq_accum [B, S, H, D]; K, V, dK, dV [B, S, H_kv, D]
  std::int64_t kv_off;   // the tile's K/V/dK/dV rows [BN, D] (bf16) at (b, n0, hk)
};

// The CTA's steps: (q head of the group, q tile) pairs, heads outer
struct BwdSched {
  int m_first, m_count, steps;  // first q tile (causal: the tile's diagonal), q tiles per head, steps
};
// q tile index of step counter mi within a head (bit 8: last to first)
template <bool TOP_DOWN>
__device__ __forceinline__ int bwd_m_of(const BwdSched& s, int mi) {
  return TOP_DOWN ? s.m_first + s.m_count - 1 - mi : s.m_first + mi;
}

__device__ __forceinline__ __nv_bfloat16* bwd_tile(unsigned char* smem, int off) {
  return reinterpret_cast<__nv_bfloat16*>(smem + off);
}

// Per-warp tile origins and ldmatrix/stmatrix lane addresses (tile byte offsets added at use)
template <int D, int VAR>
struct BwdWarp {
  using T = BwdDims<D, VAR>;
  static constexpr int BM = T::BM;
  int kw, qw, dc;             // S^T/dP^T and dV/dK: keys kw.., queries qw.., d columns dc..
  int qr, dqc;                // dQ: queries qr.., d columns dqc..
  LdsmAddr<D> a_kv;           // K, V as A
  LdsmAddr<D> b_qdo;          // Q, dO as B
  LdsmAddr<BM> a_pds;         // P^T, dS^T as A
  LdsmAddr<D> bt_qdo;         // dO, Q as B^T
  LdsmAddr<BM> at_ds;         // dS as A^T
  LdsmAddr<D> bt_k;           // K as B^T
  LdsmAddr<BM> st_pds;        // stmatrix of P^T, dS^T
  int qw_o;                   // the partner warp's (w ^ 4) queries in S^T / dP^T
  LdsmAddr<BM> a_pds_o;       // bit 6: the partner's P^T, dS^T as A
};

// kOneBar: the two mbarriers (Q/dO buffer i at mbar + 8i); then K, V [BN, D] bf16 -> shared memory
template <int D, int VAR>
__device__ __forceinline__ void bwd_load_kv(unsigned char* smem, const BwdArgs& a, const BwdPos& p,
                                            std::uint32_t mbar) {
  using T = BwdDims<D, VAR>;
  using L = typename T::L;
  if constexpr (T::kOneBar) {
    if (p.tid == 0) {
      mbar_init(mbar, T::NT);
      mbar_init(mbar + 8, T::NT);
    }
    __syncthreads();
  }
  load_tile<T::BN, D, T::NT>(bwd_tile(smem, L::K), a.k + p.kv_off, p.ldk, p.S - p.n0, p.tid);
  load_tile<T::BN, D, T::NT>(bwd_tile(smem, L::V), a.v + p.kv_off, p.ldk, p.S - p.n0, p.tid);
}

// issue the copies of q tile (head h, rows m0..) into buffer `buf`: Q, dO [BM, D] bf16, lse2,
// delta [BM] fp32; nq valid rows (the rest, all of them when nq <= 0, are zero-filled without
// reading global memory)
template <int D, int VAR>
__device__ __forceinline__ void bwd_load_step(unsigned char* smem, const BwdArgs& a, const BwdPos& p, int h, int m0,
                                              int buf, int nq) {
  using T = BwdDims<D, VAR>;
  using L = typename T::L;
  constexpr int BM = T::BM, NT = T::NT;
  const int tid = p.tid;
  const std::int64_t q_off = (static_cast<std::int64_t>(p.b) * p.S + m0) * p.ldq + h * D;
  load_tile<BM, D, NT>(bwd_tile(smem, L::Q + buf * BM * D * 2), a.q + q_off, p.ldq, nq, tid);
  load_tile<BM, D, NT>(bwd_tile(smem, L::dO + buf * BM * D * 2), a.dout + q_off, p.ldq, nq, tid);
  const std::int64_t row_off = (static_cast<std::int64_t>(p.b) * a.Hq + h) * a.S_pad + m0;
  if constexpr (T::kLoadMid) {
    const bool is_l = tid < BM / 4;
    const int i = is_l ? tid : tid - BM / 4;
    const float* src = (is_l ? a.lse2 : a.delta) + row_off + i * 4;
    cp_async16_if(smem_addr(smem + (is_l ? L::L : L::Dl) + buf * BM * 4 + i * 16), src, tid < BM / 2);
  } else {
    if (tid < BM / 4) {
      cp_async16(smem_addr(smem + L::L + buf * BM * 4 + tid * 16), a.lse2 + row_off + tid * 4, true);
    } else if (tid < BM / 2) {
      const int i = tid - BM / 4;
      cp_async16(smem_addr(smem + L::Dl + buf * BM * 4 + i * 16), a.delta + row_off + i * 4, true);
    }
  }
}

// step 0's copies; kOneBar / kPrefetch: wait for K, V (and step 0) here
template <int D, int VAR>
__device__ __forceinline__ void bwd_prologue(unsigned char* smem, const BwdArgs& a, const BwdPos& p,
                                             const BwdSched& s, std::uint32_t mbar) {
  using T = BwdDims<D, VAR>;
  const int m = bwd_m_of<T::kTopDown>(s, 0);
  bwd_load_step<D, VAR>(smem, a, p, p.hk * p.group, m * T::BM, 0, p.S - m * T::BM);
  cp_async_commit();
  if constexpr (T::kOneBar) {
    cp_async_mbar_arrive(mbar);
    cp_async_wait<0>();
    __syncthreads();  // K, V landed (step 0's buffer is waited for on its mbarrier)
  }
  if constexpr (T::kPrefetch) {
    cp_async_wait<0>();
    __syncthreads();  // K, V (and step 0) landed: the first K fragments can be loaded ahead
  }
}

// bit 9: K fragments (A of S^T) of k-step 0 [2][4] (two 16x16 bf16 tiles), loaded ahead of a barrier
template <int D, int VAR>
__device__ __forceinline__ void bwd_load_k0(const BwdWarp<D, VAR>& w, std::uint32_t (&fk0)[2][4]) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) ldsm_x4(fk0[mt], w.a_kv.at(0, mt * 16) + BwdDims<D, VAR>::L::K);
}

// the step's q head h and first q row m0; wait until its Q, dO, lse2, delta landed
template <int D, int VAR>
__device__ __forceinline__ void bwd_step_begin(const BwdPos& p, const BwdSched& s, int it, int cur_h, int cur_mi,
                                               std::uint32_t mbar, int& h, int& m0) {
  using T = BwdDims<D, VAR>;
  const int buf = it & 1;
  if constexpr (T::kLoadMid) {
    h = cur_h, m0 = bwd_m_of<T::kTopDown>(s, cur_mi) * T::BM;
  } else {
    h = p.hk * p.group + it / s.m_count, m0 = (s.m_first + it % s.m_count) * T::BM;
  }
  if constexpr (T::kOneBar) {
    mbar_wait(mbar + 8 * buf, (it >> 1) & 1);  // step `it`'s Q, dO, lse2, delta landed (all threads' copies)
  } else {
    cp_async_wait<0>();
    __syncthreads();  // step `it` landed; every warp is done with step it-1 (buffer buf^1, P^T, dS^T)
  }
}

// the next step's copies into buffer buf ^ 1 (kLoadMid: advances the step counters cur_h, cur_mi)
template <int D, int VAR>
__device__ __forceinline__ void bwd_issue_next(unsigned char* smem, const BwdArgs& a, const BwdPos& p,
                                               const BwdSched& s, int it, int buf, int h, int m0,
                                               std::uint32_t mbar, int& cur_h, int& cur_mi) {
  using T = BwdDims<D, VAR>;
  constexpr int BM = T::BM;
  if constexpr (T::kLoadMid) {
    // always issued (the copy after the last step zero-fills the idle buffer): no branch
    const bool wrap = cur_mi + 1 == s.m_count;
    const int nh = wrap ? cur_h + 1 : cur_h, nmi = wrap ? 0 : cur_mi + 1;
    const bool more = it + 1 < s.steps;
    const int nm0 = bwd_m_of<T::kTopDown>(s, nmi) * BM;
    bwd_load_step<D, VAR>(smem, a, p, more ? nh : h, more ? nm0 : m0, buf ^ 1, more ? p.S - nm0 : 0);
    if constexpr (T::kOneBar) cp_async_mbar_arrive(mbar + 8 * (buf ^ 1));
    cur_h = nh, cur_mi = nmi;
  } else {
    if (it + 1 < s.steps) {
      bwd_load_step<D, VAR>(smem, a, p, p.hk * p.group + (it + 1) / s.m_count,
                            (s.m_first + (it + 1) % s.m_count) * BM, buf ^ 1,
                            p.S - (s.m_first + (it + 1) % s.m_count) * BM);
    }
  }
  cp_async_commit();
}

// one d pair dp of a dV/dK k-step: dv[.][2dp..] += P^T dO (W bit 0), dk[.][2dp..] += dS^T Q (W bit 1);
// pa, sa: A 2 x [16 keys, 16 queries] bf16; ob, qb: B^T dO, Q [16 queries, 16 d] bf16
template <int W, int NDJ>
__device__ __forceinline__ void bwd_dkv_mma(const std::uint32_t (&pa)[2][4], const std::uint32_t (&sa)[2][4],
                                            const std::uint32_t (&ob)[4], const std::uint32_t (&qb)[4], int dp,
                                            float (&dk)[2][NDJ][4], float (&dv)[2][NDJ][4]) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    if constexpr ((W & 1) != 0) {
      mma16816(dv[mt][2 * dp], pa[mt], ob[0], ob[1]);
      mma16816(dv[mt][2 * dp + 1], pa[mt], ob[2], ob[3]);
    }
    if constexpr ((W & 2) != 0) {
      mma16816(dk[mt][2 * dp], sa[mt], qb[0], qb[1]);
      mma16816(dk[mt][2 * dp + 1], sa[mt], qb[2], qb[3]);
    }
  }
}

// dV += P^T dO (W bit 0) and/or dK += dS^T Q (W bit 1) over 16 queries (B rows at byte offset
// brow) from given A fragments pa, sa: 2 x [16 keys, 16 queries] bf16 (bit 6); dv, dk
// [2][DH/8][4] fp32. References, as the lambda this was captured them (by value: other SASS).
template <int D, int VAR, int W>
__device__ __forceinline__ void bwd_dkv_kstep(const LdsmAddr<D>& bt_qdo, const std::uint32_t& qo,
                                              const std::uint32_t& doo, std::uint32_t brow,
                                              const std::uint32_t (&pa)[2][4], const std::uint32_t (&sa)[2][4],
                                              float (&dk)[2][D / 16][4], float (&dv)[2][D / 16][4]) {
  constexpr int DH = D / 2;
#pragma unroll
  for (int dp = 0; dp < DH / 16; ++dp) {
    std::uint32_t ob[4], qb[4];  // B^T: dO, Q [16 queries, 16 d] bf16
    if constexpr ((W & 1) != 0) ldsm_x4_t(ob, bt_qdo.at(dp, 0) + brow + doo);
    if constexpr ((W & 2) != 0) ldsm_x4_t(qb, bt_qdo.at(dp, 0) + brow + qo);
    bwd_dkv_mma<W>(pa, sa, ob, qb, dp, dk, dv);
  }
}

// bit 6: dV/dK k-steps (dkv_kstep, W as in bwd_dkv) over the partner warp's queries, A fragments
// read back from shared memory (P^T, dS^T at byte offsets Pb, dSb). References, as the lambda
// this was captured them (by value: other SASS).
template <int D, int VAR, class Which, class KStep>
__device__ __forceinline__ void bwd_dkv_partner(Which which, const LdsmAddr<BwdDims<D, VAR>::BM>& a_pds_o,
                                                const std::uint32_t& Pb, const std::uint32_t& dSb, const int& qw_o,
                                                KStep& dkv_kstep) {
  constexpr int NJ = BwdDims<D, VAR>::NJ;
  constexpr int W = decltype(which)::value;
#pragma unroll
  for (int kl = 0; kl < NJ / 2; ++kl) {
    std::uint32_t pa[2][4], sa[2][4];  // A: P^T, dS^T 2 x [16 keys, 16 queries] bf16
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      if constexpr ((W & 1) != 0) ldsm_x4(pa[mt], a_pds_o.at(kl, mt * 16) + Pb);
      if constexpr ((W & 2) != 0) ldsm_x4(sa[mt], a_pds_o.at(kl, mt * 16) + dSb);
    }
    dkv_kstep(which, static_cast<std::uint32_t>((qw_o + kl * 16) * D * 2), pa, sa);
  }
}

// bit 9: dO^T / Q^T fragments ob0, qb0 [DH/16][4] of the first dV/dK k-step (this step's Q/dO:
// visible already), loaded before the P^T/dS^T barrier
template <int D, int VAR>
__device__ __forceinline__ void bwd_load_dkv0(const BwdWarp<D, VAR>& w, std::uint32_t qo, std::uint32_t doo,
                                              std::uint32_t (&ob0)[BwdDims<D, VAR>::DH / 16][4],
                                              std::uint32_t (&qb0)[BwdDims<D, VAR>::DH / 16][4]) {
#pragma unroll
  for (int dp = 0; dp < BwdDims<D, VAR>::DH / 16; ++dp) {
    ldsm_x4_t(ob0[dp], w.bt_qdo.at(dp, 0) + doo);
    ldsm_x4_t(qb0[dp], w.bt_qdo.at(dp, 0) + qo);
  }
}

// dV += P^T dO (W bit 0) and/or dK += dS^T Q (W bit 1)  (32 keys x D/2 per warp, k = BM queries,
// P^T/dS^T read back from shared memory)
template <int D, int VAR, int W>
__device__ __forceinline__ void bwd_dkv(const BwdWarp<D, VAR>& w, std::uint32_t Pb, std::uint32_t dSb,
                                        std::uint32_t qo, std::uint32_t doo,
                                        const std::uint32_t (&ob0)[BwdDims<D, VAR>::DH / 16][4],
                                        const std::uint32_t (&qb0)[BwdDims<D, VAR>::DH / 16][4],
                                        float (&dk)[2][BwdDims<D, VAR>::DH / 8][4],
                                        float (&dv)[2][BwdDims<D, VAR>::DH / 8][4]) {
  using T = BwdDims<D, VAR>;
  constexpr int BM = T::BM, DH = T::DH;
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk) {
    std::uint32_t pa[2][4], sa[2][4];  // A: P^T, dS^T 2 x [16 keys, 16 queries] bf16
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      if constexpr ((W & 1) != 0) ldsm_x4(pa[mt], w.a_pds.at(kk, mt * 16) + Pb);
      if constexpr ((W & 2) != 0) ldsm_x4(sa[mt], w.a_pds.at(kk, mt * 16) + dSb);
    }
#pragma unroll
    for (int dp = 0; dp < DH / 16; ++dp) {
      std::uint32_t ob[4], qb[4];  // B^T: dO, Q [16 queries, 16 d] bf16
      if (T::kPrefetch && kk == 0) {
#pragma unroll
        for (int r = 0; r < 4; ++r) ob[r] = ob0[dp][r], qb[r] = qb0[dp][r];
      } else {
        if constexpr ((W & 1) != 0) ldsm_x4_t(ob, w.bt_qdo.at(dp, kk * 16) + doo);
        if constexpr ((W & 2) != 0) ldsm_x4_t(qb, w.bt_qdo.at(dp, kk * 16) + qo);
      }
      bwd_dkv_mma<W>(pa, sa, ob, qb, dp, dk, dv);
    }
  }
}

// dQ_tile = dS K (acc [2][DQ/8][4] fp32: 32 queries x DQ per warp, k = BN keys), then the dQ
// atomics into dq_accum [B, S, H, D] fp32 (head h, rows m0 + qr..). References, as the lambda
// this was captured them: passed by value the SASS changed.
template <int D, int VAR>
__device__ __forceinline__ void bwd_dq(const BwdArgs& a, const int& b, const int& S, const int& g, const int& t,
                                       const int& qr, const int& dqc, const int& h, const int& m0,
                                       const LdsmAddr<BwdDims<D, VAR>::BM>& at_ds, const LdsmAddr<D>& bt_k,
                                       const std::uint32_t& dSb) {
  using C = BwdCfg<D, VAR>;
  using L = typename BwdDims<D, VAR>::L;
  constexpr int BN = kBwdBN, DQ = BwdDims<D, VAR>::DQ;
  // dQ_tile = dS K  (32 queries x DQ per warp, k = BN keys), added to dq_accum
  float acc[2][DQ / 8][4];  // dQ tile part [32 queries, DQ] fp32
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < DQ / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;
#pragma unroll
  for (int ks = 0; ks < BN / 16; ++ks) {
    std::uint32_t da[2][4];  // A^T: dS 2 x [16 queries, 16 keys] bf16
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) ldsm_x4_t(da[mt], at_ds.at(mt, ks * 16) + dSb);
#pragma unroll
    for (int dp = 0; dp < DQ / 16; ++dp) {
      std::uint32_t kb[4];  // B^T: K [16 keys, 16 d] bf16
      ldsm_x4_t(kb, bt_k.at(dp, ks * 16) + L::K);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        mma16816(acc[mt][2 * dp], da[mt], kb[0], kb[1]);
        mma16816(acc[mt][2 * dp + 1], da[mt], kb[2], kb[3]);
      }
    }
  }
  if constexpr (C::kRed4) {
    // lanes t, t^1 swap: even t -> row g, cols 2t..2t+3; odd t -> row g+8, cols 2(t-1)..
    const bool odd = (t & 1) != 0;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const int row = m0 + qr + mt * 16 + g + (odd ? 8 : 0);
      float* dst = a.dq_accum + ((static_cast<std::int64_t>(b) * S + row) * a.Hq + h) * D + dqc + 2 * (t & ~1);
#pragma unroll
      for (int j = 0; j < DQ / 8; ++j) {
        const float* c = acc[mt][j];
        const float sx = __shfl_xor_sync(0xffffffffu, odd ? c[0] : c[2], 1);
        const float sy = __shfl_xor_sync(0xffffffffu, odd ? c[1] : c[3], 1);
        const float4 v = odd ? make_float4(sx, sy, c[2], c[3]) : make_float4(c[0], c[1], sx, sy);
        if (row < S) atomicAdd(reinterpret_cast<float4*>(dst + j * 8), v);
      }
    }
  } else if constexpr (C::kRedPred) {
    const std::int64_t ld_row = static_cast<std::int64_t>(a.Hq) * D;  // dq_accum row stride
    float* base = a.dq_accum + static_cast<std::int64_t>(b) * S * ld_row + h * D + dqc + 2 * t;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = min(m0 + qr + mt * 16 + g + hr * 8, S - 1);
        float* dst = base + row * ld_row;
#pragma unroll
        for (int j = 0; j < DQ / 8; ++j) {
          atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(acc[mt][j][2 * hr], acc[mt][j][2 * hr + 1]));
        }
      }
  } else {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = m0 + qr + mt * 16 + g + hr * 8;
        if (row < S) {
          float* dst = a.dq_accum + ((static_cast<std::int64_t>(b) * S + row) * a.Hq + h) * D + dqc + 2 * t;
#pragma unroll
          for (int j = 0; j < DQ / 8; ++j) {
            atomicAdd(reinterpret_cast<float2*>(dst + j * 8),
                      make_float2(acc[mt][j][2 * hr], acc[mt][j][2 * hr + 1]));
          }
        }
      }
  }
}

// dK (times scale) and dV: registers [2][DH/8][4] fp32 -> K/V tiles in shared memory (bf16) -> global
template <int D, int VAR>
__device__ __forceinline__ void bwd_epilogue(unsigned char* smem, const BwdArgs& a, const BwdPos& p,
                                             const BwdWarp<D, VAR>& w, const float (&dk)[2][BwdDims<D, VAR>::DH / 8][4],
                                             const float (&dv)[2][BwdDims<D, VAR>::DH / 8][4]) {
  using T = BwdDims<D, VAR>;
  using L = typename T::L;
  constexpr int DH = T::DH;
  const int g = p.g, t = p.t, kw = w.kw, dc = w.dc;
  if constexpr (T::kOneBar) cp_async_wait<0>();  // the idle buffer's (zero-fill) copies, before exit
  __syncthreads();  // every warp is done reading K (dQ) and V
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = kw + mt * 16 + g + hr * 8;
#pragma unroll
      for (int j = 0; j < DH / 8; ++j) {
        *reinterpret_cast<std::uint32_t*>(bwd_tile(smem, L::K) + swz<D>(r, dc / 8 + j) + 2 * t) =
            pack_bf16(dk[mt][j][2 * hr] * a.scale, dk[mt][j][2 * hr + 1] * a.scale);
        *reinterpret_cast<std::uint32_t*>(bwd_tile(smem, L::V) + swz<D>(r, dc / 8 + j) + 2 * t) =
            pack_bf16(dv[mt][j][2 * hr], dv[mt][j][2 * hr + 1]);
      }
    }
  __syncthreads();
  store_tile<T::BN, D, T::NT>(a.dk + p.kv_off, p.ldk, bwd_tile(smem, L::K), p.S - p.n0, p.tid);
  store_tile<T::BN, D, T::NT>(a.dv + p.kv_off, p.ldk, bwd_tile(smem, L::V), p.S - p.n0, p.tid);
}

// Warp layouts (8 warps, BN = 128 keys, BM = 64 or 128 queries per step):
//   S^T, dP^T (keys x queries): warp -> keys 32*(w%4).., queries (BM/2)*(w/4)..  (2 x BM/16 MMA tiles)
//   dV, dK    (keys x d):       warp -> keys 32*(w%4).., d (D/2)*(w/4)..          (2 x D/16 tiles)
//   dQ        (queries x d):    warp -> queries 32*(w%WQ).., d DQ*(w/WQ)..        (WQ = BM/32, DQ = D*WQ/8)
// P^T and dS^T go through shared memory (bf16) between the first and the other two.
// Top to bottom: bwd_load_kv, bwd_prologue (step 0's copies); per step bwd_step_begin (wait),
// bwd_issue_next (next step's copies), S^T/dP^T, softmax and dS^T, P^T/dS^T to shared memory (own
// k-steps: bwd_dkv_kstep), bwd_load_dkv0, barrier, bwd_dkv or bwd_dkv_partner and bwd_dq (dQ and
// its atomics); bwd_epilogue. The S^T/dP^T passes, the softmax and the P^T/dS^T stores stay in
// the body: moved into functions they changed the SASS of the default variants (other integer and
// address code, spills); byte-identical .text before/after, checked by compiling, is the rule.
template <int D, bool CAUSAL, int VAR>
__global__ void __launch_bounds__(kBwdNW * 32, 1) bwd_kernel(const BwdArgs a) {
  using C = BwdCfg<D, VAR>;
  using T = BwdDims<D, VAR>;  // BM, BN, DH, NJ, WQ, DQ and the shared-memory layout L
  using L = typename T::L;
  constexpr int BM = T::BM, BN = T::BN, DH = T::DH, NJ = T::NJ, WQ = T::WQ, DQ = T::DQ;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto tile = [&](int off) { return reinterpret_cast<__nv_bfloat16*>(smem_raw + off); };

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n_block = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int n0 = n_block * BN;
  const int group = a.Hq / a.Hkv;

  const std::int64_t ldq = static_cast<std::int64_t>(a.Hq) * D;
  const std::int64_t ldk = static_cast<std::int64_t>(a.Hkv) * D;
  const std::int64_t kv_off = (static_cast<std::int64_t>(b) * S + n0) * ldk + hk * D;

  const BwdPos p{tid, lane, warp, g, t, n_block, hk, b, S, n0, group, ldq, ldk, kv_off};
  const std::uint32_t mbar = smem_addr(smem_raw + L::Mb);  // kOneBar: mbarrier of Q/dO buffer i at mbar + 8i
  bwd_load_kv<D, VAR>(smem_raw, a, p, mbar);

  const int m_first = CAUSAL ? n0 / BM : 0;
  const int m_count = (S + BM - 1) / BM - m_first;
  const int steps = group * m_count;

  const BwdSched s{m_first, m_count, steps};
  bwd_prologue<D, VAR>(smem_raw, a, p, s, mbar);

  const int kw = (warp & 3) * 32, qw = (warp >> 2) * (BM / 2), dc = (warp >> 2) * DH;
  const int qr = (warp & (WQ - 1)) * 32, dqc = (warp >> (WQ == 2 ? 1 : 2)) * DQ;
  // ldmatrix lane addresses (tile byte offsets added at use)
  const LdsmAddr<D> a_kv(smem_raw, kw + (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);     // K, V as A
  const LdsmAddr<D> b_qdo(smem_raw, qw + (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);    // Q, dO as B
  const LdsmAddr<BM> a_pds(smem_raw, kw + (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);   // P^T, dS^T as A
  const LdsmAddr<D> bt_qdo(smem_raw, (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4, dc / 16);  // dO, Q as B^T
  const LdsmAddr<BM> at_ds(smem_raw, (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1, qr / 16);  // dS as A^T
  const LdsmAddr<D> bt_k(smem_raw, (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4, dqc / 16);   // K as B^T
  const LdsmAddr<BM> st_pds(smem_raw, kw + (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4, qw / 16);  // stmatrix
  const int qw_o = qw ^ (BM / 2);  // the partner warp's (w ^ 4) queries in S^T / dP^T
  const LdsmAddr<BM> a_pds_o(smem_raw, kw + (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4, qw_o / 16);  // bit 6
  const BwdWarp<D, VAR> w{kw, qw, dc, qr, dqc, a_kv, b_qdo, a_pds, bt_qdo, at_ds, bt_k, st_pds, qw_o, a_pds_o};

  float dk[2][DH / 8][4], dv[2][DH / 8][4];  // dK, dV [32 keys, D/2] fp32 per warp
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < DH / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[mt][j][e] = dv[mt][j][e] = 0.f;

  // bit 9: K fragments (A of S^T) of k-step 0, loaded before each step's top barrier
  std::uint32_t fk0[2][4];
  if constexpr (C::kPrefetch) bwd_load_k0(w, fk0);
  const std::uint32_t opaque_zero = static_cast<std::uint32_t>(S) >> 31;  // S >= 1: 0, unknown to ptxas
  int cur_h = hk * group, cur_mi = 0;  // step's q head and q tile (counters; used with kLoadMid)
  for (int it = 0; it < steps; ++it) {
    const int buf = it & 1;
    int h, m0;
    bwd_step_begin<D, VAR>(p, s, it, cur_h, cur_mi, mbar, h, m0);
    // kOneBar: P^T / dS^T buffer of this step (the other one may still be read by slower warps)
    const std::uint32_t Pb = L::P + (C::kOneBar ? (it & 1) * BN * BM * 2 : 0);
    const std::uint32_t dSb = L::dS + (C::kOneBar ? (it & 1) * BN * BM * 2 : 0);
    auto issue_next = [&] { bwd_issue_next<D, VAR>(smem_raw, a, p, s, it, buf, h, m0, mbar, cur_h, cur_mi); };
    if constexpr (!C::kLoadMid) issue_next();
    const std::uint32_t qo = L::Q + buf * BM * D * 2, doo = L::dO + buf * BM * D * 2;
    // lse2 and delta of this step (defined where used: live ranges matter at 255 registers)
    auto lse2_of = [&] { return reinterpret_cast<const float*>(smem_raw + L::L) + buf * BM; };
    auto delta_of = [&] { return reinterpret_cast<const float*>(smem_raw + L::Dl) + buf * BM; };

    // S^T = K Q^T, dP^T = V dO^T  (32 keys x BM/2 queries per warp)
    float st[2][NJ][4], dpt[2][NJ][4];  // S^T -> P^T, dP^T -> dS^T [32 keys, BM/2 queries] fp32
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[mt][j][e] = dpt[mt][j][e] = 0.f;
    // kSoftPipe: P^T tiles (mt, j) = tix / NJ, tix % NJ computed TPK per dP^T k-step. ptxas
    // sinks independent MUFU work below all MMAs of a block (measured in the SASS), so the
    // exponentials of k-step ks feed a false dependency (their bits AND an opaque zero, ORed into
    // a B fragment) into the MMAs of k-step ks + LAG: they must issue between the MMAs.
    constexpr int TPK = (2 * NJ + D / 16 - 1) / (D / 16);
    constexpr int LAG = D / 16 >= 8 ? 2 : 1;
    std::uint32_t dep[D / 16];  // kSoftPipe: false dependency per k-step
    // two passes (S^T, then dP^T) keep fewer operand fragments live
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const std::uint32_t a_off = pass == 0 ? L::K : L::V;
      const std::uint32_t b_off = pass == 0 ? qo : doo;
      float (&acc)[2][NJ][4] = pass == 0 ? st : dpt;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        std::uint32_t fa[2][4];  // A: K or V 2 x [16 keys, 16 d] bf16
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          if (C::kPrefetch && pass == 0 && ks == 0) {
#pragma unroll
            for (int r = 0; r < 4; ++r) fa[mt][r] = fk0[mt][r];
          } else {
            ldsm_x4(fa[mt], a_kv.at(ks, mt * 16) + a_off);
          }
        }
#pragma unroll
        for (int qp = 0; qp < NJ / 2; ++qp) {
          std::uint32_t fb[4];  // B: Q or dO [16 queries, 16 d] bf16
          ldsm_x4(fb, b_qdo.at(ks, qp * 16) + b_off);
          if constexpr (C::kSoftPipe) {
            if (pass == 1 && qp == 0 && ks >= LAG) fb[0] |= dep[ks - LAG];
          }
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma16816(acc[mt][2 * qp], fa[mt], fb[0], fb[1]);
            mma16816(acc[mt][2 * qp + 1], fa[mt], fb[2], fb[3]);
          }
        }
        if constexpr (C::kSoftPipe) {
          if (pass == 1) {
            std::uint32_t bits = 0;
#pragma unroll
            for (int u = 0; u < TPK; ++u) {
              const int tix = ks * TPK + u;
              if (tix < 2 * NJ) {
                const int mt = tix / NJ, j = tix % NJ;
                const float2 l2 = *reinterpret_cast<const float2*>(lse2_of() + qw + j * 8 + 2 * t);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  st[mt][j][e] = ex2_approx(fmaf(st[mt][j][e], a.scale_log2, -((e & 1) ? l2.y : l2.x)));
                  bits |= __float_as_uint(st[mt][j][e]);
                }
              }
            }
            dep[ks] = bits & opaque_zero;
          }
        }
      }
      if constexpr (C::kLoadMid && !C::kOneBar) {
        if (pass == 0) issue_next();
      }
    }

    // P^T (masked: keys beyond S; causal keys after the query), dS^T = P^T (dP^T - delta);
    // both to shared memory as bf16
    const float* Lb = lse2_of();
    const float* Db = delta_of();
    const bool need_mask = (n0 + BN > S) || (CAUSAL && m0 < n0 + BN - 1);
    if constexpr (C::kSoftPipe) {
      if (need_mask) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int j = 0; j < NJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = n0 + kw + mt * 16 + g + (e >> 1) * 8;
              const int qc = qw + j * 8 + 2 * t + (e & 1);
              if (key >= S || (CAUSAL && key > m0 + qc)) st[mt][j][e] = 0.f;
            }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const float2 dl = *reinterpret_cast<const float2*>(Db + qw + j * 8 + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) dpt[mt][j][e] = st[mt][j][e] * (dpt[mt][j][e] - ((e & 1) ? dl.y : dl.x));
        }
    } else {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int qc = qw + j * 8 + 2 * t;
          const float2 l2 = *reinterpret_cast<const float2*>(Lb + qc);
          const float2 dl = *reinterpret_cast<const float2*>(Db + qc);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float p = exp2f(fmaf(st[mt][j][e], a.scale_log2, -((e & 1) ? l2.y : l2.x)));
            if (need_mask) {
              const int key = n0 + kw + mt * 16 + g + (e >> 1) * 8;
              if (key >= S || (CAUSAL && key > m0 + qc + (e & 1))) p = 0.f;
            }
            st[mt][j][e] = p;
            dpt[mt][j][e] = p * (dpt[mt][j][e] - ((e & 1) ? dl.y : dl.x));
          }
        }
    }
    // bit 6: dV += P^T dO, dK += dS^T Q over 16 queries (B rows at byte offset brow) from given A fragments
    auto dkv_kstep = [&](auto which, std::uint32_t brow, const std::uint32_t(&pa)[2][4],
                         const std::uint32_t(&sa)[2][4]) {
      bwd_dkv_kstep<D, VAR, decltype(which)::value>(bt_qdo, qo, doo, brow, pa, sa, dk, dv);
    };
    if constexpr (C::kOwnRegs) {
      // P^T, dS^T of the warp's keys x own queries, packed once as A fragments (k-step jp): stored
      // for the partner warp, used for the own k-steps before the barrier
      std::uint32_t pf[NJ / 2][2][4], sf[NJ / 2][2][4];  // A: 2 x [16 keys, 16 q] bf16 per k-step
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int jp = 0; jp < NJ / 2; ++jp) {
          const float(&p0)[4] = st[mt][2 * jp];
          const float(&p1)[4] = st[mt][2 * jp + 1];
          const float(&d0)[4] = dpt[mt][2 * jp];
          const float(&d1)[4] = dpt[mt][2 * jp + 1];
          std::uint32_t(&pr)[4] = pf[jp][mt];
          std::uint32_t(&sr)[4] = sf[jp][mt];
          pr[0] = pack_bf16(p0[0], p0[1]), pr[1] = pack_bf16(p0[2], p0[3]);
          pr[2] = pack_bf16(p1[0], p1[1]), pr[3] = pack_bf16(p1[2], p1[3]);
          sr[0] = pack_bf16(d0[0], d0[1]), sr[1] = pack_bf16(d0[2], d0[3]);
          sr[2] = pack_bf16(d1[0], d1[1]), sr[3] = pack_bf16(d1[2], d1[3]);
          const std::uint32_t at = st_pds.at(jp, mt * 16);
          stsm_x4(at + Pb, pr[0], pr[1], pr[2], pr[3]);
          stsm_x4(at + dSb, sr[0], sr[1], sr[2], sr[3]);
        }
#pragma unroll
      for (int kl = 0; kl < NJ / 2; ++kl) {
        dkv_kstep(std::integral_constant<int, 3>{}, static_cast<std::uint32_t>((qw + kl * 16) * D * 2), pf[kl],
                  sf[kl]);
      }
    } else if constexpr (C::kStsm) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int jp = 0; jp < NJ / 2; ++jp) {
          const std::uint32_t at = st_pds.at(jp, mt * 16);
          const float(&p0)[4] = st[mt][2 * jp];
          const float(&p1)[4] = st[mt][2 * jp + 1];
          stsm_x4(at + Pb, pack_bf16(p0[0], p0[1]), pack_bf16(p0[2], p0[3]), pack_bf16(p1[0], p1[1]),
                  pack_bf16(p1[2], p1[3]));
          const float(&d0)[4] = dpt[mt][2 * jp];
          const float(&d1)[4] = dpt[mt][2 * jp + 1];
          stsm_x4(at + dSb, pack_bf16(d0[0], d0[1]), pack_bf16(d0[2], d0[3]), pack_bf16(d1[0], d1[1]),
                  pack_bf16(d1[2], d1[3]));
        }
    } else {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const int r = kw + mt * 16 + g, c = qw / 8 + j;
          const float(&p)[4] = st[mt][j];
          const float(&ds)[4] = dpt[mt][j];
          *reinterpret_cast<std::uint32_t*>(tile(L::P) + swz<BM>(r, c) + 2 * t) = pack_bf16(p[0], p[1]);
          *reinterpret_cast<std::uint32_t*>(tile(L::P) + swz<BM>(r + 8, c) + 2 * t) = pack_bf16(p[2], p[3]);
          *reinterpret_cast<std::uint32_t*>(tile(L::dS) + swz<BM>(r, c) + 2 * t) = pack_bf16(ds[0], ds[1]);
          *reinterpret_cast<std::uint32_t*>(tile(L::dS) + swz<BM>(r + 8, c) + 2 * t) = pack_bf16(ds[2], ds[3]);
        }
    }
    // bit 9: dO^T / Q^T fragments of the first dV/dK k-step (this step's Q/dO: visible already)
    std::uint32_t ob0[DH / 16][4], qb0[DH / 16][4];  // B^T of k-step 0: [16 queries, 16 d] bf16 each
    if constexpr (C::kPrefetch) bwd_load_dkv0(w, qo, doo, ob0, qb0);
    __syncthreads();  // P^T and dS^T of all warps in shared memory
    if constexpr (C::kOneBar) issue_next();  // every warp is done with step it-1: its buffer is free

    // dV += P^T dO (WHICH bit 0) and/or dK += dS^T Q (bit 1)  (32 keys x D/2 per warp, k = BM queries)
    auto dq_phase = [&] { bwd_dq<D, VAR>(a, b, S, g, t, qr, dqc, h, m0, at_ds, bt_k, dSb); };
    // bit 6: the partner warp's queries, A fragments read back from shared memory
    auto dkv_partner = [&](auto which) { bwd_dkv_partner<D, VAR>(which, a_pds_o, Pb, dSb, qw_o, dkv_kstep); };
    if constexpr (C::kOwnRegs && C::kSplitDkv) {
      dkv_partner(std::integral_constant<int, 1>{});
      dq_phase();
      dkv_partner(std::integral_constant<int, 2>{});
    } else if constexpr (C::kOwnRegs) {
      dkv_partner(std::integral_constant<int, 3>{});
      dq_phase();
    } else if constexpr (C::kSplitDkv) {
      bwd_dkv<D, VAR, 1>(w, Pb, dSb, qo, doo, ob0, qb0, dk, dv);
      dq_phase();
      bwd_dkv<D, VAR, 2>(w, Pb, dSb, qo, doo, ob0, qb0, dk, dv);
    } else {
      bwd_dkv<D, VAR, 3>(w, Pb, dSb, qo, doo, ob0, qb0, dk, dv);
      dq_phase();
    }
    if constexpr (C::kPrefetch) bwd_load_k0(w, fk0);  // next step's first K fragments, ahead of its barrier
  }

  bwd_epilogue<D, VAR>(smem_raw, a, p, w, dk, dv);
}

// memset + preprocess, then main(args) (the main kernel's launch), then the dq conversion
template <int D, class Main>
cudaError_t run_bwd(const AttnBwdParams& p, cudaStream_t stream, Main&& main) {
  const Workspace ws = carve(p.workspace, p.B, p.S, p.Hq, p.D);
  const std::int64_t S_pad = padded_rows(p.S);
  cudaError_t err = cudaMemsetAsync(ws.dq_accum, 0, static_cast<std::size_t>(p.B * p.S * p.Hq * D) * 4, stream);
  if (err != cudaSuccess) return err;
  const std::int64_t rows = p.B * p.Hq * S_pad;
  const unsigned pre_blocks = static_cast<unsigned>((rows * 32 + 255) / 256);
  bwd_preprocess<D><<<pre_blocks, 256, 0, stream>>>(p.o, p.dout, p.lse, ws.lse2, ws.delta, static_cast<int>(p.S),
                                                    static_cast<int>(S_pad), static_cast<int>(p.Hq), rows);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;

  const BwdArgs a{p.q, p.k, p.v, p.dout, ws.lse2, ws.delta, ws.dq_accum, p.dk, p.dv,
                  static_cast<int>(p.S), static_cast<int>(S_pad), static_cast<int>(p.Hq), static_cast<int>(p.Hkv),
                  p.scale, p.scale * kLog2e};
  if ((err = main(a)) != cudaSuccess) return err;

  const std::int64_t n4 = p.B * p.S * p.Hq * D / 4;
  const unsigned conv_blocks = static_cast<unsigned>(std::min<std::int64_t>((n4 + 255) / 256, 132 * 16));
  bwd_convert_dq<<<conv_blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(ws.dq_accum),
                                                  reinterpret_cast<uint2*>(p.dq), n4, p.scale);
  return cudaGetLastError();
}

template <int D, bool CAUSAL, int VAR>
cudaError_t launch_bwd(const AttnBwdParams& p, cudaStream_t stream) {
  return run_bwd<D>(p, stream, [&](const BwdArgs& a) {
    constexpr int smem = BwdSmem<D, BwdCfg<D, VAR>::BM, BwdCfg<D, VAR>::kOneBar>::bytes;
    auto kern = bwd_kernel<D, CAUSAL, VAR>;
    cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    const dim3 grid(static_cast<unsigned>((p.S + kBwdBN - 1) / kBwdBN), static_cast<unsigned>(p.Hkv),
                    static_cast<unsigned>(p.B));
    kern<<<grid, kBwdNW * 32, smem, stream>>>(a);
    return cudaGetLastError();
  });
}

// Arguments the backward accepts (else cudaErrorInvalidValue)
inline bool bwd_params_ok(const AttnBwdParams& p) {
  if (p.D != 64 && p.D != 128) return false;
  if (p.S < 1 || p.B < 1 || p.Hq < 1 || p.Hkv < 1 || p.Hq % p.Hkv != 0) return false;
  if (p.S > (1LL << 30) || p.B > 65535 || p.Hkv > 65535) return false;
  return p.q && p.k && p.v && p.o && p.dout && p.lse && p.dq && p.dk && p.dv && p.workspace;
}

inline std::size_t bwd_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t D) {
  if (B < 1 || S < 1 || Hq < 1 || D < 1) return 0;
  return dq_accum_bytes(B, S, Hq, D) + 2 * round256(static_cast<std::size_t>(B * Hq * padded_rows(S)) * 4);
}

// the wgmma main kernel (D = 128, sm_90a) between the shared preprocess and dq conversion
inline cudaError_t launch_bwd_sm90a(const AttnBwdParams& p, cudaStream_t stream) {
  return run_bwd<128>(p, stream, [&](const BwdArgs& a) {
    return launch_bwd_main_sm90a(a, static_cast<int>(p.B), p.causal, stream);
  });
}

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
