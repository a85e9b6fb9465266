// The fp64 decoder layer (runtime/reference_decoder_layer.hpp) on identities its formula implies.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "runtime/reference_decoder_layer.hpp"
#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"

using namespace ulysses;
using core::bf16;
using runtime::random_bf16;

namespace {
}  // namespace

TEST_CASE("reference decoder layer: with o_proj and down_proj zero the layer is the identity", "[runtime][layer]") {
  runtime::DecoderLayerDims d;
  d.T = 16, d.h = 32, d.H = 2, d.H_kv = 1, d.D = 16, d.F = 64;
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  runtime::DecoderLayerParams<std::vector<bf16>> p{random_bf16(h, 1), random_bf16(HD * h, 2), random_bf16(KD * h, 3),
                                                   random_bf16(KD * h, 4), std::vector<bf16>(h * HD, 0), random_bf16(h, 5),
                                                   random_bf16(F * h, 6), random_bf16(F * h, 7), std::vector<bf16>(h * F, 0)};
  std::vector<std::int64_t> pos(T);
  for (std::int64_t t = 0; t < T; ++t) pos[t] = t;
  std::vector<bf16> cos, sin;
  runtime::rope_tables(T, d.D, pos.data(), 10000.0, cos, sin);
  const auto x = random_bf16(T * h, 8), dy = random_bf16(T * h, 9);
  const auto r = runtime::decoder_layer_reference(d, p, runtime::widen(x), runtime::widen(dy), cos, sin);
  for (std::int64_t i = 0; i < T * h; ++i) {
    CHECK(r.y[i] == core::bf16_to_float(x[i]));   // y = x + 0 + 0
    CHECK(r.dx[i] == core::bf16_to_float(dy[i])); // nothing flows back through the zeroed projections
  }
  // what does flow: dWd = dy^T act and dWo = dy^T o are not zero; every other gradient is
  double swd = 0, swo = 0, sq = 0;
  for (double v : r.dparams.wd) swd += v * v;
  for (double v : r.dparams.wo) swo += v * v;
  for (double v : r.dparams.wq) sq += v * v;
  CHECK(swd > 0);
  CHECK(swo > 0);
  CHECK(sq == 0);
}
