// `run --backend cpu --scope step` (runtime/cpu/cpu_step.hpp): the sequence-parallel ZeRO-3 step on
// thread-ranks, checked against one rank, as a user runs it; what it does not run is one line, exit 2.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/step_bench.hpp"
#include "runtime/cpu/cpu_step.hpp"
#include "runtime/step_measurement.hpp"
#include "sim/config.hpp"
#include "tests/cli/run_cli.hpp"

using ulysses::test::CliResult;
using ulysses::test::run_cli;
using ulysses::test::source_path;

namespace {
const std::string kStep = " --backend cpu --scope step --scenario " + source_path("scenarios/cpu-tiny-step.yaml");

void one_line_exit2(const std::string& args, const std::string& must_name) {
  const CliResult r = run_cli(args);
  INFO(args << "\n" << r.err);
  CHECK(r.rc == 2);
  CHECK(ulysses::test::count_lines(r.err) == 1);
  CHECK(r.err.find(must_name) != std::string::npos);
}
}  // namespace

TEST_CASE("cpu step: four thread-ranks equal one rank, in the table and the JSON", "[cli][cpu_step]") {
  const CliResult t = run_cli("run" + kStep + " --warmup 0 --iters 2");
  INFO(t.err);
  REQUIRE(t.rc == 0);
  for (const char* s : {"zero.allgather", "fwd_bwd", "zero.reduce_scatter", "optimizer.step", "#wrong", "gradients",
                        "parameters (bf16 bits)", "correct (every loss finite, no check wrong): true", "device memory: none"})
    CHECK(t.out.find(s) != std::string::npos);
  const CliResult j = run_cli("run" + kStep + " --warmup 0 --iters 1 --format json");
  REQUIRE(j.rc == 0);
  const auto doc = nlohmann::ordered_json::parse(j.out);
  CHECK(doc["backend"] == "cpu");
  CHECK(doc["ranks"] == 4);
  CHECK(doc["correct"] == true);
  CHECK(doc["max_memory_allocated"].is_null());  // no device: not a zero
  REQUIRE(doc["checks"].size() == 5);
  for (const auto& c : doc["checks"]) {
    CHECK(c["wrong"] == 0);
    CHECK(c["elements"].get<std::int64_t>() > 0);
  }
  // the JSON reads back as the measurement (a stored record of it)
  const auto m = ulysses::runtime::measurement_from_json(doc);
  CHECK(m.correct());
  CHECK_FALSE(m.has_device_memory());
  CHECK(m.checks.size() == 5);
  // other sp sizes and layer counts: 2 ranks (kv heads split), one layer
  const CliResult two = run_cli("run" + kStep + " --sp-size 2 --gpus 2 --layers 1 --warmup 0 --iters 1 --format json");
  INFO(two.err);
  REQUIRE(two.rc == 0);
  CHECK(nlohmann::json::parse(two.out)["correct"] == true);
}

TEST_CASE("cpu step: a check that fails makes the measurement incorrect", "[cli][cpu_step]") {
  ulysses::runtime::StepMeasurement m;
  m.losses = {1.0};
  m.checks = {{"gradients", 10, 0, 1e-12, 1e-9}};
  CHECK(m.correct());
  m.checks[0].wrong = 1;
  CHECK_FALSE(m.correct());
  m.checks[0] = {"gradients", 0, 0, 0, 1e-9};  // nothing compared is not a pass
  CHECK_FALSE(m.correct());
}

TEST_CASE("cpu step: what it does not run is one line naming the key, exit 2", "[cli][cpu_step]") {
  one_line_exit2("run" + kStep + " --gpus 8", "gpus");
  one_line_exit2("run" + kStep + " --sp-size 3 --gpus 3", "plan.sp_size");
  one_line_exit2("run" + kStep + " --seq-len 65536", "plan.seq_len");  // far above the fp64 budget
  one_line_exit2("run" + kStep + " --offload-optimizer true", "plan.offload_optimizer");
  one_line_exit2("run" + kStep + " --seq-len 252 --pad-to-multiple-of 64", "no pad tokens");  // 256 with padding: refused
  // every timed step counts against the budget: one step fits, a thousand do not
  one_line_exit2("run" + kStep + " --warmup 0 --iters 1000", "1001 steps and the oracle");
  one_line_exit2("run" + kStep + " --zero-stage 2", "plan.zero_stage");
  one_line_exit2("compare" + kStep, "--scope");
  one_line_exit2("validate --backend cpu --scope step --set " + source_path("scenarios/validation/h200-step.yaml") + " --out /nonexistent/x.json",
                 "--scope");
}

