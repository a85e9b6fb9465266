#pragma once
// Small formatting helpers shared by every writer.
#include <string>

#include "sim/units.hpp"

namespace ulysses::reports {

std::string human_bytes_GiB(bytes_t b);   // "12.34 GiB"
std::string human_tokens(std::int64_t n); // 131072 -> "128K", 1048576 -> "1M", else digits
std::string utc_now();                    // "2026-12-01T16:05:19Z": when a record or profile was measured

}  // namespace ulysses::reports
