// `ulysses calibrate --from-raw` through the binary: exit codes, what it prints and writes, bad raw
// input exits 2 naming the file and key (the fits themselves: tests/calib/test_a2a_fit.cpp); the
// model's use of the calibrated exchange (transport, idle-link penalty); calibrate --backend cuda's flag checks.
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

TEST_CASE("sim: one fixed cost per exchange phase for p2p, one per tensor otherwise", "[calibrate][a2a]") {
  Calibration c;
  CHECK(exchange_launches(c, 3) == 3);  // older profiles: NCCL semantics
  c.a2a_transport = "nccl";
  CHECK(exchange_launches(c, 3) == 3);
  c.a2a_transport = "p2p";
  CHECK(exchange_launches(c, 3) == 1);
  CHECK(exchange_launches(c, 1) == 1);
}

TEST_CASE("calibrate --from-raw prints the section, or writes the profile with it", "[calibrate][a2a][cli]") {
  TempDir dir;
  const std::string raw = record_path("validation/h200-calibration.json");
  const auto printed = run_cli("calibrate --from-raw '" + raw + "' --profile h200-sxm-141gb");
  INFO(printed.out << printed.err);
  REQUIRE(printed.rc == 0);
  CHECK(printed.out.find("exchange curves of P=2 re-derived from") != std::string::npos);
  CHECK(printed.out.find("\ncalibrated:\n  provenance: ") != std::string::npos);
  const auto r = run_cli("calibrate --from-raw '" + raw + "' --profile h200-sxm-141gb --profile-out '" + (dir / "p.yaml") + "'");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("wrote " + (dir / "p.yaml") + " (profile h200-sxm-141gb with a calibrated: section)") != std::string::npos);
  const Calibration c = load_profile(dir / "p.yaml").calibrated;
  CHECK(c.a2a_transport == "p2p");
  CHECK(c.provenance.find("re-derived") != std::string::npos);
  CHECK(c.provenance.find("by `ulysses calibrate --from-raw") != std::string::npos);
  // --help: exit 0; no file: the help and exit 2
  CHECK(run_cli("calibrate --from-raw x --help").rc == 0);
  CHECK(run_cli("calibrate --from-raw= ").rc == 2);
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

TEST_CASE("calibrate --from-raw refuses bad idle-link samples", "[calibrate][a2a][cli]") {
  TempDir dir;
  json raw{{"measured_at", "synthetic"}, {"a2a_idle", json::array()}};
  for (auto [T, t] : {std::pair{5.0, 100e-6}, {10.0, 100.5e-6}})  // no idle_ms 0 baseline
    raw["a2a_idle"].push_back({{"P", 2}, {"idle_ms", T}, {"a2a.out.bwd_s", t}});
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
  const Dims d = derive_dims(sc);
  std::array<core::seconds_t, 6> with{}, without{};
  block_times(sc, d, with);
  Scenario bare = sc;
  bare.hw.calibrated.a2a_idle_penalty_us = Curve{};
  block_times(bare, d, without);
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
  const Dims d8 = derive_dims(sc);
  bare = sc;
  bare.hw.calibrated.a2a_idle_penalty_us = Curve{};
  block_times(sc, d8, with);
  block_times(bare, d8, without);
  CHECK(at(with, core::BlockPhase::a2a_out_fwd) - at(without, core::BlockPhase::a2a_out_fwd) < 2e-6);
  // P = 1: no exchange, no penalty
  CHECK(exchange_idle_penalty_s(sc, Dims{}, 1.0) == 0);
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

TEST_CASE("calibrate --backend cuda refuses --quick with --only in one line in every build", "[calibrate][cli]") {
  for (const char* only : {"attention", "a2a-idle", "ulysses-kernels"}) {
    const auto r = run_cli(std::string("calibrate --backend cuda --profile h200-sxm-141gb --quick --only ") + only);
    INFO(only << "\n" << r.err);
    CHECK(r.rc == 2);  // before any GPU is touched, and before a build without CUDA refuses --backend cuda
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("--quick") != std::string::npos);
    CHECK(r.err.find("--only") != std::string::npos);
  }
}