TEST_CASE("a check's non-finite error survives the JSON (null) and reads back as infinity", "[cli][cpu_step]") {
  ulysses::runtime::StepMeasurement m;
  m.backend = "cpu";
  m.max_memory_allocated = m.max_memory_reserved = m.device_used_bytes = -1;
  m.phases.push_back({"fwd_bwd", 1, 1, 1, -1, -1, -1, -1});
  m.checks.push_back({"gradients", 10, 1, INFINITY, 1e-9});
  const auto j = ulysses::runtime::measurement_json(m);
  CHECK(j["checks"][0]["max_rel_err"].is_null());
  CHECK(j["phases"][0]["peak_bytes"].is_null());
  const auto back = ulysses::runtime::measurement_from_json(nlohmann::ordered_json::parse(j.dump()));
  REQUIRE(back.checks.size() == 1);
  CHECK(std::isinf(back.checks[0].max_rel_err));
  CHECK(back.phases[0].peak_bytes == -1);
  CHECK(j["energy_j_per_step"].is_null());  // not measured: null, and -1 again when read back
  CHECK(back.energy_j_per_step == -1);
  m.energy_j_per_step = 866.25;
  CHECK(ulysses::runtime::measurement_from_json(nlohmann::ordered_json::parse(ulysses::runtime::measurement_json(m).dump()))
            .energy_j_per_step == 866.25);
  CHECK(!back.has_device_memory());
  CHECK(!back.correct());
}

TEST_CASE("cpu step: the flops guard grows with the sequence and the layers", "[cli][cpu_step]") {
  ulysses::runtime::StepDims d;
  d.layer.T = 256, d.layer.h = 64, d.layer.H = 8, d.layer.H_kv = 2, d.layer.D = 16, d.layer.F = 128;
  d.L = 2, d.V = 512;
  const double f = ulysses::runtime::cpu::cpu_step_flops(d);
  CHECK(f > 0);
  d.L = 4;
  CHECK(ulysses::runtime::cpu::cpu_step_flops(d) == Approx(2 * f - 3 * 2 * 256.0 * 512 * 64).epsilon(1e-12));
}

TEST_CASE("bench step: a Megatron-style rate above the peak is explained in one line, not otherwise", "[cli][bench_step]") {
  ulysses::bench::StepBench b;
  b.scenario = "t";
  for (const char* be : {"cuda", "deepspeed"}) {
    ulysses::bench::StepBenchRow r;
    r.backend = be;
    r.m.step_median_s = 0.2;
    r.m.losses = {1.0};
    r.c.peak_tflops = 989.4;
    r.c.tokens_per_gpu.measured = 1000;
    r.c.hw_tflops.measured = 500;
    r.c.megatron_tflops.measured = 900;
    b.rows.push_back(r);
  }
  const std::string note = "Megatron-style: the papers' FLOP count";
  CHECK(ulysses::bench::step_bench_table(b).find(note) == std::string::npos);
  b.rows[0].c.megatron_tflops.measured = 1004;  // 101.5 % of the peak, as llama 16K at 2 layers on an H100
  const std::string t = ulysses::bench::step_bench_table(b);
  CHECK(t.find(note) != std::string::npos);
  CHECK(t.find("101.5") != std::string::npos);
}

TEST_CASE("bench step: two backends' steps side by side with the tokens/s ratio", "[cli][cpu_step][bench_step]") {
  // the cpu step on both sides exercises the whole path without a GPU; on the GPU host: --backends cuda,deepspeed
  ulysses::test::TempDir tmp;
  const std::string args = "bench step --backends cpu,cpu --scenario " + source_path("scenarios/cpu-tiny-step.yaml") +
                           " --warmup 0 --iters 1 --json " + (tmp / "b.json");
  const CliResult r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("tokens/s per GPU, cpu / cpu:") != std::string::npos);
  CHECK(r.out.find("(per GPU)") != std::string::npos);  // the units row
  const auto j = nlohmann::json::parse(ulysses::test::slurp(tmp / "b.json"));
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["valid"] == true);
  const double a = j["rows"][0]["comparison"]["throughput"]["tokens_per_s_per_gpu"]["measured"].get<double>();
  const double b = j["rows"][1]["comparison"]["throughput"]["tokens_per_s_per_gpu"]["measured"].get<double>();
  REQUIRE(b > 0);
  CHECK(j["ratio_tokens_per_s_per_gpu"].get<double>() == Approx(a / b));
  CHECK(r.out.find("power: cpu: not sampled (the cpu backend)") != std::string::npos);
  CHECK(j["rows"][0]["power"]["available"] == false);
  CHECK(j["rows"][1]["power"]["why"] == "the cpu backend");
  CHECK(r.out.find("energy over the timed steps (NVML energy counters, summed over the ranks' GPUs): cpu not measured; "
                   "cpu not measured\n") != std::string::npos);
  CHECK(r.out.find("tokens per joule") == std::string::npos);
  CHECK(j["rows"][0]["tokens_per_joule"].is_null());
  CHECK(j["rows"][0]["measurement"]["energy_j_per_step"].is_null());
  one_line_exit2("bench step --backends cuda --scenario " + source_path("scenarios/cpu-tiny-step.yaml"), "--backends");
  one_line_exit2("bench step --backends cpu,nope --scenario " + source_path("scenarios/cpu-tiny-step.yaml"), "--backends");
  one_line_exit2("bench step --backends cpu,cpu, --scenario " + source_path("scenarios/cpu-tiny-step.yaml"), "--backends");
  // the second backend's plan is refused (our CUDA step's attention kernels take head_dim 64 or 128; its plan check
  // needs no GPU): one line naming the key, exit 2, whether or not this build has the CUDA backend
  one_line_exit2("bench step --backends cpu,cuda --scenario " + source_path("scenarios/cpu-tiny-step.yaml"), "model.head_dim");
  one_line_exit2("bench layer --layers 2 --scenario " + source_path("scenarios/cpu-tiny-step.yaml"), "--layers");
}
