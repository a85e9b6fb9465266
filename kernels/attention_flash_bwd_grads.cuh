#pragma once
// Flash attention backward (mma.sync), part 2 of 4 (the overview and the kernel:
// attention_flash_bwd.cuh): the second half of a step, dV += P^T dO, dK += dS^T Q, dQ = dS K with
// its atomics into dq_accum, and the dK/dV epilogue. Private to kernels/ and the lab.
#include "kernels/attention_flash_bwd_tiles.cuh"

namespace ulysses::kernels {
namespace flash {
namespace {
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

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
