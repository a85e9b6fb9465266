// eval/ for whole steps on the deepspeed backend, called directly: the worker's results grouped
// against the step model, the step statistics and targets, set and record case keys, and the
// capacity bisection and its record.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "runtime/step_plan.hpp"
#include "eval/step_capacity.hpp"
#include "eval/step_capacity_record.hpp"
#include "eval/step_compare.hpp"
#include "eval/step_out.hpp"
#include "eval/step_record.hpp"
#include "eval/step_run.hpp"
#include "eval/validation_set.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/config.hpp"
#include "sim/step_allocs.hpp"
#include "sim/step_runtime_memory.hpp"
#include "core/errors.hpp"
#include "sim/predict.hpp"

using namespace ulysses;
namespace rd = ulysses::runtime::deepspeed;

namespace {
// Two layers of Llama 3.1 8B at S on one H200, attention through sdpa.
Scenario two_layers(std::int64_t S) {
  Scenario sc;
  for (const auto& [k, v] : eval::Keys{{"model", "llama-3.1-8b"}, {"profile", "h200-sxm-141gb"}, {"model.layers", "2"},
                                       {"plan.attn_implementation", "sdpa"}})
    set_key(sc, k, v, "test");
  sc.plan.seq_len = S;
  sc.name = "t";
  return sc;
}
std::string source_path(const std::string& rel) { return std::string(ULYSSES_SOURCE_DIR) + "/" + rel; }

eval::StepCase step_case(const std::string& name, double alloc_err, double step_err, bool expandable) {
  eval::StepCase c;
  c.name = name;
  c.sc.plan.expandable_segments = expandable;
  c.c.allocated.error_pct = alloc_err;
  c.c.reserved.error_pct = alloc_err;
  c.c.step.error_pct = step_err;
  c.c.phases.push_back({"attn.fwd", 1, 1, step_err, true});
  c.c.phases.push_back({"norm.fwd", 0, 1, -100, false});
  return c;
}

// Each case of a step set of our runtime as `validate --backend cuda` builds it (plan.runtime ulysses), each checked
// to pass the step's plan at sp `sp` (no InputError) and to fit one GPU of its profile (one rank's bytes) with room
// for the CUDA context.
std::vector<Scenario> runtime_step_cases(const eval::ValidationSet& set, std::int64_t sp) {
  std::vector<Scenario> out;
  for (const auto& c : set.cases) {
    INFO(c.name);
    eval::StepSetCase s = eval::step_set_case(set.model, set.profile, c.name, eval::case_keys(set, c), set.path, "cuda");
    CHECK(s.sc.plan.sp_size == sp);
    CHECK(runtime::step_shape_of(s.sc, set.path).sp == sp);
    s.sc.plan.runtime = Runtime::ulysses;
    const double bytes = double(ulysses_step_bytes(derive_dims(s.sc), step_runtime_flags(s.sc)).total());
    CHECK(bytes < 0.95 * double(s.sc.hw.hbm_bytes));
    out.push_back(s.sc);
  }
  return out;
}

}  // namespace

