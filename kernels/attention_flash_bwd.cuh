#pragma once
// Flash attention backward kernels (FlashAttention-2 structure, mma.sync on sm_80+/sm_90), part
// 4 of 4: the main kernel and the launches (parts 1-3: attention_flash_bwd_tiles.cuh (set-up,
// copies), attention_flash_bwd_softmax.cuh (S^T, dP^T, softmax, P^T/dS^T stores),
// attention_flash_bwd_grads.cuh (dV, dK, dQ, epilogue)). The templates are shared by
// kernels/attention_flash_bwd.cu (which instantiates the defaults) and the lab build of the tuning
// variants (bench/attn/attn_flash_lab.cu).
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
#include <type_traits>

#include "kernels/attention_flash_bwd_grads.cuh"
#include "kernels/attention_flash_bwd_softmax.cuh"

namespace ulysses::kernels {
namespace flash {
namespace {

// Warp layouts (8 warps, BN = 128 keys, BM = 64 or 128 queries per step):
//   S^T, dP^T (keys x queries): warp -> keys 32*(w%4).., queries (BM/2)*(w/4)..  (2 x BM/16 MMA tiles)
//   dV, dK    (keys x d):       warp -> keys 32*(w%4).., d (D/2)*(w/4)..          (2 x D/16 tiles)
//   dQ        (queries x d):    warp -> queries 32*(w%WQ).., d DQ*(w/WQ)..        (WQ = BM/32, DQ = D*WQ/8)
// P^T and dS^T go through shared memory (bf16) between the first and the other two.
// Top to bottom: bwd_load_kv, bwd_prologue (step 0's copies); per step bwd_step_begin (wait),
// bwd_issue_next (next step's copies), bwd_st_dpt (S^T, dP^T), bwd_softmax (P^T, dS^T; without
// bit 2 in the body), bwd_store_pds (P^T/dS^T to shared memory; bit 6: own k-steps, bwd_dkv_kstep), bwd_load_dkv0,
// barrier, bwd_dkv or bwd_dkv_partner and bwd_dq (dQ and its atomics); bwd_epilogue.
// The functions are __forceinline__ and take the body's scalars by value and its arrays by
// reference, the scratch fragments included (declared here, not in the function): with a local
// array in the function, or the scalars by reference, the PTX differed (virtual register numbers,
// the operand order of an or) and ptxas made other SASS. Byte-identical .text of the variants
// before/after a change, checked with bench/attn/cubin_sections.py, is the rule.
template <int D, bool CAUSAL, int VAR>
__global__ void __launch_bounds__(kBwdNW * 32, 1) bwd_kernel(const BwdArgs a) {
  using C = BwdCfg<D, VAR>;
  using T = BwdDims<D, VAR>;  // BM, BN, DH, NJ, WQ, DQ and the shared-memory layout L
  using L = typename T::L;
  constexpr int BM = T::BM, BN = T::BN, DH = T::DH, NJ = T::NJ, WQ = T::WQ, DQ = T::DQ;
  extern __shared__ __align__(1024) unsigned char smem_raw[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n_block = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int n0 = n_block * BN;
  const int group = a.H / a.H_kv;

  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * D;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * D;
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
    std::uint32_t dep[D / 16];  // kSoftPipe: false dependency per k-step
    std::uint32_t fa[2][4];     // A: K or V 2 x [16 keys, 16 d] bf16
    std::uint32_t fb[4];        // B: Q or dO [16 queries, 16 d] bf16
    bwd_st_dpt<D, VAR>(a, a_kv, b_qdo, qo, doo, fk0, qw, t, opaque_zero, lse2_of, issue_next, dep, fa, fb, st, dpt);

    // P^T (masked: keys beyond S; causal keys after the query), dS^T = P^T (dP^T - delta);
    // both to shared memory as bf16 (bwd_store_pds)
    const float* Lb = lse2_of();
    const float* Db = delta_of();
    const bool need_mask = (n0 + BN > S) || (CAUSAL && m0 < n0 + BN - 1);
    if constexpr (C::kSoftPipe) {
      bwd_softmax<D, CAUSAL, VAR>(Db, need_mask, S, n0, m0, kw, qw, g, t, st, dpt);
    } else {  // P^T = exp2(S^T*c - lse2), masked, and dS^T here (see bwd_softmax)
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
    std::uint32_t pf[NJ / 2][2][4], sf[NJ / 2][2][4];  // bit 6: A: 2 x [16 keys, 16 q] bf16 per k-step
    bwd_store_pds<D, VAR>(smem_raw, st_pds, Pb, dSb, kw, qw, g, t, dkv_kstep, pf, sf, st, dpt);
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

// memset + preprocess, then main(args) (the main kernel's launch), then the dq conversion (dq_frag: dq_accum in
// the fragment layout of variant 106496 at D = 128, 114688 at D = 64: attention_flash_sm90a.hpp dq_frag_block;
// FRAG_BM = 128: in the 128-row q tiles' layout of variant 245760 at D = 64, dq_frag_q128_block, whatever dq_frag)
template <int D, int FRAG_BM = 64, class Main>
cudaError_t run_bwd(const AttnBwdParams& p, cudaStream_t stream, Main&& main, bool dq_frag = false) {
  const Workspace ws = carve(p.workspace, p.B, p.S, p.H, p.D);
  const std::int64_t S_pad = padded_rows(p.S);
  cudaError_t err = cudaMemsetAsync(ws.dq_accum, 0, static_cast<std::size_t>(p.B * p.S * p.H * D) * 4, stream);
  if (err != cudaSuccess) return err;
  const std::int64_t rows = p.B * p.H * S_pad;
  const unsigned pre_blocks = static_cast<unsigned>((rows * 32 + 255) / 256);
  bwd_preprocess<D><<<pre_blocks, 256, 0, stream>>>(p.o, p.dout, p.lse, ws.lse2, ws.delta, static_cast<int>(p.S),
                                                    static_cast<int>(S_pad), static_cast<int>(p.H), rows);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;

  const BwdArgs a{p.q, p.k, p.v, p.dout, ws.lse2, ws.delta, ws.dq_accum, p.dk, p.dv,
                  static_cast<int>(p.S), static_cast<int>(S_pad), static_cast<int>(p.H), static_cast<int>(p.H_kv),
                  p.scale, p.scale * kLog2e};
  if ((err = main(a)) != cudaSuccess) return err;

  const std::int64_t n4 = p.B * p.S * p.H * D / 4;
  const unsigned conv_blocks = static_cast<unsigned>(std::min<std::int64_t>((n4 + 255) / 256, 132 * 16));
  if (dq_frag || FRAG_BM == 128) {  // one CTA per block of the full q tiles, then 256 pairs of the tail rows per CTA
    const std::int64_t frag_blocks =
        p.B * p.H * (p.S / FRAG_BM) * 2 + (p.B * p.H * (p.S % FRAG_BM) * (D / 2) + 255) / 256;
    if (frag_blocks > 0x7fffffff) return cudaErrorInvalidValue;
    bwd_convert_dq_frag<D, FRAG_BM><<<static_cast<unsigned>(frag_blocks), 256, 0, stream>>>(
        reinterpret_cast<const float2*>(ws.dq_accum), reinterpret_cast<std::uint32_t*>(p.dq), static_cast<int>(p.B),
        static_cast<int>(p.S), static_cast<int>(p.H), p.scale);
    return cudaGetLastError();
  }
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
    const dim3 grid(static_cast<unsigned>((p.S + kBwdBN - 1) / kBwdBN), static_cast<unsigned>(p.H_kv),
                    static_cast<unsigned>(p.B));
    kern<<<grid, kBwdNW * 32, smem, stream>>>(a);
    return cudaGetLastError();
  });
}

// Arguments the backward accepts (else cudaErrorInvalidValue)
inline bool bwd_params_ok(const AttnBwdParams& p) {
  if (p.D != 64 && p.D != 128) return false;
  if (p.S < 1 || p.B < 1 || p.H < 1 || p.H_kv < 1 || p.H % p.H_kv != 0) return false;
  if (p.S > (1LL << 30) || p.B > 65535 || p.H_kv > 65535) return false;
  return p.q && p.k && p.v && p.o && p.dout && p.lse && p.dq && p.dk && p.dv && p.workspace;
}

inline std::size_t bwd_workspace_bytes(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D) {
  if (B < 1 || S < 1 || H < 1 || D < 1) return 0;
  return dq_accum_bytes(B, S, H, D) + 2 * round256(static_cast<std::size_t>(B * H * padded_rows(S)) * 4);
}

// the wgmma main kernel (D = 128, sm_90a) of variant v (2048, 8192, 40960, 106496 or 368640) between the shared preprocess
// and dq conversion
inline cudaError_t launch_bwd_sm90a(const AttnBwdParams& p, cudaStream_t stream, int v) {
  const bool frag = sm90a_bwd_dq_frag(v);
  return run_bwd<128>(
      p, stream,
      [&](const BwdArgs& a) {
        const int B = static_cast<int>(p.B);
        if (v == kBwdVariantSm90aTma3DqBulkProducer) return launch_bwd_main_sm90a_tma3_dq_bulk_producer(a, B, p.causal, stream);
        if (frag) return launch_bwd_main_sm90a_tma3_dq_bulk(a, B, p.causal, stream);
        if (v == kBwdVariantSm90aTma3DqUnderDk) return launch_bwd_main_sm90a_tma3_dq_under_dk(a, B, p.causal, stream);
        if (v == kBwdVariantSm90aTma3) return launch_bwd_main_sm90a_tma3(a, B, p.causal, stream);
        return launch_bwd_main_sm90a(a, B, p.causal, stream);
      },
      frag);
}

// The wgmma backward at head dim 64 (variant 16384, 114688 with its fragment-layout dq_accum, or 245760 with the
// 128-row q tiles' one): preprocess, main kernel, dq conversion.
inline cudaError_t launch_bwd_sm90a_d64(const AttnBwdParams& p, cudaStream_t stream, int v) {
  if (v == kBwdVariantSm90aD64Q128) {
    return run_bwd<64, 128>(p, stream, [&](const BwdArgs& a) {
      return launch_bwd_main_sm90a_d64_q128(a, static_cast<int>(p.B), p.causal, stream);
    });
  }
  const bool frag = sm90a_bwd_dq_frag(v);
  return run_bwd<64>(
      p, stream,
      [&](const BwdArgs& a) {
        if (frag) return launch_bwd_main_sm90a_d64_dq_bulk(a, static_cast<int>(p.B), p.causal, stream);
        return launch_bwd_main_sm90a_d64(a, static_cast<int>(p.B), p.causal, stream);
      },
      frag);
}

}  // namespace
}  // namespace flash
}  // namespace ulysses::kernels
