// The step's kernels around the decoder layers (kernels/loss_ops.hpp), top to bottom: the seeded
// fill, the embedding's forward (row gather) and backward (row scatter-add), the cross-entropy over
// a logits chunk (max and sum of exponentials in one pass, then the gradient; 16-byte accesses where the
// rows allow them, then one block per SM walking the rows so the second pass reads from L2).
#include "kernels/loss_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/bf16_pack.cuh"
#include "kernels/testdata.cuh"

namespace ulysses::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n, int per_block) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>((n + per_block - 1) / per_block, 65535 * 32)));
}

__global__ void fill_kernel(__nv_bfloat16* x,  // [n]
                            std::int64_t n, std::uint64_t seed, std::uint32_t tensor, float bias, float scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16_rn(__fadd_rn(bias, __fmul_rn(scale, seeded_value(seed, tensor, static_cast<std::uint64_t>(i)))));
}

// ---- embedding: one block per token row ----

__global__ void embedding_fwd_kernel(const __nv_bfloat162* embed,  // [V, h/2]
                                     const std::int32_t* tokens,   // [T]
                                     __nv_bfloat162* x,            // [T, h/2]
                                     std::int64_t h2) {
  const std::int64_t t = blockIdx.x, row = tokens[t];
  for (std::int64_t j = threadIdx.x; j < h2; j += blockDim.x) x[t * h2 + j] = embed[row * h2 + j];
}

__global__ void embedding_bwd_kernel(const __nv_bfloat162* dx,   // [T, h/2]
                                     const std::int32_t* tokens,  // [T]
                                     float* d_embed,              // [V, h]
                                     std::int64_t h2) {
  const std::int64_t t = blockIdx.x, row = tokens[t];
  for (std::int64_t j = threadIdx.x; j < h2; j += blockDim.x) {
    const float2 g = __bfloat1622float2(dx[t * h2 + j]);
    atomicAdd(&d_embed[row * 2 * h2 + 2 * j], g.x);
    atomicAdd(&d_embed[row * 2 * h2 + 2 * j + 1], g.y);
  }
}

// ---- cross-entropy: one block per row of the chunk; with V % 8 == 0, one block per SM walking the rows ----

struct MaxSum {  // running max m and sum of exp(x - m)
  float m, s;
};
__device__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

// The block's MaxSum from each thread's (kBlock threads): warps by shuffles, then the warps' in order by thread 0;
// every thread returns the block's (part: [kBlock / 32], all: one, both shared, free again on return for the
// block's next row).
template <int kBlock>
__device__ MaxSum block_merge(MaxSum ms, MaxSum* part, MaxSum* all) {
  for (int o = 16; o > 0; o >>= 1) ms = merge(ms, MaxSum{__shfl_xor_sync(0xffffffffu, ms.m, o), __shfl_xor_sync(0xffffffffu, ms.s, o)});
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ms;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum a = part[0];
    for (int i = 1; i < kBlock / 32; ++i) a = merge(a, part[i]);
    *all = a;
  }
  __syncthreads();
  const MaxSum r = *all;
  __syncthreads();
  return r;
}

// Rows of any V, any alignment: one bf16 at a time.
__global__ void cross_entropy_kernel(__nv_bfloat16* logits,       // [Tc, V] in: logits, out: dlogits
                                     const std::int32_t* labels,  // [Tc]
                                     float* loss_rows,            // [Tc]
                                     std::int64_t V, float inv_divisor) {
  __shared__ MaxSum part[kThreads / 32];
  __shared__ MaxSum all;
  const std::int64_t t = blockIdx.x;
  __nv_bfloat16* row = logits + t * V;
  const std::int32_t label = labels[t];
  if (label < 0) {  // ignored: no loss, no gradient
    for (std::int64_t v = threadIdx.x; v < V; v += kThreads) row[v] = __float2bfloat16_rn(0.f);
    if (threadIdx.x == 0) loss_rows[t] = 0.f;
    return;
  }
  const float x_label = __bfloat162float(row[label]);  // read before any thread overwrites the row
  MaxSum ms{-INFINITY, 0.f};
  for (std::int64_t v = threadIdx.x; v < V; v += kThreads) ms = merge(ms, MaxSum{__bfloat162float(row[v]), 1.f});
  const MaxSum a = block_merge<kThreads>(ms, part, &all);
  if (threadIdx.x == 0) loss_rows[t] = a.m + logf(a.s) - x_label;
  const float m = a.m, inv_s = 1.f / a.s;
  for (std::int64_t v = threadIdx.x; v < V; v += kThreads) {
    const float p = __expf(__bfloat162float(row[v]) - m) * inv_s;
    row[v] = __float2bfloat16_rn((p - (v == label ? 1.f : 0.f)) * inv_divisor);
  }
}

// Rows of V % 8 == 0 in a 16-byte aligned chunk: 8 bf16 per access (uint4), one block of kRowThreads per
// SM walking rows t = blockIdx.x, + gridDim.x, ... Pass 1 keeps each thread's running max and sum of
// exponentials over 8 logits at a time (9 exponentials per 8 logits, where the one-at-a-time merge takes
// 16), kUnroll words in flight; pass 2 rereads the row and writes the gradient over it. With one row per
// SM in flight the rows being read are SMs x 2V bytes (Llama 3's 128256: 33 MiB on 132 SMs), within the
// L2 (50 MiB on H100/H200), so pass 2's reads mostly hit it: the chunk costs one read and one write of
// HBM per logit instead of two reads and a write (2048 rows of 256 blocks each had 270 MB in flight).
constexpr int kUnroll = 4;
constexpr int kRowThreads = 512;

