#pragma once
// Small formatting helpers shared by every writer: one convention for token counts and times in
// every table (docs/OUTPUTS.md "Units in tables"); JSON and CSV keep raw numbers.
#include <string>
#include <string_view>

#include "core/units.hpp"

namespace ulysses::reports {

// Token counts, decimal as papers write them (parsed back by parse_tokens, sim/tokens.hpp):
// below 1000 the digits; then K (1e3) with one decimal, M (1e6) and G (1e9) with two, trailing
// zeros dropped: 999 -> "999", 131072 -> "131.1K", 1000000 -> "1M", 4526000 -> "4.53M".
std::string human_tokens(std::int64_t n);
// Seconds scaled for reading: "12.3 us" (below 1 ms), "4.56 ms" (below 1 s), "12.35 s" (below a
// minute), then "h:mm:ss" ("2:43:01", "0:01:05"). Negative, huge and non-finite values as "%g s".
std::string human_time(double seconds);
// 64-bit FNV-1a of the bytes as 16 hex digits: a fingerprint (not a cryptographic hash) of
// inputs echoed in outputs (calibration curves, sweep specs).
std::string fnv1a64_hex(std::string_view bytes);
std::string utc_now();                    // "2026-12-01T16:05:19Z": when a record or profile was measured

}  // namespace ulysses::reports
