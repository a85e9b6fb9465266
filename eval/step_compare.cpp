#include "eval/step_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim/step_allocs.hpp"
#include "sim/step_runtime_memory.hpp"

namespace ulysses::eval {

const std::vector<PhaseGroup>& step_phase_groups() {
  static const std::vector<PhaseGroup> g = {
      {"embed", {"embed.fwd", "embed.bwd"}, {"embed.fwd", "embed.bwd"}},
      {"norm.fwd", {"norm.fwd"}, {"norm.fwd"}},
      {"gemm.qkv.fwd", {"gemm.qkv.fwd"}, {"gemm.qkv.fwd"}},
      {"a2a.qkv.fwd", {"a2a.qkv.fwd"}, {"a2a.qkv.fwd"}},
      {"attn.fwd", {"attn.fwd"}, {"attn.fwd"}},
      {"a2a.out.fwd", {"a2a.out.fwd"}, {"a2a.out.fwd"}},
      {"gemm.o.fwd", {"gemm.o.fwd"}, {"gemm.o.fwd"}},
      {"mlp.fwd", {"mlp.fwd"}, {"mlp.fwd", "swiglu.fwd"}},
      {"logits", {"logits.fwd", "logits.bwd"}, {"logits.fwd", "logits.bwd"}},
      {"offload.ckpt.d2h", {"offload.ckpt.d2h"}, {"offload.ckpt.d2h"}},
      {"offload.ckpt.h2d", {"offload.ckpt.h2d"}, {"offload.ckpt.h2d"}},
      {"norm.recompute", {"norm.recompute"}, {"norm.recompute"}},
      {"gemm.qkv.recompute", {"gemm.qkv.recompute"}, {"gemm.qkv.recompute"}},
      {"a2a.qkv.recompute", {"a2a.qkv.recompute"}, {"a2a.qkv.recompute"}},
      {"attn.recompute", {"attn.recompute"}, {"attn.recompute"}},
      {"a2a.out.recompute", {"a2a.out.recompute"}, {"a2a.out.recompute"}},
      {"gemm.o.recompute", {"gemm.o.recompute"}, {"gemm.o.recompute"}},
      {"mlp.recompute", {"mlp.recompute"}, {"mlp.recompute", "swiglu.recompute"}},
      {"mlp.bwd", {"mlp.bwd", "mlp.tiled_recompute"}, {"mlp.bwd", "mlp.tiled_recompute", "swiglu.tiled_recompute", "swiglu.bwd"}},
      {"norm.bwd", {"norm.bwd"}, {"norm.bwd"}},
      {"gemm.o.bwd", {"gemm.o.bwd"}, {"gemm.o.bwd"}},
      {"a2a.out.bwd", {"a2a.out.bwd"}, {"a2a.out.bwd"}},
      {"attn.bwd", {"attn.bwd"}, {"attn.bwd"}},
      {"a2a.qkv.bwd", {"a2a.qkv.bwd"}, {"a2a.qkv.bwd"}},
      {"gemm.qkv.bwd", {"gemm.qkv.bwd"}, {"gemm.qkv.bwd"}},
      {"zero.allgather", {"zero.allgather", "offload.params"}, {"zero.allgather", "offload.params"}},
      {"zero.reduce_scatter", {"zero.reduce_scatter", "offload.grads"}, {"zero.reduce_scatter", "dp.allreduce", "offload.grads"}},
      {"optimizer", {"optimizer.step", "offload.optimizer"}, {"optimizer.step", "offload.optimizer"}},
      {"other", {"other"}, {"rope_add.fwd", "rope_add.recompute", "rope_add.bwd"}},
  };
  return g;
}

double error_pct(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? 0.0 : 100.0;
  return (predicted - measured) / measured * 100.0;
}

namespace {
bool in(const std::vector<const char*>& names, const std::string& n) {
  return std::any_of(names.begin(), names.end(), [&](const char* s) { return n == s; });
}
Row row(const std::string& name, double pred, double meas, bool scored) {
  return {name, pred, meas, error_pct(pred, meas), scored};
}
}  // namespace

StepComparison compare_step(const Scenario& sc, const Prediction& p, const runtime::StepMeasurement& m) {
  StepComparison c;
  const auto& groups = step_phase_groups();
  // each measured range to its group once (names no group lists go to "other")
  std::vector<double> meas(groups.size(), 0.0);
  std::vector<bool> seen(groups.size(), false);
  std::vector<double> mhz_x_samples(groups.size(), 0.0);
  std::vector<std::int64_t> samples(groups.size(), 0);
  const auto other = std::find_if(groups.begin(), groups.end(), [](const PhaseGroup& g) { return std::strcmp(g.name, "other") == 0; });
  for (const auto& ph : m.phases) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const PhaseGroup& x) { return in(x.measured, ph.name); });
    if (g == groups.end()) g = other;
    const auto i = static_cast<std::size_t>(g - groups.begin());
    meas[i] += ph.median_s;
    seen[i] = true;
    if (ph.sm_mhz > 0 && ph.sm_samples > 0) mhz_x_samples[i] += ph.sm_mhz * double(ph.sm_samples), samples[i] += ph.sm_samples;
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    double pred = 0;
    for (const char* n : groups[i].predicted) pred += p.step.get(n);
    if (!seen[i] && pred == 0) continue;
    Row r = row(groups[i].name, pred, meas[i], seen[i] && !groups[i].predicted.empty());
    r.measured_seen = seen[i];
    if (samples[i] > 0) r.sm_mhz = mhz_x_samples[i] / double(samples[i]), r.sm_samples = samples[i];
    c.phases.push_back(r);
  }
  c.step = row("step", p.step_time_s, m.step_median_s, true);
  const double same_work = m.step_median_s > 0 ? p.step_time_s / m.step_median_s : 0;  // predicted rate -> measured
  const double per_gpu = p.tokens_per_s / static_cast<double>(std::max<std::int64_t>(sc.gpus, 1));
  c.tokens_per_gpu = row("tokens/s per GPU", per_gpu, per_gpu * same_work, false);
  c.hw_tflops = row("hardware TFLOP/s per GPU", p.hw_tflops_per_gpu, p.hw_tflops_per_gpu * same_work, false);
  c.megatron_tflops = row("Megatron TFLOP/s per GPU", p.megatron_tflops_per_gpu, p.megatron_tflops_per_gpu * same_work, false);
  c.peak_tflops = sc.hw.bf16_dense_flops / 1e12;
  if (sc.plan.runtime == Runtime::ulysses) {  // our runtime: every buffer up front, allocated == reserved
    const double bytes = double(ulysses_step_bytes(derive_dims(sc), step_runtime_flags(sc)).total());
    c.allocated = row("max_memory_allocated", bytes, double(m.max_memory_allocated), true);
    c.reserved = row("max_memory_reserved", bytes, double(m.max_memory_reserved), true);
    c.predicted_peak_at = "construction";
    c.measured_peak_at = m.peak_at;
    return c;
  }
  c.allocated = row("max_memory_allocated", double(predicted_allocated_bytes(p)), double(m.max_memory_allocated), true);
  const std::int64_t generated = generated_reserved_peak(sc, kGeneratedReservedSteps);
  c.reserved_generated = generated >= 0;
  c.reserved = row("max_memory_reserved", c.reserved_generated ? double(generated) : double(predicted_reserved_bytes(p)),
                   double(m.max_memory_reserved), true);
  c.predicted_peak_at = p.gpu_peak_at;
  c.measured_peak_at = m.peak_at;
  return c;
}

