#pragma once
// Keys of calibrated attention-efficiency curves (profile `calibrated.attn_fwd_eff` /
// `attn_bwd_eff`, docs/INPUTS.md). Attention efficiency depends on the head dim, the mask and
// the heads per rank as much as on S, so a curve may be filed for one shape:
//   <impl>                           any shape (the original form)
//   <impl>@d<D>.<causal|full>        head dim D, causal or full (non-causal) mask
//   <impl>@d<D>.<causal|full>.h<Hl>  ... measured with Hl query heads per rank
// e.g. `ulysses_flash@d128.causal.h16`. Parsing allocates nothing (predict() calls it).
#include <cstdint>
#include <string_view>

namespace ulysses {

struct AttnCurveKey {
  std::string_view impl;   // the attn_implementation name
  std::int64_t D = 0;      // 0: any head dim
  int causal = -1;         // -1: any mask, 0: full, 1: causal
  std::int64_t h_local = 0;// 0: any heads per rank
};

// false when `key` does not follow the grammar above (the impl name is not checked here).
bool parse_attn_curve_key(std::string_view key, AttnCurveKey& out);

}  // namespace ulysses
