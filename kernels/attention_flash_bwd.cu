// Flash attention backward (FlashAttention-2 structure, mma.sync on sm_80+/sm_90).
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

#include "kernels/attention_flash.hpp"
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

Workspace carve(void* ws, std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t D) {
  auto* base = static_cast<unsigned char*>(ws);
  const std::size_t dq_bytes = round256(static_cast<std::size_t>(B * S * Hq * D) * 4);
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

struct BwdArgs {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const __nv_bfloat16* dout;
  const float* lse2;
  const float* delta;
  float* dq_accum;
  __nv_bfloat16* dk;
  __nv_bfloat16* dv;
  int S, S_pad, Hq, Hkv;
  float scale, scale_log2;
};

template <int D, bool CAUSAL>
__global__ void __launch_bounds__(kBwdNW * 32, 1) bwd_kernel(const BwdArgs a) {
  constexpr int BM = kBwdBM, BN = kBwdBN, NW = kBwdNW, NT = NW * 32;
  constexpr int QT = BM / 8;  // n8 tiles of S^T (queries)
  constexpr int DT = D / 8;   // n8 tiles of dK, dV
  static_assert(BN == 16 * NW, "one m16 key tile per warp");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* Ks = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* Vs = Ks + BN * D;
  __nv_bfloat16* Qs = Vs + BN * D;   // [2][BM*D]
  __nv_bfloat16* dOs = Qs + 2 * BM * D;  // [2][BM*D]
  __nv_bfloat16* dSs = dOs + 2 * BM * D; // [BN][BM], swizzled
  float* Ls = reinterpret_cast<float*>(dSs + BN * BM);  // [2][BM]
  float* Ds = Ls + 2 * BM;                             // [2][BM]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n_block = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int n0 = n_block * BN;
  const int group = a.Hq / a.Hkv;

  const std::int64_t ldq = static_cast<std::int64_t>(a.Hq) * D;
  const std::int64_t ldk = static_cast<std::int64_t>(a.Hkv) * D;
  const std::int64_t kv_off = (static_cast<std::int64_t>(b) * S + n0) * ldk + hk * D;

  load_tile<BN, D, NT>(Ks, a.k + kv_off, ldk, S - n0, tid);
  load_tile<BN, D, NT>(Vs, a.v + kv_off, ldk, S - n0, tid);

  const int m_first = CAUSAL ? n0 / BM : 0;
  const int m_count = (S + BM - 1) / BM - m_first;
  const int steps = group * m_count;

  // issue the copies of step `it` into buffer `buf`
  auto load_step = [&](int it, int buf) {
    const int h = hk * group + it / m_count;
    const int m0 = (m_first + it % m_count) * BM;
    const std::int64_t q_off = (static_cast<std::int64_t>(b) * S + m0) * ldq + h * D;
    load_tile<BM, D, NT>(Qs + buf * BM * D, a.q + q_off, ldq, S - m0, tid);
    load_tile<BM, D, NT>(dOs + buf * BM * D, a.dout + q_off, ldq, S - m0, tid);
    const std::int64_t row_off = (static_cast<std::int64_t>(b) * a.Hq + h) * a.S_pad + m0;
    if (tid < BM / 4) {
      cp_async16(smem_addr(Ls + buf * BM + tid * 4), a.lse2 + row_off + tid * 4, true);
    } else if (tid < BM / 2) {
      const int i = tid - BM / 4;
      cp_async16(smem_addr(Ds + buf * BM + i * 4), a.delta + row_off + i * 4, true);
    }
  };
  load_step(0, 0);
  cp_async_commit();

  float dk[DT][4], dv[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j) {
    dk[j][0] = dk[j][1] = dk[j][2] = dk[j][3] = 0.f;
    dv[j][0] = dv[j][1] = dv[j][2] = dv[j][3] = 0.f;
  }
  const int kw = warp * 16;  // this warp's first key inside the tile

  for (int it = 0; it < steps; ++it) {
    const int buf = it & 1;
    const int h = hk * group + it / m_count;
    const int m0 = (m_first + it % m_count) * BM;
    cp_async_wait<0>();
    __syncthreads();  // step `it` landed; every warp is done with step it-1 (buffer buf^1, dSs)
    if (it + 1 < steps) load_step(it + 1, buf ^ 1);
    cp_async_commit();
    const __nv_bfloat16* Qb = Qs + buf * BM * D;
    const __nv_bfloat16* dOb = dOs + buf * BM * D;
    const float* Lb = Ls + buf * BM;
    const float* Db = Ds + buf * BM;

    // S^T = K Q^T and dP^T = V dO^T  (16 keys x BM queries per warp)
    float st[QT][4], dpt[QT][4];
#pragma unroll
    for (int j = 0; j < QT; ++j) {
      st[j][0] = st[j][1] = st[j][2] = st[j][3] = 0.f;
      dpt[j][0] = dpt[j][1] = dpt[j][2] = dpt[j][3] = 0.f;
    }
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      std::uint32_t ka[4], va[4];
      const int r = kw + (lane & 7) + ((lane >> 3) & 1) * 8;
      ldsm_x4(ka, smem_addr(Ks + swz<D>(r, ks * 2 + (lane >> 4))));
      ldsm_x4(va, smem_addr(Vs + swz<D>(r, ks * 2 + (lane >> 4))));
#pragma unroll
      for (int qp = 0; qp < BM / 16; ++qp) {
        std::uint32_t qb[4], ob[4];
        const int rq = qp * 16 + (lane & 7) + (lane >> 4) * 8;
        ldsm_x4(qb, smem_addr(Qb + swz<D>(rq, ks * 2 + ((lane >> 3) & 1))));
        ldsm_x4(ob, smem_addr(dOb + swz<D>(rq, ks * 2 + ((lane >> 3) & 1))));
        mma16816(st[2 * qp], ka, qb[0], qb[1]);
        mma16816(st[2 * qp + 1], ka, qb[2], qb[3]);
        mma16816(dpt[2 * qp], va, ob[0], ob[1]);
        mma16816(dpt[2 * qp + 1], va, ob[2], ob[3]);
      }
    }

    // P^T (masked: keys beyond S; causal keys after the query) and dS^T = P^T (dP^T - delta)
    const bool need_mask = (n0 + BN > S) || (CAUSAL && m0 < n0 + BN - 1);
#pragma unroll
    for (int j = 0; j < QT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = j * 8 + 2 * t + (e & 1);
        float p = exp2f(fmaf(st[j][e], a.scale_log2, -Lb[qc]));
        if (need_mask) {
          const int key = n0 + kw + g + (e >> 1) * 8;
          if (key >= S || (CAUSAL && key > m0 + qc)) p = 0.f;
        }
        st[j][e] = p;
        dpt[j][e] = p * (dpt[j][e] - Db[qc]);
      }

    // dV += P^T dO and dK += dS^T Q  (B operands: dO and Q, [query][d] -> ldmatrix.trans)
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      std::uint32_t pa[4], sa[4];
      pa[0] = pack_bf16(st[2 * kk][0], st[2 * kk][1]);
      pa[1] = pack_bf16(st[2 * kk][2], st[2 * kk][3]);
      pa[2] = pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]);
      pa[3] = pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3]);
      sa[0] = pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]);
      sa[1] = pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]);
      sa[2] = pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
      sa[3] = pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
      // dS^T (bf16) to shared memory for the dQ product: row = key, col = query
      const int c = kk * 2;
      *reinterpret_cast<std::uint32_t*>(dSs + swz<BM>(kw + g, c) + 2 * t) = sa[0];
      *reinterpret_cast<std::uint32_t*>(dSs + swz<BM>(kw + g + 8, c) + 2 * t) = sa[1];
      *reinterpret_cast<std::uint32_t*>(dSs + swz<BM>(kw + g, c + 1) + 2 * t) = sa[2];
      *reinterpret_cast<std::uint32_t*>(dSs + swz<BM>(kw + g + 8, c + 1) + 2 * t) = sa[3];
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t ob[4], qb[4];
        const int rq = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldsm_x4_t(ob, smem_addr(dOb + swz<D>(rq, dp * 2 + (lane >> 4))));
        ldsm_x4_t(qb, smem_addr(Qb + swz<D>(rq, dp * 2 + (lane >> 4))));
        mma16816(dv[2 * dp], pa, ob[0], ob[1]);
        mma16816(dv[2 * dp + 1], pa, ob[2], ob[3]);
        mma16816(dk[2 * dp], sa, qb[0], qb[1]);
        mma16816(dk[2 * dp + 1], sa, qb[2], qb[3]);
      }
    }
    __syncthreads();  // dS^T of all warps in shared memory

    // dQ_tile (BM x D) = dS K: warp w -> rows 16*(w%4).., cols (w/4)*D/2..
    {
      constexpr int DH = D / 2;
      const int rq0 = (warp & 3) * 16, dc0 = (warp >> 2) * DH;
      float acc[DH / 8][4];
#pragma unroll
      for (int j = 0; j < DH / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < BN / 16; ++ks) {
        std::uint32_t sa[4];
        const int rk = ks * 16 + (lane & 7) + (lane >> 4) * 8;
        ldsm_x4_t(sa, smem_addr(dSs + swz<BM>(rk, rq0 / 8 + ((lane >> 3) & 1))));
#pragma unroll
        for (int dp = 0; dp < DH / 16; ++dp) {
          std::uint32_t kb[4];
          const int rk2 = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          ldsm_x4_t(kb, smem_addr(Ks + swz<D>(rk2, dc0 / 8 + dp * 2 + (lane >> 4))));
          mma16816(acc[2 * dp], sa, kb[0], kb[1]);
          mma16816(acc[2 * dp + 1], sa, kb[2], kb[3]);
        }
      }
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int row = m0 + rq0 + g + hr * 8;
        if (row < S) {
          float* dst = a.dq_accum + ((static_cast<std::int64_t>(b) * S + row) * a.Hq + h) * D + dc0 + 2 * t;
#pragma unroll
          for (int j = 0; j < DH / 8; ++j) {
            atomicAdd(reinterpret_cast<float2*>(dst + j * 8), make_float2(acc[j][2 * hr], acc[j][2 * hr + 1]));
          }
        }
      }
    }
  }

  // dK (times scale) and dV: registers -> K/V tiles in shared memory -> global
  __syncthreads();  // every warp is done reading Ks (dQ) and Vs
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = kw + g + hr * 8;
#pragma unroll
    for (int j = 0; j < DT; ++j) {
      *reinterpret_cast<std::uint32_t*>(Ks + swz<D>(r, j) + 2 * t) =
          pack_bf16(dk[j][2 * hr] * a.scale, dk[j][2 * hr + 1] * a.scale);
      *reinterpret_cast<std::uint32_t*>(Vs + swz<D>(r, j) + 2 * t) = pack_bf16(dv[j][2 * hr], dv[j][2 * hr + 1]);
    }
  }
  __syncthreads();
  store_tile<BN, D, NT>(a.dk + kv_off, ldk, Ks, S - n0, tid);
  store_tile<BN, D, NT>(a.dv + kv_off, ldk, Vs, S - n0, tid);
}

