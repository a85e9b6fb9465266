// `run --backend cuda --scope step`'s SM clock per phase (runtime/cuda/step_run.cpp, runtime/power_sampler.hpp
// clock_in_windows): Llama-3.1-8B's shapes cut to 2 layers at S 16K, three timed steps (~0.5 s each on an H100),
// NVML every 10 ms. Checked: the longest phase holds samples and a clock a GPU can have; no phase holds more samples
// than its windows can (its time over the period, plus one per window); the samples in all phases together are no
// more than the timed steps' span allows. This checks the wiring, not the alignment: a window shifted by part of a
// step would pass (the windows' arithmetic is checked on CPU, tests/runtime/test_power_summary.cpp "windows after";
// the anchor event's timing is not). Skips where NVML does not see the GPU. Written in the thirteenth session, after
// the last device call: not yet run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>

#include "runtime/cuda/device_info.hpp"
#include "runtime/cuda/step_run.hpp"
#include "runtime/power_sampler.hpp"
#include "tests/sim/fixtures.hpp"

using namespace ulysses;

TEST_CASE("run step: the SM clock of each long phase", "[.gpu][gpu][step][power]") {
  Scenario sc;
  sc.name = "clock";
  sc.model = test::llama31_8b();
  sc.model.layers = 2;
  sc.hw = test::h100_sxm();
  sc.plan.seq_len = 16384, sc.plan.sp_size = 1, sc.gpus = 1, sc.plan.zero_stage = 3;
  sc.plan.activation_checkpointing = true;
  const std::string bus = runtime::cuda::pci_bus_id(0);
  if (bus.empty() || runtime::PowerSampler(10).index_of(bus) < 0) {
    std::fprintf(stderr, "SKIPPED (NVML does not see this GPU): %s\n", Catch::getResultCapture().getCurrentTestName().c_str());
    WARN("skipped: NVML does not see this GPU");
    return;
  }
  runtime::StepRunOptions o;
  o.warmup = 1, o.iters = 3, o.seed = 5;
  const runtime::StepMeasurement m = runtime::cuda::run_step(sc, o, "clock");
  REQUIRE(m.correct());
  std::int64_t all = 0;
  const runtime::StepPhase* longest = nullptr;
  for (const auto& p : m.phases) {
    if (!longest || p.median_s > longest->median_s) longest = &p;
    if (p.sm_mhz < 0) continue;
    INFO(p.name << ": " << p.sm_mhz << " MHz over " << p.sm_samples << " samples, " << p.median_s * 1e3 << " ms per step");
    CHECK(p.sm_samples >= 1);
    CHECK(p.sm_mhz > 200);
    CHECK(p.sm_mhz < 2500);
    // three steps of its time at one sample per 10 ms, plus one per window (2 layers, forward and backward: a few)
    CHECK(p.sm_samples <= static_cast<std::int64_t>(3 * p.max_s / 0.010) + 3 * 8 + 1);
    all += p.sm_samples;
  }
  REQUIRE(longest);
  INFO("longest phase " << longest->name << ": " << longest->median_s * 1e3 << " ms");
  CHECK(longest->sm_mhz > 0);
  CHECK(all <= static_cast<std::int64_t>(3 * m.step_max_s / 0.010) + 3 * 64);
  std::fprintf(stderr, "clock per phase: %s %.0f MHz (%lld samples), step %.1f ms\n", longest->name.c_str(), longest->sm_mhz,
               static_cast<long long>(longest->sm_samples), m.step_median_s * 1e3);
}
