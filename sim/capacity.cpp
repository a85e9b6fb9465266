// Longest sequence that fits (docs/MODEL.md "Capacity search"): S = k * step with
// step = lcm(P, granularity); exponential search for the first k that fails, then binary
// search between the last fit and that failure. Memory grows with S apart from small saw
// teeth where a tile count (tiled logits, TiledMLP) steps up; the search returns a length
// that fits with the next multiple failing.
#include "sim/capacity.hpp"

#include <fmt/format.h>

#include "sim/checked.hpp"
#include "core/errors.hpp"
#include "sim/limits.hpp"
#include "sim/memory.hpp"
#include "sim/predict.hpp"

namespace ulysses {
namespace {

constexpr std::int64_t kMaxTokens = kMaxSeqLen;

bool fits(const Prediction& p) { return p.fits_gpu && p.fits_host; }

Binding binding_of(const Prediction& p) {
  if (p.fits_gpu && p.fits_host) return Binding::none;
  if (!p.fits_gpu && !p.fits_host) {  // both over: the one over by the larger fraction
    const double g = static_cast<double>(p.gpu.total()) / static_cast<double>(p.gpu_capacity_bytes);
    const double h = static_cast<double>(p.host.total()) / static_cast<double>(p.host_capacity_bytes);
    return g >= h ? Binding::gpu_hbm : Binding::host_ram;
  }
  return p.fits_gpu ? Binding::host_ram : Binding::gpu_hbm;
}

}  // namespace

CapacityResult find_max_seq_len(const Scenario& sc, std::int64_t granularity) {
  CapacityResult r;
  Scenario s = sc;  // one copy per search (the only allocation)
  const auto step = checked_lcm(s.plan.sp_size, granularity);
  if (!step || *step > kMaxTokens)
    throw core::InputError("", "granularity", fmt::format("lcm(granularity, sp_size) must be 1..{} (granularity {}, sp_size {})",
                                                    kMaxTokens, granularity, s.plan.sp_size));
  r.step = *step;
  const std::int64_t k_max = kMaxTokens / r.step;
  auto eval = [&](std::int64_t k) {
    s.plan.seq_len = k * r.step;
    ++r.evaluations;
    return predict(s);
  };

  Prediction first = eval(1);
  if (!fits(first)) {
    r.max_seq_len = 0;
    r.binding = binding_of(first);
    r.at_max = first;
    return r;
  }
  // exponential: lo fits, hi fails (or is past the bound)
  std::int64_t lo = 1, hi = 2;
  Prediction lo_p = first, hi_p{};
  bool hi_failed = false;
  while (hi <= k_max) {
    Prediction p = eval(hi);
    if (!fits(p)) { hi_p = p; hi_failed = true; break; }
    lo = hi;
    lo_p = p;
    hi *= 2;
  }
  if (!hi_failed) hi = k_max + 1;
  // binary: keep lo fitting, hi failing
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    Prediction p = eval(mid);
    if (fits(p)) { lo = mid; lo_p = p; }
    else { hi = mid; hi_p = p; hi_failed = true; }
  }
  r.max_seq_len = lo * r.step;
  r.at_max = lo_p;
  r.binding = hi_failed && hi == lo + 1 && hi <= k_max ? binding_of(hi_p) : Binding::none;
  return r;
}

}  // namespace ulysses
