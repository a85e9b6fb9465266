#pragma once
// Our runtime's optimizer on the host (runtime/host_adam.hpp) timed alone: one tensor of `params`
// parameters with bf16 gradients (seeded values), one warm-up step, then the median of `iters` steps;
// the parameters must stay finite (std::runtime_error otherwise). `calibrate --backend cuda` writes the rate
// as calibrated.ulysses_host_adam_ns_per_param (the step model's optimizer.step under offload_optimizer).
// A CPU measurement: run it on the machine whose host runs the step.
#include <cstdint>

namespace ulysses::calib {

struct HostAdamRate {
  std::int64_t params = 0;
  double step_s = 0, s_per_param = 0;
};

// Default size: one [F, h] matrix of Llama-3.1-8B (14336 x 4096).
HostAdamRate host_adam_rate(int threads, int iters, std::int64_t params = std::int64_t{14336} * 4096);

}  // namespace ulysses::calib
