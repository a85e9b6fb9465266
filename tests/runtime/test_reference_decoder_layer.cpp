// The fp64 decoder layer (runtime/reference_decoder_layer.hpp) on identities its formula implies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/reference_decoder_layer.hpp"
#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"

using namespace ulysses;
using core::bf16;
using runtime::random_bf16;

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

// The backward against central differences of the forward: with the norms' bf16 rounding off the layer
// is smooth (autograd treats that rounding as the identity), so every input and parameter gradient of
// L = <dy, y> is a slope. x is fp64 (steps of 1e-6); parameters are bf16 (steps of about 3 % of the value,
// rounded to bf16: the slope over the rounded points).
namespace {
void check_against_central_differences(bool qk_norm) {
  runtime::DecoderLayerDims d;
  d.T = 8, d.h = 16, d.H = 2, d.H_kv = 1, d.D = 8, d.F = 32, d.round_normalized = false, d.qk_norm = qk_norm;
  const std::int64_t T = d.T, h = d.h, F = d.F, HD = d.H * d.D, KD = d.H_kv * d.D;
  runtime::DecoderLayerParams<std::vector<bf16>> p{random_bf16(h, 11, 0.3f), random_bf16(HD * h, 12, 0.3f),
                                                   random_bf16(KD * h, 13, 0.3f), random_bf16(KD * h, 14, 0.3f),
                                                   random_bf16(h * HD, 15, 0.3f), random_bf16(h, 16, 0.3f),
                                                   random_bf16(F * h, 17, 0.3f), random_bf16(F * h, 18, 0.3f),
                                                   random_bf16(h * F, 19, 0.3f)};
  if (qk_norm) {  // Qwen3's head norms near 1, as trained ones are
    p.wqn = random_bf16(d.D, 22, 0.3f), p.wkn = random_bf16(d.D, 23, 0.3f);
    for (auto* w : {&p.wqn, &p.wkn})
      for (auto& v : *w) v = core::float_to_bf16(1.f + core::bf16_to_float(v));
  }
  std::vector<std::int64_t> pos(T);
  for (std::int64_t t = 0; t < T; ++t) pos[t] = 3 * t;
  std::vector<bf16> cos, sin;
  runtime::rope_tables(T, d.D, pos.data(), 10000.0, cos, sin);
  const std::vector<double> x = runtime::widen(random_bf16(T * h, 20)), dy = runtime::widen(random_bf16(T * h, 21));
  const auto r = runtime::decoder_layer_reference(d, p, x, dy, cos, sin);
  const auto loss = [&](const runtime::DecoderLayerParams<std::vector<bf16>>& q, const std::vector<double>& xx) {
    const auto y = runtime::decoder_layer_reference(d, q, xx, {}, cos, sin).y;
    double L = 0;
    for (std::size_t i = 0; i < y.size(); ++i) L += dy[i] * y[i];
    return L;
  };
  for (const std::int64_t i : {0, 37, 77, 127}) {
    auto xp = x, xm = x;
    xp[i] += 1e-6, xm[i] -= 1e-6;
    INFO("dx[" << i << "]");
    CHECK(r.dx[i] == Approx((loss(p, xp) - loss(p, xm)) / 2e-6).epsilon(1e-5).margin(1e-6));
  }
  using P = runtime::DecoderLayerParams<std::vector<bf16>>;
  using G = runtime::DecoderLayerParams<std::vector<double>>;
  std::vector<std::pair<const char*, std::pair<std::vector<bf16> P::*, std::vector<double> G::*>>> each = {
      {"w1", {&P::w1, &G::w1}}, {"wq", {&P::wq, &G::wq}}, {"wk", {&P::wk, &G::wk}}, {"wv", {&P::wv, &G::wv}},
      {"wo", {&P::wo, &G::wo}}, {"w2", {&P::w2, &G::w2}}, {"wg", {&P::wg, &G::wg}}, {"wu", {&P::wu, &G::wu}},
      {"wd", {&P::wd, &G::wd}}};
  if (qk_norm) each.push_back({"wqn", {&P::wqn, &G::wqn}}), each.push_back({"wkn", {&P::wkn, &G::wkn}});
  for (const auto& [name, m] : each) {
    const std::vector<bf16>& w = p.*(m.first);
    for (const std::size_t i : {std::size_t{0}, w.size() / 2, w.size() - 1}) {
      const double v = core::bf16_to_float(w[i]), step = std::max(std::fabs(v), 0.05) * 0.03;
      const bf16 up = core::float_to_bf16(float(v + step)), dn = core::float_to_bf16(float(v - step));
      P pp = p, pm = p;
      (pp.*(m.first))[i] = up, (pm.*(m.first))[i] = dn;
      const double slope = (loss(pp, x) - loss(pm, x)) / (double(core::bf16_to_float(up)) - core::bf16_to_float(dn));
      INFO("d" << name << "[" << i << "]: " << (r.dparams.*(m.second))[i] << " vs " << slope);
      CHECK((r.dparams.*(m.second))[i] == Approx(slope).epsilon(2e-2).margin(2e-4));
    }
  }
}
}  // namespace

TEST_CASE("reference decoder layer: every gradient against central differences", "[runtime][layer]") {
  check_against_central_differences(false);
}

TEST_CASE("reference decoder layer with Qwen3's head norms: every gradient against central differences", "[runtime][layer]") {
  check_against_central_differences(true);
}
