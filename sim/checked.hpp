#pragma once
// Checked int64 arithmetic for sizes derived from input: the result, or nothing when it would
// overflow. Callers turn nothing into an InputError naming the key (docs/INPUTS.md "Limits").
#include <cstdint>
#include <numeric>
#include <optional>

namespace ulysses {

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// lcm of two positive values
inline std::optional<std::int64_t> checked_lcm(std::int64_t a, std::int64_t b) {
  if (a <= 0 || b <= 0) return std::nullopt;
  return checked_mul(a / std::gcd(a, b), b);
}

// ceil(s / m) * m for s >= 0, m > 0
inline std::optional<std::int64_t> checked_round_up(std::int64_t s, std::int64_t m) {
  if (s < 0 || m <= 0) return std::nullopt;
  return checked_mul(s / m + (s % m != 0), m);
}

}  // namespace ulysses
