// calib/host_adam_rate.hpp: seeded parameters and gradients, a warm-up step, the timed steps, the check.
#include "calib/host_adam_rate.hpp"

#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/stats.hpp"
#include "runtime/host_adam.hpp"

namespace ulysses::calib {

HostAdamRate host_adam_rate(int threads, int iters, std::int64_t params) {
  if (params < 1 || iters < 1) throw std::invalid_argument("host_adam_rate: needs params >= 1 and iters >= 1");
  std::mt19937_64 rng(11);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<core::bf16> p(static_cast<std::size_t>(params)), g(p.size());
  for (auto& x : p) x = core::float_to_bf16(0.02f * n(rng));
  for (auto& x : g) x = core::float_to_bf16(1e-3f * n(rng));
  runtime::HostAdamW opt({p}, runtime::AdamConfig{}, threads);
  std::vector<core::bf16> out(p.size());
  const std::vector<runtime::HostTensor> ts = {{g.data(), false, out.data(), params}};
  opt.step(ts);  // warm-up: the pages touched, the threads started once
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.step(ts);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (const core::bf16 x : out)
    if (!std::isfinite(core::bf16_to_float(x))) throw std::runtime_error("host_adam_rate: the optimizer wrote a non-finite parameter");
  HostAdamRate r;
  r.params = params;
  r.step_s = core::median(t);
  r.s_per_param = r.step_s / double(params);
  return r;
}

}  // namespace ulysses::calib
