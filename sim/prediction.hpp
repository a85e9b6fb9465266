#pragma once
// What predict() returns. Fixed-size, allocation-free (predict() must run >= 1e6/s/core).
// Term and phase names are string literals with static storage.
#include <array>
#include <stdexcept>
#include <cstdint>

#include "core/phases.hpp"
#include "core/units.hpp"

namespace ulysses {

// Entries past a breakdown's n are all zero (name nullptr): a Prediction starts as one memset.
struct NamedBytes {
  const char* name = nullptr;
  core::bytes_t bytes = 0;
};

// A named breakdown that sums to its total.
struct MemoryBreakdown {
  static constexpr int kMax = 32;
  std::array<NamedBytes, kMax> terms{};
  int n = 0;
  void add(const char* name, core::bytes_t b) { terms[n++] = {name, b}; }
  core::bytes_t total() const {
    core::bytes_t t = 0;
    for (int i = 0; i < n; ++i) t += terms[i].bytes;
    return t;
  }
  core::bytes_t get(const char* name) const;  // 0 when absent; defined in sim/prediction.cpp
};

struct NamedTime {
  const char* name = nullptr;  // past PhaseTimes::n: nullptr
  core::seconds_t time_s = 0;
};

struct PhaseTimes {
  static constexpr int kMax = 48;
  std::array<NamedTime, kMax> phases{};
  int n = 0;
  void add(const char* name, core::seconds_t t) {
    if (n >= kMax) throw std::logic_error("PhaseTimes: more than kMax step phases");  // a model change outgrew it
    phases[n++] = {name, t};
  }
  core::seconds_t total() const {
    core::seconds_t t = 0;
    for (int i = 0; i < n; ++i) t += phases[i].time_s;
    return t;
  }
  core::seconds_t get(const char* name) const;  // 0 when absent
};

enum class Binding { none, gpu_hbm, host_ram };
constexpr const char* to_string(Binding b) {
  return b == Binding::gpu_hbm ? "gpu_hbm" : b == Binding::host_ram ? "host_ram" : "none";
}

struct Prediction {
  std::int64_t seq_len = 0;         // S as requested
  std::int64_t padded_seq_len = 0;  // S after padding to a multiple of lcm(pad_to_multiple_of, P)
  std::int64_t s_local = 0;         // padded S / P
  MemoryBreakdown gpu;              // per GPU (peak)
  MemoryBreakdown host;             // host RAM per node
  core::bytes_t gpu_capacity_bytes = 0;   // HBM per GPU
  core::bytes_t host_capacity_bytes = 0;  // host RAM per node
  bool fits_gpu = false;
  bool fits_host = false;
  PhaseTimes step;                  // one optimizer step, all layers (phase -> seconds)
  std::array<core::seconds_t, 6> block{}; // one layer's Ulysses attention block, indexed by BlockPhase
  core::bytes_t block_peak_bytes = 0;     // peak bytes of the block alone (what `ulysses run` measures)
  core::bytes_t block_peak_bytes_freeing = 0;  // same block when each buffer is freed after its last use
                                        // (the cpu backend; block_peak_bytes: all up front, the cuda backend)
  core::bytes_t a2a_q_bytes_per_rank = 0; // bytes one rank sends+keeps in the q exchange (nccl-tests "size")
  core::bytes_t a2a_kv_bytes_per_rank = 0;// same, k and v together (after GQA replication if any)
  const char* gpu_peak_at = "";    // the moment of the GPU peak, e.g. "backward.mlp", "logits_loss" (docs/MODEL.md)
  core::seconds_t step_time_s = 0;
  double tokens_per_s = 0;          // global tokens per second
  double hw_tflops_per_gpu = 0;     // FLOPs actually executed (causal halved, recompute counted)
  double megatron_tflops_per_gpu = 0;  // papers' count: (2cNS + 4cLhS^2)*B, c=4 w/ ckpt else 3
};

// What PyTorch's caching allocator holds at the peak (docs/MODEL.md "Fixed costs and fragmentation"):
// reserved = the GPU total less the fixed costs (cuda_context, nccl_buffers); allocated = that less
// fragmentation. An out-of-memory is decided by reserved + the fixed costs (= total).
core::bytes_t predicted_reserved_bytes(const Prediction& p);
core::bytes_t predicted_allocated_bytes(const Prediction& p);

}  // namespace ulysses
