#pragma once
// Flash attention backward main kernel on Hopper (sm_90a), head dim 128, with its per-step loads on TMA:
// the wgmma backward of attention_flash_bwd_sm90a.cu step for step (its pieces, attention_flash_bwd_sm90a.cuh:
// the same instructions, the same rounding), but Q and dO tiles arrive by cp.async.bulk.tensor and the
// step's lse2 / delta rows by 1-D bulk copies into STAGES mbarrier-guarded stages, and dS^T is
// double-buffered, so a step has one CTA-wide barrier (dS^T of both warpgroups in shared memory, which
// dQ needs) instead of two and no per-thread copies. Backward variants 8192 (three stages; kernels/ build it),
// 40960 (8192 in FlashAttention-3's step order; kernels/ build it), 106496 (40960 with dQ by bulk
// reductions; kernels/ build it), 12288 (two, the lab) and 368640 (106496 with FlashAttention-3's producer
// warpgroup, PRODUCER below; kernels/ build it, the default).
//
// One CTA per (128-key tile n0, kv head, batch), 256 threads, the steps (q head of the group, 64-row q
// tile) as in the default kernel. Stage st = step % STAGES, phase (step / STAGES) & 1:
//   load (thread 0): wait empty[st] -> expect Q + dO + lse2 + delta bytes on full[st] -> TMA Q, dO (two
//     64-column halves each) and the two 256-byte rows; steps 0 .. STAGES-2 before the loop, step
//     it + STAGES - 1 right after step it's dQ wgmma has completed (outside every wgmma stage). That
//     refills step it-1's stage, which both warpgroups released before the barrier of step it.
//   compute: wait full[st]; S^T, dP^T, softmax, dS^T (into dS buffer it & 1), dV/dK; barrier; dQ (waits
//     for every wgmma of the step) -> every thread arrives on empty[st] -> dQ atomics (8192; 40960 and 106496:
//     dV; barrier; dQ, dK; dQ's atomics / staging while dK runs; then the arrival).
// dS buffer it & 1 is rewritten at step it + 2, after the barrier of step it + 1, which both warpgroups
// pass only after their dQ of step it.
//
// Shared memory (bytes): K 32768, V 32768 (offsets as Sm90Smem's: the shared pieces address them so),
// STAGES x {Q [2][64][64] 16384, dO 16384}, dS^T [2][128][64] 32768, STAGES x {lse2 [64], delta [64]} fp32,
// the mbarriers full[STAGES], empty[STAGES].
//
// PRODUCER (variant 368640 = 106496 + the producer, attention_flash_sm90a.hpp kBwdVariantSm90aTma3DqBulkProducer;
// <CAUSAL, 3, true, true, true>, the D = 128 default: +6.5-15 % over 106496, docs/ATTENTION.md v20): the same step
// math, the same shared memory layout (BwdTmaSmem<3, true>), the same dq_accum fragment layout (run_bwd's dq_frag).
// 384 threads, __launch_bounds__(384, 1) (ptxas: 168 registers per thread at entry). The role by warpgroup
// (threadIdx.x / 128 made warp-uniform by __shfl_sync), as the forward's PRODUCER form
// (attention_flash_fwd_sm90a_tma.cuh):
//   warpgroup 0 (threads 0..127): setmaxnreg.dec to kBwdProducerRegs (24); thread 0 issues every load, the other
//     127 threads exit at once;
//   warpgroups 1, 2 (threads 128..383): setmaxnreg.inc to kBwdConsumerRegs (240; 2 x 128 x 240 + 128 x 24 =
//     384 x 168) and are 106496's two consumer warpgroups with tid = threadIdx.x - 128 (0..255: every fragment and
//     address of 106496 unchanged, wg = tid / 128 owning keys n0 + 64 wg .. + 63), without loads.
// Step j uses stage st = j % STAGES, phase (j / STAGES) & 1:
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
// issuing thread waits for its last bulk reduction to have read the staging block before the CTA can end. Every wait
// is mbar_wait_asm (kernels/tma.cuh: with mbar_wait's C++ loop ptxas kept setmaxnreg consumers within the launch
// bound's registers, C7512).
// Shared memory (BwdTmaSmem<3, true>): K 32768 at 0, V 32768 at 32768, 3 stages x {Q 16384, dO 16384} at 65536,
// dS^T [2 buffers][128][64] 32768 at 163840, 3 x {lse2 [64], delta [64]} fp32 at 196608, full[3] at 198144, empty[3]
// at 198168, the dQ staging [2 warpgroups][64 x 64] fp32 32768 at 198272: 231040 in all.
#include "kernels/attention_flash_bwd_sm90a.cuh"
#include "kernels/tma.cuh"

