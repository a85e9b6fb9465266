#pragma once
// Tuning variants of the flash attention kernels (the lab: built only into bench/attn's
// attn_check by attn_flash_lab.cu; the product's kernels/ run the defaults,
// kernels/attention_flash_defaults.hpp), for side-by-side measurement with attn_check
// --fwd-variant / --bwd-variant. The defaults are the measured best (docs/ATTENTION.md).
//   forward bits: 1 D=64 with 128-key tiles (else 64; the mma.sync D=128 kernel always uses 64),
//   2 D=128 on the Hopper warpgroup-MMA forward (kernels/attention_flash_fwd_sm90a.cuh; built here by
//   attn_flash_fwd_sm90a_lab.cu in every form, kernels/ build only 2|4|8|16|32; sm_90a builds on
//   an sm_90 device; elsewhere the mma.sync kernel runs), 4 (with 2) its pipelined form, 8 (with
//   4) the two warpgroups taking turns at issuing (ping-pong), 16 (with 2|4|8) K/V by TMA into
//   mbarrier-guarded stages (kernels/attention_flash_fwd_sm90a_tma.cuh), 32 (with 16) three stages
//   for the full mask (the causal keeps two), 64 (with 16) causal row blocks of every head longest
//   first (heads fastest in the grid), 128 (with 16) D=64 on the TMA form too (else mma.sync at D=64).
//   256 (with 16; kFwdBitTmaProducer; with 1024 the default since 2026-12-06c) FlashAttention-3's producer warpgroup: 384 threads, warpgroup 0
//   setmaxnreg.dec 24 and one of its threads issues every TMA load, warpgroups 1-2 setmaxnreg.inc 240 and are the
//   two consumers (ping-pong, intra-warpgroup overlap) without loads (kernels/attention_flash_fwd_sm90a_tma.cuh
//   PRODUCER); 512 (with 256 and 32) three K/V stages for the causal mask too. E.g. 447 = 191 + 256, 959 = 447 + 512.
//   1024 (with 256; kFwdBitTmaProducer176) 176-key K/V tiles for the full mask at D=128 in two stages (bit 32 then
//   applies to D=64 only; the causal mask and D=64 keep 128-key tiles): FlashAttention-3's hdim-128 forward without a
//   mask, producer + 2 consumers at 240 registers + 128 x 176 tiles + 2 stages (kernels/attention_flash_fwd_sm90a_tma.cuh
//   BN = 176). E.g. 1471 = 447 + 1024, 1983 = 959 + 1024.
//   Valid: 0..15, and 30/31 +32/+64/+128/+256, +512 with 256 and 32, +1024 with 256. The defaults:
//   kernels/attention_flash_defaults.hpp (the one place).
//   Tried and dropped: 176-key tiles in two stages for the full mask at D=128 without the producer warpgroup (the old
//   447: -1 to -3 % against 191's 128-key tiles in three stages on one H200, docs/ATTENTION.md v17; commit 3a1e2ea).
//   backward: bits (kernels/attention_flash_bwd.cuh, BwdCfg): 1 stmatrix for P^T/dS^T, 2 float4 dQ
//   atomics, 4 softmax inside the dP^T pass, 8 next-step copies after the S^T pass (no division,
//   no branch), 16 D=64 with 128-row q tiles, 32 FA2's dV / dQ / dK order, 64 own-query dV/dK
//   k-steps from registers before the barrier, 128 one __syncthreads per step (mbarrier
//   arrival), 256 q tiles last to first, 512 ldmatrix ahead of both barriers, 1024 branch-free dQ
//   reductions (rows past S add their zero dQ to row S-1). 2048: a different kernel, the
//   Hopper warpgroup-MMA backward (attention_flash_bwd_sm90a.cu; D=128, sm_90a builds on an
//   sm_90 device; elsewhere bwd_variant() reports the mma.sync default that runs instead).
//   8192 / 12288: 2048 with Q, dO and the lse2/delta rows by TMA into three / two mbarrier-guarded stages and
//   dS^T double-buffered (kernels/attention_flash_bwd_sm90a_tma.cuh; kernels/ build 8192 too).
//   16384: the wgmma backward at D=64 (kernels/attention_flash_bwd_sm90a_d64.cuh: 8192's step at half the head
//   dim, K/V by TMA too; kernels/ build it; the lab builds 20480 only, attn_flash_bwd_sm90a_d64_lab.cu); 20480: 16384
//   with dQ split by keys (each warpgroup its 64 keys' share of the whole dQ tile, a warpgroup barrier instead
//   of __syncthreads, twice the atomics). At D=128, and without sm_90a, the mma.sync default runs instead.
//   40960: 8192 in FlashAttention-3's step order (dV before the barrier, then dQ, then dK; the dQ atomics while dK
//   runs; D=128 only; kernels/ build it; the default on 2026-12-06). 106496: 40960 with each warpgroup's dQ block
//   staged in shared memory in fragment order and added by one cp.reduce.async.bulk per step (FlashAttention-3's dQ
//   path; dq_accum in the fragment layout, attention_flash_sm90a.hpp dq_frag_block; the default since 2026-12-06b,
//   +11-21 % over 40960 on one H100).
//   So over 8192 (D=128) and 16384 (D=64): bit 32768 FlashAttention-3's step order, bit 65536 (with 32768) its dQ path.
//   114688 = 16384 | 32768 | 65536: 106496 at D=64 (kernels/attention_flash_bwd_sm90a_d64.cuh DQ_BULK: 16384 in the
//   step order dV, barrier, dQ, dK, each warpgroup's dQ share [64 q x 32 d] staged in fragment order while dK runs and
//   added by one 8 KiB cp.reduce.async.bulk per step; dq_accum in dq_frag_block<64>'s layout, bwd_convert_dq_frag<64>;
//   kernels/ build it, the D=64 default 2026-12-06b to 2026-12-06c; the lab runs kernels/' instance).
//   245760 = 114688 | 131072: bit 131072 (with 114688) 128-row q tiles, FlashAttention-3's D=64 tile (the wgmma form of
//   the mma.sync era's bit 16): S^T/dP^T m64n128 per warpgroup, dV/dK over k = 128 q, dQ split by q rows (each
//   warpgroup 64 q x 64 d over the 128 keys, one 16 KiB bulk reduction per step into dq_frag_q128_block's layout,
//   run_bwd<64, 128>), two TMA stages of Q/dO [128 x 64] (kernels/attention_flash_bwd_sm90a_d64_q128.cuh bwd_kernel_q128;
//   kernels/ build it, the D=64 default since 2026-12-06c: +25-35 % over 114688; the lab runs kernels/' instance).
//   368640 = 106496 | 262144: bit 262144 (with 106496) FlashAttention-3's producer warpgroup: 384 threads, warpgroup 0
//   setmaxnreg.dec 24 and one of its threads issues every TMA load (Q, dO, lse2/delta rows), warpgroups 1-2
//   setmaxnreg.inc 240 run 106496's compute without loads (kernels/attention_flash_bwd_sm90a_tma.cuh PRODUCER; kernels/
//   build it, the D=128 default since 2026-12-06, fifth session: +6.5-15 % over 106496; the lab runs kernels/' instance).
//   Only kBwdVariants are built. The defaults per head dim, and the mma.sync fallbacks without sm_90a:
//   kernels/attention_flash_defaults.hpp.
// Tried and dropped after measurement (docs/ATTENTION.md, commit 98953d6): dQ before dK/dV in
// the backward (-7%), one-register XOR ldmatrix addressing (fwd -6%, bwd -3..5%).
// H200, D=128 causal S=32K H=16, bwd TFLOP/s (docs/ATTENTION.md, Versions): variants 0..3
// 289 293 288 290 (v3 era); runs 1-3 of this tuning: 1: 291-295, 13: 313-316, 525: 317-318,
// 1549: 322 (FA2 317-318 in the same calls); D=64 32K: 1: 237, 93: 289-292, 1117: 298 (FA2 281).
// fwd D=64 causal 32K: variant 0 291, variant 1 305.
#include <string>