TEST_CASE("deepspeed results: ranks merged, phases grouped against the step model", "[deepspeed]") {
  using Json = rd::Json;
  Json r0 = Json::parse(R"({"status":"ok","device":"NVIDIA H200","pytorch_cuda_alloc_conf":"expandable_segments:True",
    "phases":{"gemm.qkv.fwd":[0.010,0.012,0.011],"attn.fwd":[0.020,0.021,0.022],"mlp.bwd":[0.3,0.3,0.3],
              "logits.fwd":[0.05,0.05,0.05],"logits.bwd":[0.01,0.01,0.01],"optimizer.step":[1,1,1],"norm.fwd":[0.002,0.002,0.002],
              "mystery":[0.001,0.001,0.001]},
    "memory_step":{"phases":{"gemm.qkv.fwd":{"start":100,"peak":200,"peak_reserved":300}},"peak_at":"mlp.bwd"},
    "steps":[{"step_s":2.0},{"step_s":2.2},{"step_s":2.1}],
    "max_memory_allocated":1000,"max_memory_reserved":1200,"losses":[12.0,11.9]})");
  Json r1 = r0;
  r1["phases"]["attn.fwd"] = {0.030, 0.031, 0.032};
  r1["max_memory_allocated"] = 1100;
  const runtime::StepMeasurement m = rd::measurement_of({r0, r1});
  CHECK(m.ranks == 2);
  CHECK(m.max_memory_allocated == 1100);
  CHECK(m.step_median_s == Approx(2.1));
  const auto attn = std::find_if(m.phases.begin(), m.phases.end(), [](auto& p) { return p.name == "attn.fwd"; });
  REQUIRE(attn != m.phases.end());
  CHECK(attn->median_s == Approx(0.031));  // max over ranks of the per-rank median
  CHECK(attn->min_s == Approx(0.020));
  CHECK(m.phases.front().name == "gemm.qkv.fwd");  // memory-step order first
  CHECK(m.phases.front().peak_reserved_bytes == 300);

  CHECK(attn->host_s == -1);  // no host clock in these results: not measured

  Scenario sc = two_layers(16384);
  sc.plan.tiled_mlp = true;
  const Prediction p = predict(sc);
  const auto c = eval::compare_step(sc, p, m);
  auto find = [&](const std::string& n) {
    auto it = std::find_if(c.phases.begin(), c.phases.end(), [&](auto& r) { return r.name == n; });
    REQUIRE(it != c.phases.end());
    return *it;
  };
  CHECK(find("logits").measured == Approx(0.06));
  CHECK(find("logits").predicted == Approx(p.step.get("logits.fwd") + p.step.get("logits.bwd")));
  CHECK(find("mlp.bwd").predicted == Approx(p.step.get("mlp.bwd") + p.step.get("mlp.tiled_recompute") +
                                             p.step.get("swiglu.tiled_recompute") + p.step.get("swiglu.bwd")));
  CHECK(find("other").measured == Approx(0.001));  // unknown names land in other
  // ... and are compared with what runs outside the named ranges: RoPE and the residual adds
  CHECK(find("other").predicted ==
        Approx(p.step.get("rope_add.fwd") + p.step.get("rope_add.recompute") + p.step.get("rope_add.bwd")));
  CHECK(find("other").scored);
  CHECK(find("attn.fwd").scored);
  CHECK(c.allocated.predicted == Approx(double(p.gpu.total() - p.gpu.get("cuda_context") - p.gpu.get("nccl_buffers") -
                                               p.gpu.get("fragmentation"))));
  // reserved: the generated allocation sequence's peak where it covers the plan, else the binding bytes
  const std::int64_t generated = generated_reserved_peak(sc, kGeneratedReservedSteps);
  CHECK(c.reserved_generated == (generated >= 0));
  if (c.reserved_generated) CHECK(c.reserved.predicted == double(generated));
  else CHECK(c.reserved.predicted - c.allocated.predicted == Approx(double(p.gpu.get("fragmentation"))));
  CHECK(c.allocated.error_pct == Approx((c.allocated.predicted - 1100) / 1100 * 100));
  // throughput: the predicted rates, and the same work over the measured 2.1 s step (not scored)
  REQUIRE(p.hw_tflops_per_gpu > 0);
  CHECK(c.tokens_per_gpu.predicted == Approx(16384.0 / p.step_time_s));  // one GPU, one sequence of 16K
  CHECK(c.tokens_per_gpu.measured == Approx(16384.0 / 2.1));
  CHECK(c.hw_tflops.measured * 2.1 == Approx(p.hw_tflops_per_gpu * p.step_time_s));
  CHECK(c.megatron_tflops.predicted == Approx(p.megatron_tflops_per_gpu));
  CHECK_FALSE(c.hw_tflops.scored);
  CHECK(c.peak_tflops == Approx(sc.hw.bf16_dense_flops / 1e12));
  CHECK(eval::comparison_json(c)["throughput"]["hw_tflops_per_gpu"]["measured"].get<double>() == Approx(c.hw_tflops.measured));
  const std::string table = eval::step_compare_table(c);
  INFO(table);
  CHECK(table.find("Megatron TFLOP/s per GPU") != std::string::npos);
  CHECK(table.find(fmt::format("{:.1f}", c.hw_tflops.measured / c.peak_tflops * 100)) != std::string::npos);  // its MFU
  // without expandable segments the reserved row is always the binding bytes
  sc.plan.expandable_segments = false;
  const Prediction pn = predict(sc);
  const auto nb = eval::compare_step(sc, pn, m);
  CHECK_FALSE(nb.reserved_generated);
  CHECK(nb.reserved.predicted - nb.allocated.predicted == Approx(double(pn.gpu.get("fragmentation"))));
}


