#pragma once
// One whole training step measured, whichever runtime ran it: the deepspeed backend's Python worker
// (runtime/deepspeed/step_run.hpp) or our CUDA runtime's step (runtime/cuda/step_run.hpp, --scope step).
// Phases carry the step model's names (eval/step_compare.cpp groups them), so compare, validate and
// report read both the same way.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ulysses::runtime {

using Json = nlohmann::ordered_json;

struct StepPhase {
  std::string name;                    // step-model name + pass: gemm.qkv.fwd, attn.recompute, zero.allgather, other
  double median_s = 0, min_s = 0, max_s = 0;  // per step (summed over layers), over timed steps; max over ranks
  double kernel_s = -1;                // CUPTI: kernel time attributed to it in the traced step (-1: not traced)
  double host_s = -1;                  // the host clock charged to it (deepspeed: median over timed steps, max over
                                       // ranks; -1: not measured, e.g. records before 2026-12-06c)
  double sm_mhz = -1;                  // NVML's SM clock while it ran: the median of the samples inside its windows
                                       // over the timed steps (cuda, sp 1; -1: not measured, e.g. no sample in it)
  std::int64_t sm_samples = 0;         // how many samples that median is of
  // memory: -1 where the measurement has no device (cpu; JSON null)
  std::int64_t alloc_start_bytes = 0;  // torch.cuda.memory_allocated at its start (max over its occurrences)
  std::int64_t peak_bytes = 0;         // max_memory_allocated while it runs (memory step)
  std::int64_t peak_reserved_bytes = 0;
};

// Capacity probes: a ladder of increasing sequence lengths, each set up and stepped once until one runs
// out of device memory (the deepspeed worker's, or our runtime's: runtime/backend.hpp probe_steps).
struct ProbeResult {
  struct Probe { std::int64_t seq_len = 0, max_memory_allocated = 0, max_memory_reserved = 0; };
  std::vector<Probe> fits;             // lengths that ran, increasing
  std::int64_t oom_at = 0;             // the first length that ran out of memory; 0: none did
};

// A backend's own check of its step (the cpu step: the P-rank step against the one-rank step), nccl-tests
// style: the elements compared, how many lie outside the tolerance, the largest relative error.
struct StepCheck {
  std::string name;
  std::int64_t elements = 0, wrong = 0;
  double max_rel_err = 0, tolerance = 0;
};

struct StepMeasurement {
  std::string backend = "deepspeed";   // "deepspeed" (the Python worker) | "cuda" (our runtime, --scope step) | "cpu"
  std::string device, alloc_conf;      // GPU name; PYTORCH_CUDA_ALLOC_CONF the worker ran with ("" on cuda)
  Json versions;                       // deepspeed: torch, transformers, accelerate, deepspeed, cuda, python
  int ranks = 1;
  std::int64_t layers = 0, seq_len = 0;
  std::vector<StepPhase> phases;       // in first-seen order of the memory step
  double step_median_s = 0, step_min_s = 0, step_max_s = 0;  // step time, max over ranks (GPU events; cpu: host clock)
  std::int64_t max_memory_allocated = 0, max_memory_reserved = 0;  // max over ranks and steps; -1: no device (cpu),
                                                                    // with device_used_bytes (JSON null)
  std::string peak_at;                 // the phase during which the allocated peak happened
  std::int64_t host_rss_bytes = 0, host_rss_peak_bytes = 0, pinned_bytes = 0;  // rank 0
  std::int64_t device_used_bytes = 0;  // cudaMemGetInfo used at the end (context + NCCL + allocator)
  struct Segment { std::string phase; double start_s = 0, dur_s = 0; };
  std::vector<std::vector<Segment>> timeline;  // per rank: the last timed step, exclusive segments
  // cuda: the traced step's CUPTI records (kernels, copies, memsets per stream; NVTX ranges; the phase windows),
  // start relative to the traced step's start; empty when CUPTI is off (not part of the JSON)
  struct Span { std::string name, track; double start_s = 0, dur_s = 0; };
  std::vector<Span> traced;
  std::vector<double> losses;          // rank 0, every step in order
  std::vector<StepCheck> checks;       // empty: the backend checks nothing beyond the losses
  double wall_s = 0;
  double energy_j_per_step = -1;       // the GPUs' energy counters (NVML) over the timed steps / steps, summed over
                                       // ranks; -1: not measured (no NVML, a CPU step; JSON null)
  Json raw;                            // deepspeed: rank 0's result as written by the worker
  bool correct() const;                // every step's loss finite (a NaN or inf loss: the step did not train), no check wrong
  bool has_device_memory() const { return max_memory_allocated >= 0; }
};

// The measurement as `run --format json` prints it and step records store it, and back
// (docs/DEEPSPEED_BACKEND.md "Result"; the timeline and raw worker output are not part of it;
// a stored measurement without "backend" is the deepspeed backend's).
Json measurement_json(const StepMeasurement& m);
StepMeasurement measurement_from_json(const Json& j);  // throws on a missing required key

// losses as the worker and the records write them: null for a non-finite loss (strict JSON)
std::vector<double> step_losses_of(const Json& j);

}  // namespace ulysses::runtime
