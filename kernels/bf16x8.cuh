#pragma once
// Eight bf16 in one 16-byte word (uint4), the unit of the bandwidth-bound kernels' vector accesses:
// unpacked to fp32 and packed back with one round-to-nearest-even per element.
#include <cstring>

#include <cuda_bf16.h>

namespace ulysses::kernels {

__device__ __forceinline__ void unpack8(const uint4& u, float (&x)[8]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    __nv_bfloat162 b;
    memcpy(&b, &w[k], 4);
    const float2 f = __bfloat1622float2(b);
    x[2 * k] = f.x, x[2 * k + 1] = f.y;
  }
}

__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  unsigned w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(x[2 * k], x[2 * k + 1]);
    memcpy(&w[k], &b, 4);
  }
  return uint4{w[0], w[1], w[2], w[3]};
}

}  // namespace ulysses::kernels