TEST_CASE("deepspeed capacity: ladders", "[deepspeed]") {
  CHECK(eval::ladder_between(1000, 2000, 3, 100) == std::vector<std::int64_t>{1300, 1500, 1800});  // 1250, 1500, 1750 to multiples of 100
  CHECK(eval::ladder_between(1000, 1100, 3, 100).empty());
  const auto l = eval::first_ladder(10000, 512);
  REQUIRE(!l.empty());
  CHECK(std::is_sorted(l.begin(), l.end()));
  CHECK(std::adjacent_find(l.begin(), l.end()) == l.end());
  for (auto s : l) CHECK(s % 512 == 0);
  CHECK(l.front() < 10000);
  CHECK(l.back() > 10000);
}


TEST_CASE("deepspeed capacity: the bisection brackets the limit of a probe within 2 %", "[deepspeed]") {
  // a stand-in for the worker's probe ladders: every length up to `limit` runs, the next one runs out
  for (std::int64_t limit : {20000LL, 49999LL, 150000LL}) {
    int processes = 0;
    const auto probe = [&](const std::vector<std::int64_t>& ladder) {
      ++processes;
      rd::ProbeResult r;
      for (std::int64_t s : ladder) {
        if (s > limit) {
          r.oom_at = s;
          break;
        }
        r.fits.push_back({s, s * 10, s * 11});
      }
      return r;
    };
    INFO(limit);
    const eval::Bisection b = eval::bisect_capacity(50000, 512, probe);
    CHECK(processes <= 3);
    REQUIRE(b.fits > 0);
    REQUIRE(b.first_oom > 0);
    CHECK(b.fits <= limit);
    CHECK(b.first_oom > limit);
    CHECK(b.fits % 512 == 0);
    if (limit == 49999) CHECK(double(b.first_oom - b.fits) <= 0.02 * double(b.fits));
  }
}


TEST_CASE("step error convention: nothing measured is 100 % unless nothing is predicted", "[eval][deepspeed]") {
  CHECK(eval::error_pct(110, 100) == Approx(10));
  CHECK(eval::error_pct(0, 0) == 0);
  CHECK(eval::error_pct(5, 0) == 100);
}

TEST_CASE("step statistics: reserved scored only with expandable segments, the targets name what they miss", "[eval][deepspeed]") {
  const std::vector<eval::StepCase> cs = {step_case("a", 2, 5, true), step_case("b", -8, 12, false), step_case("c", 1, -20, true)};
  const eval::StepSummary s = eval::summarize_steps(cs);
  CHECK(s.allocated.errors.size() == 3);
  CHECK(s.reserved.errors.size() == 2);  // b ran without expandable segments
  CHECK(s.allocated.median_abs() == Approx(2));
  CHECK(s.allocated.max_abs() == Approx(8));
  CHECK(s.allocated.worst() == "b (-8.0 %)");
  REQUIRE(s.phases.size() == 1);  // norm.fwd is not scored
  CHECK(s.phases[0].name == "attn.fwd");
  const auto missed = eval::missed_step_targets(s);
  CHECK(missed == std::vector<std::string>{"max_memory_allocated: max |error| 8.00 % > 6 % (b (-8.0 %))",
                                           "step time: median |error| 12.00 % > 10 %"});
  CHECK(eval::step_summary_json(s)["missed_targets"].size() == 2);
  CHECK(eval::missed_step_targets(eval::summarize_steps({step_case("ok", 1, 1, true)})).empty());
  // our runtime's step (issue 13): memory max 3 %, step time median 5 % and max 15 %
  const eval::StepSummary c = eval::summarize_steps(cs, "cuda");
  CHECK(eval::missed_step_targets(c) == std::vector<std::string>{"max_memory_allocated: max |error| 8.00 % > 3 % (b (-8.0 %))",
                                                                 "step time: median |error| 12.00 % > 5 %",
                                                                 "step time: max |error| 20.00 % > 15 % (c (-20.0 %))"});
  CHECK(eval::step_summary_json(c)["backend"] == "cuda");
  CHECK(eval::missed_step_targets(eval::summarize_steps({step_case("ok", 2.5, 4, true)}, "cuda")).empty());
}

