#pragma once
// Seeded test data for the CUDA backend and its checks. The generator is a pure function of
// (seed, tensor id, global element index) written for host and device alike, so a host oracle
// and every rank produce the same bits without copying the full tensors around.
//   value(seed, t, i) = bf16_rn( (u0+u1+u2+u3 - 2^17) * 2^-16 * sqrt(3) ),  u_k = 16-bit words
//   of splitmix64(seed ^ t*K1 ^ i*K2): an Irwin-Hall(4) sum with unit variance, in [-3.46, 3.46].
// Integer arithmetic and one float multiply: host and device round identically.
// Global tensors: q, dout [B, S, H, D], k, v [B, S, H_kv, D], element index ((b*S + s)*Hx + h)*D + d.
#include <cstdint>

#include <cuda_runtime.h>

#include "core/layout.hpp"

namespace ulysses::kernels {

enum TensorId : std::uint32_t { kTensorQ = 0, kTensorK = 1, kTensorV = 2, kTensorDout = 3 };

ULYSSES_HD std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

ULYSSES_HD float seeded_value(std::uint64_t seed, std::uint32_t t, std::uint64_t i) {
  const std::uint64_t h = splitmix64(seed ^ (static_cast<std::uint64_t>(t) * 0xD1B54A32D192ED03ull) ^ (i * 0x8CB92BA72F3D8DD7ull));
  const std::int64_t n = static_cast<std::int64_t>(h & 0xFFFF) + static_cast<std::int64_t>((h >> 16) & 0xFFFF) +
                         static_cast<std::int64_t>((h >> 32) & 0xFFFF) + static_cast<std::int64_t>(h >> 48) - (1 << 17);
  return static_cast<float>(n) * (1.0f / 65536.0f) * 1.7320508f;
}

// Fill rank r's sequence shard x_seq [B, S_l, Hx, D] of global tensor t: x_seq[b][s_l] = global[b][r*S_l + s_l].
cudaError_t fill_seq_shard_bf16(void* x_seq, const core::Dims& x, int r, std::uint64_t seed, std::uint32_t t,
                                cudaStream_t stream);

// Count elements of rank r's head-sharded x_head [B, S, H_l, D] whose bits differ from the direct
// gather x_head[b][s][h_l][d] = global[b][s][source_head(r, h_l)][d]  (x.H = heads of the global
// tensor; x.H < x.P: the kv head r/R). Adds the count to *wrong (device int64).
cudaError_t count_wrong_head_bf16(const void* x_head, const core::Dims& x, int r, std::uint64_t seed, std::uint32_t t,
                                  unsigned long long* wrong, cudaStream_t stream);

// Adds to *wrong the number of 16-bit words that differ between a and b (n words).
cudaError_t count_wrong_bits16(const void* a, const void* b, std::int64_t n, unsigned long long* wrong, cudaStream_t stream);

// Adds to *wrong the number of bf16 elements of x (n) that are NaN or infinite (e.g. poison left).
cudaError_t count_nonfinite_bf16(const void* x, std::int64_t n, unsigned long long* wrong, cudaStream_t stream);

// Bare all-to-all check data: rank r's send buffer holds value(seed, 100 + r, i) for i < P*count;
// after the exchange recv[c*count + j] must equal value(seed, 100 + c, r*count + j).
cudaError_t fill_a2a_send_bf16(void* send, std::int64_t total, int r, std::uint64_t seed, cudaStream_t stream);
cudaError_t count_wrong_a2a_bf16(const void* recv, std::int64_t count, int P, int r, std::uint64_t seed,
                                 unsigned long long* wrong, cudaStream_t stream);

}  // namespace ulysses::kernels

namespace ulysses::kernels {

// Keeps every SM of the device busy for `ns` nanoseconds (globaltimer spin, no memory traffic):
// the GPU stays clocked up while its NVLinks carry nothing (calibrate: exchange after idle links).
cudaError_t spin_for_ns(long long ns, cudaStream_t stream);

}  // namespace ulysses::kernels