namespace ulysses::kernels::flash {
namespace {

template <int STAGES, bool DQ_BULK = false>
struct BwdTmaSmem {
  static constexpr int K = Sm90Smem::K, V = Sm90Smem::V;
  static constexpr int stage_bytes = 2 * kBM * kD * 2;  // Q then dO
  static constexpr int Stages = V + kBN * kD * 2;        // stage s at Stages + s * stage_bytes; dO at + kBM * kD * 2
  static constexpr int dS = Stages + STAGES * stage_bytes;  // buffer u at dS + u * kBN * kBM * 2
  static constexpr int Rows = dS + 2 * kBN * kBM * 2;      // stage s: lse2 at Rows + s * 512, delta at + 256
  static constexpr int full = Rows + STAGES * 2 * kBM * 4, empty = full + 8 * STAGES;
  // DQ_BULK: each warpgroup's dQ [64 q x 64 d] fp32 staged in fragment order, 16 KiB per warpgroup
  static constexpr int DqStage = (empty + 8 * STAGES + 127) / 128 * 128;
  static constexpr int bytes = DQ_BULK ? DqStage + 2 * kBM * 64 * 4 : empty + 8 * STAGES;
  static constexpr std::uint32_t tx_bytes = stage_bytes + 2 * kBM * 4;
  static_assert(K == 0 && V == kBN * kD * 2, "issue_st_dp addresses K and V at Sm90Smem's offsets");
  static_assert(Stages % 1024 == 0 && dS % 1024 == 0 && stage_bytes % 1024 == 0, "wgmma tiles must be 1024-byte aligned");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

// PRODUCER form: one producer warpgroup in front of the kNT consumer threads, and its register split (the forward's
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
__device__ __forceinline__ void bwd_consumer_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kBwdConsumerBar), "n"(kNT) : "memory");
}