__device__ __forceinline__ MaxSum merge8(MaxSum ms, const uint4& w) {
  float x[8];
  unpack8(w, x);
  float mx = x[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) mx = fmaxf(mx, x[k]);
  const float m = fmaxf(ms.m, mx);
  if (m == -INFINITY) return ms;  // nothing but -inf so far: the sum stays 0
  float s = ms.s * __expf(ms.m - m);  // ms.m = -inf: exp(-inf) = 0
#pragma unroll
  for (int k = 0; k < 8; ++k) s += __expf(x[k] - m);
  return MaxSum{m, s};
}

__global__ void __launch_bounds__(kRowThreads) cross_entropy_vec8_kernel(__nv_bfloat16* logits,       // [Tc, V]
                                                                         const std::int32_t* labels,  // [Tc]
                                                                         float* loss_rows,            // [Tc]
                                                                         std::int64_t Tc, std::int64_t V, float inv_divisor) {
  __shared__ MaxSum part[kRowThreads / 32];
  __shared__ MaxSum all;
  const std::int64_t words = V / 8;
  for (std::int64_t t = blockIdx.x; t < Tc; t += gridDim.x) {
    uint4* row = reinterpret_cast<uint4*>(logits + t * V);  // [V / 8] words of 8 bf16
    const std::int32_t label = labels[t];
    if (label < 0) {  // ignored: no loss, no gradient
      for (std::int64_t i = threadIdx.x; i < words; i += kRowThreads) row[i] = uint4{0u, 0u, 0u, 0u};
      if (threadIdx.x == 0) loss_rows[t] = 0.f;
      continue;
    }
    const float x_label = __bfloat162float(logits[t * V + label]);  // read before any thread overwrites the row
    MaxSum ms{-INFINITY, 0.f};
    for (std::int64_t i0 = threadIdx.x; i0 < words; i0 += std::int64_t(kUnroll) * kRowThreads) {
      uint4 u[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const std::int64_t i = i0 + std::int64_t(j) * kRowThreads;
        u[j] = i < words ? row[i] : uint4{0xff80ff80u, 0xff80ff80u, 0xff80ff80u, 0xff80ff80u};  // past the row: -inf
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) ms = merge8(ms, u[j]);
    }
    const MaxSum a = block_merge<kRowThreads>(ms, part, &all);
    if (threadIdx.x == 0) loss_rows[t] = a.m + logf(a.s) - x_label;
    const float m = a.m, inv_s = 1.f / a.s;
    for (std::int64_t i0 = threadIdx.x; i0 < words; i0 += std::int64_t(kUnroll) * kRowThreads) {
      uint4 u[kUnroll] = {};
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const std::int64_t i = i0 + std::int64_t(j) * kRowThreads;
        if (i < words) u[j] = row[i];
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const std::int64_t i = i0 + std::int64_t(j) * kRowThreads;
        if (i >= words) break;
        float x[8];
        unpack8(u[j], x);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const float p = __expf(x[k] - m) * inv_s;
          x[k] = (p - (8 * i + k == label ? 1.f : 0.f)) * inv_divisor;
        }
        row[i] = pack8(x);
      }
    }
  }
}

int sm_count() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1)
    return 1;
  return n;
}

__global__ void add_bf16_to_fp32_kernel(const __nv_bfloat16* a,  // [n]
                                        float* out,              // [n]
                                        std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] += __bfloat162float(a[i]);
}

}  // namespace

cudaError_t fill_seeded_param(__nv_bfloat16* x, std::int64_t n, std::uint64_t seed, std::uint32_t tensor, float bias,
                              float scale, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n, kThreads * 8), kThreads, 0, stream>>>(x, n, seed, tensor, bias, scale);
  return cudaGetLastError();
}

cudaError_t embedding_fwd(const __nv_bfloat16* embed, const std::int32_t* tokens, __nv_bfloat16* x, std::int64_t T,
                          std::int64_t h, cudaStream_t stream) {
  if (T < 1 || h < 2 || h % 2 || T > 2147483647) return cudaErrorInvalidValue;
  embedding_fwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat162*>(embed), tokens, reinterpret_cast<__nv_bfloat162*>(x), h / 2);
  return cudaGetLastError();
}

cudaError_t embedding_bwd(const __nv_bfloat16* dx, const std::int32_t* tokens, float* d_embed, std::int64_t T,
                          std::int64_t h, cudaStream_t stream) {
  if (T < 1 || h < 2 || h % 2 || T > 2147483647) return cudaErrorInvalidValue;
  embedding_bwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(reinterpret_cast<const __nv_bfloat162*>(dx),
                                                                           tokens, d_embed, h / 2);
  return cudaGetLastError();
}

cudaError_t cross_entropy_fwd_bwd(__nv_bfloat16* logits, const std::int32_t* labels, float* loss_rows, std::int64_t Tc,
                                  std::int64_t V, float divisor, cudaStream_t stream) {
  if (Tc < 1 || V < 1 || !(divisor > 0) || Tc > 2147483647) return cudaErrorInvalidValue;
  if (V % 8 == 0 && reinterpret_cast<std::uintptr_t>(logits) % 16 == 0)
    cross_entropy_vec8_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(Tc, sm_count())), kRowThreads, 0, stream>>>(
        logits, labels, loss_rows, Tc, V, 1.f / divisor);
  else
    cross_entropy_kernel<<<static_cast<unsigned>(Tc), kThreads, 0, stream>>>(logits, labels, loss_rows, V, 1.f / divisor);
  return cudaGetLastError();
}

cudaError_t add_bf16_to_fp32(const __nv_bfloat16* d_head, float* d_embed, std::int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  add_bf16_to_fp32_kernel<<<blocks_for(n, kThreads * 8), kThreads, 0, stream>>>(d_head, d_embed, n);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
