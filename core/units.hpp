#pragma once
// core/ (namespace ulysses::core), the ground floor: standard library only; every library may include it.
// Units used everywhere (see docs/DESIGN.md "Units"):
//   bytes are int64_t; time is seconds as double; bandwidth GB/s with GB = 1e9 bytes;
//   capacity is shown in GiB = 2^30 bytes; FLOP/s as double.
#include <cstdint>

namespace ulysses::core {

using bytes_t = std::int64_t;   // bytes
using seconds_t = double;       // seconds

inline constexpr double kGiB = 1073741824.0;            // capacity unit
inline constexpr bytes_t kGiBytes = bytes_t{1} << 30;
inline constexpr double kTFLOP = 1e12;

constexpr double to_GiB(bytes_t b) { return static_cast<double>(b) / kGiB; }

}  // namespace ulysses::core
