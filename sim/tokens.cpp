// parse_tokens (sim/tokens.hpp): integer arithmetic only, so "1.000001M" is exact.
#include "sim/tokens.hpp"

#include <cctype>

#include <fmt/format.h>

#include "sim/errors.hpp"
#include "sim/limits.hpp"

namespace ulysses {

std::int64_t parse_tokens(const std::string& text, const std::string& origin, const std::string& key) {
  const auto bad = [&](const std::string& why) {
    return InputError(origin, key, fmt::format("'{}' {}: a token count such as 1000000, 256K, 1M, 1.5M (K/M/G = 1e3/1e6/1e9), 1..{}",
                                               text, why, limits::kMaxSeqLen));
  };
  std::string digits = text;
  std::int64_t scale = 1;
  if (!digits.empty()) {
    switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K': scale = 1000; break;
      case 'M': scale = 1000000; break;
      case 'G': scale = 1000000000; break;
      default: break;
    }
    if (scale > 1) digits.pop_back();
  }
  const std::size_t dot = digits.find('.');
  const std::string whole = digits.substr(0, dot), frac = dot == std::string::npos ? "" : digits.substr(dot + 1);
  const auto all_digits = [](const std::string& s) {
    for (char c : s) if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
  };
  if (whole.empty() || !all_digits(whole) || !all_digits(frac) || (dot != std::string::npos && frac.empty()))
    throw bad("is not a token count");
  if (whole.size() > 13) throw bad("is too large");
  std::int64_t n = std::stoll(whole);
  if (n > limits::kMaxSeqLen / scale) throw bad("is too large");
  n *= scale;
  std::int64_t unit = scale;
  for (char c : frac) {  // each fractional digit is a tenth of the previous unit
    if (unit % 10 != 0) throw bad("is not a whole number of tokens");
    unit /= 10;
    n += (c - '0') * unit;
  }
  if (n <= 0) throw bad("must be at least 1");
  if (n > limits::kMaxSeqLen) throw bad("is too large");
  return n;
}

}  // namespace ulysses
