#include "reports/format.hpp"

#include <ctime>

#include <fmt/format.h>

namespace ulysses::reports {

std::string human_bytes_GiB(bytes_t b) { return fmt::format("{:.2f} GiB", to_GiB(b)); }

std::string human_tokens(std::int64_t n) {
  if (n > 0 && n % (1 << 20) == 0) return fmt::format("{}M", n >> 20);
  if (n > 0 && n % (1 << 10) == 0) return fmt::format("{}K", n >> 10);
  return fmt::format("{}", n);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace ulysses::reports
