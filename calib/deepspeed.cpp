// `ulysses calibrate --backend deepspeed` (calib/deepspeed.hpp): the set-up step's scenario, the
// worker's fixed costs, and the calibrated key they give.
#include "calib/deepspeed.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calib/op_fit.hpp"
#include "reports/format.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/config.hpp"
#include "sim/memory.hpp"
#include "sim/provenance.hpp"
#include "core/errors.hpp"

namespace ulysses::calib::deepspeed {

Result calibrate(const Setup& s) {
  const std::int64_t gpus = s.gpus;
  if (gpus < 1 || gpus > 64) throw core::InputError("", "--gpus", fmt::format("must be 1..64 (got {})", gpus));
  Scenario sc;
  set_key(sc, "model", s.model, "--model");
  set_key(sc, "profile", s.profile, "--profile");
  const std::int64_t layers = s.layers;
  if (layers < 1 || layers > sc.model.layers) throw core::InputError("", "--layers", fmt::format("must be 1..{}", sc.model.layers));
  sc.model.layers = layers;
  sc.name = "calibrate";
  sc.gpus = gpus;
  sc.plan.sp_size = 1;
  sc.plan.dp_shard_size = gpus;
  sc.plan.zero_stage = 3;
  sc.plan.attn_implementation = "sdpa";
  sc.plan.torch_adam = true;
  set_key(sc, "plan.seq_len", std::to_string(s.seq_len), "--seq-len");
  std::string features;  // ", tiled logits, ..." of the set-up (provenance and the phase clock's title)
  for (const auto& [on, key, flag, name] :
       {std::tuple{s.tiled_logits, "plan.tiled_logits", "--tiled-logits", "tiled logits"},
        {s.tiled_mlp, "plan.tiled_mlp", "--tiled-mlp", "TiledMLP"},
        {s.offload_checkpoints, "plan.offload_checkpoints", "--offload-checkpoints", "checkpoint offload"}})
    if (on) set_key(sc, key, "true", flag), features += fmt::format(", {}", name);
  validate(sc, "calibrate");
  Result r;
  Calibration& c = r.c;
  c = sc.hw.has_calibration ? sc.hw.calibrated : Calibration{};
  if (gpus > 1 && c.pytorch_context_bytes < 0)
    throw core::InputError("", "--gpus", "the profile has no calibrated.pytorch_context_GiB: calibrate with --gpus 1 first");
  runtime::deepspeed::StepOptions ops;
  if (gpus == 1) {
    for (std::size_t i = 0; i < s.op_seq_lens.size(); ++i) {
      const std::int64_t S = s.op_seq_lens[i];
      if (S < 128 || S > (1 << 20) || (i > 0 && S <= s.op_seq_lens[i - 1]))
        throw core::InputError("", "--op-seq-lens", fmt::format("must increase, each 128..1Mi (got {} at position {})", S, i + 1));
    }
    if (s.op_seq_lens.size() > 8) throw core::InputError("", "--op-seq-lens", "at most 8 lengths");
    for (const auto& [n, flag] : {std::pair{s.op_adam_params, "--op-adam-params"}, {s.op_cpu_adam_params, "--op-cpu-adam-params"}})
      if (n < 0 || n > 4'000'000'000) throw core::InputError("", flag, fmt::format("must be 0..4G parameters (got {})", n));
    ops.op_seq_lens = s.op_seq_lens, ops.op_adam_params = s.op_adam_params, ops.op_cpu_adam_params = s.op_cpu_adam_params;
  }
  const runtime::deepspeed::FixedCosts f = runtime::deepspeed::run_fixed_costs(sc, "", ops);
  const std::string when = reports::utc_now();
  // what the process cannot allocate, against the profile's HBM (as calibrate --backend cuda counts its
  // cuda_context): used outside the allocator, plus what the driver keeps from the profile's figure
  // (nvidia-smi memory.total - cudaMemGetInfo total; docs/MODEL.md "Fixed costs and fragmentation")
  const std::int64_t driver_gap = std::max<std::int64_t>(0, sc.hw.hbm_bytes - f.device_total_bytes);
  const std::int64_t held = f.outside_allocator_bytes + driver_gap;
  std::string& what = r.what;
  if (gpus == 1) {
    c.pytorch_context_bytes = held;
    what = fmt::format("pytorch_context = {} B: {} B used outside the allocator (torch's context alone {} B) + {} B profile HBM "
                       "above cudaMemGetInfo total ({} B)",
                       held, f.outside_allocator_bytes, f.outside_before_setup_bytes, driver_gap, f.device_total_bytes);
  } else {
    c.pytorch_nccl_buffer_bytes = std::max<std::int64_t>(0, held - c.pytorch_context_bytes);
    what = fmt::format("pytorch_nccl_buffer = {} B ({} B held on {} ranks less the calibrated context)",
                       c.pytorch_nccl_buffer_bytes, held, gpus);
  }
  set_provenance(c.provenance, gpus == 1 ? "pytorch_context" : "pytorch_nccl_buffer",
                 fmt::format("{}: measured {} by `ulysses calibrate --backend deepspeed --gpus {}` on {} ({}): cudaMemGetInfo used "
                             "- memory_reserved + (profile HBM - cudaMemGetInfo total) after Accelerate + DeepSpeed ZeRO-3 set-up and two "
                             "steps of {} x{} layers, S={}{}",
                             what, when, gpus, f.device, f.versions.dump(), sc.model.name, layers, sc.plan.seq_len, features));
  if (f.has_ops) {
    const double fused_before = c.zero3_fused_adam_step_s_per_param;
    r.ops = apply_op_bench(f.ops, sc.hw.bf16_dense_flops, sc.hw.hbm_GBps, c);
    // a FusedAdam row of this bench replaces a value an older clause accounted for
    if (c.zero3_fused_adam_step_s_per_param != fused_before) drop_provenance(c.provenance, "zero3_fused_adam");
    set_provenance(c.provenance, "op_bench",
                   fmt::format("op bench (attention {} at S={}, GEMMs of its layer, torch AdamW, DeepSpeedCPUAdam{}{}): "
                               "measured {} by `ulysses calibrate --backend deepspeed --gpus 1` on {} (calib/op_fit.hpp)",
                               sc.plan.attn_implementation, fmt::join(s.op_seq_lens, ","),
                               f.ops.eager.empty() ? "" : ", the layer's eager elementwise passes",
                               f.ops.zero_step.empty() ? "" : ", ZeRO-3's step on the GPU and offloaded", when, f.device));
  }
  // the host's issue cost of one logits tile (issue 12: when an offloaded checkpoint's free completes,
  // sim/step_allocs.hpp): the worker synchronizes before the loss in this set-up, so 'logits.fwd' holds no wait
  if (s.tiled_logits && gpus == 1) {
    const auto it = std::find_if(f.phase_clock.begin(), f.phase_clock.end(), [](const auto& p) { return p.name == "logits.fwd"; });
    if (it == f.phase_clock.end() || it->host_s <= 0)
      throw std::runtime_error("deepspeed backend: the set-up step with tiled logits reported no host time for logits.fwd");
    const Dims d = derive_dims(sc);
    const auto tiles = static_cast<std::int64_t>(torch_chunk_sizes(d.B * d.S_l, d.logits_shards).size());
    c.pytorch_host_logits_tile_s = it->host_s / static_cast<double>(tiles);
    set_provenance(c.provenance, "pytorch_host_logits_tile",
                   fmt::format("pytorch_host_logits_tile = {:.3f} ms: the phase clock's host time of logits.fwd ({:.3f} ms) over its {} "
                               "tiles, the GPU idle when the loss starts; measured {} by `ulysses calibrate --backend deepspeed "
                               "--tiled-logits` on {} ({} x{} layers, S={}{})",
                               c.pytorch_host_logits_tile_s * 1e3, it->host_s * 1e3, tiles, when, f.device, sc.model.name, layers,
                               sc.plan.seq_len, features));
  }
  if (!f.phase_clock.empty()) {
    auto rows = f.phase_clock;
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.gpu_s > b.gpu_s; });
    r.phase_clock.push_back(fmt::format("phase clock of the second step ({} x{} layers, S={}{}): GPU {:.2f} ms, host {:.2f} ms",
                                        sc.model.name, layers, sc.plan.seq_len, features, f.phase_clock_step_s * 1e3,
                                        f.phase_clock_wall_s * 1e3));
    r.phase_clock.push_back(fmt::format("#  {:<24} {:>10} {:>10} {:>9}", "phase", "GPU", "host", "host/GPU"));
    r.phase_clock.push_back(fmt::format("#  {:<24} {:>10} {:>10} {:>9}", "", "(ms)", "(ms)", "(x)"));
    for (const auto& p : rows)
      r.phase_clock.push_back(fmt::format("   {:<24} {:>10.3f} {:>10.3f} {:>9}", p.name, p.gpu_s * 1e3, p.host_s * 1e3,
                                          p.gpu_s > 0 ? fmt::format("{:.2f}", p.host_s / p.gpu_s) : std::string("-")));
  }
  r.profile_name = sc.hw.name;
  return r;
}

}  // namespace ulysses::calib::deepspeed
