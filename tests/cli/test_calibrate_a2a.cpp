// `ulysses calibrate --from-raw`: the exchange curves are derived from raw phase times so that
// the model (sim/timing.cpp, exchange_launches) gives the measured times back, for both
// transports; the committed H200 profile is exactly the derivation of the committed raw file;
// bad raw input exits 2 naming the file and key.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "core/errors.hpp"
#include "sim/memory.hpp"
#include "core/phases.hpp"
#include "sim/timing.hpp"
#include "tests/cli/run_cli.hpp"

using namespace ulysses;
using namespace ulysses::test;
using json = nlohmann::json;

namespace {

const Curve* curve(const Calibration& c, const std::string& key) {
  for (const auto& [k, cv] : c.a2a_phase_GBps)
    if (k == key) return &cv;
  return nullptr;
}

// Synthetic raw file: t = launches * alpha + bytes / bw, bw different per phase.
json synthetic(const std::string& transport, double alpha_s) {
  json raw{{"measured_at", "synthetic"}, {"a2a_transport", transport}, {"a2a", json::array()}};
  const int launches_qkv = transport == "p2p" ? 1 : 3;
  for (double X : {1e7, 1e8, 1e9}) {  // large enough that bytes/bw > 10% of t (the derivation's floor)
    const double B = 1.5 * X;
    raw["a2a"].push_back({{"P", 2}, {"q_bytes_per_rank", X}, {"qkv_bytes_per_rank", B},
                          {"a2a.qkv.fwd_s", launches_qkv * alpha_s + B / 500e9}, {"a2a.out.fwd_s", alpha_s + X / 600e9},
                          {"a2a.out.bwd_s", alpha_s + X / 650e9}, {"a2a.qkv.bwd_s", launches_qkv * alpha_s + B / 550e9}});
  }
  return raw;
}

}  // namespace

TEST_CASE("sim: one fixed cost per exchange phase for p2p, one per tensor otherwise", "[calibrate][a2a]") {
  Calibration c;
  CHECK(sim::exchange_launches(c, 3) == 3);  // older profiles: NCCL semantics
  c.a2a_transport = "nccl";
  CHECK(sim::exchange_launches(c, 3) == 3);
  c.a2a_transport = "p2p";
  CHECK(sim::exchange_launches(c, 3) == 1);
  CHECK(sim::exchange_launches(c, 1) == 1);
}

TEST_CASE("calibrate --from-raw derives curves that give the measured times back", "[calibrate][a2a][cli]") {
  const double alpha = load_profile("h200-sxm-141gb").calibrated.a2a_alpha_per_tensor_s;
  REQUIRE(alpha > 0);
  for (const std::string transport : {"p2p", "nccl"}) {
    INFO(transport);
    TempDir dir;
    std::ofstream(dir / "raw.json") << synthetic(transport, alpha).dump();
    const auto r = run_cli("calibrate --from-raw '" + (dir / "raw.json") + "' --profile h200-sxm-141gb --profile-out '" +
                           (dir / "p.yaml") + "'");
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    const Calibration c = load_profile(dir / "p.yaml").calibrated;
    CHECK(c.a2a_transport == transport);
    for (auto [key, bw] : {std::pair{"a2a.qkv.fwd@p2", 500.0}, {"a2a.out.fwd@p2", 600.0}, {"a2a.out.bwd@p2", 650.0},
                           {"a2a.qkv.bwd@p2", 550.0}}) {
      INFO(key);
      const Curve* cv = curve(c, key);
      REQUIRE(cv != nullptr);
      REQUIRE(cv->points.size() == 3);
      for (const auto& [x, y] : cv->points) CHECK(y == Approx(bw).epsilon(1e-6));
    }
    // one curve per phase and sp size, replaced, not appended
    CHECK(c.a2a_phase_GBps.size() == 4);
    CHECK(c.provenance.find("re-derived") != std::string::npos);
  }
}

