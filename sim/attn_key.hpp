#pragma once
// Keys of calibrated attention-efficiency curves (profile `calibrated.attn_fwd_eff` /
// `attn_bwd_eff`, docs/INPUTS.md). Attention efficiency depends on the head dim, the mask and
// the heads per rank as much as on S, so a curve may be filed for one shape:
//   <impl>                           any shape (the original form)
//   <impl>@d<D>.<causal|full>        head dim D, causal or full (non-causal) mask
//   <impl>@d<D>.<causal|full>.h<Hl>  ... measured with Hl query heads per rank
//   <impl>@d<D>.<causal|full>.kv<n>  ... measured with n kv heads per rank (for kernels that
//                                    parallelise over kv heads, e.g. our flash backward)
// e.g. `ulysses_flash@d128.causal.h16`. Parsing allocates nothing (predict() calls it).
#include <cstdint>
#include <string_view>

namespace ulysses {

struct AttnCurveKey {
  std::string_view impl;   // the attn_implementation name
  std::int64_t D = 0;      // 0: any head dim
  int causal = -1;         // -1: any mask, 0: full, 1: causal
  std::int64_t h_local = 0;// 0: any heads per rank
  std::int64_t kv_local = 0;// 0: any kv heads per rank (at most one of h_local, kv_local is set)
};

// false when `key` does not follow the grammar above (the impl name is not checked here).
bool parse_attn_curve_key(std::string_view key, AttnCurveKey& out);

// Keys of calibrated exchange-phase curves (`calibrated.a2a_phase_GBps`): "<phase>@p<P>" with
// phase one of the block's exchanges (a2a.qkv.fwd, a2a.out.fwd, a2a.out.bwd, a2a.qkv.bwd), P >= 2.
bool parse_a2a_phase_key(std::string_view key, std::string_view& phase, std::int64_t& P);

}  // namespace ulysses
