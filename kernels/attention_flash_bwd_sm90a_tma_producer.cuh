#pragma once
// Flash attention backward main kernel on Hopper (sm_90a), head dim 128, with FlashAttention-3's producer
// warpgroup: the lab's backward variant 368640 (bench/attn/attn_tuning.hpp kBwdVariantSm90aTma3DqBulkProducer),
// which is the default backward, variant 106496 (attention_flash_bwd_sm90a_tma.cuh bwd_kernel_sm90a_tma<CAUSAL, 3,
// true, true>: FlashAttention-3's step order, dQ by bulk reductions, three TMA stages), plus the producer and nothing
// else: the same step math (the same pieces of attention_flash_bwd_sm90a.cuh, the same rounding), the same shared
// memory layout (BwdTmaSmem<3, true>), the same dq_accum fragment layout (run_bwd's dq_frag). Built by the lab only
// (bench/attn/attn_flash_bwd_sm90a_producer_lab.cu), to measure the producer alone against 106496.
//
// One CTA per (128-key tile n0, kv head, batch), 384 threads, __launch_bounds__(384, 1) (ptxas: 168 registers per
// thread at entry). The role by warpgroup (threadIdx.x / 128 made warp-uniform by __shfl_sync), as the forward's
// PRODUCER form (attention_flash_fwd_sm90a_tma.cuh):
//   warpgroup 0 (threads 0..127): setmaxnreg.dec to kBwdProducerRegs (24); thread 0 issues every load, the other
//     127 threads exit at once;
//   warpgroups 1, 2 (threads 128..383): setmaxnreg.inc to kBwdConsumerRegs (240; 2 x 128 x 240 + 128 x 24 =
//     384 x 168) and are 106496's two consumer warpgroups with tid = threadIdx.x - 128 (0..255: every fragment and
//     address of 106496 unchanged, wg = tid / 128 owning keys n0 + 64 wg .. + 63), without loads.
// The steps (q head of the group, 64-row q tile) as 106496's; step j uses stage st = j % STAGES, phase
// (j / STAGES) & 1:
//   producer (thread 0), j = 0, 1, .. steps - 1 in order: wait empty[st] with parity ((j / STAGES) & 1) ^ 1 (a fresh
//     barrier's "previous phase" counts as completed: the first STAGES steps do not wait; step j >= STAGES waits for
//     the release of step j - STAGES) -> expect Q + dO + lse2 + delta bytes (tx_bytes, 33280) on full[st] -> TMA Q,
//     dO (two 64-column halves each) and the two 256-byte rows (1-D bulk copies) into stage st.
//     Compared with 106496 (loads by consumer thread 0, step it + STAGES - 1 after step it's release) the producer
//     refills a stage as soon as it is released: up to STAGES steps in flight instead of STAGES - 1.
//   consumers, step it: wait full[st] with parity (it / STAGES) & 1; S^T, dP^T, softmax, dS^T (into dS buffer
//     it & 1), dV; bulk_wait_read (the previous step's dQ reduction has read the staging block); barrier C (named
//     barrier 3, the 256 consumer threads); dQ, dK; dQ staged in fragment order while dK runs; warpgroup barrier
//     (named barrier 1 + wg, 128 threads) and one bulk reduction per warpgroup (the last partial q tile: atomics);
//     then every consumer thread arrives on empty[st] (count 256: every wgmma of the step has completed).
// dS buffer it & 1 is rewritten at step it + 2, after barrier C of step it + 1, which both warpgroups pass only after
// their dQ of step it (as 106496). No CTA-wide barrier follows the role split: only the one after the mbarriers'
// init (and the producer's loads start after it); the consumers' K/V copies (cp.async, as 106496) are issued before
// it and waited for behind barrier C. The epilogue (dK, dV from the accumulators) has no barrier: each warpgroup's
// issuing thread waits for its last bulk reduction to have read the staging block before the CTA can end.
//
// Shared memory (bytes; BwdTmaSmem<3, true>, attention_flash_bwd_sm90a_tma.cuh): K 32768 at 0, V 32768 at 32768,
// 3 stages x {Q [2][64][64] 16384, dO 16384} at 65536, dS^T [2 buffers][128][64] 32768 at 163840, 3 x {lse2 [64],
// delta [64]} fp32 at 196608, full[3] at 198144, empty[3] at 198168, the dQ staging [2 warpgroups][64 x 64] fp32
// 32768 at 198272: 231040 in all.
#include "kernels/attention_flash_bwd_sm90a_tma.cuh"

