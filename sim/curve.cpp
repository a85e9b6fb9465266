#include <cmath>

#include "sim/scenario.hpp"

namespace ulysses {

// Linear in log(x) between samples; clamped to the first/last y outside the sampled range.
double Curve::at(double x) const {
  if (points.empty()) return 0.0;
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  std::size_t hi = 1;
  while (points[hi].first < x) ++hi;
  const auto& [x0, y0] = points[hi - 1];
  const auto& [x1, y1] = points[hi];
  const double t = (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0));
  return y0 + t * (y1 - y0);
}

}  // namespace ulysses
