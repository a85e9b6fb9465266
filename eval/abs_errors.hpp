#pragma once
// |error| statistics over signed errors in % (the validation summaries of the block and of whole steps).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/stats.hpp"

namespace ulysses::eval {

inline double median_abs(const std::vector<double>& errors) {
  std::vector<double> a;
  for (double e : errors) a.push_back(std::fabs(e));
  return core::median(a);
}
inline double max_abs(const std::vector<double>& errors) {
  double m = 0;
  for (double e : errors) m = std::max(m, std::fabs(e));
  return m;
}

}  // namespace ulysses::eval