TEST_CASE("set case keys: run.* are worker options, split off before set_key", "[eval][deepspeed]") {
  eval::Keys keys = {{"plan.seq_len", "4096"}, {"run.ballast_GiB", "2"}, {"run.expandable_segments", "true"}};
  const eval::RunKeys r = eval::split_run_keys(keys, "set.yaml", "c");
  CHECK(r.ballast_bytes == 2LL << 30);
  CHECK(keys == eval::Keys{{"plan.seq_len", "4096"}, {"plan.expandable_segments", "true"}});
  eval::Keys bad = {{"run.ballast_GiB", "-1"}};
  CHECK_THROWS_WITH(eval::split_run_keys(bad, "set.yaml", "c"), Catch::Contains("cases.c.run.ballast_GiB"));
  eval::Keys unknown = {{"run.turbo", "1"}};
  CHECK_THROWS_AS(eval::split_run_keys(unknown, "set.yaml", "c"), core::InputError);
}

TEST_CASE("validation sets: every case builds its scenario, gpus follow the plan", "[eval][validate]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/cpu-tiny.yaml"));
  CHECK(set.name == "cpu-tiny");
  REQUIRE(set.cases.size() == 6);
  const eval::Keys keys = eval::case_keys(set, set.cases[1]);
  CHECK(keys.front() == eval::Keys::value_type{"plan.micro_batch_size", "1"});  // defaults first
  CHECK(keys.back().first == "workload.causal");
  const Scenario sc = eval::case_scenario(set.model, set.profile, keys, set.path, set.cases[1].name);
  CHECK(sc.plan.sp_size == 2);
  CHECK(sc.gpus == 2);
  CHECK(sc.model.kv_heads == 2);
  CHECK_THROWS_WITH(eval::case_scenario(set.model, set.profile, {{"model.headz", "8"}}, "x.yaml", "c"), Catch::Contains("model.headz"));
}

TEST_CASE("step capacity records: the bisection lands in the case, the target is on the longest S", "[eval][deepspeed]") {
  eval::StepCapacityCase c;
  c.set.name = "c";
  c.predicted_S = 10300;
  eval::Bisection none;
  CHECK_FALSE(eval::record_bisection(c, none));
  eval::Bisection b;
  b.fits = 10000, b.first_oom = 10200;
  b.ran = {{9000, 1, 2}, {10000, 3, 4}};
  b.oom = {10200};
  REQUIRE(eval::record_bisection(c, b));
  CHECK(c.measured_S == 10000);
  CHECK(c.failed_S == 10200);
  CHECK(c.probes.size() == 3);
  CHECK(c.probes[2]["fits"] == false);
  CHECK(eval::missed_step_capacity({c}, 3.5).empty());
  CHECK(eval::missed_step_capacity({c}, 2).size() == 1);
  CHECK(eval::missed_step_capacity({c}, -1).empty());
  const auto j = eval::step_capacity_case_json(c);
  CHECK(j["measured_S"] == 10000);
  CHECK(j["first_oom_S"] == 10200);
  CHECK(eval::is_step_capacity_record({{"format", "ulysses-step-capacity/1"}}));
}

TEST_CASE("the step validation set of our runtime: every case runs on the cuda step and fits one H200", "[eval][validate]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h200-step.yaml"));
  REQUIRE(set.cases.size() >= 20);  // issue 13's least
  int tiled_mlp = 0, offload = 0, all = 0, host_optimizer = 0;
  for (const Scenario& sc : runtime_step_cases(set, 1)) {
    tiled_mlp += sc.plan.tiled_mlp, offload += sc.plan.offload_checkpoints, host_optimizer += sc.plan.offload_optimizer;
    all += sc.plan.tiled_mlp && sc.plan.offload_checkpoints && sc.plan.tiled_logits;
  }
  CHECK(tiled_mlp >= 2);  // the feature ladder's rungs on one GPU
  CHECK(offload >= 2);
  CHECK(all >= 2);
  CHECK(host_optimizer >= 3);  // the optimizer on the host: alone, with Qwen3's shapes, with every feature
}

