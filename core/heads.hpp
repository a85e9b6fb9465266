#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// The Ulysses head rules (docs/DESIGN.md): H query heads, H_kv kv heads, P sp ranks (all positive).
//   H % H_kv == 0                       every kv head serves H/H_kv query heads (GQA groups)
//   H % P == 0                          query heads split evenly over the ranks
//   H_kv % P == 0 or P % H_kv == 0      kv heads split (H_kv >= P) or replicated (P > H_kv)
// Callers word their own messages (the scenario checks name keys, the runtime names values).
#include <cstdint>

namespace ulysses::core {

enum class HeadRule { ok, kv_heads_divide_heads, heads_divisible_by_sp, kv_heads_split_or_replicated };

// H % H_kv == 0 (the rule without P).
constexpr bool kv_heads_divide(std::int64_t H, std::int64_t H_kv) { return H % H_kv == 0; }

// The first of the two sp rules that (H, H_kv, P) breaks, or ok.
constexpr HeadRule sp_head_rule(std::int64_t H, std::int64_t H_kv, std::int64_t P) {
  if (H % P != 0) return HeadRule::heads_divisible_by_sp;
  if (H_kv % P != 0 && P % H_kv != 0) return HeadRule::kv_heads_split_or_replicated;
  return HeadRule::ok;
}

// The first of all three rules that (H, H_kv, P) breaks, or ok.
constexpr HeadRule head_rule(std::int64_t H, std::int64_t H_kv, std::int64_t P) {
  return kv_heads_divide(H, H_kv) ? sp_head_rule(H, H_kv, P) : HeadRule::kv_heads_divide_heads;
}

}  // namespace ulysses::core
