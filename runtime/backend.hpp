#pragma once
// One interface for every backend (cpu reference, cuda): run the Ulysses attention block of
// one layer, forward and backward, and return a Measurement keyed by docs/DESIGN.md phase names;
// and (cuda) a whole training step, returned as a StepMeasurement (runtime/step_measurement.hpp).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/step_measurement.hpp"
#include "sim/scenario.hpp"

namespace ulysses::runtime {

struct BlockShape {
  std::int64_t B = 1, S = 0, H = 0, H_kv = 0, D = 0, P = 1;
  bool causal = true;
  KvStrategy kv_strategy = KvStrategy::replicate;
  std::string attn_implementation;  // backend-specific kernel choice; "" = backend default
  std::int64_t S_l() const { return S / P; }  // S_l = S/P positions per rank
};

// Validates the head rules of docs/DESIGN.md; returns "" when valid, else one line naming the rule.
std::string validate(const BlockShape& s);
BlockShape block_shape_of(const Scenario& sc);  // padded S, heads and dims from the scenario

struct RunOptions {
  int warmup = 2;
  int iters = 5;
  std::uint64_t seed = 1234;
  double timeout_s = 300;           // collective watchdog (cuda)
  bool verify = true;               // correctness checks (always on for run/compare)
};

struct PhaseStats {
  std::string name;                 // docs/DESIGN.md phase name
  double median_s = 0;              // max over ranks of the per-rank median
  double min_s = 0;                 // min over ranks and iterations
  double max_s = 0;                 // max over ranks and iterations
};

struct Check {
  std::string name;                 // e.g. "a2a.qkv bit-exact", "out vs single-rank"
  std::int64_t wrong = 0;           // elements outside tolerance (nccl-tests #wrong)
  double max_abs_err = 0;
  double tolerance = 0;
  bool passed = false;
};

struct TraceEvent {
  std::string name;                 // phase or kernel name
  int rank = 0;
  std::string track;                // e.g. "stream 7", "cpu"
  double start_us = 0;              // relative to the run's origin
  double dur_us = 0;
};

struct Measurement {
  std::string backend;              // "cpu" | "cuda"
  std::string device;               // e.g. "2x NVIDIA H200" or "x86_64 (2 threads)"
  BlockShape shape;
  std::vector<PhaseStats> phases;   // the six block phases, in execution order
  std::vector<std::int64_t> peak_bytes_per_rank;
  std::vector<std::int64_t> phase_peak_bytes;  // per phase (order of `phases`): live-bytes high-water
                                               // mark during that phase, max over ranks (may be empty)
  std::vector<Check> checks;
  bool correct = false;             // true only when every check passed
  std::int64_t a2a_q_bytes_per_rank = 0;
  std::int64_t a2a_kv_bytes_per_rank = 0;
  std::vector<TraceEvent> trace;    // one timed iteration
  std::string attn_kernel;          // the attention kernel that ran, as a plan.attn_implementation
                                    // name (ulysses_flash | ulysses_reference); empty: not reported
};

// Thrown by a backend when a device allocation fails for lack of memory: the shape does not fit
// (what `ulysses capacity` bisects on). Other failures stay std::runtime_error.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StepRunOptions {
  int warmup = 1;                   // untimed steps after the first (which also checks the loss)
  int iters = 3;                    // timed steps (median, min, max)
  std::uint64_t seed = 1234;        // parameters and tokens
  bool ranks_on_one_gpu = false;    // cuda at sp > 1: the ranks as threads of one GPU (a check; runtime/cuda/step_run.hpp)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Measurement run_block(const BlockShape& shape, const RunOptions& opt) = 0;
  // The scenario's whole training step (`origin`: the scenario file, for error lines). A backend
  // without one throws core::InputError naming --scope.
  virtual StepMeasurement run_step(const Scenario& sc, const StepRunOptions& opt, const std::string& origin);
  // Capacity probes of the whole step: each length of `seq_lens` (increasing) set up and stepped once, with
  // `ballast_bytes` of device memory held throughout, until one runs out of memory. A backend without
  // whole steps throws core::InputError naming --scope.
  virtual ProbeResult probe_steps(const Scenario& sc, const std::vector<std::int64_t>& seq_lens, std::int64_t ballast_bytes,
                                  const std::string& origin);
};

// "cpu" always; "cuda" when built with the CUDA backend. Throws std::runtime_error with one
// line otherwise.
std::unique_ptr<Backend> make_backend(std::string_view name);

}  // namespace ulysses::runtime
