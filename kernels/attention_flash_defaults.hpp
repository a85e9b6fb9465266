#pragma once
// The flash attention kernels' defaults (per head dim, the measured best: docs/ATTENTION.md)
// and the one line naming what runs. Private to kernels/ and the lab build of the tuning
// variants (bench/attn/attn_flash_lab.cu, whose table bench/attn/attn_tuning.hpp explains the
// variant numbers).
#include <string>

#include "kernels/attention_flash_sm90a.hpp"

namespace ulysses::kernels::flash {

// Forward: 1 D=64 with 128-key tiles (mma.sync, without sm_90a); D=128 on the wgmma kernel where usable in
// kFwdProductForm (attention_flash_sm90a.hpp): pipelined, the two warpgroups taking turns (ping-pong), K/V by TMA
// from FlashAttention-3's producer warpgroup (setmaxnreg), two stages (causal) or 176-key tiles in two (full); 128
// (kFwdBitSm90aD64): D=64 on the same form where usable (three 128-key stages for the full mask). 1471: +11-16 % over
// 191, the form without the producer, on the two rounds' mean at the four target points (+7.1-16.5 % per round; one H100,
// 2026-12-06c, docs/ATTENTION.md v18).
// A build may override it (-DULYSSES_FLASH_FWD_DEFAULT=N, e.g. 1 = mma.sync at both head dims) to run the GPU
// tests on another form.
#ifndef ULYSSES_FLASH_FWD_DEFAULT
#define ULYSSES_FLASH_FWD_DEFAULT (1 | kFwdProductForm | kFwdBitSm90aD64)
#endif
inline constexpr int kFwdDefault = ULYSSES_FLASH_FWD_DEFAULT;

// Backward: per head dim, the fastest variant measured that also passed the Catch2 [flash]
// gate as a compiled-in default; a build may override them (-DULYSSES_FLASH_BWD_DEFAULT_D128=N
// / _D64=N, any variant of bench/attn/attn_tuning.hpp) to run the GPU tests on another variant.
// D=128: the wgmma kernel's TMA form with FlashAttention-3's dQ path behind FlashAttention-3's producer warpgroup
// (368640: one thread of warpgroup 0, at 24 registers, issues every TMA load; +6.5-15 % over 106496 per round at the four
// target points, fp64 worst ratio 1.27, one H100, 2026-12-06 fifth session, records/gpu-runs/h100-2026-12-06d; 106496:
// each warpgroup's dQ block staged in shared memory and added to a fragment-layout dq_accum by one bulk reduction per
// step, +11-21 % over 40960, records/gpu-runs/h100-2026-12-06b/call1; 40960, FA3's step order, was
// +2.7-4.2 % over 8192 causal; 8192 was 3.5-7 % faster than the cp.async form 2048; docs/ATTENTION.md) where the
// build has sm_90a code and the device is
// sm_90, else the fastest mma.sync variant, 525 (kBwdFallbackD128). 1549 (525 + bit 10) measured
// faster than 525 at 32K (322 vs 317 TFLOP/s) but slower at 128K.
// D=64: the wgmma kernel with FlashAttention-3's step order, dQ path and 128-row q tiles, 245760 (+25-35 % over
// 114688 at the four target points, one H100, 2026-12-06c, records/gpu-runs/h100-2026-12-06c/call2; 114688, 106496's
// dQ path at D=64, was +5-14 % over 16384, level at 32K causal, one H200, 2026-12-06b; 16384 was +17-25 % over 1117,
// records/attn/bwd-d64-2026-12-03) where usable, else mma.sync 1117 (kBwdFallbackD64).
#ifndef ULYSSES_FLASH_BWD_DEFAULT_D128
#define ULYSSES_FLASH_BWD_DEFAULT_D128 368640
#endif
#ifndef ULYSSES_FLASH_BWD_DEFAULT_D64
#define ULYSSES_FLASH_BWD_DEFAULT_D64 245760
#endif
inline constexpr int kBwdDefaultD128 = ULYSSES_FLASH_BWD_DEFAULT_D128;
inline constexpr int kBwdDefaultD64 = ULYSSES_FLASH_BWD_DEFAULT_D64;
inline constexpr int kBwdFallbackD128 = 525, kBwdFallbackD64 = 1117;
static_assert(!is_sm90a_bwd_variant(kBwdDefaultD64) || sm90a_bwd_variant_head_dim(kBwdDefaultD64) == 64,
              "a wgmma backward runs at its own head dim only");

// The mma.sync variant of the default backward at head dim D (compiled in)
template <int D>
inline constexpr int kBwdMmaDefault =
    D == 64 ? (is_sm90a_bwd_variant(kBwdDefaultD64) ? kBwdFallbackD64 : kBwdDefaultD64)
            : (is_sm90a_bwd_variant(kBwdDefaultD128) ? kBwdFallbackD128 : kBwdDefaultD128);

// The backward variant that runs when `v` is asked for at this head dim: the wgmma kernels
// (2048, 8192, 12288, 40960, 106496, 368640 at D = 128; 16384, 20480, 114688, 245760 at D = 64) only at their head dim on a device
// they are built for; elsewhere the mma.sync default.
inline int bwd_variant_run(int v, int head_dim) {
  if (!is_sm90a_bwd_variant(v)) return v;
  if (head_dim == sm90a_bwd_variant_head_dim(v) && sm90a_usable()) return v;
  return head_dim == 64 ? kBwdMmaDefault<64> : kBwdFallbackD128;
}

// e.g. "wgmma sm_90a fwd 1471 / bwd 368640" or "mma.sync fwd 1471 / bwd 1117" (forward variant fv, whose bits
// above 1 apply at D=64 only with bit 128;
// backward variant bv as it runs at this head dim)
inline std::string kernels_in_use(int fv, int bv, int head_dim) {
  const bool fwd_wgmma = fwd_wgmma_at(fv, head_dim) && sm90a_usable();
  const bool bwd_wgmma = is_sm90a_bwd_variant(bv);
  auto family = [](bool w) { return std::string(w ? "wgmma sm_90a" : "mma.sync"); };
  const std::string f = family(fwd_wgmma) + " fwd " + std::to_string(fv);
  const std::string b = "bwd " + std::to_string(bv);
  return fwd_wgmma == bwd_wgmma ? f + " / " + b : f + " / " + family(bwd_wgmma) + " " + b;
}

}  // namespace ulysses::kernels::flash
