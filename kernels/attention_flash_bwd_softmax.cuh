#pragma once
// Flash attention backward (mma.sync), part 3 of 4 (the overview and the kernel:
// attention_flash_bwd.cuh): the first half of a step, S^T = K Q^T and dP^T = V dO^T, the softmax
// of bit 2 (P^T, dS^T) and the P^T/dS^T stores to shared memory. Private to kernels/ and the lab.
#include "kernels/attention_flash_bwd_tiles.cuh"

namespace ulysses::kernels {
namespace flash {
namespace {
// S^T = K Q^T, dP^T = V dO^T into st, dpt [2][NJ][4] fp32 (32 keys x BM/2 queries per warp), two
// passes (S^T, then dP^T) that keep fewer operand fragments live; kLoadMid without kOneBar:
// issue_next() between them. kSoftPipe: P^T = exp2(S^T*c - lse2) computed between the dP^T
// k-steps (unmasked; bwd_softmax masks). dep, fa, fb: scratch (the false dependencies, the A and
// B fragments of a k-step), the kernel body's arrays (see the comment above bwd_kernel).
template <int D, int VAR, class Lse2Of, class IssueNext>
__device__ __forceinline__ void bwd_st_dpt(const BwdArgs& a, const LdsmAddr<D>& a_kv, const LdsmAddr<D>& b_qdo,
                                           const std::uint32_t qo, const std::uint32_t doo,
                                           const std::uint32_t (&fk0)[2][4], const int qw, const int t,
                                           const std::uint32_t opaque_zero, Lse2Of& lse2_of, IssueNext& issue_next,
                                           std::uint32_t (&dep)[D / 16], std::uint32_t (&fa)[2][4],
                                           std::uint32_t (&fb)[4],
                                           float (&st)[2][BwdDims<D, VAR>::NJ][4],
                                           float (&dpt)[2][BwdDims<D, VAR>::NJ][4]) {
  using C = BwdCfg<D, VAR>;
  using L = typename BwdDims<D, VAR>::L;
  constexpr int NJ = BwdDims<D, VAR>::NJ;
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
#pragma unroll
  for (int pass = 0; pass < 2; ++pass) {
    const std::uint32_t a_off = pass == 0 ? L::K : L::V;
    const std::uint32_t b_off = pass == 0 ? qo : doo;
    float (&acc)[2][NJ][4] = pass == 0 ? st : dpt;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
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
}

// kSoftPipe (P^T already exponentiated by bwd_st_dpt): the mask on st (keys beyond S; causal keys
// after the query) and dS^T = P^T (dP^T - delta) in dpt; Db: the step's delta. (Without kSoftPipe
// the softmax stays in the kernel body: as a function, by value or by reference, its mask branch
// was unswitched and the variants without bit 2 got other SASS.)
template <int D, bool CAUSAL, int VAR>
__device__ __forceinline__ void bwd_softmax(const float* Db, const bool need_mask, const int S, const int n0,
                                            const int m0, const int kw, const int qw, const int g, const int t,
                                            float (&st)[2][BwdDims<D, VAR>::NJ][4],
                                            float (&dpt)[2][BwdDims<D, VAR>::NJ][4]) {
  constexpr int NJ = BwdDims<D, VAR>::NJ;
  static_assert(BwdCfg<D, VAR>::kSoftPipe, "without bit 2 the softmax is in the kernel body");
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
}

// P^T, dS^T (st, dpt) to shared memory as bf16 (P^T at byte offset Pb, dS^T at dSb); bit 6: also
// the dV/dK k-steps over the warp's own queries (dkv_kstep) from the packed fragments pf, sf
// (scratch: the kernel body's arrays, see the comment above bwd_kernel).
template <int D, int VAR, class KStep>
__device__ __forceinline__ void bwd_store_pds(unsigned char* smem_raw, const LdsmAddr<BwdDims<D, VAR>::BM>& st_pds,
                                              const std::uint32_t Pb, const std::uint32_t dSb, const int kw,
                                              const int qw, const int g, const int t, KStep& dkv_kstep,
                                              std::uint32_t (&pf)[BwdDims<D, VAR>::NJ / 2][2][4],
                                              std::uint32_t (&sf)[BwdDims<D, VAR>::NJ / 2][2][4],
                                              float (&st)[2][BwdDims<D, VAR>::NJ][4],
                                              float (&dpt)[2][BwdDims<D, VAR>::NJ][4]) {
  using C = BwdCfg<D, VAR>;
  using L = typename BwdDims<D, VAR>::L;
  constexpr int BM = BwdDims<D, VAR>::BM, NJ = BwdDims<D, VAR>::NJ;
  auto tile = [&](int off) { return reinterpret_cast<__nv_bfloat16*>(smem_raw + off); };
  if constexpr (C::kOwnRegs) {
    // P^T, dS^T of the warp's keys x own queries, packed once as A fragments (k-step jp): stored
    // for the partner warp, used for the own k-steps before the barrier
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
}

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
