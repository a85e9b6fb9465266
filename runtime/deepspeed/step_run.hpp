#pragma once
// The deepspeed backend: one scenario's whole training step on HF Transformers + Accelerate +
// DeepSpeed (ALST), run by the project's Python worker (runtime/deepspeed/worker.py; torchrun
// when the scenario has more than one GPU) and read back as a StepMeasurement.
// docs/DEEPSPEED_BACKEND.md has the job and result formats and the phase names.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/deepspeed/op_bench.hpp"
#include "runtime/step_measurement.hpp"
#include "sim/scenario.hpp"

namespace ulysses::runtime::deepspeed {

using runtime::Json;

struct StepOptions {
  int warmup = 1;                      // untimed steps before the memory step
  int iters = 3;                       // timed steps (median, min, max)
  std::uint64_t seed = 1234;
  std::string trace;                   // torch.profiler (CUPTI) trace path prefix; "" = no traced step
  std::vector<std::int64_t> probe_seq_lens;  // capacity probes (increasing); empty = a normal run
  bool calibrate = false;              // measure the process's fixed costs instead (run_fixed_costs)
  std::int64_t ballast_bytes = 0;      // device memory held by the worker all run long (capacity under a
                                       // smaller HBM: the allocator's counters include it)
  // with calibrate: the op bench after the fixed costs (ulysses_worker/opbench.py); empty = none
  std::vector<std::int64_t> op_seq_lens;
  std::int64_t op_adam_params = 0, op_cpu_adam_params = 0;  // 0 = that optimizer not timed
};

// The job file the worker reads (schema 1). Throws InputError (origin, key) for a plan the stack
// cannot run (kv_strategy send_once, an attention implementation it does not have, ...).
Json job_json(const Scenario& sc, const StepOptions& opt, const std::string& out_prefix, const std::string& origin);

// Capacity probes of one worker process (runtime/step_measurement.hpp).
using runtime::ProbeResult;

struct StackMissing : std::runtime_error { using std::runtime_error::runtime_error; };  // exit 1
struct WorkerOutOfMemory : std::runtime_error { using std::runtime_error::runtime_error; };

// Runs the worker on `job` (job_json) and returns rank 0's and the merged results. The worker's
// exit code decides: 2 -> InputError, 3 -> StackMissing, 4 -> WorkerOutOfMemory, other != 0 ->
// std::runtime_error with the worker's last stderr line. workdir holds the job and result files.
StepMeasurement run_step(const Scenario& sc, const StepOptions& opt, const std::string& origin);
ProbeResult run_probes(const Scenario& sc, const StepOptions& opt, const std::string& origin);

// The PyTorch process's device memory outside its caching allocator (max over ranks), measured after
// Accelerate + DeepSpeed set-up and two steps of `sc` (calibrate --backend deepspeed).
struct FixedCosts {
  std::int64_t outside_allocator_bytes = 0;         // after set-up and the steps
  std::int64_t outside_before_setup_bytes = 0;      // torch's CUDA context alone
  std::int64_t device_total_bytes = 0;              // cudaMemGetInfo total (torch's total_memory): less than
                                                    // nvidia-smi's memory.total, which profiles quote
  int ranks = 1;
  std::string device;
  Json versions;
  bool has_ops = false;
  OpBench ops;                                      // rank 0's op bench, when `opt` asked for one
  // rank 0's phase clock of the second set-up step: per phase GPU and host seconds (the host's cost of issuing
  // it where the host sets the pace); empty when the worker reported none
  struct PhaseClock { std::string name; double gpu_s = 0, host_s = 0; };
  std::vector<PhaseClock> phase_clock;
  double phase_clock_step_s = 0, phase_clock_wall_s = 0;
};
// `opt`: its op_* fields (the rest is set here).
FixedCosts run_fixed_costs(const Scenario& sc, const std::string& origin, const StepOptions& opt = {});

// Parsing of the worker's per-rank result files (tested on stored files without a GPU).
StepMeasurement measurement_of(const std::vector<Json>& ranks);

// How the worker is launched: $ULYSSES_PYTHON (default python3), torchrun for gpus > 1, the
// private stack folder $ULYSSES_DEEPSPEED_SITE (default <repo>/.alst/site) on PYTHONPATH.
std::vector<std::string> launch_argv(const Scenario& sc, const std::string& job_path);

}  // namespace ulysses::runtime::deepspeed
