// The sequence-parallel ZeRO-3 step on P threads (runtime/cpu/sp_step.hpp) equals the one-rank step and
// optimizer: the loss, every gradient, the clipping and the updated parameters, for P = 2 and 4, kv heads
// split and replicated, tied and untied heads, tiled logits, Qwen3's head norms, and a padded ZeRO
// partition. A rank's error reaches the caller instead of a hang.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/layout.hpp"
#include "runtime/cpu/sp_step.hpp"
#include "runtime/reference_attention.hpp"
#include "runtime/reference_layer.hpp"

using namespace ulysses;
using runtime::random_bf16;

namespace {

struct Case {
  std::int64_t T = 16, H = 4, H_kv = 2, L = 2;
  bool tied = false, qk_norm = false;
  std::int64_t shards = 1;
};

runtime::cpu::SpStepInput make(const Case& c) {
  runtime::cpu::SpStepInput in;
  auto& ld = in.dims.layer;
  ld.T = c.T, ld.h = 25, ld.H = c.H, ld.H_kv = c.H_kv, ld.D = 8, ld.F = 40, ld.qk_norm = c.qk_norm;
  in.dims.L = c.L, in.dims.V = 37, in.dims.tied = c.tied;  // h = 25, V * h = 925: every norm, embedding and head partition padded
  const std::int64_t h = ld.h, HD = ld.H * ld.D, KD = ld.H_kv * ld.D, F = ld.F;
  in.params.embed = random_bf16(in.dims.V * h, 1, 1.f);
  in.params.w_final = random_bf16(h, 2, 1.f);
  if (!c.tied) in.params.lm_head = random_bf16(in.dims.V * h, 3, 0.3f);
  for (std::int64_t l = 0; l < c.L; ++l) {
    const std::uint32_t b = 10 + 20 * std::uint32_t(l);
    runtime::DecoderLayerParams<std::vector<core::bf16>> p{
        random_bf16(h, b, 1.f),          random_bf16(HD * h, b + 1, 0.3f), random_bf16(KD * h, b + 2, 0.3f),
        random_bf16(KD * h, b + 3, 0.3f), random_bf16(h * HD, b + 4, 0.3f), random_bf16(h, b + 5, 1.f),
        random_bf16(F * h, b + 6, 0.3f), random_bf16(F * h, b + 7, 0.3f), random_bf16(h * F, b + 8, 0.2f), {}, {}};
    if (c.qk_norm) p.wqn = random_bf16(ld.D, b + 9, 1.f), p.wkn = random_bf16(ld.D, b + 10, 1.f);
    in.params.layers.push_back(p);
  }
  std::mt19937 g(5);
  for (std::int64_t t = 0; t < c.T; ++t) in.tokens.push_back(std::int64_t(g() % std::uint32_t(in.dims.V)));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(c.T));
  for (std::int64_t t = 0; t < c.T; ++t) pos[t] = t;
  runtime::rope_tables(c.T, ld.D, pos.data(), 10000.0, in.cos, in.sin);
  in.logits_shards = c.shards;
  in.adam.lr = 1e-2, in.adam.weight_decay = 0.1, in.adam.max_grad_norm = 0.5;  // a visible update, clipped
  return in;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0, scale = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i])), scale = std::max(scale, std::fabs(b[i]));
  return m / scale;
}

// The one-rank step and optimizer on the same input.
struct OneRank {
  runtime::StepResult grads;
  runtime::ClipResult clip;
  std::vector<runtime::AdamState> state;
};
OneRank one_rank(const runtime::cpu::SpStepInput& in) {
  OneRank o;
  o.grads = runtime::step_reference(in.dims, in.params, in.tokens, runtime::shift_labels(in.tokens), in.cos, in.sin, in.logits_shards);
  const auto g = runtime::grad_tensors(in.dims, std::as_const(o.grads));
  o.clip = runtime::clip_gradients(g, in.adam.max_grad_norm);
  const auto p = runtime::param_tensors(in.dims, in.params);
  for (std::size_t i = 0; i < p.size(); ++i) {
    o.state.push_back(runtime::adam_state_from(runtime::widen(*p[i])));
    runtime::adamw_reference(o.state.back(), *g[i], o.clip.coef, 1, in.adam);
  }
  return o;
}

