#pragma once
// Units used everywhere (see docs/DESIGN.md "Units"):
//   bytes are int64_t; time is seconds as double; bandwidth GB/s with GB = 1e9 bytes;
//   capacity is shown in GiB = 2^30 bytes; FLOP/s as double.
#include <cstdint>

namespace ulysses {

using bytes_t = std::int64_t;   // bytes
using seconds_t = double;       // seconds
using flops_t = double;         // floating point operations (count)

inline constexpr double kGB = 1e9;                      // bandwidth unit (nccl-tests)
inline constexpr double kGiB = 1073741824.0;            // capacity unit
inline constexpr bytes_t kGiBytes = bytes_t{1} << 30;
inline constexpr double kTFLOP = 1e12;

constexpr double to_GiB(bytes_t b) { return static_cast<double>(b) / kGiB; }
constexpr bytes_t from_GiB(double g) { return static_cast<bytes_t>(g * kGiB); }

}  // namespace ulysses
