// bench_predict: validates predictions, then times predict() and find_max_seq_len() on one
// thread. Targets (issue 2): >= 1,000,000 predict()/s per core; plan < 1 ms per scenario.
// Exit status: 1 when a validation fails (timing misses are reported, not failures).
//   usage: bench_predict [N predict calls, default 2000000]
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim/capacity.hpp"
#include "sim/config.hpp"
#include "sim/predict.hpp"

using namespace ulysses;
using Clock = std::chrono::steady_clock;

// CPU time of this thread: on a shared machine the wall clock also counts time spent waiting
// for a core, so "per core" rates are computed from this clock (wall-clock rates shown too).
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {

struct Case {
  std::string name;
  Scenario sc;
};

// A scenario from the presets (scenarios/models, profiles) as a user writes it: ZeRO-3, optimizer
// offload, activation checkpointing; `all`: also tiled logits/loss, TiledMLP, checkpoint offload.
// The profile's calibrated section is left out (the plain cases time the datasheet path).
Scenario preset(const char* model, const char* profile, std::int64_t gpus, std::int64_t sp, std::int64_t S, bool all) {
  Scenario sc;
  const std::string o = "bench_predict";
  set_key(sc, "model", model, o);
  set_key(sc, "profile", profile, o);
  set_key(sc, "gpus", std::to_string(gpus), o);
  set_key(sc, "plan.sp_size", std::to_string(sp), o);
  set_key(sc, "plan.dp_shard_size", std::to_string(gpus / sp), o);
  set_key(sc, "plan.zero_stage", "3", o);
  set_key(sc, "plan.offload_optimizer", "true", o);
  set_key(sc, "plan.activation_checkpointing", "true", o);
  set_key(sc, "plan.seq_len", std::to_string(S), o);
  for (const char* k : {"plan.tiled_logits", "plan.tiled_mlp", "plan.offload_checkpoints"})
    set_key(sc, k, all ? "true" : "false", o);
  sc.hw.has_calibration = false;
  sc.hw.calibrated = Calibration{};  // the calibrated case below sets its own curves, nothing else
  validate(sc, o);
  return sc;
}

int validate(const Case& c, const Prediction& p) {
  int wrong = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::printf("# WRONG %s: %s\n", c.name.c_str(), what);
      ++wrong;
    }
  };
  core::bytes_t gsum = 0, hsum = 0;
  for (int i = 0; i < p.gpu.n; ++i) { gsum += p.gpu.terms[i].bytes; check(p.gpu.terms[i].bytes >= 0, "gpu term < 0"); }
  for (int i = 0; i < p.host.n; ++i) { hsum += p.host.terms[i].bytes; check(p.host.terms[i].bytes >= 0, "host term < 0"); }
  check(gsum == p.gpu.total() && gsum > 0, "gpu breakdown sum");
  check(hsum == p.host.total() && hsum > 0, "host breakdown sum");
  double tsum = 0;
  for (int i = 0; i < p.step.n; ++i) {
    check(std::isfinite(p.step.phases[i].time_s) && p.step.phases[i].time_s >= 0, "phase time finite, >= 0");
    tsum += p.step.phases[i].time_s;
  }
  check(std::abs(tsum - p.step_time_s) <= 1e-12 * tsum && p.step_time_s > 0, "step time = sum of phases");
  for (double t : p.block) check(std::isfinite(t) && t >= 0, "block phase finite");
  check(std::isfinite(p.tokens_per_s) && p.tokens_per_s > 0, "tokens/s");
  check(std::isfinite(p.hw_tflops_per_gpu) && p.hw_tflops_per_gpu > 0, "hw TFLOP/s");
  check(p.hw_tflops_per_gpu * 1e12 <= c.sc.hw.bf16_dense_flops, "hw TFLOP/s below peak");
  check(p.padded_seq_len % c.sc.plan.sp_size == 0 && p.s_local * c.sc.plan.sp_size == p.padded_seq_len, "padding");
  check(p.fits_gpu == (p.gpu.total() <= p.gpu_capacity_bytes), "fits_gpu flag");
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const long n_calls = argc > 1 ? std::atol(argv[1]) : 2000000;
  std::vector<Case> cases;
  cases.push_back({"8b 8xH100 sp8 all 1M", preset("llama-3.1-8b", "h100-sxm-80gb", 8, 8, 1 << 20, true)});
  cases.push_back({"8b 1xH100 base 32K", preset("llama-3.1-8b", "h100-sxm-80gb", 1, 1, 32768, false)});
  cases.push_back({"70b 32xH200 sp32 all 1M", preset("llama-3.1-70b", "h200-sxm-141gb", 32, 32, 1 << 20, true)});
  cases.push_back({"70b 64xH100 sp8 dp8 128K", preset("llama-3.1-70b", "h100-sxm-80gb", 64, 8, 131072, false)});

  {  // with calibrated curves (8 samples each): exercises the curve lookups and interpolation
    Scenario sc = preset("llama-3.1-8b", "h200-sxm-141gb", 8, 8, 1 << 20, true);
    sc.hw.has_calibration = true;
    Curve bw, fa, fb, gm;
    for (int i = 0; i < 8; ++i) {
      bw.points.push_back({static_cast<double>(1 << (16 + 2 * i)), 20.0 + 45.0 * i});
      fa.points.push_back({static_cast<double>(1024 << (2 * i)), 0.30 + 0.01 * i});
      fb.points.push_back({static_cast<double>(1024 << (2 * i)), 0.25 + 0.01 * i});
      gm.points.push_back({std::pow(10.0, 6 + i), 0.4 + 0.05 * i});
    }
    sc.hw.calibrated.a2a_busbw_GBps = {{2, bw}, {8, bw}};
    sc.hw.calibrated.attn_fwd_eff = {{"sdpa", fa}, {"flash_attention_2", fa}};
    sc.hw.calibrated.attn_bwd_eff = {{"sdpa", fb}, {"flash_attention_2", fb}};
    sc.hw.calibrated.gemm_eff = gm;
    cases.push_back({"8b 8xH200 sp8 all calibrated", sc});
  }

  int wrong = 0;
  for (const Case& c : cases) wrong += validate(c, predict(c.sc));
  std::printf("# validation: %d case(s), #wrong %d\n", static_cast<int>(cases.size()), wrong);
  if (wrong) return 1;

  std::printf("%-28s %14s %14s %12s %12s %8s %10s %10s\n", "case", "predict/s", "predict/s", "ns/predict", "plan_ms",
              "evals", "max_seq", "binding");
  std::printf("%-28s %14s %14s %12s %12s %8s %10s %10s\n", "", "(cpu time)", "(wall)", "(cpu time)", "(cpu time)", "",
              "(tokens)", "");
  double worst_rate = 1e300, worst_plan_ms = 0;
  for (Case& c : cases) {
    // predict(): vary S so nothing can be hoisted; checksum keeps the result alive
    Scenario s = c.sc;
    const std::int64_t base = s.plan.seq_len, stepS = s.plan.sp_size * 1024;
    double checksum = 0;
    const double c0 = thread_cpu_s();
    const auto t0 = Clock::now();
    for (long i = 0; i < n_calls; ++i) {
      s.plan.seq_len = base + (i & 63) * stepS;
      const Prediction p = predict(s);
      checksum += p.step_time_s + static_cast<double>(p.gpu.total() & 1);
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = thread_cpu_s() - c0;
    const double rate = static_cast<double>(n_calls) / cpu, wall_rate = static_cast<double>(n_calls) / sec;
    // plan: repeated searches
    const int reps = 2000;
    CapacityResult r;
    const double c1 = thread_cpu_s();
    for (int i = 0; i < reps; ++i) r = find_max_seq_len(c.sc, 1024);
    const double plan_ms = (thread_cpu_s() - c1) * 1e3 / reps;
    wrong += validate(c, r.at_max);
    std::printf("%-28s %14.0f %14.0f %12.1f %12.4f %8d %10lld %10s   # checksum %.3g\n", c.name.c_str(), rate, wall_rate,
                1e9 / rate, plan_ms, r.evaluations, static_cast<long long>(r.max_seq_len), to_string(r.binding), checksum);
    worst_rate = std::min(worst_rate, rate);
    worst_plan_ms = std::max(worst_plan_ms, plan_ms);
  }
  std::printf("# slowest: %.0f predict/s per core (target >= 1e6: %s); slowest plan %.4f ms (target < 1 ms: %s)\n",
              worst_rate, worst_rate >= 1e6 ? "met" : "MISSED", worst_plan_ms, worst_plan_ms < 1.0 ? "met" : "MISSED");
  if (wrong) std::printf("# validation of plan results: #wrong %d\n", wrong);
  return wrong ? 1 : 0;
}
