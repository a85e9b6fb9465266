// The wgmma backward main kernel (sm_90a, D = 128; variant 2048): the kernel over the pieces of
// attention_flash_bwd_sm90a.cuh (layout and step described there), sm90a_usable() and its launch; and the
// launches of its TMA form with three stages (variant 8192: attention_flash_bwd_sm90a_tma.cuh), of that form in
// FlashAttention-3's step order (variant 40960), of 40960 with dQ by bulk reductions (106496) and of 106496 behind
// FlashAttention-3's producer warpgroup (368640, the default).
#include "kernels/attention_flash_bwd_sm90a.cuh"
#include "kernels/attention_flash_bwd_sm90a_tma.cuh"

namespace ulysses::kernels::flash {
namespace {

// (Tried and dropped, docs/ATTENTION.md: dQ staged in shared memory and added by bulk
// asynchronous reductions, cp.reduce.async.bulk, instead of the atomics: 294 vs 405 TFLOP/s.)
template <bool CAUSAL>
__global__ void __launch_bounds__(kNT, 1) bwd_kernel_sm90a(const BwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  using L = Sm90Smem;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors assume 1024-byte aligned tiles (base_offset 0)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, w4 = warp & 3;  // warpgroup, warp within it
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kBN, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int group = a.H / a.H_kv;
  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * kD;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * kD;
  const std::int64_t kv_off = (static_cast<std::int64_t>(b) * S + n0) * ldk + hk * kD;

  load_tile_sw128<kBN>(sbase + L::K, a.k + kv_off, ldk, S - n0, tid);
  load_tile_sw128<kBN>(sbase + L::V, a.v + kv_off, ldk, S - n0, tid);

  const int m_first = CAUSAL ? n0 / kBM : 0;
  const int m_count = (S + kBM - 1) / kBM - m_first;
  const int steps = group * m_count;

  // copies of step (head h, rows m0..) into buffer buf; nq valid rows (<= 0: all zero-filled)
  auto load_step = [&](int h, int m0, int buf, int nq) {
    const std::int64_t q_off = (static_cast<std::int64_t>(b) * S + m0) * ldq + h * kD;
    load_tile_sw128<kBM>(sbase + L::Q + buf * kBM * kD * 2, a.q + q_off, ldq, nq, tid);
    load_tile_sw128<kBM>(sbase + L::dO + buf * kBM * kD * 2, a.dout + q_off, ldq, nq, tid);
    const std::int64_t row_off = (static_cast<std::int64_t>(b) * a.H + h) * a.S_pad + m0;
    if (tid < kBM / 2) {  // 16 chunks of lse2, then 16 of delta (padding rows exist up to S_pad)
      const bool is_l = tid < kBM / 4;
      const int i = is_l ? tid : tid - kBM / 4;
      cp_async16(sbase + (is_l ? L::L : L::Dl) + buf * kBM * 4 + i * 16, (is_l ? a.lse2 : a.delta) + row_off + i * 4,
                 true);
    }
  };
  load_step(hk * group, m_first * kBM, 0, S - m_first * kBM);
  cp_async_commit();

  float dk[64], dv[64];  // [64 keys of wg x 128 d] accumulators (wgmma D layout)
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.f;

  // stmatrix lane address of dS^T: matrix mi = lane / 8 covers rows (mi & 1) * 8 + lane % 8 of
  // the warp's 16 keys and q chunk 2 jp + (mi >> 1)
  const int st_row = wg * 64 + w4 * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
  const std::uint32_t st_base = sbase + L::dS + st_row * 128;
  const int st_cb = lane >> 4;  // chunk offset 0/1

  const int key_base = n0 + wg * 64 + w4 * 16 + g;  // key of d[4j + 0/1]; +8 for d[4j + 2/3]
  int h = hk * group, mi = 0;
  for (int it = 0; it < steps; ++it) {
    const int buf = it & 1;
    const int m0 = (m_first + mi) * kBM, hq = h;  // this step's q tile and q head
    cp_async_wait<0>();
    wgmma::fence_proxy_async();
    __syncthreads();  // step `it` landed; every warp is done with step it-1 (buffer buf^1, dS^T)
    {
      // next step's copies (after the last step: a zero-fill of the idle buffer, no branch)
      const bool wrap = mi + 1 == m_count;
      const int nh = wrap ? h + 1 : h, nmi = wrap ? 0 : mi + 1;
      const bool more = it + 1 < steps;
      const int nm0 = (m_first + nmi) * kBM;
      load_step(more ? nh : h, more ? nm0 : m0, buf ^ 1, more ? S - nm0 : 0);
      cp_async_commit();
      h = nh, mi = nmi;
    }
    const std::uint32_t qs = sbase + L::Q + buf * kBM * kD * 2, dos = sbase + L::dO + buf * kBM * kD * 2;
    const float* lse2 = reinterpret_cast<const float*>(smem_raw + L::L) + buf * kBM;
    const float* delta = reinterpret_cast<const float*>(smem_raw + L::Dl) + buf * kBM;

    // S^T = K_wg Q^T and dP^T = V_wg dO^T: two commit groups, the softmax overlaps the second
    float st[32], dp[32];
    sm90a_issue_st_dp(st, dp, sbase, qs, dos, wg);
    wgmma::wait<1>();
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(st[i]);

    // P^T (keys beyond S and, causal, keys after the query: 0)
    const bool need_mask = (n0 + kBN > S) || (CAUSAL && m0 < n0 + kBN - 1);
    sm90a_softmax<CAUSAL>(st, a, lse2, t, need_mask, key_base, m0, S);
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(dp[i]);
    std::uint32_t pp[16], ss[16];  // P^T, dS^T packed (A fragments of dV, dK)
    sm90a_ds_pack(st, dp, delta, t, pp, ss);
    // dS^T to shared memory for dQ, before the dK wgmma takes ss as its A operand: registers of
    // an in-flight wgmma are not read
    sm90a_store_ds(ss, st_base, st_cb, lane);
    sm90a_issue_dkv(dk, dv, pp, ss, qs, dos);
    wgmma::fence_proxy_async();
    __syncthreads();  // dS^T of both warpgroups in shared memory
    float dq[32];  // dQ[:, 64wg..64wg+63] (wgmma D layout)
    sm90a_dq(dq, sbase, sbase + L::K + wg * kBN * 128);
#pragma unroll
    for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
    sm90a_dq_atomics(dq, a, b, S, ldq, hq, wg, w4, g, t, m0);
  }
  cp_async_wait<0>();  // the idle buffer's zero-fill copies, before exit
#pragma unroll
  for (int i = 0; i < 64; ++i) wgmma::fence_reg(dk[i]), wgmma::fence_reg(dv[i]);

  sm90a_store_dkv(dk, dv, a, b, S, ldk, hk, t, key_base);
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

}  // namespace

bool sm90a_usable() {
#if defined(ULYSSES_BUILD_SM90A)
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

cudaError_t launch_bwd_main_sm90a(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  constexpr int smem = Sm90Smem::bytes;
  auto kern = causal ? bwd_kernel_sm90a<true> : bwd_kernel_sm90a<false>;
  cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.S + kBN - 1) / kBN), static_cast<unsigned>(a.H_kv), static_cast<unsigned>(B));
  kern<<<grid, kNT, smem, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_bwd_main_sm90a_tma3(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_tma<true, 3>(a, B, stream) : launch_bwd_main_sm90a_tma<false, 3>(a, B, stream);
}

cudaError_t launch_bwd_main_sm90a_tma3_dq_under_dk(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_tma<true, 3, true>(a, B, stream)
                : launch_bwd_main_sm90a_tma<false, 3, true>(a, B, stream);
}

cudaError_t launch_bwd_main_sm90a_tma3_dq_bulk(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_tma<true, 3, true, true>(a, B, stream)
                : launch_bwd_main_sm90a_tma<false, 3, true, true>(a, B, stream);
}

cudaError_t launch_bwd_main_sm90a_tma3_dq_bulk_producer(const BwdArgs& a, int B, bool causal, cudaStream_t stream) {
  return causal ? launch_bwd_main_sm90a_tma<true, 3, true, true, true>(a, B, stream)
                : launch_bwd_main_sm90a_tma<false, 3, true, true, true>(a, B, stream);
}

}  // namespace ulysses::kernels::flash