// DQ_UNDER_DK (variant 40960): dV issued before the barrier, dQ and then dK after it, the dQ atomics while
// dK runs, the stage released once dK has completed.
// DQ_BULK (with DQ_UNDER_DK; variant 106496, the default): instead of 16 float2 atomics per thread, each warpgroup's dQ
// block goes to shared memory in fragment order while dK runs (pair p of thread tw at (p * 128 + tw) * 8 bytes), and
// one thread of the warpgroup adds the whole 16 KiB to dq_accum with one cp.reduce.async.bulk (FlashAttention-3's
// dQ path). dq_accum is then in the fragment layout of dq_frag_block (full 64-row q tiles; a last partial tile keeps
// atomics, into rows after the full tiles), and bwd_convert_dq_frag undoes it.
// PRODUCER (with DQ_BULK; variant 368640, the default): 106496's steps behind a producer warpgroup (the top comment).
template <bool CAUSAL, int STAGES, bool DQ_UNDER_DK = false, bool DQ_BULK = false, bool PRODUCER = false>
__global__ void __launch_bounds__(PRODUCER ? kNTBwdProducer : kNT, 1)
    bwd_kernel_sm90a_tma(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo, const BwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  static_assert(!DQ_BULK || DQ_UNDER_DK, "the bulk dQ path is built on FlashAttention-3's step order");
  static_assert(!PRODUCER || DQ_BULK, "the producer form is 106496's (variant 368640)");
  using L = BwdTmaSmem<STAGES, DQ_BULK>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors and the 128-byte swizzle assume 1024-byte aligned tiles

  // PRODUCER: the role by warpgroup, warp-uniform (setmaxnreg is .sync.aligned: every thread of a warpgroup runs it
  // together)
  const bool producer = PRODUCER && __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0) == 0;
  // tid: the thread's index among the consumers, 0..255 (PRODUCER: the producer warpgroup's are negative and leave
  // below)
  const int tid = static_cast<int>(threadIdx.x) - (PRODUCER ? kNTBwdProducer - kNT : 0), lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2, w4 = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kBN, hk = blockIdx.y, b = blockIdx.z;
  const int S = a.S;
  const int group = a.H / a.H_kv;
  const std::int64_t ldq = static_cast<std::int64_t>(a.H) * kD;
  const std::int64_t ldk = static_cast<std::int64_t>(a.H_kv) * kD;
  const std::int64_t kv_off = (static_cast<std::int64_t>(b) * S + n0) * ldk + hk * kD;
  const int m_first = CAUSAL ? n0 / kBM : 0;
  const int m_count = (S + kBM - 1) / kBM - m_first;
  const int steps = group * m_count;
  auto parity = [&](int j) { return static_cast<std::uint32_t>(j / STAGES) & 1u; };
  auto wait = [&](std::uint32_t bar, std::uint32_t par) {
    if constexpr (PRODUCER) {
      tma::mbar_wait_asm(bar, par);
    } else {
      tma::mbar_wait(bar, par);
    }
  };

  // step j's Q, dO, lse2, delta (q head h, q tile m_first + mi) into stage j % STAGES (thread 0; PRODUCER: the
  // producer's)
  auto load_at = [&](int j, int h, int mi) {
    const int st = j % STAGES, m0 = (m_first + mi) * kBM;
    const std::uint32_t full = sbase + L::full + 8 * st, dst = sbase + L::Stages + st * L::stage_bytes;
    wait(sbase + L::empty + 8 * st, parity(j) ^ 1u);  // a fresh barrier's "previous phase" has completed
    tma::mbar_expect_tx(full, L::tx_bytes);
    tma::tma_load_3d(dst, &tq, full, h * kD, m0, b);
    tma::tma_load_3d(dst + kBM * 128, &tq, full, h * kD + 64, m0, b);
    tma::tma_load_3d(dst + kBM * kD * 2, &tdo, full, h * kD, m0, b);
    tma::tma_load_3d(dst + kBM * kD * 2 + kBM * 128, &tdo, full, h * kD + 64, m0, b);
    const std::int64_t row_off = (static_cast<std::int64_t>(b) * a.H + h) * a.S_pad + m0;
    tma::bulk_load(sbase + L::Rows + st * 512, a.lse2 + row_off, kBM * 4, full);
    tma::bulk_load(sbase + L::Rows + st * 512 + 256, a.delta + row_off, kBM * 4, full);
  };
  auto load = [&](int j) { load_at(j, hk * group + j / m_count, j % m_count); };
  // barrier C (dS^T of both warpgroups in shared memory): the CTA's, or PRODUCER the 256 consumer threads'
  auto sync_consumers = [&] {
    if constexpr (PRODUCER) {
      bwd_consumer_sync();
    } else {
      __syncthreads();
    }
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      tma::mbar_init(sbase + L::full + 8 * s, 1);      // PRODUCER: the producer's expect_tx arrival (+ the bytes)
      tma::mbar_init(sbase + L::empty + 8 * s, kNT);  // every consumer thread (never the producer)
    }
    tma::fence_barrier_init();
    if constexpr (!PRODUCER) {
      for (int j = 0; j < STAGES - 1 && j < steps; ++j) load(j);
    }
  }
  if (!producer) {  // K, V by the consumers' cp.async (PRODUCER: waited for behind barrier C below)
    load_tile_sw128<kBN>(sbase + L::K, a.k + kv_off, ldk, S - n0, tid);
    load_tile_sw128<kBN>(sbase + L::V, a.v + kv_off, ldk, S - n0, tid);
    cp_async_commit();
  }
  if constexpr (PRODUCER) {
    __syncthreads();  // the only CTA-wide barrier (all 384 threads): the mbarriers exist before anyone uses them
    if (producer) {
      tma::setmaxnreg_dec<kBwdProducerRegs>();
      if (threadIdx.x == 0) {  // every step's loads, in the order the consumers use and release the stages
        int h = hk * group, mi = 0;
        for (int j = 0; j < steps; ++j) {
          load_at(j, h, mi);  // waits until both warpgroups are done with step j - STAGES
          if (++mi == m_count) mi = 0, ++h;
        }
      }
      return;  // no CTA-wide barrier follows; the consumers' barriers count their own threads only
    }
    tma::setmaxnreg_inc<kBwdConsumerRegs>();
  }
  cp_async_wait<0>();
  wgmma::fence_proxy_async();
  sync_consumers();  // K, V in shared memory; the mbarriers exist (PRODUCER: K, V of both warpgroups)

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
    wait(sbase + L::full + 8 * st, parity(it));
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
    if constexpr (DQ_UNDER_DK) {
      sm90a_issue_rs(dv, pp, dos);  // dV += P^T dO
      // 106496: the last step's reduction has read the staging block before the barrier after which it is rewritten;
      // every thread waits on its own bulk groups (none but the issuing thread's): no branch while dV is in flight
      if constexpr (DQ_BULK) tma::bulk_wait_read<0>();
      wgmma::fence_proxy_async();
      sync_consumers();  // barrier C: dS^T of both warpgroups in shared memory
      float dq[32];  // dQ[:, 64wg..64wg+63] (wgmma D layout)
      sm90a_issue_dq(dq, sbase + L::dS + u * kBN * kBM * 2 - Sm90Smem::dS, sbase + L::K + wg * kBN * 128);
      sm90a_issue_rs(dk, ss, qs);  // dK += dS^T Q
      wgmma::wait<1>();  // dV and dQ done; dK still in the tensor cores
#pragma unroll
      for (int i = 0; i < 32; ++i) wgmma::fence_reg(dq[i]);
      if constexpr (DQ_BULK) {
        sm90a_stage_dq(dq, sbase + L::DqStage + wg * (kBM * 64 * 4), tid & 127);  // branch-free as the atomics
      } else {
        sm90a_dq_atomics(dq, a, b, S, ldq, hq, wg, w4, g, t, m0);  // branch-free: no wgmma serialization (C7513)
      }
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
      if constexpr (DQ_BULK) {
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
      }
      tma::mbar_arrive(sbase + L::empty + 8 * st);  // every wgmma of the step has completed: Q, dO, rows free
      if (!PRODUCER && tid == 0 && it + STAGES - 1 < steps) load(it + STAGES - 1);
      continue;
    }
    sm90a_issue_dkv(dk, dv, pp, ss, qs, dos);
    wgmma::fence_proxy_async();
    __syncthreads();  // dS^T of both warpgroups in shared memory
    float dq[32];  // dQ[:, 64wg..64wg+63] (wgmma D layout)
    // sm90a_dq reads dS^T at its base + Sm90Smem::dS: hand it the base that puts buffer u there
    sm90a_dq(dq, sbase + L::dS + u * kBN * kBM * 2 - Sm90Smem::dS, sbase + L::K + wg * kBN * 128);
