#pragma once
// N bf16 in one memory access (N = 2: 4 bytes, N = 8: 16 bytes), the unit of the bandwidth-bound kernels, and
// its conversion to fp32 and back with one round-to-nearest-even per element (__floats2bfloat162_rn).
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>

namespace ulysses::kernels {

template <int N>
struct alignas(2 * N) Pack {  // N bf16
  __nv_bfloat162 v[N / 2];
};
// one 16-byte (or 4-byte) access each, not one per bf16 pair
template <int N>
using Word = std::conditional_t<N == 8, uint4, unsigned>;

template <int N>
__device__ __forceinline__ Pack<N> load_pack(const Pack<N>* p) {
  const Word<N> u = *reinterpret_cast<const Word<N>*>(p);
  Pack<N> r;
  memcpy(&r, &u, sizeof(r));
  return r;
}
template <int N>
__device__ __forceinline__ void store_pack(Pack<N>* p, const Pack<N>& v) {
  Word<N> u;
  memcpy(&u, &v, sizeof(u));
  *reinterpret_cast<Word<N>*>(p) = u;
}

template <int N>
__device__ __forceinline__ void to_floats(const Pack<N>& p, float (&x)[N]) {
#pragma unroll
  for (int k = 0; k < N / 2; ++k) {
    const float2 f = __bfloat1622float2(p.v[k]);
    x[2 * k] = f.x, x[2 * k + 1] = f.y;
  }
}
template <int N>
__device__ __forceinline__ Pack<N> from_floats(const float (&x)[N]) {
  Pack<N> p;
#pragma unroll
  for (int k = 0; k < N / 2; ++k) p.v[k] = __floats2bfloat162_rn(x[2 * k], x[2 * k + 1]);
  return p;
}

// a 16-byte word already in registers (uint4), as 8 fp32 and back
__device__ __forceinline__ void unpack8(const uint4& u, float (&x)[8]) {
  Pack<8> p;
  memcpy(&p, &u, sizeof(p));
  to_floats(p, x);
}
__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  const Pack<8> p = from_floats(x);
  uint4 u;
  memcpy(&u, &p, sizeof(u));
  return u;
}

}  // namespace ulysses::kernels
