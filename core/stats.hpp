#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// Order statistics shared by measurement and evaluation code (the one median; issue 15 moves the
// older copies in runtime/ here).
#include <algorithm>
#include <vector>

namespace ulysses::core {

// Median of v (mean of the two middle values for an even count); 0 for an empty v.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace ulysses::core
