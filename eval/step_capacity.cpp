#include "eval/step_capacity.hpp"

#include <algorithm>
#include <cmath>

#include "sim/step_runtime_memory.hpp"

namespace ulysses::eval {

CapacityResult predicted_step_capacity(Scenario sc, std::int64_t ballast, std::int64_t granularity) {
  if (sc.plan.runtime == Runtime::ulysses) {  // our runtime: its buffers, all allocated up front
    const StepRuntimeCapacity u = ulysses_step_capacity(sc, granularity, ballast);
    CapacityResult r;
    r.max_seq_len = u.max_seq_len, r.step = granularity, r.binding = u.binding;
    return r;
  }
  sc.hw.hbm_bytes -= ballast;
  return find_max_seq_len(sc, granularity);
}

std::vector<std::int64_t> ladder_between(std::int64_t lo, std::int64_t hi, int n, std::int64_t g) {
  std::vector<std::int64_t> out;
  for (int i = 1; i <= n; ++i) {
    const double x = double(lo) + double(hi - lo) * i / (n + 1);
    const std::int64_t s = std::int64_t(std::llround(x / double(g))) * g;
    if (s > lo && s < hi && (out.empty() || s > out.back())) out.push_back(s);
  }
  return out;
}

std::vector<std::int64_t> first_ladder(std::int64_t predicted, std::int64_t g) {
  std::vector<std::int64_t> out;
  for (double f : {0.8, 0.9, 0.97, 1.03, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0}) {
    const std::int64_t s = std::max<std::int64_t>(g, std::int64_t(std::llround(predicted * f / double(g))) * g);
    if (out.empty() || s > out.back()) out.push_back(s);
  }
  return out;
}

Bisection bisect_capacity(std::int64_t predicted, std::int64_t g, const ProbeLadder& probe,
                          const std::function<void(int, const Bisection&)>& progress) {
  Bisection b;
  std::vector<std::int64_t> ladder = first_ladder(predicted, g);
  for (int round = 0; round < 3 && !ladder.empty(); ++round) {
    const runtime::ProbeResult r = probe(ladder);
    for (const auto& p : r.fits) {
      b.fits = std::max(b.fits, p.seq_len);
      b.ran.push_back(p);
    }
    if (r.oom_at > 0) {
      b.first_oom = b.first_oom ? std::min(b.first_oom, r.oom_at) : r.oom_at;
      b.oom.push_back(r.oom_at);
    }
    if (progress) progress(round + 1, b);
    if (b.first_oom == 0) ladder = {ladder.back() * 2, ladder.back() * 3};
    else if (b.fits == 0) ladder = ladder_between(0, b.first_oom, 4, g);
    else ladder = ladder_between(b.fits, b.first_oom, 5, g);
    if (b.fits > 0 && b.first_oom > 0 && double(b.first_oom - b.fits) <= 0.02 * double(b.fits)) break;
  }
  return b;
}

}  // namespace ulysses::eval