void check_equal(const Case& c, int P) {
  const auto in = make(c);
  const OneRank want = one_rank(in);
  const auto got = runtime::cpu::sp_step(in, P);
  INFO("P=" << P << " H=" << c.H << " H_kv=" << c.H_kv << " tied=" << c.tied << " qk_norm=" << c.qk_norm << " shards=" << c.shards);
  CHECK(got.valid_tokens == want.grads.valid_tokens);
  CHECK(got.loss == Approx(want.grads.loss).epsilon(1e-12));
  CHECK(want.clip.coef < 1);  // the case clips
  CHECK(got.clip.norm == Approx(want.clip.norm).epsilon(1e-12));
  CHECK(got.clip.coef == Approx(want.clip.coef).epsilon(1e-12));
  const auto g_got = runtime::grad_tensors(in.dims, got.grads);
  const auto g_want = runtime::grad_tensors(in.dims, std::as_const(want.grads));
  REQUIRE(g_got.size() == g_want.size());
  double worst = 0;
  for (std::size_t i = 0; i < g_got.size(); ++i) worst = std::max(worst, max_rel(*g_got[i], *g_want[i]));
  CHECK(worst < 1e-10);
  double worst_master = 0;
  std::int64_t bf16_differ = 0;
  const auto upd = runtime::param_tensors(in.dims, got.updated);
  for (std::size_t i = 0; i < want.state.size(); ++i) {
    worst_master = std::max(worst_master, max_rel(got.masters[i], want.state[i].master));
    for (std::size_t j = 0; j < want.state[i].master.size(); ++j)
      bf16_differ += (*upd[i])[j] != core::float_to_bf16(static_cast<float>(want.state[i].master[j]));
  }
  CHECK(worst_master < 1e-12);
  CHECK(bf16_differ == 0);  // the all-gathered bf16 parameters are the one-rank optimizer's, bit for bit
  // each rank sent (P-1)/P of its exchanged tensors: q, k, v, o forward; dout, dq, dk, dv backward, per layer
  const std::int64_t T_l = c.T / P, D = in.dims.layer.D;
  const std::int64_t q_chunk = T_l * (c.H / P) * D, kv_chunk = T_l * core::heads_per_rank(c.H_kv, P) * D;
  const std::int64_t layer_passes = 2 * c.L;  // the backward reruns the forward (fp64 checkpointing)
  CHECK(got.a2a_elems_per_rank == (P - 1) * (layer_passes * (2 * q_chunk + 2 * kv_chunk) + c.L * (2 * q_chunk + 2 * kv_chunk)));
}

}  // namespace

TEST_CASE("sp step: P ranks equal one rank, kv heads split or replicated", "[runtime][sp_step]") {
  check_equal(Case{}, 2);                               // H_kv = P: one kv head per rank
  check_equal(Case{16, 4, 1, 2}, 2);                    // H_kv < P: the kv head replicated
  check_equal(Case{16, 4, 2, 2}, 4);                    // P = 4 > H_kv = 2
  check_equal(Case{32, 8, 4, 1}, 4);                    // H_kv = P = 4
  check_equal(Case{16, 8, 4, 2}, 2);                    // two kv heads a rank, each serving two query heads
}

TEST_CASE("sp step: tied head, tiled logits and Qwen3's head norms at P = 4", "[runtime][sp_step]") {
  check_equal(Case{16, 4, 2, 2, true, false, 1}, 4);
  check_equal(Case{24, 4, 2, 1, false, false, 3}, 2);   // 12 tokens a rank in 3 shards
  check_equal(Case{16, 4, 4, 2, false, true, 2}, 4);
}

TEST_CASE("sp step: ZeRO-3 partitions are padded equal shares", "[runtime][sp_step]") {
  using runtime::cpu::zero_partition;
  CHECK(zero_partition(10, 4).size == 3);  // 12 slots, the last rank holds 1 element and 2 of padding
  CHECK(zero_partition(12, 4).size == 3);
  CHECK(zero_partition(1, 8).size == 1);
  CHECK(zero_partition(10, 4).begin(3) == 9);
  CHECK(zero_partition(25, 2).size == 13);  // the cases above: h = 25 over 2 ranks, one slot of padding
  CHECK(zero_partition(37 * 25, 4).size == 232);
}

TEST_CASE("sp step: the ranks' tokens, and a rank's error reaches the caller", "[runtime][sp_step]") {
  auto in = make(Case{});
  const auto two = runtime::cpu::sp_step(in, 2);
  REQUIRE(two.valid_tokens_per_rank.size() == 2);
  CHECK(two.valid_tokens_per_rank[0] == 8);
  CHECK(two.valid_tokens_per_rank[1] == 7);  // the sequence's last position has no label
  // a rank fails (a token outside the vocabulary on rank 1 only): the step throws, the other rank is released
  in.tokens[12] = in.dims.V + 3;
  CHECK_THROWS_AS(runtime::cpu::sp_step(in, 2), std::invalid_argument);
  in.tokens[12] = 0;
  CHECK_THROWS_WITH(runtime::cpu::sp_step(in, 3), Catch::Contains("multiple of the ranks"));
  CHECK_THROWS_WITH(runtime::cpu::sp_step(in, 8), Catch::Contains("heads"));
}