TEST_CASE("the H100 step set of our runtime: every case runs on the cuda step at sp 1 and fits one H100", "[eval][validate]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h100-step.yaml"));
  REQUIRE(set.cases.size() >= 12);
  int tiled_mlp = 0, offload = 0, nockpt = 0, tied = 0;
  for (const Scenario& sc : runtime_step_cases(set, 1)) {
    CHECK_FALSE(sc.plan.offload_optimizer);  // the optimizer on the GPU (h100-step-offload.yaml has the host's)
    tiled_mlp += sc.plan.tiled_mlp, offload += sc.plan.offload_checkpoints, nockpt += !sc.plan.activation_checkpointing;
    tied += sc.model.tied_embeddings;
  }
  CHECK(tiled_mlp >= 2);
  CHECK(offload >= 2);
  CHECK(nockpt >= 1);
  CHECK(tied >= 2);
}

TEST_CASE("the sp 2 step set of our runtime: every case passes the step's plan at sp 2 and fits an H100", "[eval][validate]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h100-step-sp2.yaml"));
  REQUIRE(set.cases.size() >= 10);
  int tiled_mlp = 0, offload = 0, nockpt = 0, host_opt = 0, host_params = 0;
  for (const Scenario& sc : runtime_step_cases(set, 2)) {
    tiled_mlp += sc.plan.tiled_mlp, offload += sc.plan.offload_checkpoints, nockpt += !sc.plan.activation_checkpointing;
    host_opt += sc.plan.offload_optimizer, host_params += sc.plan.offload_params;
  }
  CHECK(host_opt >= 2);
  CHECK(host_params >= 1);
  CHECK(tiled_mlp >= 2);
  CHECK(offload >= 2);
  CHECK(nockpt >= 1);
}

TEST_CASE("the ZeRO-Offload step set of our runtime: every case runs on the cuda step at sp 1 and fits one H100", "[eval][validate]") {
  const eval::ValidationSet set = eval::load_validation_set(source_path("scenarios/validation/h100-step-offload.yaml"));
  REQUIRE(set.cases.size() >= 10);
  int host_params = 0, all = 0, nockpt = 0, tied = 0;
  for (const Scenario& sc : runtime_step_cases(set, 1)) {
    CHECK(sc.plan.offload_optimizer);
    host_params += sc.plan.offload_params, nockpt += !sc.plan.activation_checkpointing, tied += sc.model.tied_embeddings;
    all += sc.plan.offload_params && sc.plan.tiled_mlp && sc.plan.offload_checkpoints && sc.plan.tiled_logits;
  }
  CHECK(host_params >= 8);  // offload_params at 2 to 4 layers, S 8K to 128K
  CHECK(set.cases.size() - host_params >= 2);  // the optimizer alone on the host, to set them against
  CHECK(all >= 2);
  CHECK(nockpt >= 1);
  CHECK(tied >= 1);
}

