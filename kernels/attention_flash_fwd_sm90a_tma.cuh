#pragma once
// Flash attention forward on Hopper (sm_90a), head dim D = 128 or 64, with TMA loads into mbarrier-guarded
// stages around the wgmma math of attention_flash_fwd_sm90a.cuh (issue_s, issue_pv, softmax_tile,
// rescale, store_o_lse: the same instructions, the same rounding): no CTA-wide barrier per key tile and no
// per-thread copies. The default at both head dims in its PRODUCER form (attention_flash_fwd_sm90a.cu, variant 1471;
// 63 + 128 without the producer before 2026-12-06c); the lab builds its other forms (bench/attn/attn_flash_fwd_sm90a_lab.cu,
// forward bits 16, 32, 64, 128, 256, 512, 1024).
// D = 64 is the same kernel with one 64-column half: S = Q K^T in 4 k-steps, O [64 rows x 64 d] per
// warpgroup by m64n64k16 (o[32]), 16 KiB per tile.
//
// 256 threads, two warpgroups, warpgroup c owning rows m0 + 64c .. m0 + 64c + 63 of the CTA's 128
// query rows, pipelined (S of tile n+1 under P V of tile n) and taking turns at issuing (named
// barriers 1, 2) as the default form does. Thread 0 issues the TMA loads at the top of each step
// (outside every wgmma stage): K two tiles ahead, V one.
// PRODUCER (forward bit 256; the product's form since 2026-12-06c): FlashAttention-3's warp specialization instead. 384 threads,
// __launch_bounds__(384, 1) (ptxas: 168 registers per thread at entry); warpgroup 0 (index from threadIdx.x / 128
// made warp-uniform by __shfl_sync) runs setmaxnreg.dec to kProducerRegs and one thread of it issues every load
// (Q, K_0, then K_{j+1} before V_j: the order the consumers release stages in), the other producer threads exit;
// warpgroups 1, 2 run setmaxnreg.inc to kConsumerRegs (2 x 128 x 240 + 128 x 24 = 384 x 168) and are the two
// consumers above, unchanged but for their loads: they only wait on full barriers and arrive on empty ones.
// Per key tile j (stage st = j % STAGES, phase (j / STAGES) & 1):
//   load:     wait k_empty[st] (both warpgroups done with tile j - STAGES) -> expect the tile's bytes
//             (32 KiB at D=128) on k_full[st] -> TMA K[j] (its 64-column halves); V[j] the same on v_empty / v_full
//   compute:  wait k_full[st] before S_j = Q K_j^T, arrive k_empty[st] once S_j has completed;
//             wait v_full[st] before O += P_j V_j, arrive v_empty[st] once it has completed
//   (empty barriers count 256 arrivals, every thread after its wgmma wait: no branch inside a
//   wgmma pipeline stage, which made ptxas serialize the wgmmas, C7513)
// With 3 stages the loads rarely wait for the other warpgroup (the stage they refill was released about a
// step earlier); with 2 thread 0 waits more often for the lagging warpgroup's release.
// Q arrives once on q_full. TMA boxes are [128 rows][64 bf16] with the 128-byte swizzle, the
// layout the wgmma descriptors read (kernels/wgmma.cuh); rows past S are zero-filled by TMA
// (the 3-D map [B][S][heads * 128] bounds each batch) and masked in softmax_tile as before.
// Grid: (m blocks, H, B) with causal m blocks longest first; HEADS_FIRST (bit 64): the flattened
// (m block, head) index runs the heads fastest, so every head's longest row blocks start first.
//
// Shared memory (bytes): Q [D/64 halves][128][64] 32768 (D=128) / 16384 (D=64); K [STAGES][D/64][BN][64];
// V the same; then the mbarriers (8 bytes each): q_full, k_full[S], v_full[S], k_empty[S], v_empty[S].
// BN: keys per K/V tile, 128 (kBN), or 176 (forward bit 1024, with PRODUCER only, the product's full mask at D = 128
// in two stages: FlashAttention-3's hdim-128 forward, 128 x 176 tiles, more work per ping-pong
// turn; S [64 x 176] by m64n176k16, s[88] and pp[44] per thread, P V in 11 k-steps; TMA boxes of [176][64], 22 KiB,
// so 44 KiB expected on a full barrier per tile; 32 + 2 x (44 + 44) KiB = 208 KiB. The last tile is ragged unless
// 176 | S: its rows past S are zero-filled by TMA (the box still completes all its bytes) and masked to -inf in
// softmax_tile, as at 128. Tried before without the producer: commit 3a1e2ea, -1 to -3 % against 191).
#include "kernels/attention_flash_fwd_sm90a.cuh"
#include "kernels/tma.cuh"