runtime::deepspeed::Json comparison_json(const StepComparison& c) {
  using Json = runtime::deepspeed::Json;
  auto row = [](const Row& r) {
    Json j{{"name", r.name}, {"predicted", r.predicted}, {"measured", r.measured}, {"error_pct", r.error_pct}, {"scored", r.scored}};
    if (!r.measured_seen) j["measured"] = nullptr, j["error_pct"] = nullptr;  // not run: no number to compare
    if (r.sm_samples > 0) j["sm_mhz"] = r.sm_mhz, j["sm_samples"] = r.sm_samples;
    return j;
  };
  Json j;
  j["error_pct_convention"] = "(predicted - measured) / measured * 100; seconds per step, bytes";
  j["phases"] = Json::array();
  for (const auto& r : c.phases) j["phases"].push_back(row(r));
  j["step"] = row(c.step);
  j["max_memory_allocated"] = row(c.allocated);
  j["max_memory_reserved"] = row(c.reserved);
  j["max_memory_reserved"]["predicted_from"] = c.reserved_generated ? "allocation sequence" : "binding reserved bytes";
  j["peak_at"] = {{"predicted", c.predicted_peak_at}, {"measured", c.measured_peak_at}};
  j["throughput"] = {{"tokens_per_s_per_gpu", row(c.tokens_per_gpu)}, {"hw_tflops_per_gpu", row(c.hw_tflops)},
                     {"megatron_tflops_per_gpu", row(c.megatron_tflops)}, {"peak_tflops_per_gpu", c.peak_tflops}};
  return j;
}

}  // namespace ulysses::eval
