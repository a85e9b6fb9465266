// Formatting helpers (reports/format.hpp): bytes, token counts, times, timestamps.
#include "reports/format.hpp"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

namespace ulysses::reports {

std::string human_bytes_GiB(core::bytes_t b) { return fmt::format("{:.2f} GiB", core::to_GiB(b)); }

namespace {
// v with `decimals` decimals, trailing zeros and a trailing point removed.
std::string trimmed(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}
}  // namespace

std::string human_tokens(std::int64_t n) {
  if (n < 1000 && n > -1000) return fmt::format("{}", n);
  struct Step {
    double scale;
    const char* suffix;
    int decimals;
  };
  constexpr Step kSteps[] = {{1e3, "K", 1}, {1e6, "M", 2}, {1e9, "G", 2}};
  const double v = static_cast<double>(n);
  for (std::size_t i = 0; i < std::size(kSteps); ++i) {
    const std::string text = trimmed(v / kSteps[i].scale, kSteps[i].decimals);
    // 999960 rounds to "1000K": written as the next unit instead
    const bool last = i + 1 == std::size(kSteps);
    if (last || (std::fabs(v) < kSteps[i + 1].scale && std::fabs(std::stod(text)) < 1000)) return text + kSteps[i].suffix;
  }
  return fmt::format("{}", n);  // not reached
}

std::string human_time(double s) {
  if (!std::isfinite(s) || s < 0 || s >= 1e12) return fmt::format("{:g} s", s);
  // each bound less half a unit of the last printed digit: 0.99999 s is "1.00 s", not "1000.00 ms"
  if (s < 1e-3 - 0.05e-6) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1 - 0.005e-3) return fmt::format("{:.2f} ms", s * 1e3);
  if (s < 60 - 0.005) return fmt::format("{:.2f} s", s);
  const auto total = static_cast<long long>(std::llround(s));
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

std::string fnv1a64_hex(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace ulysses::reports
