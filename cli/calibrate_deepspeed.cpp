// ulysses calibrate --backend deepspeed: the PyTorch process's fixed costs (device memory outside its
// caching allocator) measured by the deepspeed backend's worker, written as calibrated.pytorch_context_GiB
// (one GPU) or calibrated.pytorch_nccl_buffer_GiB (--gpus P > 1: what P ranks add on top of the
// calibrated context) into the profile, keeping its other calibrated keys (docs/DEEPSPEED_BACKEND.md).
#include <cstdint>
#include <iostream>

#include <fmt/format.h>

#include "cli/calibration_out.hpp"
#include "cli/options.hpp"
#include "reports/format.hpp"
#include "runtime/deepspeed/step_run.hpp"
#include "sim/config.hpp"
#include "core/errors.hpp"

namespace ulysses::cli {

int run_calibrate_deepspeed(int argc, char** argv) {
  po::options_description d("calibrate --backend deepspeed options");
  d.add_options()("help,h", "this help")
      ("backend", po::value<std::string>(), "deepspeed")
      ("profile", po::value<std::string>()->default_value("h200-sxm-141gb"), "base profile (name or path)")
      ("profile-out", po::value<std::string>(), "write the profile with the updated `calibrated:` section here (else print it)")
      ("model", po::value<std::string>()->default_value("llama-3.1-8b"), "model preset of the set-up step")
      ("layers", po::value<std::int64_t>()->default_value(1), "its decoder layers")
      ("seq-len", po::value<std::int64_t>()->default_value(4096), "its sequence length")
      ("gpus", po::value<std::int64_t>()->default_value(1), "ranks (torchrun): 1 measures the context, P > 1 the NCCL buffers");
  const auto vm = parse_args(argc, argv, d);
  if (vm.count("help")) {
    print_help(argv[0], "--backend deepspeed --profile NAME [--gpus P] [--profile-out FILE]",
               "Measures what the PyTorch process of HF + Accelerate + DeepSpeed holds on the device outside its\n"
               "caching allocator (cudaMemGetInfo used - memory_reserved, after set-up and two ZeRO-3 steps of a\n"
               "small model): the model's cuda_context (and nccl_buffers) for plan.runtime pytorch.",
               d);
    return core::kExitOk;
  }
  const std::int64_t gpus = vm["gpus"].as<std::int64_t>();
  if (gpus < 1 || gpus > 64) throw core::InputError("", "--gpus", fmt::format("must be 1..64 (got {})", gpus));
  Scenario sc;
  set_key(sc, "model", vm["model"].as<std::string>(), "--model");
  set_key(sc, "profile", vm["profile"].as<std::string>(), "--profile");
  const std::int64_t layers = vm["layers"].as<std::int64_t>();
  if (layers < 1 || layers > sc.model.layers) throw core::InputError("", "--layers", fmt::format("must be 1..{}", sc.model.layers));
  sc.model.layers = layers;
  sc.name = "calibrate";
  sc.gpus = gpus;
  sc.plan.sp_size = 1;
  sc.plan.dp_shard_size = gpus;
  sc.plan.zero_stage = 3;
  sc.plan.attn_implementation = "sdpa";
  sc.plan.torch_adam = true;
  set_key(sc, "plan.seq_len", std::to_string(vm["seq-len"].as<std::int64_t>()), "--seq-len");
  validate(sc, "calibrate");
  Calibration c = sc.hw.has_calibration ? sc.hw.calibrated : Calibration{};
  if (gpus > 1 && c.pytorch_context_bytes < 0)
    throw core::InputError("", "--gpus", "the profile has no calibrated.pytorch_context_GiB: calibrate with --gpus 1 first");
  const runtime::deepspeed::FixedCosts f = runtime::deepspeed::run_fixed_costs(sc, "");
  const std::string when = reports::utc_now();
  // what the process cannot allocate, against the profile's HBM (as calibrate --backend cuda counts its
  // cuda_context): used outside the allocator, plus what the driver keeps from the profile's figure
  // (nvidia-smi memory.total - cudaMemGetInfo total; docs/MODEL.md "Fixed costs and fragmentation")
  const std::int64_t driver_gap = std::max<std::int64_t>(0, sc.hw.hbm_bytes - f.device_total_bytes);
  const std::int64_t held = f.outside_allocator_bytes + driver_gap;
  std::string what;
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
  std::cout << what << "\n";
  write_calibration_output(vm, sc.hw.name, c);
  return core::kExitOk;
}

}  // namespace ulysses::cli
