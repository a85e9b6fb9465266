// core/flops.hpp: attention_flops() against a hand count at a tiny shape.
#include <catch2/catch.hpp>

#include "core/flops.hpp"

using namespace ulysses;

TEST_CASE("core: attention FLOPs match a hand count", "[core][flops]") {
  // B=2, S=3, H=2, D=4, full mask. Per batch and head, q k^T is S*S dot products of D multiply-adds
  // and p v the same: 2 * S*S*D = 72 multiply-adds = 144 FLOPs; times B*H = 4 -> 576.
  constexpr double hand = 2.0 /*matmuls*/ * 3 * 3 * 4 /*S*S*D MACs*/ * 2 /*FLOPs per MAC*/ * 2 * 2 /*B*H*/;
  static_assert(hand == 576);
  CHECK(core::attention_flops(2, 3, 2, 4, false) == hand);
  CHECK(core::attention_flops(2, 3, 2, 4, false, core::Pass::fwd) == hand);
  // causal: counted as half the full mask (FlashAttention's convention, not the S*(S+1)/2 triangle)
  CHECK(core::attention_flops(2, 3, 2, 4, true) == hand / 2);
  // backward: 2.5x the forward (five matmuls for two)
  CHECK(core::kAttnBwdFlopsFactor == 2.5);
  CHECK(core::attention_flops(2, 3, 2, 4, false, core::Pass::bwd) == 1440);
  CHECK(core::attention_flops(2, 3, 2, 4, true, core::Pass::bwd) == 720);
}

TEST_CASE("core: attention FLOPs at a large shape are exact in double", "[core][flops]") {
  // Llama-3.1-8B at S = 128K on 8 ranks: 4 local heads of 128, causal -> 2^44
  CHECK(core::attention_flops(1, 131072, 4, 128, true) == 17592186044416.0);
}