namespace ulysses::kernels::flash {
namespace {

using tma::mbar_arrive;
using tma::mbar_expect_tx;
using tma::mbar_init;
using tma::mbar_wait;
using tma::setmaxnreg_dec;
using tma::setmaxnreg_inc;
using tma::tma_load_3d;

constexpr int kNTTma = 256;
// PRODUCER form: one producer warpgroup in front of the kNTTma consumer threads, and its register split
constexpr int kNTTmaProducer = kNTTma + 128;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
static_assert(kNTTma * kConsumerRegs + 128 * kProducerRegs <= 65536 / kNTTmaProducer / 8 * 8 * kNTTmaProducer,
              "setmaxnreg: the warpgroups' registers fit the CTA's launch allocation");
static_assert(kBM <= 256 && kBN <= 256, "a TMA box has at most 256 rows");

template <int STAGES, int D, int BN = kBN>
struct TmaSmem {
  static_assert(BN <= 256 && BN % 16 == 0, "a TMA box has at most 256 rows; whole wgmma k-steps of P V");
  // one K or V tile, every half: 32768 (D=128), 16384 (D=64); BN = 176: 45056
  static constexpr std::uint32_t kTileBytes = BN * D * 2;
  static constexpr int Q = 0;
  static constexpr int K = Q + kBM * D * 2;
  static constexpr int V = K + STAGES * kTileBytes;
  static constexpr int bars = V + STAGES * kTileBytes;
  static constexpr int q_full = bars, k_full = bars + 8, v_full = k_full + 8 * STAGES, k_empty = v_full + 8 * STAGES,
                       v_empty = k_empty + 8 * STAGES;
  static constexpr int bytes = v_empty + 8 * STAGES;
  static_assert(K % 1024 == 0 && V % 1024 == 0, "wgmma tiles must be 1024-byte aligned");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

template <bool CAUSAL, int STAGES, bool HEADS_FIRST, int D, bool PRODUCER = false, int BN = kBN>
__global__ void __launch_bounds__(PRODUCER ? kNTTmaProducer : kNTTma, 1)
    fwd_kernel_sm90a_tma(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                         const __grid_constant__ CUtensorMap tv, const FwdArgs a) {
#if defined(ULYSSES_SM90A_DEVICE)
  static_assert(BN == kBN || (PRODUCER && !CAUSAL && D == 128 && STAGES == 2), "176-key tiles: bit 1024's form only");
  using L = TmaSmem<STAGES, D, BN>;
  constexpr std::uint32_t kTileBytes = L::kTileBytes;
  constexpr int kHalves = D / 64;  // 64-column TMA boxes per tile
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const std::uint32_t sbase = smem_addr(smem_raw);
  if ((sbase & 1023u) != 0) __trap();  // the descriptors and the 128-byte swizzle assume 1024-byte aligned tiles

  // tid: the thread's index among the consumers (PRODUCER: the producer warpgroup's are negative and leave below)
  const int tid = static_cast<int>(threadIdx.x) - (PRODUCER ? kNTTmaProducer - kNTTma : 0), lane = tid & 31, warp = tid >> 5;
  const int wg = warp >> 2;
  const int m_blocks = (a.S + kBM - 1) / kBM;
  int m_block, h;
  if constexpr (HEADS_FIRST) {
    m_block = static_cast<int>(blockIdx.x) / a.H, h = static_cast<int>(blockIdx.x) % a.H;
  } else {
    m_block = static_cast<int>(blockIdx.x), h = static_cast<int>(blockIdx.y);
  }
  if (CAUSAL) m_block = m_blocks - 1 - m_block;  // long rows first
  const int b = blockIdx.z;
  const int hk = h / (a.H / a.H_kv);
  const int S = a.S;
  const int m0 = m_block * kBM;
  const int kv_end = CAUSAL ? min(S, m0 + kBM) : S;  // keys [0, kv_end) can matter
  const int n_tiles = (kv_end + BN - 1) / BN;

  if (threadIdx.x == 0) {
    mbar_init(sbase + L::q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sbase + L::k_full + 8 * s, 1);
      mbar_init(sbase + L::v_full + 8 * s, 1);
      mbar_init(sbase + L::k_empty + 8 * s, kNTTma);  // every consumer thread (never the producer)
      mbar_init(sbase + L::v_empty + 8 * s, kNTTma);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();  // the only CTA-wide barrier: the mbarriers exist before anyone uses them

  const int cw = wg, w4 = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  float o[D / 2];  // [64 rows of the warpgroup x D] (wgmma D layout)
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // rows g, g+8 of the warp
  const int row0 = m0 + cw * 64 + w4 * 16 + g;                     // row of o[4j + 0/1]; +8: 4j + 2/3
  const int wg_first = m0 + cw * 64;                                // the warpgroup's first row
  const std::uint32_t qs_wg = sbase + L::Q + cw * 64 * 128;
  auto k_at = [&](int n) { return sbase + L::K + (n % STAGES) * kTileBytes; };
  auto v_at = [&](int n) { return sbase + L::V + (n % STAGES) * kTileBytes; };
  auto parity = [&](int n) { return static_cast<std::uint32_t>(n / STAGES) & 1u; };
  auto release = [&](int bars, int n) { mbar_arrive(sbase + bars + 8 * (n % STAGES)); };
  auto wait = [&](std::uint32_t bar, std::uint32_t par) {
    if constexpr (PRODUCER) {
      tma::mbar_wait_asm(bar, par);
    } else {
      mbar_wait(bar, par);
    }
  };
  // issue point i of n_tiles + 1 (as the default form): consumer 0 waits for consumer 1's previous
  // issue (barrier 1) except at the first point, then releases it (barrier 2)
  auto turn_take = [&](int i) {
    if (cw == 0 && i > 0) named_bar_sync(1, 256);
    if (cw == 1) named_bar_sync(2, 256);
  };
  auto turn_give = [&](int i) {
    if (cw == 0) named_bar_arrive(2, 256);
    if (cw == 1 && i < n_tiles) named_bar_arrive(1, 256);
  };

  // the loads, issued by thread 0 (outside every wgmma stage; PRODUCER: by the producer's thread 0): tile j's K or V
  // into stage j % STAGES once both warpgroups have released the tile STAGES before it
  auto load = [&](const CUtensorMap* map, int full, int empty, int base, int j) {
    const int st = j % STAGES;
    wait(sbase + empty + 8 * st, parity(j) ^ 1u);  // a fresh barrier's "previous phase" has completed
    mbar_expect_tx(sbase + full + 8 * st, kTileBytes);
    const std::uint32_t dst = sbase + base + st * kTileBytes;
#pragma unroll
    for (int hf = 0; hf < kHalves; ++hf) tma_load_3d(dst + hf * BN * 128, map, sbase + full + 8 * st, hk * D + 64 * hf, j * BN, b);
  };
  auto load_q = [&] {
    mbar_expect_tx(sbase + L::q_full, kBM * D * 2);
#pragma unroll
    for (int hf = 0; hf < kHalves; ++hf) tma_load_3d(sbase + L::Q + hf * kBM * 128, &tq, sbase + L::q_full, h * D + 64 * hf, m0, b);
  };
  if constexpr (PRODUCER) {
    // the role by warpgroup, warp-uniform (setmaxnreg is .sync.aligned: every thread of a warpgroup runs it together)
    if (__shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0) == 0) {
      setmaxnreg_dec<kProducerRegs>();
      if (threadIdx.x == 0) {  // every load in the order the consumers release the stages: K_0, then K_{j+1}, V_j
        load_q();
        load(&tk, L::k_full, L::k_empty, L::K, 0);
        for (int j = 0; j < n_tiles; ++j) {
          if (j + 1 < n_tiles) load(&tk, L::k_full, L::k_empty, L::K, j + 1);
          load(&tv, L::v_full, L::v_empty, L::V, j);
        }
      }
      return;  // no CTA-wide barrier follows; the consumers' named barriers count their 256 threads only
    }
    setmaxnreg_inc<kConsumerRegs>();
  } else if (tid == 0) {
    load_q();
    load(&tk, L::k_full, L::k_empty, L::K, 0);
    load(&tv, L::v_full, L::v_empty, L::V, 0);
    if (n_tiles > 1) load(&tk, L::k_full, L::k_empty, L::K, 1);
  }

  std::uint32_t pp[BN / 4];
  wait(sbase + L::q_full, 0);
  {  // prologue: S_0 and its softmax
    float s[BN / 2], corr[2];
    wait(sbase + L::k_full, 0);
    turn_take(0);
    wgmma::fence();
    issue_s<D, BN>(s, qs_wg, k_at(0));
    turn_give(0);
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) wgmma::fence_reg(s[i]);
    release(L::k_empty, 0);
    softmax_tile<CAUSAL, BN>(s, pp, m_run, l_run, corr, 0, row0, wg_first, S, t, a.scale_log2);
  }
  // steps 0..n_tiles-2: S_{n+1} and P V_n in flight together, softmax of S_{n+1} under P V_n
  for (int n = 0; n + 1 < n_tiles; ++n) {
    if (!PRODUCER && tid == 0) {  // K two tiles ahead, V one (step n computes S_{n+1} and P V_n)
      if (n + 2 < n_tiles) load(&tk, L::k_full, L::k_empty, L::K, n + 2);
      load(&tv, L::v_full, L::v_empty, L::V, n + 1);
    }
    float s[BN / 2];
    wait(sbase + L::k_full + 8 * ((n + 1) % STAGES), parity(n + 1));
    wait(sbase + L::v_full + 8 * (n % STAGES), parity(n));
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) wgmma::fence_reg(pp[i]);
    turn_take(n + 1);
    wgmma::fence();
    issue_s<D, BN>(s, qs_wg, k_at(n + 1));
    issue_pv<D, BN>(o, pp, v_at(n));
    turn_give(n + 1);
    wgmma::wait<1>();  // S_{n+1} done; P V_n still running
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) wgmma::fence_reg(s[i]);
    release(L::k_empty, n + 1);
    std::uint32_t pn[BN / 4];
    float cn[2];
    softmax_tile<CAUSAL, BN>(s, pn, m_run, l_run, cn, (n + 1) * BN, row0, wg_first, S, t, a.scale_log2);
    wgmma::wait<0>();  // P V_n done: O may be rescaled, pp and V[n] are free
#pragma unroll
    for (int i = 0; i < D / 2; ++i) wgmma::fence_reg(o[i]);
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) wgmma::fence_reg(pp[i]);
    release(L::v_empty, n);
    rescale<D>(o, cn);
#pragma unroll
    for (int i = 0; i < BN / 4; ++i) pp[i] = pn[i];
  }
  // last step: P V only
  wait(sbase + L::v_full + 8 * ((n_tiles - 1) % STAGES), parity(n_tiles - 1));
