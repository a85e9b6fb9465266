#pragma once
// Flash attention forward kernels (FlashAttention-2 structure, mma.sync on sm_80+/sm_90): the
// templates, shared by kernels/attention_flash_fwd.cu (which instantiates the defaults) and
// the lab build of the tuning variants (bench/attn/attn_flash_lab.cu).
//
// One CTA per (BM query rows, q head, batch); NW warps, each owning BM/NW = 32 query rows
// (two m16 tiles, so every K/V fragment read from shared memory feeds two MMAs). The CTA walks
// the key tiles of BN rows: S = Q K^T (fp32), causal/ragged masks only on tiles that need them,
// online softmax in registers (exp2 with scale*log2e folded in), P converted in registers to
// bf16 A fragments, O += P V. K and V tiles arrive by cp.async, V's copy overlapping Q K^T and
// the next K's copy overlapping P V. GQA: q head h reads kv head h / (H/H_kv) in place.
#include <cmath>

#include "kernels/attention_flash.hpp"
#include "kernels/attention_flash_common.cuh"
#include "kernels/attention_flash_sm90a.hpp"

namespace ulysses::kernels {
namespace flash {
namespace {

template <int D, int BM, int BN, int NW, bool CAUSAL>
__global__ void __launch_bounds__(NW * 32, 2) fwd_kernel(const FwdArgs a) {
  constexpr int NT = NW * 32;
  constexpr int MT = BM / (16 * NW);  // m16 tiles per warp
  constexpr int NTILE = BN / 8;       // n8 tiles of S per row block
  constexpr int DT = D / 8;           // n8 tiles of O
  static_assert(MT >= 1 && BM == MT * 16 * NW, "BM must be 16*NW*MT");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __nv_bfloat16* Qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Ks = Qs + BM * D;
  __nv_bfloat16* Vs = Ks + BN * D;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int m_block = CAUSAL ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;  // long rows first
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.H / a.H_kv);
  const int S = a.S;
  const int m0 = m_block * BM;

  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * D;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * D;
  const __nv_bfloat16* qg = a.q + (static_cast<std::int64_t>(b) * S + m0) * ldq + h * D;
  const __nv_bfloat16* kg = a.k + static_cast<std::int64_t>(b) * S * ldk + hk * D;
  const __nv_bfloat16* vg = a.v + static_cast<std::int64_t>(b) * S * ldk + hk * D;

  const int kv_end = CAUSAL ? min(S, m0 + BM) : S;  // keys [0, kv_end) can matter
  const int n_tiles = (kv_end + BN - 1) / BN;

  load_tile<BM, D, NT>(Qs, qg, ldq, S - m0, tid);
  load_tile<BN, D, NT>(Ks, kg, ldk, S, tid);
  cp_async_commit();

  float o[MT][DT][4];
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int j = 0; j < DT; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.f;
    m_run[mt][0] = m_run[mt][1] = -INFINITY;
    l_run[mt][0] = l_run[mt][1] = 0.f;
  }