TEST_CASE("our runtime's step is predicted with the kernel it runs, the deepspeed step with the plan's", "[eval][step]") {
  const Scenario sc = two_layers(16384);  // plan.attn_implementation sdpa
  const Scenario ours = eval::step_scenario_for("cuda", sc), peer = eval::step_scenario_for("deepspeed", sc);
  CHECK(ours.plan.runtime == Runtime::ulysses);
  CHECK(ours.plan.attn_implementation == "ulysses_flash");  // sdpa is an alias of our flash kernel
  CHECK(peer.plan.runtime == Runtime::pytorch);
  CHECK(peer.plan.attn_implementation == "sdpa");
  Scenario ref = sc;
  ref.plan.attn_implementation = "eager";
  CHECK(eval::step_scenario_for("cuda", ref).plan.attn_implementation == "ulysses_reference");
  // the prediction follows: our kernel's curves, not sdpa's
  const auto attn_fwd = [](const Prediction& p) {
    for (int i = 0; i < p.step.n; ++i)
      if (std::string(p.step.phases[i].name) == "attn.fwd") return p.step.phases[i].time_s;
    return -1.0;
  };
  Scenario peer_as_ours = peer;  // the same runtime, only the curves' key differs
  peer_as_ours.plan.runtime = Runtime::ulysses;
  Scenario named = peer_as_ours;
  named.plan.attn_implementation = "ulysses_flash";
  const double a = attn_fwd(predict(ours)), b = attn_fwd(predict(peer_as_ours));
  REQUIRE(a > 0);
  CHECK(a == Approx(attn_fwd(predict(named))).epsilon(1e-12));
  CHECK(std::fabs(a / b - 1) > 0.02);  // the profile's sdpa curve is another kernel's
}

// compare --trace: the predicted step, the measured timeline, and (our runtime) the traced step's CUPTI spans
// grouped by track, in the order the tracks first appear
TEST_CASE("step trace: predicted, measured and the traced step's tracks", "[eval][trace]") {
  Scenario sc = two_layers(4096);
  sc.plan.runtime = Runtime::ulysses;
  const Prediction p = predict(sc);
  runtime::StepMeasurement m;
  m.backend = "cuda";
  m.timeline = {{{"attn.fwd", 0, 1e-3}, {"attn.bwd", 1e-3, 2e-3}}};
  auto names = [](const reports::Json& j) {
    std::vector<std::string> out;
    for (const auto& e : j["traceEvents"])
      if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") out.push_back(e["args"]["name"]);
    return out;
  };
  const auto two = names(eval::step_trace(p, m));
  REQUIRE(two.size() == 2);
  CHECK(two[1] == "measured (cuda, last timed step)");
  m.traced = {{"attn.fwd", "phases", 0, 1e-3}, {"flash_fwd", "stream 7", 1e-5, 9e-4}, {"attn.fwd", "nvtx", 0, 1e-3},
              {"attn.bwd", "phases", 1e-3, 2e-3}, {"flash_bwd", "stream 7", 1.1e-3, 1.8e-3}};
  const reports::Json j = eval::step_trace(p, m);
  const auto three = names(j);
  REQUIRE(three.size() == 3);
  CHECK(three[2].rfind("traced step (cuda, CUPTI", 0) == 0);
  std::vector<std::string> threads;
  int gpu_spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e.value("pid", 0) == 3) threads.push_back(e["args"]["name"]);
    if (e.value("ph", "") == "X" && e.value("pid", 0) == 3 && e.value("cat", "") == "gpu") ++gpu_spans;
  }
  CHECK(threads == std::vector<std::string>{"phases", "stream 7", "nvtx"});
  CHECK(gpu_spans == 2);
}

