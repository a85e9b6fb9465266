// The CPU backend end to end: every check passes (exchange bit-exact, inverse identity,
// Ulysses == single-rank fp64 attention within 2^-6) over P, MHA/GQA, causal, kv strategies.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/backend.hpp"
#include "runtime/checks.hpp"
#include "runtime/cpu/cpu_backend.hpp"
#include "core/phases.hpp"

using namespace ulysses;
using namespace ulysses::runtime;

namespace {

Measurement run(std::int64_t P, std::int64_t H, std::int64_t H_kv, bool causal, KvStrategy kv, std::int64_t D = 16,
                std::int64_t B = 1) {
  BlockShape s;
  s.B = B, s.S = 32, s.H = H, s.H_kv = H_kv, s.D = D, s.P = P, s.causal = causal, s.kv_strategy = kv;
  RunOptions o;
  o.warmup = 0, o.iters = 1, o.seed = 42 + P + H_kv;
  return make_backend("cpu")->run_block(s, o);
}

void require_correct(const Measurement& m) {
  for (auto& c : m.checks) {
    INFO(c.name << ": wrong " << c.wrong << ", max err " << c.max_abs_err << " (tol " << c.tolerance << ")");
    CHECK(c.passed);
  }
  CHECK(m.checks.size() == 13);
  CHECK(m.correct);
}

}  // namespace

TEST_CASE("Ulysses on the CPU equals single-rank attention: P 1/2/4, MHA/GQA, causal or not", "[runtime]") {
  for (bool causal : {true, false})
    for (std::int64_t P : {1, 2, 4}) {
      INFO("P=" << P << " causal=" << causal);
      require_correct(run(P, 4, 4, causal, KvStrategy::replicate));  // MHA
      require_correct(run(P, 8, 2, causal, KvStrategy::replicate));  // GQA, P > H_kv when P = 4
      if (P > 2) require_correct(run(P, 8, 2, causal, KvStrategy::send_once));
    }
}

TEST_CASE("P > H_kv: both kv strategies move the same bytes, the replica costs memory in the exchange", "[runtime]") {
  const Measurement rep = run(4, 8, 1, true, KvStrategy::replicate);
  const Measurement once = run(4, 8, 1, true, KvStrategy::send_once);
  require_correct(rep);
  require_correct(once);
  require_correct(run(8, 8, 1, false, KvStrategy::replicate));  // R = 8 replica gradients summed
  CHECK(rep.a2a_kv_bytes_per_rank == once.a2a_kv_bytes_per_rank);
  // each rank gets all S positions of its one kv head, for k and v, in bf16
  CHECK(once.a2a_kv_bytes_per_rank == 2 * 32 * 16 * 2);
  CHECK(rep.a2a_q_bytes_per_rank == (32 / 4) * 8 * 16 * 2);
  // the replicas [B,S_l,P,D] live in a2a.qkv.fwd (k and v together, grouped: 8*4*16*2 bytes each)
  // and the replica gradient in a2a.qkv.bwd (there the dq exchange sets the peak of this
  // shape); the attention phases are unaffected
  REQUIRE(rep.phase_peak_bytes.size() == 6);
  CHECK(rep.phase_peak_bytes[0] - once.phase_peak_bytes[0] == 2 * 8 * 4 * 16 * 2);
  CHECK(rep.phase_peak_bytes[5] >= once.phase_peak_bytes[5]);
  CHECK(rep.phase_peak_bytes[1] == once.phase_peak_bytes[1]);
  CHECK(rep.phase_peak_bytes[4] == once.phase_peak_bytes[4]);
}

TEST_CASE("head dims 64 and 128, batch 2 (exchanges with explicit unpack)", "[runtime]") {
  require_correct(run(2, 4, 2, true, KvStrategy::replicate, 64, 2));
  require_correct(run(4, 8, 2, false, KvStrategy::replicate, 16, 2));
  require_correct(run(4, 8, 2, true, KvStrategy::send_once, 16, 2));
  require_correct(run(2, 2, 2, false, KvStrategy::replicate, 128, 1));
}

TEST_CASE("measurement holds the six phases, timing and trace", "[runtime]") {
  const Measurement m = run(2, 4, 2, true, KvStrategy::replicate);
  REQUIRE(m.phases.size() == 6);
  for (int i = 0; i < 6; ++i) {
    CHECK(m.phases[i].name == core::kBlockPhaseNames[i]);
    CHECK(m.phases[i].median_s > 0);
    CHECK(m.phases[i].min_s <= m.phases[i].median_s);
    CHECK(m.phases[i].median_s <= m.phases[i].max_s);
  }
  REQUIRE(m.peak_bytes_per_rank.size() == 2);
  CHECK(m.peak_bytes_per_rank[0] > 0);
  int phase_events = 0;
  for (auto& e : m.trace) phase_events += e.name == "attn.fwd";
  CHECK(phase_events == 2);  // one per rank
}

TEST_CASE("checks count wrong elements and reject NaN", "[runtime]") {
  std::vector<std::uint16_t> a{1, 2, 3, 4}, b{1, 2, 9, 4};
  CHECK(check_bits("x", a.data(), a.data(), 4).passed);
  const Check c = check_bits("x", b.data(), a.data(), 4);
  CHECK_FALSE(c.passed);
  CHECK(c.wrong == 1);
  std::vector<double> ref{1, -2, 0.5, 0};
  std::vector<float> got{1, -2, 0.5, 0};
  CHECK(check_close("y", got.data(), ref.data(), 4, kBf16AttentionTol).passed);
  got[2] = std::nanf("");
  got[1] = -1.5f;
  const Check d = check_close("y", got.data(), ref.data(), 4, kBf16AttentionTol);
  CHECK(d.wrong == 2);
  CHECK_FALSE(d.passed);
}

TEST_CASE("invalid shapes are refused with the rule", "[runtime]") {
  BlockShape s;
  s.S = 30, s.H = 4, s.H_kv = 4, s.D = 8, s.P = 4;
  CHECK_THROWS_WITH(make_backend("cpu")->run_block(s, {}), Catch::Contains("divisible by sp_size"));
  CHECK_THROWS_WITH(make_backend("nope"), Catch::Contains("unknown backend"));
}
