#pragma once
// What the step's runs share (runtime/cuda/step_run.cpp at sp 1, step_run_sp.cpp at sp > 1): the phase marks, the
// step runner's plan and attention kernel of a scenario's shape, and the seeded batch of the whole sequence with
// each rank's rows of it.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nvtx3/nvToolsExt.h>

#include "core/bf16.hpp"
#include "runtime/cuda/block_runner.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/step_runner.hpp"
#include "runtime/step_plan.hpp"

namespace ulysses::runtime::cuda {

// An event at every phase boundary (one stream), an NVTX range per phase; after the step: each
// segment's time, in order.
class EventMarks : public PhaseMarks {
 public:
  ~EventMarks() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  void start() { n_ = 0, names_.clear(); }
  void begin(std::string_view phase, cudaStream_t s) override {
    if (!names_.empty()) nvtxRangePop();
    record(s);
    names_.emplace_back(phase);
    nvtxRangePushA(names_.back().c_str());
  }
  void end(cudaStream_t s) {
    if (!names_.empty()) nvtxRangePop();
    record(s);
  }
  // The first phase's start event (after a step with marks; null before any)
  cudaEvent_t first() const { return n_ > 0 ? pool_[0] : nullptr; }
  // After the stream finished: (phase, seconds) per segment, in order.
  std::vector<std::pair<std::string, double>> segments() const {
    std::vector<std::pair<std::string, double>> out;
    for (std::size_t i = 0; i + 1 < n_; ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[i], pool_[i + 1]));
      out.emplace_back(names_[i], ms * 1e-3);
    }
    return out;
  }

 private:
  void record(cudaStream_t s) {
    if (n_ == pool_.size()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      pool_.push_back(e);
    }
    CUDA_CHECK(cudaEventRecord(pool_[n_++], s));
  }
  std::vector<cudaEvent_t> pool_;
  std::size_t n_ = 0;
  std::vector<std::string> names_;
};

KernelChoice kernel_of(const StepShape& shape, const std::string& origin);  // InputError naming the key
StepPlan plan_of(const StepShape& shape);  // the optimizer: AdamW with HF's defaults (runtime/reference_adam.hpp)

// A batch as StepRunner::set_batch takes it (RoPE tables [T, D/2]).
struct StepBatch {
  std::vector<std::int64_t> tokens, labels;
  std::vector<core::bf16> cos, sin;
};
// The whole sequence (T = sp x the rank's tokens) from the seed: tokens, their labels shifted over the whole
// sequence, RoPE tables (the model's base) for positions 0..T-1.
StepBatch seeded_batch(const StepShape& shape, std::uint64_t seed);
// Rank r's rows of b (of P ranks: T / P consecutive tokens each), its labels already shifted over the whole sequence.
StepBatch rank_rows(const StepBatch& b, int r, int P);
std::int64_t valid_labels(const std::vector<std::int64_t>& labels);  // the labels that are not kIgnoreLabel

}  // namespace ulysses::runtime::cuda
