// sim/param_fetch.hpp: the fetch's windows, as the runner issues them.
#include "sim/param_fetch.hpp"

#include <algorithm>

namespace ulysses {

core::seconds_t ulysses_param_fetch_s(const ParamFetch& f) {
  const auto excess = [](double busy_s, core::seconds_t window) { return std::max(0.0, busy_s - window); };
  core::seconds_t s = (f.embed_bytes + f.layer_bytes) / f.idle_Bps;
  for (std::int64_t k = 0; k < f.L; ++k) {  // forward: layer k computes while the next is fetched
    const double bytes = (k == 0 ? f.rest_bytes : 0) + (k + 1 < f.L ? f.layer_bytes : 0);
    s += excess(bytes / f.busy_Bps, f.layer_fwd);
  }
  const std::int64_t ahead_bwd = std::max<std::int64_t>(0, f.L - 2);  // backward: layers L - 3 .. 0
  const core::seconds_t ckpt = excess(f.ckpt_bwd_bytes / f.busy_Bps, f.layer_bwd);  // shown as offload.ckpt.h2d
  s += static_cast<double>(ahead_bwd) * (excess((f.ckpt_bwd_bytes + f.layer_bytes) / f.busy_Bps, f.layer_bwd) - ckpt);
  return s;
}

}  // namespace ulysses
