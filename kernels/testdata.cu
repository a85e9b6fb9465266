// Seeded test data and bit-exact counters (kernels/testdata.cuh).
#include "kernels/testdata.cuh"

#include <cuda_bf16.h>

namespace ulysses::kernels {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 132 * 32 ? 132 * 32 : b));
}

__device__ __forceinline__ std::uint16_t bits(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }

// x_seq[b][s_l][h][d], global s = r*S_l + s_l
__global__ void fill_seq_kernel(__nv_bfloat16* x_seq, core::Dims x, int r, std::uint64_t seed, std::uint32_t t) {
  const std::int64_t S_l = x.S / x.P, n = x.B * S_l * x.H * x.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const std::int64_t d = i % x.D, h = (i / x.D) % x.H, s_l = (i / (x.D * x.H)) % S_l, b = i / (x.D * x.H * S_l);
    const std::int64_t s = core::global_pos(x, r, s_l);
    x_seq[i] = __float2bfloat16_rn(seeded_value(seed, t, static_cast<std::uint64_t>(((b * x.S + s) * x.H + h) * x.D + d)));
  }
}

__global__ void count_head_kernel(const __nv_bfloat16* x_head, core::Dims x, int r, std::uint64_t seed, std::uint32_t t,
                                  unsigned long long* wrong) {
  const std::int64_t H_l = core::heads_per_rank(x.H, x.P), n = x.B * x.S * H_l * x.D;
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const std::int64_t d = i % x.D, h_l = (i / x.D) % H_l, s = (i / (x.D * H_l)) % x.S, b = i / (x.D * H_l * x.S);
    const std::int64_t h = core::source_head(x, r, h_l);
    const __nv_bfloat16 want =
        __float2bfloat16_rn(seeded_value(seed, t, static_cast<std::uint64_t>(((b * x.S + s) * x.H + h) * x.D + d)));
    local += bits(x_head[core::head_index(x, b, s, h_l, d)]) != bits(want);
  }
  if (local) atomicAdd(wrong, local);
}

__global__ void count_bits_kernel(const std::uint16_t* a, const std::uint16_t* b, std::int64_t n, unsigned long long* wrong) {
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x)
    local += a[i] != b[i];
  if (local) atomicAdd(wrong, local);
}

__global__ void count_nonfinite_kernel(const std::uint16_t* x, std::int64_t n, unsigned long long* wrong) {
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x)
    local += (x[i] & 0x7F80u) == 0x7F80u;  // exponent all ones: inf or NaN
  if (local) atomicAdd(wrong, local);
}

__global__ void fill_a2a_kernel(__nv_bfloat16* send, std::int64_t total, int r, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < total; i += (std::int64_t)gridDim.x * blockDim.x)
    send[i] = __float2bfloat16_rn(seeded_value(seed, 100u + r, static_cast<std::uint64_t>(i)));
}

__global__ void count_a2a_kernel(const __nv_bfloat16* recv, std::int64_t count, int P, int r, std::uint64_t seed,
                                 unsigned long long* wrong) {
  unsigned long long local = 0;
  const std::int64_t n = count * P;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const std::int64_t c = i / count, j = i % count;
    const __nv_bfloat16 want = __float2bfloat16_rn(seeded_value(seed, 100u + static_cast<std::uint32_t>(c), static_cast<std::uint64_t>(r * count + j)));
    local += bits(recv[i]) != bits(want);
  }
  if (local) atomicAdd(wrong, local);
}

}  // namespace

cudaError_t count_nonfinite_bf16(const void* x, std::int64_t n, unsigned long long* wrong, cudaStream_t stream) {
  count_nonfinite_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(x), n, wrong);
  return cudaGetLastError();
}

cudaError_t fill_a2a_send_bf16(void* send, std::int64_t total, int r, std::uint64_t seed, cudaStream_t stream) {
  fill_a2a_kernel<<<grid_for(total), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(send), total, r, seed);
  return cudaGetLastError();
}

cudaError_t count_wrong_a2a_bf16(const void* recv, std::int64_t count, int P, int r, std::uint64_t seed,
                                 unsigned long long* wrong, cudaStream_t stream) {
  count_a2a_kernel<<<grid_for(count * P), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(recv), count, P, r, seed, wrong);
  return cudaGetLastError();
}

cudaError_t fill_seq_shard_bf16(void* x_seq, const core::Dims& x, int r, std::uint64_t seed, std::uint32_t t,
                                cudaStream_t stream) {
  if (x.P < 1 || x.S % x.P != 0 || r < 0 || r >= x.P) return cudaErrorInvalidValue;
  fill_seq_kernel<<<grid_for(x.B * (x.S / x.P) * x.H * x.D), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(x_seq), x, r,
                                                                                   seed, t);
  return cudaGetLastError();
}

cudaError_t count_wrong_head_bf16(const void* x_head, const core::Dims& x, int r, std::uint64_t seed, std::uint32_t t,
                                  unsigned long long* wrong, cudaStream_t stream) {
  if (x.P < 1 || x.S % x.P != 0 || r < 0 || r >= x.P) return cudaErrorInvalidValue;
  count_head_kernel<<<grid_for(x.B * x.S * core::heads_per_rank(x.H, x.P) * x.D), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x_head), x, r, seed, t, wrong);
  return cudaGetLastError();
}

cudaError_t count_wrong_bits16(const void* a, const void* b, std::int64_t n, unsigned long long* wrong, cudaStream_t stream) {
  count_bits_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(a),
                                                          static_cast<const std::uint16_t*>(b), n, wrong);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels

namespace ulysses::kernels {
namespace {

__global__ void spin_kernel(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

}  // namespace

cudaError_t spin_for_ns(long long ns, cudaStream_t stream) {
  if (ns < 0) return cudaErrorInvalidValue;
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  spin_kernel<<<sms > 0 ? sms : 1, 128, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