#include "kernels/attention_flash_sm90a.hpp"

namespace ulysses::bench::attn {

inline constexpr int kBwdVariants[] = {0,   1,   2,   3,   5,   9,   13,   15,   29,   45,   61,   77,   93,  109,   125,
                                       141, 157, 205, 221, 461, 477, 525, 1037, 1117, 1549, 1565, 2048, 8192, 12288,
                                       16384, 20480, 40960, 106496, 114688, 245760, 368640};
// Backward bit 262144 (with 106496: variant 368640, kernels/ build it, the D=128 default) is that variant only
inline constexpr int kBwdBitProducer = 262144;
static_assert((kernels::flash::kBwdVariantSm90aTma3DqBulk | kBwdBitProducer) == kernels::flash::kBwdVariantSm90aTma3DqBulkProducer,
              "368640 = 106496 | bit 262144");

constexpr bool bwd_variant_exists(int v) {
  for (int x : kBwdVariants) {
    if (x == v) return true;
  }
  return false;
}

void set_fwd_variant(int v);  // fwd_variant_exists(v) (bits above)
void set_bwd_variant(int v);      // one of kBwdVariants, for every head dim
int fwd_variant();
int bwd_variant(int head_dim);   // the variant the backward runs at this head dim
// What runs at this head dim on the current device, e.g. "wgmma sm_90a fwd 15 / bwd 2048" or
// "mma.sync fwd 1 / bwd 1117".
std::string kernels_in_use(int head_dim);

// Forward bits 256, 512, 1024 (the producer warpgroup, its three causal stages, its 176-key full-mask tiles):
// kernels/attention_flash_sm90a.hpp, beside the other bits
using kernels::flash::kFwdBitTmaProducer;
using kernels::flash::kFwdBitTmaProducer3;
using kernels::flash::kFwdBitTmaProducer176;
// Every forward variant is below this (attn_check lists the valid ones up to it)
inline constexpr int kFwdVariantEnd = 2048;

// A forward variant the lab builds: 0..15, or the TMA form's bits over the pipelined ping-pong form (with
// 128: its D=64 instance too; with 256: the producer warpgroup; 512 only with 256 and 32; 1024 only with 256)
constexpr bool fwd_variant_exists(int v) {
  if (v >= 0 && v <= 15) return true;
  // 512: three causal stages of the producer form, which needs the three full-mask stages (32) as well
  if ((v & kFwdBitTmaProducer3) != 0 && ((v & kFwdBitTmaProducer) == 0 || (v & kernels::flash::kFwdBitTma3) == 0)) return false;
  // 1024: 176-key tiles in the producer form only (without it, v17 of docs/ATTENTION.md: dropped)
  if ((v & kFwdBitTmaProducer176) != 0 && (v & kFwdBitTmaProducer) == 0) return false;
  return v > 0 && v < kFwdVariantEnd && (v & kernels::flash::kFwdBitTma) != 0 && (v & 14) == 14;
}

// The wgmma forward (D = 128; the TMA form also D = 64) in the form of forward bits 4 (pipelined), 8
// (ping-pong, with 4), 16/32/64/256/512/1024 (the TMA form) of v (attn_flash_fwd_sm90a_lab.cu, built for sm_90a;
// cudaErrorNotSupported where !sm90a_usable())
cudaError_t launch_fwd_sm90a_variant(const kernels::flash::FwdArgs& a, int B, bool causal, int head_dim, int v,
                                     cudaStream_t stream);

// The wgmma backward's main kernel in its TMA form with two stages (bwd variant 12288), D = 128
// (attn_flash_bwd_sm90a_lab.cu; cudaErrorNotSupported where !sm90a_usable()); the other TMA forms are kernels/'
cudaError_t launch_bwd_main_sm90a_tma2(const kernels::flash::BwdArgs& a, int B, bool causal, cudaStream_t stream);

// The wgmma backward's main kernel at D = 64 with dQ split by keys (bwd variant 20480, the lab only;
// attn_flash_bwd_sm90a_d64_lab.cu; cudaErrorNotSupported where !sm90a_usable()). 16384, 114688 and 245760 run
// kernels/' own instances (attention_flash_bwd.cuh launch_bwd_sm90a_d64).
cudaError_t launch_bwd_main_sm90a_d64_ksplit(const kernels::flash::BwdArgs& a, int B, bool causal, cudaStream_t stream);

}  // namespace ulysses::bench::attn
