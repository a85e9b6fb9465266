#pragma once
// The one bf16 converter: bf16 values held as raw bits (std::uint16_t), widened to fp32 exactly
// and rounded back with round-to-nearest-even (the rounding of __float2bfloat16_rn on the GPU).
// Tensors the GPU holds in bf16 are held as these bits on the host, so host code moves and
// compares exactly the bytes the device does. Standard library only; C++17 (nvcc host code).
#include <cstdint>
#include <cstring>

namespace ulysses::core {

using bf16 = std::uint16_t;               // raw bits of a bfloat16
inline constexpr bf16 kBf16NaN = 0x7FC0;  // quiet NaN: the poison value of outputs
inline constexpr std::int64_t kBf16Bytes = 2;

inline float bf16_to_float(bf16 h) {  // exact
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 float_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<bf16>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<bf16>(u >> 16);
}

}  // namespace ulysses::core
