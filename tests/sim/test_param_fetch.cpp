// Our runtime's parameter fetch under offload_params (sim/param_fetch.hpp): what shows, by hand arithmetic.
#include <catch2/catch.hpp>

#include "sim/param_fetch.hpp"

using ulysses::ParamFetch;
using ulysses::ulysses_param_fetch_s;

namespace {
// 10 bytes of embedding, 6 of final norm and lm_head, 4 per layer; 1 B/s alone, 2 B/s while the GPU computes;
// a layer's forward 1 s, its backward 1.5 s
ParamFetch small(std::int64_t L) {
  ParamFetch f;
  f.L = L, f.embed_bytes = 10, f.rest_bytes = 6, f.layer_bytes = 4, f.idle_Bps = 1, f.busy_Bps = 2;
  f.layer_fwd = 1, f.layer_bwd = 1.5;
  return f;
}
}  // namespace

TEST_CASE("param fetch: the start whole, each fetch ahead by what its layer does not hide", "[sim][param_fetch]") {
  // 4 layers: the embedding and layer 0 at the start (14 s); in the forward (6 + 4) / 2 - 1 = 4 s during layer 0,
  // 4 / 2 - 1 = 1 s during layers 1 and 2, nothing during layer 3; in the backward layers 1 and 0 ahead during
  // layers 2 and 1: 2 x (2 - 1.5) s; layers 3 and 2 are still in their slots
  CHECK(ulysses_param_fetch_s(small(4)) == Approx(14 + 4 + 1 + 1 + 2 * 0.5));
  // 2 layers: both stay in their slots for the backward
  CHECK(ulysses_param_fetch_s(small(2)) == Approx(14 + 4));
  // 1 layer: the final norm and lm_head during layer 0 alone
  CHECK(ulysses_param_fetch_s(small(1)) == Approx(14 + 3 - 1));
  // layers long enough hide every fetch ahead
  ParamFetch slow = small(8);
  slow.layer_fwd = slow.layer_bwd = 10;
  CHECK(ulysses_param_fetch_s(slow) == Approx(14));
}

TEST_CASE("param fetch: a checkpoint coming back shares the backward's link", "[sim][param_fetch]") {
  // 2 checkpoint bytes per backward window: alone 1 s (hidden by 1.5 s); with a layer's 4 bytes 3 s, 1.5 s showing,
  // all of it the fetch's (the checkpoint alone would not show)
  ParamFetch f = small(4);
  f.ckpt_bwd_bytes = 2;
  CHECK(ulysses_param_fetch_s(f) == Approx(14 + 4 + 1 + 1 + 2 * 1.5));
  // a checkpoint that shows by itself keeps its own excess (offload.ckpt.h2d): the fetch adds its bytes' time
  f.ckpt_bwd_bytes = 4;  // alone 2 s, 0.5 s showing; with the layer 4 s, 2.5 s showing: 2 s the fetch's
  CHECK(ulysses_param_fetch_s(f) == Approx(14 + 4 + 1 + 1 + 2 * 2.0));
}
