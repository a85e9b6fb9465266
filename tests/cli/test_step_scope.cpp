// `--scope block|step` (whole steps on our runtime, issue 13): bad or unsupported combinations are one
// line naming --scope and exit 2, whatever backends this build has.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using ulysses::test::CliResult;
using ulysses::test::run_cli;
using ulysses::test::source_path;

namespace {
const std::string kTiny = " --scenario " + source_path("scenarios/cpu-tiny.yaml");
const std::string kLlama = " --model llama-3.1-8b --profile h200-sxm-141gb --gpus 1 --sp-size 1 --seq-len 16384";

void one_line_exit2(const std::string& args, const std::string& must_name) {
  const CliResult r = run_cli(args);
  INFO(args << "\n" << r.err);
  CHECK(r.rc == 2);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  CHECK(r.err.find(must_name) != std::string::npos);
}

// A re-predicted step record against issue 13's targets on today's model (memory within 3 % on every case, step
// median 5 %, max 15 %), and proof that the re-prediction reads the record: a step measured twice as long moves
// that case's error.
void meets_targets_and_reads(const std::string& rec, const nlohmann::json& re, const ulysses::test::TempDir& dir) {
  CHECK(re["summary"]["max_memory_allocated"]["max_abs_error_pct"].get<double>() <= 3.0);
  CHECK(re["summary"]["step"]["median_abs_error_pct"].get<double>() <= 5.0);
  CHECK(re["summary"]["step"]["max_abs_error_pct"].get<double>() <= 15.0);
  auto j = nlohmann::json::parse(ulysses::test::slurp(rec));
  const double before = re["cases"][0]["comparison"]["step"]["error_pct"].get<double>();
  j["cases"][0]["measured"]["step_s"]["median"] = j["cases"][0]["measured"]["step_s"]["median"].get<double>() * 2;
  { std::ofstream(dir / "drift.json") << j.dump(); }
  const auto re2 = nlohmann::json::parse(ulysses::test::repredict_stored(dir / "drift.json", dir, "re2.json"));
  CHECK(re2["cases"][0]["comparison"]["step"]["error_pct"].get<double>() == Approx((before / 100 + 1) / 2 * 100 - 100));
}

// A committed step record of our runtime (records/<name>) re-predicted: its case count, the cuda backend, and
// meets_targets_and_reads; the re-prediction for the record's own checks.
nlohmann::json repredicted_within_targets(const std::string& name, std::size_t cases) {
  const std::string rec = ulysses::test::record_path(name);
  ulysses::test::TempDir dir;
  auto re = nlohmann::json::parse(ulysses::test::repredict_stored(rec, dir, "re.json"));
  REQUIRE(re["cases"].size() == cases);
  CHECK(re["summary"]["backend"] == "cuda");
  meets_targets_and_reads(rec, re, dir);
  return re;
}
}  // namespace

TEST_CASE("step scope: bad --scope values and backends without whole steps are refused in one line", "[cli][step_scope]") {
  one_line_exit2("run --backend cpu --scope sideways" + kTiny, "--scope");
  one_line_exit2("run --backend cpu --scope step" + kTiny, "plan.zero_stage");  // the cpu step partitions as ZeRO-3
  one_line_exit2("compare --backend cpu --scope step" + kTiny, "--scope");
  one_line_exit2("run --backend deepspeed --scope block" + kLlama, "--scope");
  one_line_exit2("run --backend cpu --layers 2" + kTiny, "--layers");  // a block run takes no --layers
  const std::string cap_set = " --set " + source_path("scenarios/validation/h200-step-capacity.yaml") + " --out /nonexistent-dir/x.json";
  one_line_exit2("capacity --backend cpu --scope step" + cap_set, "--scope");
  one_line_exit2("capacity --backend deepspeed --scope block" + cap_set, "--scope");
#ifndef ULYSSES_WITH_CUDA
  one_line_exit2("compare --backend cuda --scope step" + kLlama, "--backend");  // this build has no CUDA backend
  const ulysses::test::TempDir tmp;
  const std::string ok_out = " --set " + source_path("scenarios/validation/h200-step-capacity.yaml") + " --out " + (tmp / "cap.json");
  one_line_exit2("capacity --backend cuda --scope step" + ok_out, "--backend");
  CHECK_FALSE(std::filesystem::exists(tmp / "cap.json"));
  CHECK_FALSE(std::filesystem::exists(tmp / "cap.json.partial"));
#endif
}

