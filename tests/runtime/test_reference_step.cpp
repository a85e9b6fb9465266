// The fp64 training step (runtime/reference_step.hpp): tiled logits give the same loss and gradients
// as untiled; the loss split over two sequence-parallel halves with the labels shifted before the
// split and the token-weighted divisor equals the whole sequence's (a mean of the halves' means does
// not); the loss head's gradients against central differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"
#include "runtime/reference_step.hpp"

using namespace ulysses;
using core::bf16;
using runtime::random_bf16;

namespace {


struct Setup {
  runtime::StepDims d;
  runtime::StepParams p;
  std::vector<std::int64_t> tokens;
  std::vector<bf16> cos, sin;
};

Setup tiny(std::int64_t L, bool tied, std::int64_t T = 12) {
  Setup s;
  auto& ld = s.d.layer;
  ld.T = T, ld.h = 16, ld.H = 2, ld.H_kv = 1, ld.D = 8, ld.F = 32;
  s.d.L = L, s.d.V = 40, s.d.tied = tied;
  const std::int64_t h = ld.h, HD = ld.H * ld.D, KD = ld.H_kv * ld.D, F = ld.F;
  s.p.embed = random_bf16(s.d.V * h, 1, 1.f);
  s.p.w_final = random_bf16(h, 2, 1.f);
  if (!tied) s.p.lm_head = random_bf16(s.d.V * h, 3, 0.3f);
  for (std::int64_t l = 0; l < L; ++l) {
    const std::uint32_t b = 10 + 10 * std::uint32_t(l);
    s.p.layers.push_back({random_bf16(h, b, 1.f), random_bf16(HD * h, b + 1, 0.25f), random_bf16(KD * h, b + 2, 0.25f),
                          random_bf16(KD * h, b + 3, 0.25f), random_bf16(h * HD, b + 4, 0.25f), random_bf16(h, b + 5, 1.f),
                          random_bf16(F * h, b + 6, 0.25f), random_bf16(F * h, b + 7, 0.25f), random_bf16(h * F, b + 8, 0.2f)});
  }
  std::mt19937 g(7);
  for (std::int64_t t = 0; t < T; ++t) s.tokens.push_back(std::int64_t(g() % std::uint32_t(s.d.V)));
  std::vector<std::int64_t> pos(T);
  for (std::int64_t t = 0; t < T; ++t) pos[t] = t;
  runtime::rope_tables(T, ld.D, pos.data(), 10000.0, s.cos, s.sin);
  return s;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i])), scale = std::max(scale, std::fabs(b[i]));
  return m / scale;
}

}  // namespace

TEST_CASE("reference step: labels shifted once over the whole sequence", "[runtime][step]") {
  const auto l = runtime::shift_labels({5, 6, 7});
  CHECK(l == std::vector<std::int64_t>{6, 7, runtime::kIgnoreLabel});
}

TEST_CASE("reference step: tiled logits equal untiled, loss and every gradient", "[runtime][step]") {
  for (const bool tied : {false, true}) {
    const Setup s = tiny(2, tied);
    const auto labels = runtime::shift_labels(s.tokens);
    const auto a = runtime::step_reference(s.d, s.p, s.tokens, labels, s.cos, s.sin, 1);
    const auto b = runtime::step_reference(s.d, s.p, s.tokens, labels, s.cos, s.sin, 5);  // chunks of 3: 4 shards
    INFO("tied " << tied);
    CHECK(a.valid_tokens == 11);
    CHECK(std::isfinite(a.loss));
    CHECK(a.loss > 0);
    CHECK(b.loss_sum == Approx(a.loss_sum).epsilon(1e-12));
    CHECK(max_rel(b.d_embed, a.d_embed) < 1e-12);
    CHECK(max_rel(b.d_final, a.d_final) < 1e-12);
    if (!tied) CHECK(max_rel(b.d_head, a.d_head) < 1e-12);
    CHECK(max_rel(b.d_layers[0].wq, a.d_layers[0].wq) < 1e-12);
    CHECK(max_rel(b.d_layers[1].wd, a.d_layers[1].wd) < 1e-12);
  }
}

