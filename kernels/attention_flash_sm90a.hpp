#pragma once
// Attention kernels on Hopper warpgroup MMA (wgmma, sm_90a; D = 128 and 64): the forward
// (attention_flash_fwd_sm90a.cu) and the backward main kernels (attention_flash_bwd_sm90a.cu; D = 64:
// attention_flash_bwd_sm90a_d64.cu, variants 16384, 114688 and 245760; the lab also builds 20480).
// attention_flash_{fwd,bwd}.cu dispatch to them; the backward's preprocess and dq conversion
// are shared with the mma.sync backward. Private to kernels/ and the lab (bench/attn/attn_flash_lab.cu).
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ulysses::kernels::flash {

// Arguments of a forward kernel (layouts: kernels/attention.hpp)
struct FwdArgs {
  const __nv_bfloat16* q;  // [B, S, H, D]
  const __nv_bfloat16* k;  // [B, S, H_kv, D]
  const __nv_bfloat16* v;  // [B, S, H_kv, D]
  __nv_bfloat16* o;        // [B, S, H, D]
  float* lse;              // [B, H, S]  natural log
  int S, H, H_kv;
  float scale, scale_log2;
};

// Arguments of a backward main kernel (layouts: kernels/attention.hpp; workspace rows padded
// to S_pad, a multiple of 128, padding rows lse2 = +inf, delta = 0).
struct BwdArgs {
  const __nv_bfloat16* q;     // [B, S, H, D]
  const __nv_bfloat16* k;     // [B, S, H_kv, D]
  const __nv_bfloat16* v;     // [B, S, H_kv, D]
  const __nv_bfloat16* dout;  // [B, S, H, D]
  const float* lse2;          // [B, H, S_pad]  lse * log2(e)
  const float* delta;         // [B, H, S_pad]  rowsum(dO * O)
  float* dq_accum;            // [B, S, H, D]   zeroed; receives dS K (unscaled)
  __nv_bfloat16* dk;          // [B, S, H_kv, D]
  __nv_bfloat16* dv;          // [B, S, H_kv, D]
  int S, S_pad, H, H_kv;
  float scale, scale_log2;
};

// Backward variant id of the wgmma kernel at D = 128 (bench/attn/attn_tuning.hpp kBwdVariants).
inline constexpr int kBwdVariantSm90a = 2048;
// Its TMA forms (attention_flash_bwd_sm90a_tma.cuh): three stages (kernels/ build it too), two (the lab).
inline constexpr int kBwdVariantSm90aTma3 = 8192, kBwdVariantSm90aTma2 = 12288;
// 8192 in FlashAttention-3's step order (kernels/ build it): dV before the barrier, then dQ, then dK, and the dQ atomics
// issued while dK is still in the tensor cores (docs/ATTENTION.md "FlashAttention-3's backward next to ours")
inline constexpr int kBwdVariantSm90aTma3DqUnderDk = 40960;
// 40960 with dQ added by one bulk reduction per warpgroup and step (the D = 128 default from 2026-12-06b until 368640;
// DQ_BULK in attention_flash_bwd_sm90a_tma.cuh): dq_accum in the fragment layout below, converted by
// bwd_convert_dq_frag.
inline constexpr int kBwdVariantSm90aTma3DqBulk = 106496;
// 106496 behind FlashAttention-3's producer warpgroup (PRODUCER in attention_flash_bwd_sm90a_tma.cuh; the D = 128
// default since 2026-12-06, fifth session): 384 threads, warpgroup 0 at 24 registers issues every TMA load, the two
// consumer warpgroups at 240 run 106496's steps; dq_accum in the same fragment layout.
inline constexpr int kBwdVariantSm90aTma3DqBulkProducer = 368640;
// The wgmma backward at head dim 64, TMA loads in three stages (attention_flash_bwd_sm90a_d64.cuh; kernels/ build it),
// and its form with dQ split by keys across the warpgroups (each its own 64 keys' share, added by atomics).
inline constexpr int kBwdVariantSm90aD64 = 16384, kBwdVariantSm90aD64Ksplit = 20480;
// 16384 in 40960's step order with 106496's dQ path (kernels/ build it, not the default; DQ_BULK in
// attention_flash_bwd_sm90a_d64.cuh): each warpgroup's dQ share [64 q x 32 d] staged in fragment order and added by
// one 8 KiB bulk reduction per step, dq_accum in the fragment layout below at D = 64.
inline constexpr int kBwdVariantSm90aD64DqBulk = 114688;
// 114688 with 128-row q tiles (FlashAttention-3's D = 64 tile; kernels/ build it, the D = 64 default since
// 2026-12-06c; attention_flash_bwd_sm90a_d64_q128.cuh bwd_kernel_q128): dq_accum in the 128-row tiles' fragment layout (dq_frag_q128_block below; run_bwd<64, 128>).
inline constexpr int kBwdVariantSm90aD64Q128 = 245760;
constexpr bool is_sm90a_bwd_variant(int v) {
  return v == kBwdVariantSm90a || v == kBwdVariantSm90aTma3 || v == kBwdVariantSm90aTma2 || v == kBwdVariantSm90aD64 ||
         v == kBwdVariantSm90aD64Ksplit || v == kBwdVariantSm90aTma3DqUnderDk || v == kBwdVariantSm90aTma3DqBulk ||
         v == kBwdVariantSm90aD64DqBulk || v == kBwdVariantSm90aD64Q128 || v == kBwdVariantSm90aTma3DqBulkProducer;
}
// The head dim a wgmma backward variant is built for
constexpr int sm90a_bwd_variant_head_dim(int v) {
  return v == kBwdVariantSm90aD64 || v == kBwdVariantSm90aD64Ksplit || v == kBwdVariantSm90aD64DqBulk ||
                 v == kBwdVariantSm90aD64Q128
             ? 64
             : 128;
}
// Whether wgmma backward variant v leaves dq_accum in the fragment layout below (run_bwd converts it so); 245760's
// layout is the 128-row tiles' one (sm90a_bwd_dq_frag_q128)
constexpr bool sm90a_bwd_dq_frag(int v) {
  return v == kBwdVariantSm90aTma3DqBulk || v == kBwdVariantSm90aTma3DqBulkProducer || v == kBwdVariantSm90aD64DqBulk;
}
constexpr bool sm90a_bwd_dq_frag_q128(int v) { return v == kBwdVariantSm90aD64Q128; }
// The fragment layout of dq_accum [B, S, H, D] fp32 under 106496 (D = 128) and 114688 (D = 64; the same number of
// floats): the S / 64 full 64-row q tiles of each (b, h) first, tile (b, h, mt) as two blocks [64 q x D/2 d] of
// 128 D bytes (16 KiB, 8 KiB), one per warpgroup (its D/2 columns), block element pair p (0 .. D/8 - 1) of warpgroup
// thread tw (0..127) at float (p * 128 + tw) * 2, holding the wgmma accumulators dq[2p], dq[2p + 1]: row
// 64 mt + 16 (tw / 32) + (tw % 32) / 4 + 8 (p % 2), columns (D/2) wg + 8 (p / 2) + 2 (tw % 4) + {0, 1}; then the
// S % 64 rows of each (b, h)'s last partial tile, row by row ([B][H][S % 64][D]). Every block starts at a multiple
// of 8 KiB from dq_accum (the bulk reductions need 16 bytes).
template <int D = 128>
__host__ __device__ constexpr std::int64_t dq_frag_block(int b, int h, int mt, int wg, int H, int S) {
  static_assert(D == 64 || D == 128, "the wgmma backward's head dims");
  return ((static_cast<std::int64_t>(b) * H + h) * (S / 64) + mt) * (64 * D) + wg * (64 * D / 2);
}
template <int D = 128>
__host__ __device__ constexpr std::int64_t dq_frag_tail_row(int b, int h, int r, int B, int H, int S) {
  static_assert(D == 64 || D == 128, "the wgmma backward's head dims");
  return static_cast<std::int64_t>(B) * H * (S / 64) * (64 * D) + ((static_cast<std::int64_t>(b) * H + h) * (S % 64) + r) * D;
}
// The fragment layout of dq_accum [B, S, H, 64] fp32 under 245760 (128-row q tiles at D = 64; the same number of
// floats): the S / 128 full 128-row q tiles of each (b, h) first, tile (b, h, mt) as two blocks [64 q x 64 d] of
// 16 KiB, block wg holding rows 128 mt + 64 wg .. + 63 (the rows whose dQ warpgroup wg computes, all 64 columns),
// block element pair p (0..15) of warpgroup thread tw (0..127) at float (p * 128 + tw) * 2, holding the wgmma
// accumulators dq[2p], dq[2p + 1]: row 128 mt + 64 wg + 16 (tw / 32) + (tw % 32) / 4 + 8 (p % 2), columns
// 8 (p / 2) + 2 (tw % 4) + {0, 1}; then the S % 128 rows of each (b, h)'s last partial tile, row by row
// ([B][H][S % 128][64]). Every block starts at a multiple of 16 KiB from dq_accum.
__host__ __device__ constexpr std::int64_t dq_frag_q128_block(int b, int h, int mt, int wg, int H, int S) {
  return ((static_cast<std::int64_t>(b) * H + h) * (S / 128) + mt) * (128 * 64) + wg * (64 * 64);
}
__host__ __device__ constexpr std::int64_t dq_frag_q128_tail_row(int b, int h, int r, int B, int H, int S) {
  return static_cast<std::int64_t>(B) * H * (S / 128) * (128 * 64) + ((static_cast<std::int64_t>(b) * H + h) * (S % 128) + r) * 64;
}

// Forward variant bits of the wgmma kernel (bench/attn/attn_tuning.hpp); D = 128, and D = 64 with bit 128:
// 2 the wgmma kernel, 4 (with 2) its pipelined form (softmax of tile n+1 during P V of tile n),
// 8 (with 4) the two warpgroups take turns at issuing, 16 (with 2|4|8) K/V by TMA into mbarrier-guarded
// stages (attention_flash_fwd_sm90a_tma.cuh), 32 (with 16) three stages for the full mask (the causal
// keeps two), 64 (with 16, the lab only) causal row blocks of every head longest first. kernels/ build only
// kFwdProductForm (below); the lab builds the other forms (bench/attn/attn_flash_fwd_sm90a_lab.cu).
inline constexpr int kFwdBitSm90a = 2;
inline constexpr int kFwdBitSm90aPipe = 4;
inline constexpr int kFwdBitSm90aPing = 8;
inline constexpr int kFwdBitTma = 16;
inline constexpr int kFwdBitTma3 = 32;
inline constexpr int kFwdBitTmaHeads = 64;
// 128 (with 16): D = 64 on the TMA form too (its D = 64 instance: one 64-column box per tile, O [64 x 64] per
// warpgroup); without it D = 64 runs the mma.sync forward.
inline constexpr int kFwdBitSm90aD64 = 128;
// 256 (with 16): FlashAttention-3's producer warpgroup (384 threads, setmaxnreg 24/240: one thread of warpgroup 0
// issues every TMA load, warpgroups 1-2 are the ping-pong consumers; attention_flash_fwd_sm90a_tma.cuh PRODUCER),
// 512 (with 256 and 32, the lab only) three K/V stages for the causal mask too, 1024 (with 256) 176-key K/V tiles in
// two stages for the full mask at D = 128 (BN = 176; the causal mask and D = 64 keep 128-key tiles).
inline constexpr int kFwdBitTmaProducer = 256;
inline constexpr int kFwdBitTmaProducer3 = 512;
inline constexpr int kFwdBitTmaProducer176 = 1024;
// The one wgmma form kernels/ build (attention_flash_fwd_sm90a.cu): the TMA form with the producer warpgroup, two
// stages for the causal mask, 176-key tiles in two stages for the full mask at D = 128, three 128-key stages at D = 64
inline constexpr int kFwdProductForm = kFwdBitSm90a | kFwdBitSm90aPipe | kFwdBitSm90aPing | kFwdBitTma | kFwdBitTma3 |
                                       kFwdBitTmaProducer | kFwdBitTmaProducer176;
// Whether forward variant v runs the wgmma kernel at this head dim (where sm90a_usable())
constexpr bool fwd_wgmma_at(int v, int head_dim) {
  if ((v & kFwdBitSm90a) == 0) return false;
  return head_dim == 128 || (head_dim == 64 && (v & kFwdBitTma) != 0 && (v & kFwdBitSm90aD64) != 0);
}

// True when this build holds the sm_90a kernels and the current device is compute capability 9.0.
bool sm90a_usable();

// Launch the wgmma forward (kFwdProductForm) for head dim 128 or 64 on `stream` (B = gridDim.z).
cudaError_t launch_fwd_sm90a(const FwdArgs& a, int B, bool causal, int head_dim, cudaStream_t stream);

// Launch the wgmma main kernel for head dim 128 on `stream` (B = gridDim.z): variant 2048.
cudaError_t launch_bwd_main_sm90a(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// The same in its TMA form with three stages (variant 8192; attention_flash_bwd_sm90a_tma.cuh).
cudaError_t launch_bwd_main_sm90a_tma3(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// The same in FlashAttention-3's step order (variant 40960).
cudaError_t launch_bwd_main_sm90a_tma3_dq_under_dk(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// 40960 with dQ by bulk reductions into the fragment layout (variant 106496; run_bwd's dq_frag converts it).
cudaError_t launch_bwd_main_sm90a_tma3_dq_bulk(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// 106496 behind the producer warpgroup (variant 368640; the same fragment-layout dq_accum).
cudaError_t launch_bwd_main_sm90a_tma3_dq_bulk_producer(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// The main kernel for head dim 64 (variant 16384; attention_flash_bwd_sm90a_d64.cu).
cudaError_t launch_bwd_main_sm90a_d64(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// The same in 40960's step order with dQ by bulk reductions into the fragment layout (variant 114688; run_bwd's
// dq_frag converts it).
cudaError_t launch_bwd_main_sm90a_d64_dq_bulk(const BwdArgs& a, int B, bool causal, cudaStream_t stream);
// 114688 with 128-row q tiles in two stages (variant 245760; dq_accum in dq_frag_q128_block's layout, converted by
// run_bwd<64, 128>).
cudaError_t launch_bwd_main_sm90a_d64_q128(const BwdArgs& a, int B, bool causal, cudaStream_t stream);

}  // namespace ulysses::kernels::flash