TEST_CASE("step scope: the committed H200 record of our runtime's step re-predicts, and follows its measurements", "[cli][step_scope]") {
  // records/validation/h200-step.json: 30 whole steps on one H200 (docs/VALIDATION.md "Whole steps on our runtime")
  repredicted_within_targets("validation/h200-step.json", 30);
}

TEST_CASE("step scope: the committed H100 ZeRO-Offload record of our runtime re-predicts within issue 13's targets", "[cli][step_scope]") {
  // records/validation/h100-step-offload.json: 11 whole steps on one H100 with the optimizer on the host, 9 of them
  // with the parameters there too (docs/VALIDATION.md "ZeRO-Offload steps on one H100")
  const auto re = repredicted_within_targets("validation/h100-step-offload.json", 11);
  // the parameters' fetch (offload.params, compared inside zero.allgather) is predicted in every case that has it
  int fetched = 0;
  for (const auto& c : re["cases"])
    for (const auto& p : c["comparison"]["phases"])
      if (p["name"] == "zero.allgather" && p["measured"].get<double>() > 0.01) {
        ++fetched;
        CHECK(std::abs(p["error_pct"].get<double>()) <= 15.0);
      }
  CHECK(fetched == 9);
}

TEST_CASE("step scope: the committed H100 plain-step record re-predicts within issue 13's targets", "[cli][step_scope]") {
  // records/validation/h100-step.json: 12 whole steps on one H100, the optimizer on the GPU, each phase's measured SM
  // clock kept (docs/VALIDATION.md "Plain steps on one H100")
  const auto re = repredicted_within_targets("validation/h100-step.json", 12);
  // the data a clock model is to be tested against: the attention backward of every case from 16K on holds samples,
  // those of the six cases at 64K and 128K (0.3-1.2 s each) at least 100; each clock lies between the H100's idle
  // floor and its boost
  int clocked = 0, long_clocked = 0;
  for (const auto& c : re["cases"])
    for (const auto& p : c["comparison"]["phases"])
      if (p["name"] == "attn.bwd" && p.contains("sm_mhz")) {
        ++clocked;
        long_clocked += p["sm_samples"].get<int>() >= 100;
        CHECK(p["sm_mhz"].get<double>() >= 345);
        CHECK(p["sm_mhz"].get<double>() <= 1980);
      }
  CHECK(clocked == 11);  // llama8b-l2-s8k: its backward, 8 ms over 2 layers, held no 10 ms sample
  CHECK(long_clocked == 6);
}

TEST_CASE("step scope: the committed capacity record of our runtime's step re-predicts within 3 %", "[cli][step_scope]") {
  // records/validation/h200-step-capacity.json: 4 cases bisected on one H200 under a ballast
  const std::string rec = ulysses::test::record_path("validation/h200-step-capacity.json");
  CliResult r = run_cli("capacity --stored '" + rec + "'");
  INFO(r.out << r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("(cuda,") != std::string::npos);  // the record's backend: our runtime's model
  CHECK(r.out.find("target: predicted within 3 % of measured: met") != std::string::npos);
  // the re-prediction reads the record: a measured S halved misses the target, named on its line
  ulysses::test::TempDir dir;
  auto j = nlohmann::json::parse(ulysses::test::slurp(rec));
  j["cases"][0]["measured_S"] = j["cases"][0]["measured_S"].get<std::int64_t>() / 2;
  { std::ofstream(dir / "drift.json") << j.dump(); }
  r = run_cli("capacity --stored '" + (dir / "drift.json") + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("missed: llama8b-l2-ckpt") != std::string::npos);
}
