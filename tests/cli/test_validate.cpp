// ulysses validate and capacity through the built binary: the committed GPU records re-predicted
// against today's model (the CI drift check), the whole loop on the CPU backend, and bad input
// (drift detection and the statistics themselves: tests/eval/test_block_eval.cpp).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using nlohmann::json;
using ulysses::test::run_cli;
using ulysses::test::slurp;
using ulysses::test::record_path;
using ulysses::test::source_path;
using ulysses::test::TempDir;

namespace {

// A re-prediction's summary against the committed one (a model or profile change that moves a phase's median or max
// |error| by more than half a percentage point is a drift to look at; re-generate the committed file on purpose)
void check_no_drift(const json& now, const std::string& committed, std::initializer_list<const char*> phases) {
  const json base = json::parse(slurp(record_path(committed)))["summary"];
  for (const char* ph : phases) {
    INFO(ph);
    CHECK(now[ph]["median_abs_error_pct"].get<double>() == Approx(base[ph]["median_abs_error_pct"].get<double>()).margin(0.5));
    CHECK(now[ph]["max_abs_error_pct"].get<double>() == Approx(base[ph]["max_abs_error_pct"].get<double>()).margin(0.5));
  }
}
const std::string kOff = " --max-median-error-pct -1 --max-error-pct -1 --max-memory-error-pct -1";
}

// The committed record re-predicted with today's model and the committed calibrated profile:
//  - the targets of issue 6 that the model meets must stay met (attention forward; attention
//    backward median; a2a.out.bwd; a2a.out.fwd; the median of a2a.qkv.bwd; peak memory).
//    The record is of the p2p exchange transport (one fixed cost per phase: sim/timing.hpp
//    exchange_launches); the NCCL-era record is in git history (commit 8a30419);
//  - every phase's median and max |error| must stay where the committed re-prediction
//    (records/validation/h200-repredicted.json) put them, to 0.5 percentage points: a model or
//    profile change that moves them is a drift to look at (re-generate that file on purpose:
//    `ulysses validate --stored records/validation/h200.json --json records/validation/h200-repredicted.json`).
// What misses (a2a.qkv.fwd median and max, some max errors) is listed in docs/VALIDATION.md.
TEST_CASE("the committed H200 validation record: met targets stay met, no drift", "[cli][validate]") {
  const std::string rec = record_path("validation/h200.json");
  REQUIRE(std::filesystem::exists(rec));
  const json j = json::parse(slurp(rec));
  CHECK(j["backend"] == "cuda");
  CHECK(j["cases"].size() >= 24);
  for (const auto& c : j["cases"]) CHECK(c["correct"] == true);
  TempDir dir;
  const auto r = run_cli("validate --stored '" + rec + "' --json '" + (dir / "re.json") + "'" + kOff);
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("a2a.qkv.fwd") != std::string::npos);
  const json now = json::parse(slurp(dir / "re.json"))["summary"];
  check_no_drift(now, "validation/h200-repredicted.json",
                 {"a2a.qkv.fwd", "attn.fwd", "a2a.out.fwd", "a2a.out.bwd", "attn.bwd", "a2a.qkv.bwd", "peak memory"});
  CHECK(now["attn.fwd"]["median_abs_error_pct"].get<double>() <= 5);
  CHECK(now["attn.fwd"]["max_abs_error_pct"].get<double>() <= 15);
  CHECK(now["attn.bwd"]["median_abs_error_pct"].get<double>() <= 5);
  CHECK(now["a2a.out.bwd"]["median_abs_error_pct"].get<double>() <= 5);
  CHECK(now["a2a.out.bwd"]["max_abs_error_pct"].get<double>() <= 15);
  CHECK(now["a2a.out.fwd"]["median_abs_error_pct"].get<double>() <= 5);
  CHECK(now["a2a.out.fwd"]["max_abs_error_pct"].get<double>() <= 15);  // with the idle-link penalty
  CHECK(now["a2a.qkv.bwd"]["median_abs_error_pct"].get<double>() <= 5);
  CHECK(now["peak memory"]["max_abs_error_pct"].get<double>() <= 3);
  CHECK(now["incorrect_cases"] == 0);
}