  const int row_w = warp * MT * 16;  // first row of this warp inside the tile
  // ldmatrix lanes: Q as A (rows, k chunk by lane/16), K as "col" B (rows by lane/16),
  // V as B through .trans (rows by lane/8 % 2, d chunk by lane/16)
  const LdsmAddr<D> q_lds(Qs, row_w + (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);
  const LdsmAddr<D> k_lds(Ks, (lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);
  const LdsmAddr<D> v_lds(Vs, (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);
  for (int n = 0; n < n_tiles; ++n) {
    const int n0 = n * BN;
    cp_async_wait<0>();
    __syncthreads();  // K[n] (and Q) landed; every warp is done with V[n-1]
    load_tile<BN, D, NT>(Vs, vg + static_cast<std::int64_t>(n0) * ldk, ldk, S - n0, tid);
    cp_async_commit();

    // S = Q K^T
    float s[MT][NTILE][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < NTILE; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      std::uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        ldsm_x4(qa[mt], q_lds.at(ks, mt * 16));
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        std::uint32_t kb[4];
        ldsm_x4(kb, k_lds.at(ks, np * 16));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(s[mt][2 * np], qa[mt], kb[0], kb[1]);
          mma16816(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    // masks: keys beyond S (last tile), keys after the query (causal, tiles crossing the diagonal)
    const bool need_mask = (n0 + BN > S) || (CAUSAL && n0 + BN - 1 > m0);
    if (need_mask) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = n0 + j * 8 + 2 * t + (e & 1);
            const int row = m0 + row_w + mt * 16 + g + (e >> 1) * 8;
            if (key >= S || (CAUSAL && key > row)) s[mt][j][e] = -INFINITY;
          }
    }

    // online softmax (rows g and g+8 of each m tile; a row lives in the 4 threads of a quad)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = m_run[mt][hr];
#pragma unroll
        for (int j = 0; j < NTILE; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * hr], s[mt][j][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_use = (mx == -INFINITY) ? 0.f : mx;  // fully masked row so far
        const float corr = exp2f((m_run[mt][hr] - m_use) * a.scale_log2);
        m_run[mt][hr] = mx;
        const float bias = m_use * a.scale_log2;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < NTILE; ++j) {
          const float p0 = exp2f(fmaf(s[mt][j][2 * hr], a.scale_log2, -bias));
          const float p1 = exp2f(fmaf(s[mt][j][2 * hr + 1], a.scale_log2, -bias));
          s[mt][j][2 * hr] = p0;
          s[mt][j][2 * hr + 1] = p1;
          sum += p0 + p1;
        }
        l_run[mt][hr] = l_run[mt][hr] * corr + sum;  // per-thread partial; quad-reduced at the end
#pragma unroll
        for (int j = 0; j < DT; ++j) {
          o[mt][j][2 * hr] *= corr;
          o[mt][j][2 * hr + 1] *= corr;
        }
      }

    cp_async_wait<0>();
    __syncthreads();  // V[n] landed; every warp is done with K[n]
    if (n + 1 < n_tiles) {
      load_tile<BN, D, NT>(Ks, kg + static_cast<std::int64_t>(n0 + BN) * ldk, ldk, S - n0 - BN, tid);
    }
    cp_async_commit();

    // O += P V
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      std::uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t vb[4];
        ldsm_x4_t(vb, v_lds.at(dp, kk * 16));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
          mma16816(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }

  // epilogue: O /= l, lse = m*scale + log(l); O staged through this warp's own rows of Qs
  const std::int64_t lse_base = (static_cast<std::int64_t>(b) * a.H + h) * S;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = l_run[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int rloc = row_w + mt * 16 + g + hr * 8;
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        *reinterpret_cast<std::uint32_t*>(Qs + swz<D>(rloc, j) + 2 * t) =
            pack_bf16(o[mt][j][2 * hr] * inv, o[mt][j][2 * hr + 1] * inv);
      }
      const int row = m0 + rloc;
      if (t == 0 && row < S) {
        a.lse[lse_base + row] = l > 0.f ? m_run[mt][hr] * a.scale + logf(l) : INFINITY;
      }
    }
  __syncwarp();
  constexpr int ROWS_W = MT * 16;
  store_tile<ROWS_W, D, 32>(a.o + (static_cast<std::int64_t>(b) * S + m0 + row_w) * ldq + h * D, ldq,
                            Qs + row_w * D, S - m0 - row_w, lane);
}

// The arguments of the kernels for p (scale_log2 = scale * log2(e))
inline FwdArgs fwd_args(const AttnFwdParams& p) {
  return FwdArgs{p.q, p.k, p.v, p.o, p.lse, static_cast<int>(p.S), static_cast<int>(p.H), static_cast<int>(p.H_kv),
                 p.scale, p.scale * kLog2e};
}

template <int D, int BM, int BN, int NW, bool CAUSAL>
cudaError_t launch_fwd(const AttnFwdParams& p, cudaStream_t stream) {
  const FwdArgs a = fwd_args(p);
  constexpr int smem = (BM + 2 * BN) * D * 2;
  auto kern = fwd_kernel<D, BM, BN, NW, CAUSAL>;
  cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.S + BM - 1) / BM), static_cast<unsigned>(p.H),
                  static_cast<unsigned>(p.B));
  kern<<<grid, NW * 32, smem, stream>>>(a);
  return cudaGetLastError();
}

// Arguments the forward accepts (else cudaErrorInvalidValue)
inline bool fwd_params_ok(const AttnFwdParams& p) {
  if (p.D != 64 && p.D != 128) return false;
  if (p.S < 1 || p.B < 1 || p.H < 1 || p.H_kv < 1 || p.H % p.H_kv != 0) return false;
  if (p.S > (1LL << 30) || p.B > 65535 || p.H > 65535) return false;
  return p.q && p.k && p.v && p.o && p.lse;
}

// The mma.sync forward at p.D; D64_WIDE: 128-key tiles for D=64 (else 64; D=128 always 64)
// (forward variant bit 1 of bench/attn/attn_tuning.hpp)
template <bool D64_WIDE>
cudaError_t dispatch_fwd_mma(const AttnFwdParams& p, cudaStream_t stream) {
  if (p.D == 128) {
    return p.causal ? launch_fwd<128, 128, 64, 4, true>(p, stream)
                    : launch_fwd<128, 128, 64, 4, false>(p, stream);
  }
  if constexpr (D64_WIDE) {
    return p.causal ? launch_fwd<64, 128, 128, 4, true>(p, stream)
                    : launch_fwd<64, 128, 128, 4, false>(p, stream);
  } else {
    return p.causal ? launch_fwd<64, 128, 64, 4, true>(p, stream) : launch_fwd<64, 128, 64, 4, false>(p, stream);
  }
}

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
