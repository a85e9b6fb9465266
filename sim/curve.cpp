// Curve::at: linear interpolation in log(x) between a curve's samples (docs/MODEL.md).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "sim/scenario.hpp"

namespace ulysses {
namespace {

// log() of the samples' x, remembered per thread by the exact bits of x: the same profile's samples
// recur in every predict() (the queried x is not remembered). A slot holds the last x hashed to it.
struct SampleLogs {
  static constexpr int kSlots = 256;
  std::uint64_t bits[kSlots] = {};
  double value[kSlots] = {};
  bool used[kSlots] = {};
  double log_of(double x) {
    std::uint64_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    const auto i = static_cast<int>((b * 0x9E3779B97F4A7C15ull) >> 56);
    if (!used[i] || bits[i] != b) bits[i] = b, value[i] = std::log(x), used[i] = true;
    return value[i];
  }
};
thread_local SampleLogs t_sample_logs;

}  // namespace

// Linear in log(x) between samples; clamped to the first/last y outside the sampled range.
double Curve::at(double x) const {
  if (points.empty()) return 0.0;
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  std::size_t hi = 1;
  while (points[hi].first < x) ++hi;
  const auto& [x0, y0] = points[hi - 1];
  const auto& [x1, y1] = points[hi];
  SampleLogs& logs = t_sample_logs;
  const double log_x0 = logs.log_of(x0), log_x1 = logs.log_of(x1);
  const double t = (std::log(x) - log_x0) / (log_x1 - log_x0);
  return y0 + t * (y1 - y0);
}

}  // namespace ulysses
