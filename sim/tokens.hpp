#pragma once
// A token count as a user writes it: digits with an optional decimal K/M/G suffix (1M = 1,000,000).
#include <cstdint>
#include <string>

namespace ulysses {

// "1000000", "1M", "1.5M", "256K", "2G" (suffix case-insensitive; K = 1e3, M = 1e6, G = 1e9). The result
// must be a whole number in 1..limits::kMaxSeqLen; anything else throws InputError(origin, key, rule).
std::int64_t parse_tokens(const std::string& text, const std::string& origin, const std::string& key);

}  // namespace ulysses
