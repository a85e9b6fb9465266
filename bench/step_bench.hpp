#pragma once
// `ulysses bench step`: our runtime's whole step next to the HF Accelerate + DeepSpeed step (the deepspeed
// backend) on the same scenario in one call (issue 13's target: tokens/s per GPU >= 1.3x). Each backend runs
// the scenario as `run --scope step` does (its first step's loss must be finite before any step is timed);
// the throughput rows are compare's (eval/step_compare.hpp): tokens/s per GPU, hardware and Megatron-style
// TFLOP/s per GPU and their MFU against the profile's dense bf16 peak, the work being the step model's count
// for that backend's runtime (ours recomputes less under checkpointing: its hardware FLOPs are fewer; the
// Megatron-style count is the same for both).
#include <string>
#include <vector>

#include "eval/step_compare.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "runtime/power_sampler.hpp"
#include "runtime/step_measurement.hpp"
#include "sim/scenario.hpp"

namespace ulysses::bench {

struct StepBenchRow {
  std::string backend;
  runtime::StepMeasurement m;
  eval::StepComparison c;  // its measured throughput rows
  runtime::PowerSummary power;      // the GPUs' clock and power while it ran (setup included; loaded samples only)
  double tokens_per_joule() const;  // the step's tokens over m.energy_j_per_step; -1 where its energy was not measured
};

struct StepBench {
  std::string scenario;
  std::vector<StepBenchRow> rows;  // in the order asked: ours first, then the peer
  double target = 1.3;             // ours / the peer, tokens/s per GPU (issue 13)
  bool valid() const;              // two rows, both correct (every loss finite, no check wrong)
  double ratio() const;            // rows[0] / rows[1] tokens/s per GPU; 0 unless valid()
};

// Runs `backends` in order (e.g. {"cuda", "deepspeed"}) on `sc`. Every backend's scenario is predicted before
// anything runs; a plan a backend refuses (one InputError line) is found when its turn comes.
StepBench bench_step(const Scenario& sc, const std::vector<std::string>& backends, const runtime::deepspeed::StepOptions& opt,
                     const std::string& origin);

std::string step_bench_table(const StepBench& b);  // one row per backend with a units row, then the ratio line
std::string step_power_table(const StepBench& b);  // each backend's SM clock and power, or why not sampled; the
                                                   // timed steps' energy, tokens per joule and their ratio
runtime::Json step_bench_json(const StepBench& b);

}  // namespace ulysses::bench