namespace ulysses::kernels::flash {
namespace {

// One producer warpgroup in front of the kNT consumer threads, and its register split (the forward's
// kNTTmaProducer / kProducerRegs / kConsumerRegs, attention_flash_fwd_sm90a_tma.cuh; that header cannot join this
// one in a translation unit: both name their tile constants kD, kBM, kBN)
constexpr int kNTBwdProducer = kNT + 128;
constexpr int kBwdProducerRegs = 24, kBwdConsumerRegs = 240;
static_assert(kNT * kBwdConsumerRegs + 128 * kBwdProducerRegs <= 65536 / kNTBwdProducer / 8 * 8 * kNTBwdProducer,
              "setmaxnreg: the warpgroups' registers fit the CTA's launch allocation");
// barrier C: the 256 consumer threads (0: __syncthreads, 1 and 2: wg_named_sync's warpgroup barriers)
constexpr int kBwdConsumerBar = 3;
static_assert(BwdTmaSmem<3, true>::dS == 163840 && BwdTmaSmem<3, true>::full == 198144 &&
                  BwdTmaSmem<3, true>::DqStage == 198272 && BwdTmaSmem<3, true>::bytes == 231040 &&
                  BwdTmaSmem<3, true>::tx_bytes == 33280,
              "the layout in the header comment");

template <int N>
__device__ __forceinline__ void bwd_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void bwd_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
__device__ __forceinline__ void bwd_consumer_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kBwdConsumerBar), "n"(kNT) : "memory");
}

template <bool CAUSAL, int STAGES = 3>
__global__ void __launch_bounds__(kNTBwdProducer, 1)
    bwd_kernel_sm90a_tma_producer(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
                                  const BwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  using L = BwdTmaSmem<STAGES, true>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors and the 128-byte swizzle assume 1024-byte aligned tiles

  const int n0 = blockIdx.x * kBN, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int group = a.H / a.H_kv;
  const int m_first = CAUSAL ? n0 / kBM : 0;
  const int m_count = (S + kBM - 1) / kBM - m_first;
  const int steps = group * m_count;
  auto parity = [&](int j) { return static_cast<std::uint32_t>(j / STAGES) & 1u; };
  // the role by warpgroup, warp-uniform (setmaxnreg is .sync.aligned: every thread of a warpgroup runs it together)
  const bool producer = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0) == 0;
  // tid: the thread's index among the consumers, 0..255 as in 106496 (the producer warpgroup's are negative)
  const int tid = static_cast<int>(threadIdx.x) - (kNTBwdProducer - kNT);
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * kD;
  const std::int64_t kv_off = (static_cast<std::int64_t>(b) * S + n0) * ldk + hk * kD;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(sbase + L::full + 8 * s, 1);      // the producer's expect_tx arrival (+ the bytes)
      tma::mbar_init(sbase + L::empty + 8 * s, kNT);  // every consumer thread (never the producer)
    }
    tma::fence_barrier_init();
  }
  if (!producer) {  // K, V by the consumers' cp.async, as 106496 (waited for behind barrier C below)
    load_tile_sw128<kBN>(sbase + L::K, a.k + kv_off, ldk, S - n0, tid);
    load_tile_sw128<kBN>(sbase + L::V, a.v + kv_off, ldk, S - n0, tid);
    cp_async_commit();
  }
  __syncthreads();  // the only CTA-wide barrier (all 384 threads): the mbarriers exist before anyone uses them

  if (producer) {
    bwd_setmaxnreg_dec<kBwdProducerRegs>();
    if (threadIdx.x == 0) {  // every step's loads, in the order the consumers use and release the stages
      int h = hk * group, mi = 0;
      for (int j = 0; j < steps; ++j) {
        const int st = j % STAGES, m0 = (m_first + mi) * kBM;
        const std::uint32_t full = sbase + L::full + 8 * st, dst = sbase + L::Stages + st * L::stage_bytes;
        tma::mbar_wait_asm(sbase + L::empty + 8 * st, parity(j) ^ 1u);  // both warpgroups done with step j - STAGES
        tma::mbar_expect_tx(full, L::tx_bytes);
        tma::tma_load_3d(dst, &tq, full, h * kD, m0, b);
        tma::tma_load_3d(dst + kBM * 128, &tq, full, h * kD + 64, m0, b);
        tma::tma_load_3d(dst + kBM * kD * 2, &tdo, full, h * kD, m0, b);
        tma::tma_load_3d(dst + kBM * kD * 2 + kBM * 128, &tdo, full, h * kD + 64, m0, b);
        const std::int64_t row_off = (static_cast<std::int64_t>(b) * a.H + h) * a.S_pad + m0;
        tma::bulk_load(sbase + L::Rows + st * 512, a.lse2 + row_off, kBM * 4, full);
        tma::bulk_load(sbase + L::Rows + st * 512 + 256, a.delta + row_off, kBM * 4, full);
        if (++mi == m_count) mi = 0, ++h;
      }
    }
    return;  // no CTA-wide barrier follows; the consumers' barriers count their own threads only
  }
  bwd_setmaxnreg_inc<kBwdConsumerRegs>();

  const int lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, w4 = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  cp_async_wait<0>();
  wgmma::fence_proxy_async();
  bwd_consumer_sync();  // K, V of both warpgroups in shared memory

  float dk[64], dv[64];  // [64 keys of wg x 128 d] accumulators (wgmma D layout)
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.f;
  // stmatrix lane address of dS^T (as the default kernel), buffer 0; buffer 1 at + kBN * kBM * 2
  const int st_row = wg * 64 + w4 * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
  const std::uint32_t st_base0 = sbase + L::dS + st_row * 128;
  const int st_cb = lane >> 4;
  const int key_base = n0 + wg * 64 + w4 * 16 + g;  // key of d[4j + 0/1]; +8 for d[4j + 2/3]
  int h = hk * group, mi = 0;
  for (int it = 0; it < steps; ++it) {
    const int st = it % STAGES, u = it & 1;
    const int m0 = (m_first + mi) * kBM, hq = h;  // this step's q tile and q head
    if (++mi == m_count) mi = 0, ++h;
    tma::mbar_wait_asm(sbase + L::full + 8 * st, parity(it));
    const std::uint32_t qs = sbase + L::Stages + st * L::stage_bytes, dos = qs + kBM * kD * 2;
    const float* lse2 = reinterpret_cast<const float*>(smem_raw + L::Rows + st * 512);
    const float* delta = lse2 + kBM;

    float st_acc[32], dp[32];
    sm90a_issue_st_dp(st_acc, dp, sbase, qs, dos, wg);
    wgmma::wait<1>();
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(st_acc[i]);
    const bool need_mask = (n0 + kBN > S) || (CAUSAL && m0 < n0 + kBN - 1);
    sm90a_softmax<CAUSAL>(st_acc, a, lse2, t, need_mask, key_base, m0, S);
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(dp[i]);
    std::uint32_t pp[16], ss[16];  // P^T, dS^T packed (A fragments of dV, dK)
    sm90a_ds_pack(st_acc, dp, delta, t, pp, ss);
    sm90a_store_ds(ss, st_base0 + u * kBN * kBM * 2, st_cb, lane);
    sm90a_issue_rs(dv, pp, dos);  // dV += P^T dO
    // the last step's reduction has read the staging block before the barrier after which it is rewritten; every
    // thread waits on its own bulk groups (none but the issuing thread's): no branch while dV is in flight
    tma::bulk_wait_read<0>();
    wgmma::fence_proxy_async();
    bwd_consumer_sync();  // barrier C: dS^T of both warpgroups in shared memory
    float dq[32];  // dQ[:, 64wg..64wg+63] (wgmma D layout)
    sm90a_issue_dq(dq, sbase + L::dS + u * kBN * kBM * 2 - Sm90Smem::dS, sbase + L::K + wg * kBN * 128);
    sm90a_issue_rs(dk, ss, qs);  // dK += dS^T Q
    wgmma::wait<1>();  // dV and dQ done; dK still in the tensor cores
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma::fence_reg(dq[i]);
    sm90a_stage_dq(dq, sbase + L::DqStage + wg * (kBM * 64 * 4), tid & 127);  // branch-free as the atomics
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
    if (m0 + kBM <= S) {
      wgmma::fence_proxy_async();  // the staging stores before the bulk copy's reads
      wg_named_sync(wg);
      if ((tid & 127) == 0) {
        tma::bulk_reduce_add_f32(a.dq_accum + dq_frag_block(b, hq, m0 / kBM, wg, a.H, S),
                                 sbase + L::DqStage + wg * (kBM * 64 * 4), kBM * 64 * 4);
        tma::bulk_commit();
      }
    } else {
      sm90a_dq_atomics_tail(dq, a, b, S, hq, wg, w4, g, t, m0);
    }
    tma::mbar_arrive(sbase + L::empty + 8 * st);  // every wgmma of the step has completed: Q, dO, rows free
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) wgmma::fence_reg(dk[i]), wgmma::fence_reg(dv[i]);
  if ((tid & 127) == 0) tma::bulk_wait_read<0>();  // the staging block stays until the last reduction has read it
  sm90a_store_dkv(dk, dv, a, b, S, ldk, hk, t, key_base);
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

