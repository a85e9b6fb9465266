// `ulysses calibrate --backend deepspeed` (calib/deepspeed.hpp): the set-up step's scenario, the
// worker's fixed costs, and the calibrated key they give.
#include "calib/deepspeed.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/config.hpp"
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
  validate(sc, "calibrate");
  Result r;
  Calibration& c = r.c;
  c = sc.hw.has_calibration ? sc.hw.calibrated : Calibration{};
  if (gpus > 1 && c.pytorch_context_bytes < 0)
    throw core::InputError("", "--gpus", "the profile has no calibrated.pytorch_context_GiB: calibrate with --gpus 1 first");
  const runtime::deepspeed::FixedCosts f = runtime::deepspeed::run_fixed_costs(sc, "");
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
  c.provenance += fmt::format("{}{}: measured {} by `ulysses calibrate --backend deepspeed --gpus {}` on {} ({}): cudaMemGetInfo used "
                              "- memory_reserved + (profile HBM - cudaMemGetInfo total) after Accelerate + DeepSpeed ZeRO-3 set-up and two steps of {} x{} layers, S={}",
                              c.provenance.empty() ? "" : "; ", what, when, gpus, f.device, f.versions.dump(),
                              sc.model.name, layers, sc.plan.seq_len);
  r.profile_name = sc.hw.name;
  return r;
}

}  // namespace ulysses::calib::deepspeed