TEST_CASE("the committed H200 profile is the derivation of the committed raw calibration", "[calibrate][a2a][cli]") {
  TempDir dir;
  const auto r = run_cli("calibrate --from-raw '" + source_path("reports/validation/h200-calibration.json") +
                         "' --profile h200-sxm-141gb --profile-out '" + (dir / "p.yaml") + "'");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const Calibration now = load_profile(dir / "p.yaml").calibrated, committed = load_profile("h200-sxm-141gb").calibrated;
  CHECK(committed.a2a_transport == "p2p");
  REQUIRE(now.a2a_phase_GBps.size() == committed.a2a_phase_GBps.size());
  for (const auto& [key, cv] : committed.a2a_phase_GBps) {
    INFO(key);
    const Curve* got = curve(now, key);
    REQUIRE(got != nullptr);
    REQUIRE(got->points.size() == cv.points.size());
    for (std::size_t i = 0; i < cv.points.size(); ++i) CHECK(got->points[i].second == Approx(cv.points[i].second).epsilon(1e-9));
  }
}

TEST_CASE("calibrate --from-raw refuses bad raw files in one line", "[calibrate][a2a][cli]") {
  TempDir dir;
  auto rc_of = [&](const std::string& text, const std::string& expect) {
    std::ofstream(dir / "bad.json") << text;
    const auto r = run_cli("calibrate --from-raw '" + (dir / "bad.json") + "' --profile h200-sxm-141gb");
    INFO(text << "\n" << r.out << r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find(expect) != std::string::npos);
  };
  rc_of("not json", "is not a JSON object");
  rc_of("{}", "a2a");
  rc_of(R"({"a2a_transport": "tcp", "a2a": [{"P": 2}]})", "a2a_transport");
  rc_of(R"({"a2a": [{"P": 2, "q_bytes_per_rank": 1e6}]})", "a2a[0]");
  rc_of(R"({"a2a": [{"P": 2, "q_bytes_per_rank": 1e6, "qkv_bytes_per_rank": 1.5e6, "a2a.qkv.fwd_s": 0, "a2a.out.fwd_s": 1e-5,
         "a2a.out.bwd_s": 1e-5, "a2a.qkv.bwd_s": 1e-5}]})", "phase times must be > 0");
  const auto r = run_cli("calibrate --from-raw '" + (dir / "missing.json") + "'");
  CHECK(r.rc == 2);
  CHECK(r.err.find("cannot open") != std::string::npos);
}

TEST_CASE("calibrate --from-raw derives the idle-link penalty curve", "[calibrate][a2a][cli]") {
  TempDir dir;
  json raw{{"measured_at", "synthetic"}, {"a2a_idle", json::array()}};
  for (auto [T, t] : {std::pair{0.0, 100e-6}, {10.0, 100.5e-6}, {40.0, 99e-6}, {60.0, 195e-6}})
    raw["a2a_idle"].push_back({{"P", 2}, {"idle_ms", T}, {"a2a.out.bwd_s", t}});
  std::ofstream(dir / "idle.json") << raw.dump();
  const auto r = run_cli("calibrate --from-raw '" + (dir / "idle.json") + "' --profile h200-sxm-141gb --profile-out '" +
                         (dir / "p.yaml") + "'");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const Calibration c = load_profile(dir / "p.yaml").calibrated;
  const Calibration before = load_profile("h200-sxm-141gb").calibrated;
  REQUIRE(c.a2a_idle_penalty_us.points.size() == 3);  // T > 0 only
  CHECK(c.a2a_idle_penalty_us.points[0].first == 10);
  CHECK(c.a2a_idle_penalty_us.points[0].second == Approx(0.5));
  CHECK(c.a2a_idle_penalty_us.points[1].second == 0);  // faster than the baseline: no negative penalty
  CHECK(c.a2a_idle_penalty_us.points[2].second == Approx(95));
  // the exchange curves are untouched when the file holds no "a2a" samples
  CHECK(c.a2a_phase_GBps.size() == before.a2a_phase_GBps.size());
  CHECK(c.a2a_transport == before.a2a_transport);
  // bad idle samples
  raw["a2a_idle"][0]["idle_ms"] = 5.0;
  std::ofstream(dir / "bad.json") << raw.dump();
  const auto b = run_cli("calibrate --from-raw '" + (dir / "bad.json") + "' --profile h200-sxm-141gb");
  CHECK(b.rc == 2);
  CHECK(b.err.find("a2a_idle[0]") != std::string::npos);
}

