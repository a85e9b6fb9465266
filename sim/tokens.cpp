// parse_tokens (sim/tokens.hpp): decimal and binary suffixes, exact integers only.
#include "sim/tokens.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "sim/limits.hpp"

namespace ulysses {

namespace {

constexpr const char* kForm = "a token count (an integer, or with K, M, G = 10^3, 10^6, 10^9 or Ki, Mi, Gi = 2^10, 2^20, 2^30: 64K, 1.5M, 128Ki)";

struct Suffix {
  const char* text;
  std::int64_t factor;
};
constexpr Suffix kSuffixes[] = {{"", 1},
                                {"K", 1000},
                                {"k", 1000},
                                {"M", 1000 * 1000},
                                {"G", 1000 * 1000 * 1000},
                                {"Ki", std::int64_t{1} << 10},
                                {"ki", std::int64_t{1} << 10},
                                {"Mi", std::int64_t{1} << 20},
                                {"Gi", std::int64_t{1} << 30}};

}  // namespace

std::int64_t parse_tokens(const std::string& text, const std::string& file, const std::string& key) {
  auto fail = [&](const std::string& why) -> std::int64_t {
    const std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;
    throw core::InputError(file, key, fmt::format("must be {}{} (got '{}')", kForm, why, shown));
  };
  std::size_t i = 0;
  const std::size_t n = text.size();
  std::size_t int_digits = 0, frac_digits = 0;
  unsigned __int128 mantissa = 0;  // the digits without the point; at most 25 of them
  for (; i < n && text[i] >= '0' && text[i] <= '9'; ++i, ++int_digits)
    if (int_digits < 25) mantissa = mantissa * 10 + static_cast<unsigned>(text[i] - '0');
  if (i < n && text[i] == '.') {
    for (++i; i < n && text[i] >= '0' && text[i] <= '9'; ++i, ++frac_digits)
      if (int_digits + frac_digits < 25) mantissa = mantissa * 10 + static_cast<unsigned>(text[i] - '0');
    if (frac_digits == 0) return fail("");
  }
  if (int_digits == 0) return fail(n > 0 && (text[0] == '-' || text[0] == '+') ? "; no sign" : "");
  const std::string suffix = text.substr(i);
  const Suffix* s = nullptr;
  for (const auto& c : kSuffixes)
    if (suffix == c.text) s = &c;
  if (!s) return fail(suffix == "m" || suffix == "g" ? "; the suffixes are upper case (m is milli)" : "");
  if (int_digits + frac_digits > 25) return fail(fmt::format("; at most {}", kMaxSeqLen));
  unsigned __int128 scale = 1;
  for (std::size_t k = 0; k < frac_digits; ++k) scale *= 10;
  const unsigned __int128 scaled = mantissa * static_cast<unsigned __int128>(s->factor);  // < 10^25 * 2^30 < 2^128
  if (scaled % scale != 0) return fail("; a whole number of tokens");
  const unsigned __int128 v = scaled / scale;
  if (v == 0) return fail("; at least 1");
  if (v > static_cast<unsigned __int128>(kMaxSeqLen)) return fail(fmt::format("; at most {}", kMaxSeqLen));
  return static_cast<std::int64_t>(v);
}

}  // namespace ulysses
