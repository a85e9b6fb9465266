#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// FLOPs of one attention pass, counted as FlashAttention counts them (docs/DESIGN.md "Units"): the
// forward is two matmuls of 2*S*S*D FLOPs per head (q k^T and p v), 4*B*S^2*H*D, half when causal;
// the backward is kAttnBwdFlopsFactor times the forward (five matmuls for the forward's two).
#include <cstdint>

namespace ulysses::core {

inline constexpr double kAttnBwdFlopsFactor = 2.5;  // backward FLOPs / forward FLOPs

enum class Pass { fwd, bwd };

// B batch, S sequence length (all of it: attention runs on the whole sequence), H query heads, D head dim.
constexpr double attention_flops(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D, bool causal,
                                 Pass pass = Pass::fwd) {
  const double s = static_cast<double>(S);
  const double fwd = 4.0 * static_cast<double>(B) * s * s * static_cast<double>(H) * static_cast<double>(D) * (causal ? 0.5 : 1.0);
  return pass == Pass::fwd ? fwd : kAttnBwdFlopsFactor * fwd;
}

}  // namespace ulysses::core