TEST_CASE("the model adds the idle-link penalty to the exchanges after long attention only", "[calibrate][a2a][model]") {
  Scenario sc = load_scenario(source_path("scenarios/llama8b-h100-sp8.yaml"));
  sc.hw = load_profile("h200-sxm-141gb");
  REQUIRE(!sc.hw.calibrated.a2a_idle_penalty_us.empty());
  sc.gpus = 2;
  for (auto [k, v] : {std::pair{"plan.sp_size", "2"}, {"plan.dp_shard_size", "1"}, {"plan.seq_len", "98304"},
                      {"plan.attn_implementation", "ulysses_flash"}})
    set_key(sc, k, v, "test");
  const sim::Dims d = sim::derive_dims(sc);
  std::array<core::seconds_t, 6> with{}, without{};
  sim::block_times(sc, d, with);
  Scenario bare = sc;
  bare.hw.calibrated.a2a_idle_penalty_us = Curve{};
  sim::block_times(bare, d, without);
  const auto at = [](const std::array<core::seconds_t, 6>& b, core::BlockPhase p) { return b[static_cast<int>(p)]; };
  REQUIRE(at(with, core::BlockPhase::attn_fwd) > 0.05);  // S = 96K, 16 heads per rank: attention > 50 ms
  const double pen = sc.hw.calibrated.a2a_idle_penalty_us.at(at(with, core::BlockPhase::attn_fwd) * 1e3) * 1e-6;
  CHECK(pen > 50e-6);
  CHECK(at(with, core::BlockPhase::a2a_out_fwd) - at(without, core::BlockPhase::a2a_out_fwd) == Approx(pen));
  CHECK(at(with, core::BlockPhase::a2a_qkv_bwd) > at(without, core::BlockPhase::a2a_qkv_bwd) + 50e-6);
  // the exchanges that follow an exchange get nothing
  CHECK(at(with, core::BlockPhase::a2a_out_bwd) == at(without, core::BlockPhase::a2a_out_bwd));
  CHECK(at(with, core::BlockPhase::a2a_qkv_fwd) == at(without, core::BlockPhase::a2a_qkv_fwd));
  // short attention (S = 8K): below the step, (almost) nothing
  set_key(sc, "plan.seq_len", "8192", "test");
  const sim::Dims d8 = sim::derive_dims(sc);
  bare = sc;
  bare.hw.calibrated.a2a_idle_penalty_us = Curve{};
  sim::block_times(sc, d8, with);
  sim::block_times(bare, d8, without);
  CHECK(at(with, core::BlockPhase::a2a_out_fwd) - at(without, core::BlockPhase::a2a_out_fwd) < 2e-6);
  // P = 1: no exchange, no penalty
  CHECK(sim::exchange_idle_penalty_s(sc, sim::Dims{}, 1.0) == 0);
}

TEST_CASE("a profile's a2a_transport must be nccl or p2p", "[calibrate][a2a][config]") {
  TempDir dir;
  std::string text = slurp(source_path("profiles/h200-sxm-141gb.yaml"));
  const auto at = text.find("a2a_transport: p2p");
  REQUIRE(at != std::string::npos);
  text.replace(at, 18, "a2a_transport: tcp");
  std::ofstream(dir / "p.yaml") << text;
  CHECK_THROWS_WITH(load_profile(dir / "p.yaml"), Catch::Contains("a2a_transport"));
}

TEST_CASE("ULYSSES_EXCHANGE_GAP_MS must be milliseconds in 0..10000", "[calibrate][a2a][cli]") {
  for (const char* bad : {"abc", "-1", "20000"}) {
    INFO(bad);
    setenv("ULYSSES_EXCHANGE_GAP_MS", bad, 1);
    const auto r = run_cli("run --backend cuda --model llama-3.1-8b --profile h200-sxm-141gb --gpus 2 --sp-size 2 --seq-len 4096");
    unsetenv("ULYSSES_EXCHANGE_GAP_MS");
    INFO(r.out << r.err);
    CHECK(r.rc == 2);  // checked before any GPU is touched (a build without CUDA refuses --backend cuda, also 2)
    if (r.err.find("built without the CUDA backend") == std::string::npos && r.err.find("is not built") == std::string::npos)
      CHECK(r.err.find("ULYSSES_EXCHANGE_GAP_MS") != std::string::npos);
  }
}