TEST_CASE("reference step: the loss over two sequence-parallel halves is token-weighted", "[runtime][step]") {
  // without layers every token's loss is its own, so two halves of the sequence are two SP ranks
  Setup s = tiny(0, false, 12);
  auto labels = runtime::shift_labels(s.tokens);
  labels[2] = labels[3] = labels[4] = runtime::kIgnoreLabel;  // the first half has fewer valid tokens
  const auto whole = runtime::step_reference(s.d, s.p, s.tokens, labels, s.cos, s.sin);
  Setup half = tiny(0, false, 6);
  const std::vector<std::int64_t> t0(s.tokens.begin(), s.tokens.begin() + 6), t1(s.tokens.begin() + 6, s.tokens.end());
  const std::vector<std::int64_t> l0(labels.begin(), labels.begin() + 6), l1(labels.begin() + 6, labels.end());
  half.p = s.p;
  const auto r0 = runtime::step_reference(half.d, half.p, t0, l0, half.cos, half.sin, 1, whole.valid_tokens);
  const auto r1 = runtime::step_reference(half.d, half.p, t1, l1, half.cos, half.sin, 1, whole.valid_tokens);
  CHECK(r0.valid_tokens == 3);  // 6 positions, 3 ignored
  CHECK(r1.valid_tokens == 5);  // 6 positions, the sequence's last ignored
  CHECK(whole.valid_tokens == 8);
  CHECK((r0.loss_sum + r1.loss_sum) / double(whole.valid_tokens) == Approx(whole.loss).epsilon(1e-12));
  // a mean of the ranks' means weighs a token of the emptier rank more: not the loss
  CHECK(std::fabs((r0.loss + r1.loss) / 2 - whole.loss) > 1e-3 * whole.loss);
  std::vector<double> sum(whole.d_head.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = r0.d_head[i] + r1.d_head[i];
  CHECK(max_rel(sum, whole.d_head) < 1e-12);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = r0.d_embed[i] + r1.d_embed[i];
  CHECK(max_rel(sum, whole.d_embed) < 1e-12);
}

TEST_CASE("reference step: the loss head's gradients against central differences", "[runtime][step]") {
  Setup s = tiny(1, false);
  const auto labels = runtime::shift_labels(s.tokens);
  const auto r = runtime::step_reference(s.d, s.p, s.tokens, labels, s.cos, s.sin);
  // the loss is smooth in lm_head and in the final norm's weight (they do not change the rounded
  // normalized value); perturb bf16 parameters by whole steps of their own size and compare slopes
  const auto loss_with = [&](auto change) {
    runtime::StepParams q = s.p;
    change(q);
    return runtime::step_reference(s.d, q, s.tokens, labels, s.cos, s.sin).loss;
  };
  for (const std::int64_t i : {0, 17, 333, 600}) {
    const double w = core::bf16_to_float(s.p.lm_head[i]), step = std::max(std::fabs(w), 0.05) * 0.03;
    const double up = core::bf16_to_float(core::float_to_bf16(float(w + step)));
    const double dn = core::bf16_to_float(core::float_to_bf16(float(w - step)));
    const double lp = loss_with([&](runtime::StepParams& q) { q.lm_head[i] = core::float_to_bf16(float(up)); });
    const double lm = loss_with([&](runtime::StepParams& q) { q.lm_head[i] = core::float_to_bf16(float(dn)); });
    INFO("lm_head[" << i << "]");
    CHECK(r.d_head[i] == Approx((lp - lm) / (up - dn)).epsilon(2e-2).margin(1e-6));
  }
  for (const std::int64_t j : {0, 5, 15}) {
    const double w = core::bf16_to_float(s.p.w_final[j]), step = std::max(std::fabs(w), 0.05) * 0.03;
    const double up = core::bf16_to_float(core::float_to_bf16(float(w + step)));
    const double dn = core::bf16_to_float(core::float_to_bf16(float(w - step)));
    const double lp = loss_with([&](runtime::StepParams& q) { q.w_final[j] = core::float_to_bf16(float(up)); });
    const double lm = loss_with([&](runtime::StepParams& q) { q.w_final[j] = core::float_to_bf16(float(dn)); });
    INFO("w_final[" << j << "]");
    CHECK(r.d_final[j] == Approx((lp - lm) / (up - dn)).epsilon(2e-2).margin(1e-6));
  }
}
