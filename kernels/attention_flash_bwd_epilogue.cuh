#pragma once
// Flash attention backward (mma.sync), part 2 of 3 (attention_flash_bwd.cuh has the overview and
// the kernel): the softmax (P^T, dS^T), dQ = dS K with its atomics into dq_accum, and the dK/dV
// epilogue. Private to kernels/ and the lab.
#include "kernels/attention_flash_bwd_mainloop.cuh"

namespace ulysses::kernels {
namespace flash {
namespace {
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
      float* dst = a.dq_accum + ((static_cast<std::int64_t>(b) * S + row) * a.H + h) * D + dqc + 2 * (t & ~1);
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
    const std::int64_t ld_row = static_cast<std::int64_t>(a.H) * D;  // dq_accum row stride
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
          float* dst = a.dq_accum + ((static_cast<std::int64_t>(b) * S + row) * a.H + h) * D + dqc + 2 * t;
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

// P^T (masked: keys beyond S; causal keys after the query) in st, dS^T = P^T (dP^T - delta) in
// dpt; Lb, Db: the step's lse2, delta (scalars by value: by reference the or-operands of the
// causal mask came in another order and the SASS changed).
template <int D, bool CAUSAL, int VAR>
__device__ __forceinline__ void bwd_softmax(const BwdArgs& a, const float* Lb, const float* Db,
                                            const bool need_mask, const int S, const int n0, const int m0,
                                            const int kw, const int qw, const int g, const int t,
                                            float (&st)[2][BwdDims<D, VAR>::NJ][4],
                                            float (&dpt)[2][BwdDims<D, VAR>::NJ][4]) {
  using C = BwdCfg<D, VAR>;
  constexpr int NJ = BwdDims<D, VAR>::NJ;
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
}

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
