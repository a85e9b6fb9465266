#include "runtime/checks.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/bf16.hpp"

namespace ulysses::runtime {

Check check_bits(std::string name, const std::uint16_t* got, const std::uint16_t* want, std::int64_t n) {
  Check c;
  c.name = std::move(name);
  for (std::int64_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    ++c.wrong;  // max_abs_err: the largest difference of the two as bf16 values (inf for NaN)
    const double d = std::abs(double(core::bf16_to_float(got[i])) - double(core::bf16_to_float(want[i])));
    c.max_abs_err = std::isfinite(d) ? std::max(c.max_abs_err, d) : INFINITY;
  }
  c.tolerance = 0;
  c.passed = c.wrong == 0 && n > 0;
  return c;
}

Check check_close(std::string name, const float* got, const double* ref, std::int64_t n, double tol) {
  return check_close(std::move(name), got, ref, n, tol, nullptr);
}

Check check_close(std::string name, const float* got, const double* ref, std::int64_t n, double tol,
                  const double* extra_scale) {
  Check c;
  c.name = std::move(name);
  c.tolerance = tol;
  double ss = 0;
  for (std::int64_t i = 0; i < n; ++i) ss += ref[i] * ref[i];
  const double rms = n ? std::sqrt(ss / double(n)) : 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double scale = std::abs(ref[i]) + rms + (extra_scale ? extra_scale[i] : 0.0);
    const double err = std::abs(double(got[i]) - ref[i]);
    const double rel = scale > 0 ? err / scale : err;
    if (!std::isfinite(double(got[i])) || !(rel <= tol)) {
      ++c.wrong;
      c.max_abs_err = std::isfinite(rel) ? std::max(c.max_abs_err, rel) : INFINITY;
    } else {
      c.max_abs_err = std::max(c.max_abs_err, rel);
    }
  }
  c.passed = c.wrong == 0 && n > 0 && std::isfinite(rms);
  return c;
}

}  // namespace ulysses::runtime