template <int D>
constexpr int bwd_smem_bytes() {
  return (2 * kBwdBN * D + 4 * kBwdBM * D + kBwdBN * kBwdBM) * 2 + 4 * kBwdBM * 4;
}

template <int D, bool CAUSAL>
cudaError_t launch_bwd(const AttnBwdParams& p, cudaStream_t stream) {
  const Workspace ws = carve(p.workspace, p.B, p.S, p.Hq, p.D);
  const std::int64_t S_pad = padded_rows(p.S);
  cudaError_t err = cudaMemsetAsync(ws.dq_accum, 0, static_cast<std::size_t>(p.B * p.S * p.Hq * D) * 4, stream);
  if (err != cudaSuccess) return err;
  const std::int64_t rows = p.B * p.Hq * S_pad;
  const unsigned pre_blocks = static_cast<unsigned>((rows * 32 + 255) / 256);
  bwd_preprocess<D><<<pre_blocks, 256, 0, stream>>>(p.o, p.dout, p.lse, ws.lse2, ws.delta, static_cast<int>(p.S),
                                                    static_cast<int>(S_pad), static_cast<int>(p.Hq), rows);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;

  BwdArgs a{p.q, p.k, p.v, p.dout, ws.lse2, ws.delta, ws.dq_accum, p.dk, p.dv,
            static_cast<int>(p.S), static_cast<int>(S_pad), static_cast<int>(p.Hq), static_cast<int>(p.Hkv),
            p.scale, p.scale * kLog2e};
  constexpr int smem = bwd_smem_bytes<D>();
  auto kern = bwd_kernel<D, CAUSAL>;
  if ((err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.S + kBwdBN - 1) / kBwdBN), static_cast<unsigned>(p.Hkv),
                  static_cast<unsigned>(p.B));
  kern<<<grid, kBwdNW * 32, smem, stream>>>(a);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;

  const std::int64_t n4 = p.B * p.S * p.Hq * D / 4;
  const unsigned conv_blocks = static_cast<unsigned>(std::min<std::int64_t>((n4 + 255) / 256, 132 * 16));
  bwd_convert_dq<<<conv_blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(ws.dq_accum),
                                                  reinterpret_cast<uint2*>(p.dq), n4, p.scale);
  return cudaGetLastError();
}

}  // namespace
}  // namespace flash

