#include "eval/step_capacity.hpp"

#include <algorithm>
#include <cmath>

namespace ulysses::eval {

CapacityResult predicted_step_capacity(Scenario sc, std::int64_t ballast, std::int64_t granularity) {
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

}  // namespace ulysses::eval