// The block record's P = 1 cases re-measured on one H100 with the kernels of issue 14 (forward 1471, backward 368640;
// records/gpu-runs/h100-2026-12-06e), predicted with the curves calibrated in the same session (pinned beside it):
// issue 6's targets hold (median 5 %, max 15 %, memory 3 %) and the summary stays where the committed re-prediction
// put it.
TEST_CASE("the committed H100 block record at P = 1: targets met, no drift", "[cli][validate]") {
  const std::string rec = record_path("validation/h100-block-p1.json");
  REQUIRE(std::filesystem::exists(rec));
  const json j = json::parse(slurp(rec));
  CHECK(j["backend"] == "cuda");
  CHECK(j["cases"].size() == 10);
  for (const auto& c : j["cases"]) CHECK(c["correct"] == true);
  TempDir dir;
  const auto r = run_cli("validate --stored '" + rec + "' --json '" + (dir / "re.json") + "'");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const json now = json::parse(slurp(dir / "re.json"))["summary"];
  check_no_drift(now, "validation/h100-block-p1-repredicted.json", {"attn.fwd", "attn.bwd", "peak memory"});
  for (const char* ph : {"attn.fwd", "attn.bwd"}) {
    INFO(ph);
    CHECK(now[ph]["median_abs_error_pct"].get<double>() <= 5);
    CHECK(now[ph]["max_abs_error_pct"].get<double>() <= 15);
  }
  CHECK(now["peak memory"]["median_abs_error_pct"].get<double>() <= 3);
  CHECK(now["peak memory"]["max_abs_error_pct"].get<double>() <= 3);
}

TEST_CASE("the committed H200 capacity record: predicted longest S within 3 %", "[cli][validate]") {
  const std::string rec = record_path("validation/h200-capacity.json");
  REQUIRE(std::filesystem::exists(rec));
  const auto r = run_cli("capacity --stored '" + rec + "' --max-error-pct 3");
  INFO(r.out << r.err);
  CHECK(r.rc == 0);
}

TEST_CASE("validate runs a set on the CPU backend and re-predicts the stored record", "[cli][validate]") {
  TempDir dir;
  const std::string out = dir / "cpu.json";
  const auto r = run_cli("validate --backend cpu --set '" + source_path("scenarios/validation/cpu-tiny.yaml") + "' --out '" + out +
                         "' --warmup 0 --iters 1" + kOff);
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const json j = json::parse(slurp(out));
  CHECK(j["backend"] == "cpu");
  REQUIRE(j["cases"].size() == 6);
  for (const auto& c : j["cases"]) {
    CHECK(c["correct"] == true);
    REQUIRE(c["phases"].size() == 6);
    CHECK(c["peak_memory"]["measured_bytes"].get<std::int64_t>() > 0);
    CHECK(c["phases"][1]["measured_s"].get<double>() > 0);
    const bool p2 = c["shape"]["P"] == 2;
    CHECK(c["phases"][0]["scored"] == p2);
  }
  // the same numbers come back from the stored record
  const auto s = run_cli("validate --stored '" + out + "' --json '" + (dir / "re.json") + "'" + kOff);
  INFO(s.out << s.err);
  REQUIRE(s.rc == 0);
  const json re = json::parse(slurp(dir / "re.json"));
  REQUIRE(re["cases"].size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(re["cases"][i]["phases"][1]["predicted_s"].get<double>() == Approx(j["cases"][i]["phases"][1]["predicted_s"].get<double>()));
    CHECK(re["cases"][i]["peak_memory"]["error_pct"].get<double>() ==
          Approx(j["cases"][i]["peak_memory"]["error_pct"].get<double>()));
  }
  // impossible targets fail
  const auto t = run_cli("validate --stored '" + out + "' --max-median-error-pct 0 --max-error-pct 0 --max-memory-error-pct -1");
  CHECK(t.rc == 1);
}

TEST_CASE("validate and capacity reject bad input with one line and exit 2", "[cli][validate]") {
  TempDir dir;
  const std::string bad = dir / "bad.yaml";
  std::ofstream(bad) << "model: llama-3.1-8b\nprofile: cpu-local\ncases:\n  - {name: x, plan.seq_len: 512, model.headz: 8}\n";
  auto r = run_cli("validate --backend cpu --set '" + bad + "' --out '" + (dir / "o.json") + "'");
  CHECK(r.rc == 2);
  CHECK(r.err.find("bad.yaml") != std::string::npos);
  CHECK(r.err.find("model.headz") != std::string::npos);
  r = run_cli("validate --backend cpu --set '" + source_path("scenarios/validation/cpu-tiny.yaml") + "'");
  CHECK(r.rc == 2);
  CHECK(r.err.find("--out") != std::string::npos);
  r = run_cli("validate --stored '" + (dir / "missing.json") + "'");
  CHECK(r.rc == 2);
  std::ofstream(dir / "empty.json") << "{}";
  r = run_cli("validate --stored '" + (dir / "empty.json") + "'");
  CHECK(r.rc == 2);
  CHECK(r.err.find("cases") != std::string::npos);
  r = run_cli("capacity --stored '" + (dir / "empty.json") + "'");
  CHECK(r.rc == 2);
}
