#pragma once
// bf16 storage for the CPU reference backend. Tensors that the CUDA backend holds in bf16
// (q, k, v, o, dout, dq, dk, dv and every exchange buffer) are held here as raw bf16 bits
// (std::uint16_t), so the exchange moves exactly the bytes the GPU moves and the bit-exact
// checks compare the same bits. Arithmetic converts to fp32 (exact) and rounds back with
// round-to-nearest-even, the rounding of __float2bfloat16_rn on the GPU.
#include <cstdint>
#include <cstring>

namespace ulysses::runtime::cpu {

using bf16 = std::uint16_t;                   // raw bits of a bfloat16
inline constexpr bf16 kBf16NaN = 0x7FC0;      // quiet NaN: the poison value of outputs
inline constexpr std::int64_t kBf16Bytes = 2;

inline float bf16_to_float(bf16 h) {
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

}  // namespace ulysses::runtime::cpu