std::size_t attn_bwd_flash_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t Hq, std::int64_t,
                                           std::int64_t D) {
  if (B < 1 || S < 1 || Hq < 1 || D < 1) return 0;
  return flash::round256(static_cast<std::size_t>(B * S * Hq * D) * 4) +
         2 * flash::round256(static_cast<std::size_t>(B * Hq * flash::padded_rows(S)) * 4);
}

cudaError_t attn_bwd_flash(const AttnBwdParams& p, cudaStream_t stream) {
  if (p.S < 1 || p.B < 1 || p.Hq < 1 || p.Hkv < 1 || p.Hq % p.Hkv != 0) return cudaErrorInvalidValue;
  if (p.S > (1LL << 30) || p.B > 65535 || p.Hkv > 65535) return cudaErrorInvalidValue;
  if (!p.q || !p.k || !p.v || !p.o || !p.dout || !p.lse || !p.dq || !p.dk || !p.dv || !p.workspace) {
    return cudaErrorInvalidValue;
  }
  if (p.D == 128) {
    return p.causal ? flash::launch_bwd<128, true>(p, stream) : flash::launch_bwd<128, false>(p, stream);
  }
  if (p.D == 64) {
    return p.causal ? flash::launch_bwd<64, true>(p, stream) : flash::launch_bwd<64, false>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ulysses::kernels