TEST_CASE("deepspeed results: the host clock per phase, max over ranks of the median, kept through JSON", "[deepspeed]") {
  using Json = rd::Json;
  Json r0 = Json::parse(R"({"status":"ok","device":"NVIDIA H200",
    "phases":{"mlp.bwd":[0.30,0.30,0.30],"attn.fwd":[0.020,0.021,0.022]},
    "phases_host":{"mlp.bwd":[0.50,0.40,0.45],"attn.fwd":[0.001,0.002,0.003]},
    "steps":[{"step_s":1.0},{"step_s":1.0},{"step_s":1.0}],"max_memory_allocated":1,"max_memory_reserved":1,"losses":[1.0]})");
  Json r1 = r0;
  r1["phases_host"]["mlp.bwd"] = {0.2, 0.2, 0.2};
  r1["phases_host"].erase("attn.fwd");  // a rank without it: the other rank's
  const runtime::StepMeasurement m = rd::measurement_of({r0, r1});
  auto host = [&](const runtime::StepMeasurement& x, const std::string& n) {
    const auto it = std::find_if(x.phases.begin(), x.phases.end(), [&](auto& p) { return p.name == n; });
    REQUIRE(it != x.phases.end());
    return it->host_s;
  };
  CHECK(host(m, "mlp.bwd") == Approx(0.45));  // r0's median; r1's 0.2 is lower
  CHECK(host(m, "attn.fwd") == Approx(0.002));
  const runtime::StepMeasurement back = runtime::measurement_from_json(runtime::measurement_json(m));
  CHECK(host(back, "mlp.bwd") == Approx(0.45));
  CHECK(host(back, "attn.fwd") == Approx(0.002));
  // a stored record from before the host clock reads as not measured, and is written back without the key
  Json old = runtime::measurement_json(m);
  for (auto& p : old["phases"]) p.erase("host_s");
  const runtime::StepMeasurement o = runtime::measurement_from_json(old);
  CHECK(host(o, "mlp.bwd") == -1);
  CHECK_FALSE(runtime::measurement_json(o)["phases"][0].contains("host_s"));
  // a phase's SM clock: written with its sample count where measured, read back; absent reads as not measured
  runtime::StepMeasurement c = m;
  c.phases[0].sm_mhz = 1545, c.phases[0].sm_samples = 12;
  const Json cj = runtime::measurement_json(c);
  CHECK(cj["phases"][0]["sm_mhz"] == 1545);
  CHECK(cj["phases"][0]["sm_samples"] == 12);
  CHECK_FALSE(cj["phases"][1].contains("sm_mhz"));
  const runtime::StepMeasurement cb = runtime::measurement_from_json(cj);
  CHECK(cb.phases[0].sm_mhz == 1545);
  CHECK(cb.phases[0].sm_samples == 12);
  CHECK(cb.phases[1].sm_mhz == -1);
}

TEST_CASE("step comparison: each group's SM clock, its phases' medians weighted by their samples", "[eval][power]") {
  runtime::StepMeasurement m;
  m.backend = "cuda", m.ranks = 1, m.step_median_s = 1.0;
  auto phase = [](const char* n, double s, double mhz, std::int64_t k) {
    runtime::StepPhase p;
    p.name = n, p.median_s = p.min_s = p.max_s = s, p.sm_mhz = mhz, p.sm_samples = k;
    return p;
  };
  m.phases = {phase("logits.fwd", 0.1, 1320, 10), phase("logits.bwd", 0.3, 1400, 30),  // one group, two clocks
              phase("attn.bwd", 0.2, 1395, 20), phase("norm.fwd", 0.001, -1, 0)};   // norm.fwd: no sample in it
  const Scenario sc = two_layers(16384);
  const auto c = eval::compare_step(sc, predict(sc), m);
  auto find = [&](const std::string& n) {
    auto it = std::find_if(c.phases.begin(), c.phases.end(), [&](auto& r) { return r.name == n; });
    REQUIRE(it != c.phases.end());
    return *it;
  };
  CHECK(find("logits").sm_mhz == Approx((1320.0 * 10 + 1400.0 * 30) / 40));
  CHECK(find("logits").sm_samples == 40);
  CHECK(find("attn.bwd").sm_mhz == Approx(1395));
  CHECK(find("norm.fwd").sm_samples == 0);
  const auto j = eval::comparison_json(c);
  int rows = 0;
  for (const auto& r : j["phases"]) {
    if (r["name"] == "logits") {
      CHECK(r["sm_mhz"].get<double>() == Approx(1380));
      ++rows;
    }
    if (r["name"] == "norm.fwd") {
      CHECK_FALSE(r.contains("sm_mhz"));
      ++rows;
    }
  }
  CHECK(rows == 2);
  const std::string table = eval::step_compare_table(c);
  INFO(table);
  CHECK(table.find("sm clock") != std::string::npos);
  const auto logits_line = table.find("logits");
  REQUIRE(logits_line != std::string::npos);
  CHECK(table.substr(logits_line, table.find('\n', logits_line) - logits_line).find("1380") != std::string::npos);
  // no clock measured (the deepspeed backend, or no NVML): no column
  for (auto& p : m.phases) p.sm_mhz = -1, p.sm_samples = 0;
  const std::string plain = eval::step_compare_table(eval::compare_step(sc, predict(sc), m));
  CHECK(plain.find("sm clock") == std::string::npos);
}