// Launch bwd_kernel_sm90a_tma_producer<CAUSAL, STAGES> for head dim 128 on `stream` (B = gridDim.z); dq_accum is left
// in the fragment layout of variant 106496 (dq_frag_block: run_bwd's dq_frag converts it)
template <bool CAUSAL, int STAGES = 3>
cudaError_t launch_bwd_main_sm90a_tma_producer(const BwdArgs& a, int B, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  if (((reinterpret_cast<std::uintptr_t>(a.lse2) | reinterpret_cast<std::uintptr_t>(a.delta)) & 15u) != 0)
    return cudaErrorInvalidValue;  // the bulk copies need 16-byte aligned rows (S_pad is a multiple of 128)
  if ((reinterpret_cast<std::uintptr_t>(a.dq_accum) & 15u) != 0) return cudaErrorInvalidValue;
  CUtensorMap tq, tdo;
  cudaError_t err = tma::encode_bshd_map(&tq, a.q, B, a.S, a.H, kBM, 128);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tdo, a.dout, B, a.S, a.H, kBM, 128);
  if (err != cudaSuccess) return err;
  constexpr int smem = BwdTmaSmem<STAGES, true>::bytes;
  auto kern = bwd_kernel_sm90a_tma_producer<CAUSAL, STAGES>;
  err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.S + kBN - 1) / kBN), static_cast<unsigned>(a.H_kv), static_cast<unsigned>(B));
  kern<<<grid, kNTBwdProducer, smem, stream>>>(tq, tdo, a);
  return cudaGetLastError();
}

}  // namespace

}  // namespace ulysses::kernels::flash
