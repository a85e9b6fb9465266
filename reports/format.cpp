#include "reports/format.hpp"

#include <fmt/format.h>

namespace ulysses::reports {

std::string human_bytes_GiB(bytes_t b) { return fmt::format("{:.2f} GiB", to_GiB(b)); }

std::string human_tokens(std::int64_t n) {
  if (n > 0 && n % (1 << 20) == 0) return fmt::format("{}M", n >> 20);
  if (n > 0 && n % (1 << 10) == 0) return fmt::format("{}K", n >> 10);
  return fmt::format("{}", n);
}

}  // namespace ulysses::reports