#pragma unroll
    for (int i = 0; i < 16; ++i) wgmma::fence_reg(pp[i]), wgmma::fence_reg(ss[i]);
    tma::mbar_arrive(sbase + L::empty + 8 * st);  // every wgmma of the step has completed: Q, dO, rows free
    if (tid == 0 && it + STAGES - 1 < steps) load(it + STAGES - 1);
    sm90a_dq_atomics(dq, a, b, S, ldq, hq, wg, w4, g, t, m0);
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) wgmma::fence_reg(dk[i]), wgmma::fence_reg(dv[i]);
  if constexpr (DQ_BULK) {
    if ((tid & 127) == 0) tma::bulk_wait_read<0>();  // the staging block stays until the last reduction has read it
  }
  sm90a_store_dkv(dk, dv, a, b, S, ldk, hk, t, key_base);
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

// Launch bwd_kernel_sm90a_tma<CAUSAL, STAGES, DQ_UNDER_DK, DQ_BULK, PRODUCER> for head dim 128 on `stream`
// (B = gridDim.z); PRODUCER: 384 threads
template <bool CAUSAL, int STAGES, bool DQ_UNDER_DK = false, bool DQ_BULK = false, bool PRODUCER = false>
cudaError_t launch_bwd_main_sm90a_tma(const BwdArgs& a, int B, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  if (((reinterpret_cast<std::uintptr_t>(a.lse2) | reinterpret_cast<std::uintptr_t>(a.delta)) & 15u) != 0)
    return cudaErrorInvalidValue;  // the bulk copies need 16-byte aligned rows (S_pad is a multiple of 128)
  CUtensorMap tq, tdo;
  cudaError_t err = tma::encode_bshd_map(&tq, a.q, B, a.S, a.H, kBM, 128);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tdo, a.dout, B, a.S, a.H, kBM, 128);
  if (err != cudaSuccess) return err;
  if (DQ_BULK && (reinterpret_cast<std::uintptr_t>(a.dq_accum) & 15u) != 0) return cudaErrorInvalidValue;
  constexpr int smem = BwdTmaSmem<STAGES, DQ_BULK>::bytes;
  auto kern = bwd_kernel_sm90a_tma<CAUSAL, STAGES, DQ_UNDER_DK, DQ_BULK, PRODUCER>;
  err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.S + kBN - 1) / kBN), static_cast<unsigned>(a.H_kv), static_cast<unsigned>(B));
  kern<<<grid, PRODUCER ? kNTBwdProducer : kNT, smem, stream>>>(tq, tdo, a);
  return cudaGetLastError();
}

}  // namespace

}  // namespace ulysses::kernels::flash
