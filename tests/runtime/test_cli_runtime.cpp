// The `run`, `compare` and `calibrate` commands as a user runs them (the built binary).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "tests/cli/run_cli.hpp"
#include "core/phases.hpp"

namespace {

using Result = ulysses::test::CliResult;
using ulysses::test::TempDir;

// Each call captures into its own temp folder: ctest runs these cases as concurrent processes.
Result sh(const std::string& args) { return ulysses::test::run_cli(args); }

const std::string kTiny = std::string(ULYSSES_SOURCE_DIR) + "/scenarios/cpu-tiny.yaml";
// a quarter of the tiny scenario's sequence keeps the test to a fraction of a second
const std::string kSmall = "--scenario " + kTiny + " --seq-len 256 --warmup 0 --iters 2";

}  // namespace

TEST_CASE("compare --format json holds every phase on both sides, peak memory and correct", "[runtime]") {
  const TempDir tmp;
  const std::string trace = tmp / "trace.json";
  const Result r = sh("compare --backend cpu " + kSmall + " --format json --trace " + trace);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["phases"].size() == 6);
  for (int i = 0; i < 6; ++i) {
    const auto& p = j["phases"][i];
    CHECK(p["name"] == std::string(ulysses::core::kBlockPhaseNames[i]));
    CHECK(p["predicted_s"].get<double>() > 0);
    CHECK(p["measured_s"].get<double>() > 0);
    const double err = 100 * (p["predicted_s"].get<double>() - p["measured_s"].get<double>()) / p["measured_s"].get<double>();
    CHECK(p["error_pct"].get<double>() == Approx(err));
  }
  CHECK(j["peak_memory"]["predicted_bytes"].get<long long>() > 0);
  CHECK(j["peak_memory"]["measured_bytes"].get<long long>() > 0);
  CHECK(j["peak_memory"].contains("error_pct"));
  CHECK(j["correct"] == true);
  CHECK(j["exchange_bytes_per_rank"]["q"]["predicted"] == j["exchange_bytes_per_rank"]["q"]["measured"]);

  // the trace: two processes, the predicted one with the six phases, the measured one per rank
  std::ifstream f(trace);
  const auto t = nlohmann::json::parse(f);
  int predicted = 0, measured_rank0 = 0;
  std::map<int, std::string> process;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
  REQUIRE(process.size() == 2);
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "phase") (e["pid"] == 1 ? predicted : measured_rank0) += 1;
  CHECK(predicted == 6);
  CHECK(measured_rank0 == 12);  // six phases on each of the two ranks
}

TEST_CASE("run prints the phase table and the checks, json says correct", "[runtime]") {
  const Result t = sh("run --backend cpu " + kSmall);
  INFO(t.err);
  REQUIRE(t.rc == 0);
  for (auto name : ulysses::core::kBlockPhaseNames) CHECK(t.out.find(std::string(name)) != std::string::npos);
  CHECK(t.out.find("#wrong") != std::string::npos);
  CHECK(t.out.find("correct: true") != std::string::npos);
  const Result j = sh("run --backend cpu " + kSmall + " --format json --sp-size 1 --gpus 1");
  REQUIRE(j.rc == 0);
  CHECK(nlohmann::json::parse(j.out)["correct"] == true);
}

TEST_CASE("bad input exits 2 with one line naming the file or flag", "[runtime]") {
  const TempDir tmp;
  const std::string bad = tmp / "bad.yaml";
  {
    std::ifstream in(kTiny);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.replace(text.find("sp_size: 2"), 10, "sp_size: 3");  // 8 heads are not divisible by 3
    std::ofstream(bad) << text;
  }
  auto one_line = [](const Result& r) {
    INFO(r.err);
    CHECK(r.rc == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  const Result a = sh("compare --backend cpu --scenario " + bad);
  one_line(a);
  CHECK(a.err.find(bad) != std::string::npos);
  CHECK(a.err.find("sp_size") != std::string::npos);
  one_line(sh("run --backend cpu --scenario /nonexistent/x.yaml"));
  one_line(sh("run --backend nope " + kSmall));
  one_line(sh("run --backend cpu " + kSmall + " --iters 0"));
  const Result big = sh("run --backend cpu --scenario " + kTiny + " --seq-len 1048576");
  one_line(big);
  CHECK(big.err.find("plan.seq_len") != std::string::npos);
}

TEST_CASE("calibrate writes a profile that loads, and compare then uses it", "[runtime]") {
  const TempDir tmp;
  const std::string out = tmp / "calibrated.yaml";
  const Result c = sh("calibrate --backend cpu --quick --sp-sizes 2 --profile-out " + out);
  INFO(c.err);
  REQUIRE(c.rc == 0);
  const ulysses::HardwareProfile hw = ulysses::load_profile(out);
  REQUIRE(hw.has_calibration);
  CHECK(hw.calibrated.provenance.find("hardware threads") != std::string::npos);
  CHECK(hw.calibrated.a2a_busbw_GBps.size() == 1);
  REQUIRE(hw.calibrated.attn_fwd_eff.size() == 2);  // quick: the bare name and the shape key
  CHECK(hw.calibrated.attn_fwd_eff[0].first == "ulysses_reference");
  CHECK(hw.calibrated.attn_fwd_eff[1].first == "ulysses_reference@d64.causal.h4");
  CHECK(hw.calibrated.pack_GBps > 0);
  const Result r = sh("compare --backend cpu " + kSmall + " --profile " + out + " --format json");
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["calibrated"] == true);
}