#pragma unroll
  for (int i = 0; i < BN / 4; ++i) wgmma::fence_reg(pp[i]);
  turn_take(n_tiles);
  wgmma::fence();
  issue_pv<D, BN>(o, pp, v_at(n_tiles - 1));
  turn_give(n_tiles);
  wgmma::wait<0>();
#pragma unroll
  for (int i = 0; i < D / 2; ++i) wgmma::fence_reg(o[i]);

  store_o_lse<D>(o, m_run, l_run, a, b, h, S, row0, t);  // epilogue (as the default form): O /= l, lse
#else
  __trap();  // built without sm_90a: sm90a_usable() is false and nothing launches this
#endif
}

// Launch fwd_kernel_sm90a_tma<CAUSAL, STAGES, HEADS_FIRST, D, PRODUCER, BN> for head dim D (128 or 64) and BN-key
// tiles (128, or 176: bit 1024) on `stream` (B = gridDim.z)
template <bool CAUSAL, int STAGES, bool HEADS_FIRST, int D = 128, bool PRODUCER = false, int BN = kBN>
cudaError_t launch_fwd_sm90a_tma(const FwdArgs& a, int B, cudaStream_t stream) {
  if (!sm90a_usable()) return cudaErrorNotSupported;
  CUtensorMap tq, tk, tv;
  cudaError_t err = tma::encode_bshd_map(&tq, a.q, B, a.S, a.H, kBM, D);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tk, a.k, B, a.S, a.H_kv, BN, D);
  if (err == cudaSuccess) err = tma::encode_bshd_map(&tv, a.v, B, a.S, a.H_kv, BN, D);
  if (err != cudaSuccess) return err;
  constexpr int smem = TmaSmem<STAGES, D, BN>::bytes;
  auto kern = fwd_kernel_sm90a_tma<CAUSAL, STAGES, HEADS_FIRST, D, PRODUCER, BN>;
  err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const std::int64_t m_blocks = (a.S + kBM - 1) / kBM;
  if (HEADS_FIRST && m_blocks * a.H > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const dim3 grid = HEADS_FIRST ? dim3(static_cast<unsigned>(m_blocks * a.H), 1u, static_cast<unsigned>(B))
                                : dim3(static_cast<unsigned>(m_blocks), static_cast<unsigned>(a.H), static_cast<unsigned>(B));
  kern<<<grid, PRODUCER ? kNTTmaProducer : kNTTma, smem, stream>>>(tq, tk, tv, a);
  return cudaGetLastError();
}

}  // namespace

}  // namespace ulysses::kernels::flash
