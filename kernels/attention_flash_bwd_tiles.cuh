#pragma once
// Flash attention backward (mma.sync), part 1 of 4 (the overview and the kernel:
// attention_flash_bwd.cuh): the workspace, the preprocess and dq conversion kernels, the main
// kernel's variants (BwdCfg), shapes and shared-memory layout, the thread's and warp's places and
// the step copies (K, V once; Q, dO, lse2, delta per step). Private to kernels/ and the lab.
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
  float* dq_accum;  // [B, S, H, D]
  float* lse2;      // [B, H, S_pad]
  float* delta;     // [B, H, S_pad]
};

std::size_t dq_accum_bytes(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D) {
  return round256(static_cast<std::size_t>(B * S * H * D) * 4);
}

Workspace carve(void* ws, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D) {
  auto* base = static_cast<unsigned char*>(ws);
  const std::size_t dq_bytes = dq_accum_bytes(B, S, H, D);
  const std::size_t row_bytes = round256(static_cast<std::size_t>(B * H * padded_rows(S)) * 4);
  return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + dq_bytes),
          reinterpret_cast<float*>(base + dq_bytes + row_bytes)};
}

// one warp per (b, h, row) of the padded row space
template <int D>
__global__ void bwd_preprocess(const __nv_bfloat16* __restrict__ o, const __nv_bfloat16* __restrict__ dout,
                               const float* __restrict__ lse, float* __restrict__ lse2, float* __restrict__ delta,
                               int S, int S_pad, int H, std::int64_t rows_total) {
  const std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= rows_total) return;
  const int s = static_cast<int>(w % S_pad);
  const std::int64_t bh = w / S_pad;  // b * H + h
  if (s >= S) {
    if (lane == 0) {
      lse2[w] = INFINITY;
      delta[w] = 0.f;
    }
    return;
  }
  const std::int64_t b = bh / H, h = bh % H;
  const std::int64_t off = ((b * S + s) * H + h) * D;
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

// dq [B, S, H, D] bf16 = scale * dq_accum in the fragment layout of variants 106496 (D = 128) and 114688 (D = 64),
// BM = 64 (attention_flash_sm90a.hpp dq_frag_block, dq_frag_tail_row), or of variant 245760's 128-row q tiles at
// D = 64, BM = 128 (dq_frag_q128_block, dq_frag_q128_tail_row). 256 threads per CTA: CTA x < B H (S / BM) 2 converts
// one block, [64 q x D/2 d] (BM = 64: the warpgroups split the columns) or [64 q x D d] (BM = 128: they split the
// rows), its (b, h, q tile, warpgroup) decoded once; the CTAs after it the tail rows (S % BM per (b, h)), 256 pairs
// each.
template <int D, int BM = 64>
__global__ void bwd_convert_dq_frag(const float2* __restrict__ acc, std::uint32_t* __restrict__ dq, int B, int S, int H,
                                    float scale) {
  static_assert(D == 64 || D == 128, "the wgmma backward's head dims");
  static_assert(BM == 64 || (BM == 128 && D == 64), "the 128-row q tiles' layout is D = 64's");
  constexpr int CB = BM == 64 ? D / 2 : D;  // columns of a block
  constexpr int P = CB / 4;                 // pairs per warpgroup thread in a block: 16, or 8 at D = 64, BM = 64
  const int tiles = S / BM, rem = S % BM;
  const std::int64_t blocks = static_cast<std::int64_t>(B) * H * tiles * 2;
  const std::int64_t ld = static_cast<std::int64_t>(H) * (D / 2);  // a row of dq in bf16 pairs
  const int x = threadIdx.x;
  if (static_cast<std::int64_t>(blockIdx.x) < blocks) {
    const int blk = static_cast<int>(blockIdx.x), wg = blk & 1, tile = blk >> 1;
    const int mt = tile % tiles, bh = tile / tiles, b = bh / H, h = bh % H;
    const int tw = x & 127, w4 = tw >> 5, g = (tw & 31) >> 2, t = tw & 3;
    const float2* src = acc + static_cast<std::int64_t>(blk) * (64 * CB / 2);
#pragma unroll
    for (int k = 0; k < P / 2; ++k) {
      const int p = 2 * k + (x >> 7);  // pair p of thread tw: float2 p * 128 + tw of the block
      const float2 v = src[p * 128 + tw];
      const int row = mt * BM + (BM == 128 ? wg * 64 : 0) + w4 * 16 + g + 8 * (p & 1);
      const int c2 = (BM == 64 ? wg * (D / 4) : 0) + (p >> 1) * 4 + t;
      dq[(static_cast<std::int64_t>(b) * S + row) * ld + h * (D / 2) + c2] = pack_bf16(v.x * scale, v.y * scale);
    }
    return;
  }
  const std::int64_t j = (static_cast<std::int64_t>(blockIdx.x) - blocks) * 256 + x;  // a pair of the tail rows
  if (rem == 0 || j >= static_cast<std::int64_t>(B) * H * rem * (D / 2)) return;
  constexpr int kRowShift = D == 128 ? 6 : 5;  // D / 2 pairs per row
  const int r = static_cast<int>(j >> kRowShift), c2 = static_cast<int>(j & (D / 2 - 1));
  const int bh = r / rem, b = bh / H, h = bh % H;
  const float2 v = acc[blocks * (64 * CB / 2) + j];
  dq[(static_cast<std::int64_t>(b) * S + tiles * BM + r % rem) * ld + h * (D / 2) + c2] = pack_bf16(v.x * scale, v.y * scale);
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
  const std::int64_t row_off = (static_cast<std::int64_t>(p.b) * a.H + h) * a.S_pad + m0;
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

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
