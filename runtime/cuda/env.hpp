#pragma once
// The CUDA runtime's environment settings: numbers (ULYSSES_TIMEOUT_S, ULYSSES_EXCHANGE_GAP_MS,
// ULYSSES_GEMM_TUNE_WINDOW_MS, ...: unset, or one InputError line naming the variable and its rule) and switches.
#include <cstdlib>
#include <optional>
#include <string>

#include "core/errors.hpp"

namespace ulysses::runtime::cuda {

// A numeric environment variable in [lo, hi]: nullopt when unset, one InputError line when malformed.
inline std::optional<double> env_number(const char* name, double lo, double hi, const char* rule) {
  const char* t = std::getenv(name);
  if (!t) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t, &end);
  if (end == t || *end || !(v >= lo && v <= hi))
    throw core::InputError("", std::string("environment ") + name, std::string("must be ") + rule);
  return v;
}

// A switch: on when the variable is exactly "1" (ULYSSES_GEMM_TUNE_LOG, ULYSSES_LOOPBACK_TRACE).
inline bool env_flag(const char* name) {
  const char* t = std::getenv(name);
  return t && std::string(t) == "1";
}

}  // namespace ulysses::runtime::cuda
