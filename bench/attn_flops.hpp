#pragma once
// The FLOPs of one attention pass as bench/ counts them: every bench and the sweep's estimate
// call attn_flops() here, the one call of the formula (runtime/reference_attention.hpp:
// fwd 4*B*S^2*H*D, half when causal; bwd 2.5x fwd).
#include <cstdint>

#include "runtime/reference_attention.hpp"

namespace ulysses::bench {

struct AttnFlops {
  double fwd = 0, bwd = 0;
};

inline AttnFlops attn_flops(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D,
                            bool causal) {
  const runtime::AttnDims a{B, S, H, H_kv, D, causal};
  return {runtime::attention_fwd_flops(a), runtime::attention_bwd_flops(a)};
}

}  // namespace ulysses::bench
