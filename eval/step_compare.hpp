#pragma once
// A whole training step measured on the deepspeed backend next to the step model's prediction.
//
// Phases are compared in groups, because the two sides cut the step differently: the worker's
// ranges are the step model's names plus the pass ('.fwd', '.recompute', '.bwd'), but e.g. DeepSpeed
// runs TiledMLP's recompute inside the MLP backward, the tiled loss runs its backward inside its
// forward. Memory: the model's GPU
// total less its fixed costs (cuda_context, nccl_buffers) is what the caching allocator reserves;
// less fragmentation too, what it has allocated (docs/MODEL.md "Fixed costs and fragmentation").
// Error convention: (predicted - measured) / measured * 100.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/deepspeed/step_run.hpp"
#include "sim/prediction.hpp"

namespace ulysses::eval {

struct PhaseGroup {
  const char* name;                         // the row's name
  std::vector<const char*> measured;        // worker range names summed
  std::vector<const char*> predicted;       // step-model phase names summed (empty: not modelled)
};
const std::vector<PhaseGroup>& step_phase_groups();  // the one table; unknown measured names -> "other"

struct Row {
  std::string name;
  double predicted = 0, measured = 0;       // seconds or bytes
  double error_pct = 0;
  bool scored = false;                      // modelled and measured (the others are shown, not scored)
  bool measured_seen = true;                // false: the run had no such range (predicted only)
  double sm_mhz = -1;                       // the measured SM clock (our runtime at sp 1: docs/STEP_POWER.md): the
  std::int64_t sm_samples = 0;              // group's phases' medians weighted by their samples; -1, 0: none
};

struct StepComparison {
  std::vector<Row> phases;                  // in the groups' order, only groups seen or predicted
  Row step;                                 // step time (median over timed steps)
  Row allocated, reserved;                  // peak bytes
  bool reserved_generated = false;          // reserved predicted from the allocation sequence
  std::string predicted_peak_at, measured_peak_at;
  // throughput (not scored): tokens/s per GPU, hardware TFLOP/s per GPU (the FLOPs executed: causal halved,
  // recompute counted) and Megatron-style TFLOP/s per GPU (sim/predict.cpp); the measured ones are the same
  // work over the measured step time. MFU = TFLOP/s / peak_tflops (the profile's dense bf16 peak per GPU).
  Row tokens_per_gpu, hw_tflops, megatron_tflops;
  double peak_tflops = 0;
};

double error_pct(double predicted, double measured);

// The reserved row: under expandable segments, for a plan the allocation sequence covers
// (sim/step_allocs.hpp), the peak of that sequence through the allocator simulation (a run with room
// to spare); else the model's binding reserved bytes (what an out-of-memory decides on).
StepComparison compare_step(const Scenario& sc, const Prediction& p, const runtime::StepMeasurement& m);
// phases [{name, predicted, measured, error_pct, scored[, sm_mhz, sm_samples]}], step, max_memory_allocated/reserved, peak_at,
// throughput {tokens_per_s_per_gpu, hw_tflops_per_gpu, megatron_tflops_per_gpu, peak_tflops_per_gpu}
runtime::deepspeed::Json comparison_json(const StepComparison& c);

}  // namespace ulysses::eval
