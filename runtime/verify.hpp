#pragma once
// The checks of one validated block run, shared by both backends (runtime/verify.cpp): what the
// ranks kept from their validating iteration, compared with the full-sequence inputs through the
// layout maps (exchange, bit-exact) and with the fp64 single-rank oracle (attention, tolerance).
#include <cstdint>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/backend.hpp"

namespace ulysses::runtime {

// Full-sequence inputs of one run (bf16 bits; each backend draws its own values):
//   q, dout [B,S,H,D]   k, v [B,S,H_kv,D]
struct BlockInputs {
  std::vector<core::bf16> q, k, v, dout;
};

// What rank r kept from the validating iteration (layouts of core/layout.hpp:
// x_seq [B,S_l,H,D], x_head [B,S,H_l,D]; k, v and their gradients with H_kv heads).
struct RankResult {
  std::vector<core::bf16> q_head, k_head, v_head, o_head, o_seq, dout_head;
  std::vector<core::bf16> dq_head, dk_head, dv_head, dq_seq, dk_seq, dv_seq;
  std::vector<core::bf16> q_roundtrip;  // head_to_seq(seq_to_head(q_seq)): must equal q_seq
};

// The checks of one validated run: exchange bit-exact against a direct gather from the layout
// maps, the inverse identity, and Ulysses vs an fp64 single-rank oracle (rules in verify.cpp).
std::vector<Check> verify_block(const BlockShape& s, const BlockInputs& in, const std::vector<RankResult>& ranks);

}  // namespace ulysses::runtime
