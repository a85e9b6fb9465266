// predict(): memory (sim/memory.cpp) + time (sim/timing.cpp, sim/block_timing.cpp) at one sequence length.
// Allocation-free and O(1): fixed-size breakdowns, string-literal names (docs/MODEL.md).
#include "sim/predict.hpp"

#include "sim/block_memory.hpp"
#include "sim/memory.hpp"
#include "sim/model_terms.hpp"
#include "sim/timing.hpp"

namespace ulysses {
namespace {

// The model terms of the last few structures this thread predicted (sweeps and capacity searches
// vary seq_len between calls, feature searches a few plan keys): looked up by their whole key.
struct TermsCache {
  static constexpr int kEntries = 4;
  ModelTermsKey key[kEntries];
  ModelTerms terms[kEntries];
  int n = 0, last = 0;
  const ModelTerms& get(const Scenario& sc, const Dims& d) {
    const ModelTermsKey k = model_terms_key(sc, d);
    if (n > 0 && key[last] == k) return terms[last];
    for (int i = 0; i < n; ++i)
      if (key[i] == k) return terms[last = i];
    last = n < kEntries ? n++ : (last + 1) % kEntries;
    key[last] = k;
    terms[last] = model_terms(k);
    return terms[last];
  }
};
thread_local TermsCache t_terms;

Prediction predict_with(const Scenario& sc, const Dims& d, const ModelTerms& mt) {
  Prediction p;
  p.seq_len = d.S_req;
  p.padded_seq_len = d.S;
  p.s_local = d.S_l;

  p.gpu_peak_at = gpu_memory(sc, d, mt, p.gpu);
  host_memory(sc, d, p.host);
  p.gpu_capacity_bytes = gpu_capacity_bytes(sc);
  p.host_capacity_bytes = host_capacity_bytes(sc);
  p.fits_gpu = p.gpu.total() <= p.gpu_capacity_bytes;
  p.fits_host = p.host.total() <= p.host_capacity_bytes;
  p.block_peak_bytes = block_peak_bytes(sc, d);
  p.block_peak_bytes_freeing = block_peak_bytes_freeing(d);
  p.a2a_q_bytes_per_rank = q_bytes_per_rank(d);
  p.a2a_kv_bytes_per_rank = 2 * kv_bytes_per_rank(d);

  block_times(sc, d, p.block);
  const double flops_per_gpu = step_times(sc, d, p.block, p.step);
  p.step_time_s = p.step.total();

  // throughput: useful (requested) tokens; the hardware count uses the padded length it executes
  const double gpus = static_cast<double>(sc.gpus), P = static_cast<double>(d.P);
  const double B = static_cast<double>(d.B), S = static_cast<double>(d.S_req);
  if (p.step_time_s > 0) {
    p.tokens_per_s = B * S * (gpus / P) / p.step_time_s;
    p.hw_tflops_per_gpu = flops_per_gpu / p.step_time_s / core::kTFLOP;
    // papers' (Megatron-style) count: per sample 2cNS + 4cLhS^2, attention non-causal
    const double c = d.ckpt ? 4 : 3, N = static_cast<double>(d.total_params);
    const double L = static_cast<double>(d.L), h = static_cast<double>(d.h);
    const double per_sample = 2 * c * N * S + 4 * c * L * h * S * S;
    p.megatron_tflops_per_gpu = B * per_sample * (gpus / P) / (p.step_time_s * gpus) / core::kTFLOP;
  }
  return p;
}

}  // namespace

Prediction predict(const Scenario& sc) {
  const Dims d = derive_dims(sc);
  return predict_with(sc, d, t_terms.get(sc, d));
}

Prediction predict(const Scenario& sc, const ModelTerms& mt) { return predict_with(sc, derive_dims(sc), mt); }

}  // namespace ulysses
