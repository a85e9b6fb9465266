// The optimizer step's kernels (kernels/optim_ops.hpp), top to bottom: the per-tensor partial sums
// of squared gradients, the global norm and clipping coefficient from them, AdamW over one tensor,
// and the master weights' first fill. Every kernel streams its tensors once (memory bound); AdamW
// moves 4 elements per thread step when n is a multiple of 4 and every pointer is aligned for it (arena
// buffers are 256-byte aligned), else one.
#include "kernels/optim_ops.hpp"

#include <algorithm>
#include <cstdint>

#include "kernels/bf16_pack.cuh"

namespace ulysses::kernels {
namespace {

constexpr int kThreads = 256;

constexpr std::int64_t kMaxBlocks = 132 * 16;  // a grid-stride cap: 16 blocks per SM of a 132-SM H100/H200

int grid_for(std::int64_t n, int per_thread) {
  const std::int64_t blocks = (n + std::int64_t(kThreads) * per_thread - 1) / (std::int64_t(kThreads) * per_thread);
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(blocks, kMaxBlocks)));
}

__device__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ float to_f(float x) { return x; }

// ---- the gradient norm: kNormBlocks blocks per tensor, a fixed order of sums ----
// kNormThreads threads per block (one block per SM: the grid is only kNormBlocks), each reading 16 bytes
// at a time (8 bf16 or 4 fp32 gradients) where the tensor is 16-byte aligned, the last n % (16 /
// sizeof(G)) elements one at a time; a thread's sum in element order, the block's by a fixed tree.

constexpr int kNormThreads = 1024;

__device__ void add_squares(const uint4& u, const __nv_bfloat16*, float& s) {
  float x[8];
  unpack8(u, x);
#pragma unroll
  for (int k = 0; k < 8; ++k) s = fmaf(x[k], x[k], s);
}
__device__ void add_squares(const uint4& u, const float*, float& s) {
  const float x[4] = {__uint_as_float(u.x), __uint_as_float(u.y), __uint_as_float(u.z), __uint_as_float(u.w)};
#pragma unroll
  for (int k = 0; k < 4; ++k) s = fmaf(x[k], x[k], s);
}

template <class G>
__global__ void __launch_bounds__(kNormThreads) sq_partials_kernel(const G* grad,  // [n]
                                                                   std::int64_t n, bool vec,
                                                                   float* partials) {  // [kNormBlocks]
  constexpr int E = 16 / sizeof(G);  // elements per 16-byte word
  const std::int64_t first = blockIdx.x * std::int64_t(kNormThreads) + threadIdx.x;
  const std::int64_t stride = std::int64_t(kNormBlocks) * kNormThreads;
  float s = 0.f;
  std::int64_t done = 0;  // elements the word loop covers
  if (vec) {
    const uint4* words = reinterpret_cast<const uint4*>(grad);  // [n / E]
    const std::int64_t nw = n / E;
#pragma unroll 4
    for (std::int64_t i = first; i < nw; i += stride) add_squares(words[i], grad, s);
    done = nw * E;
  }
  for (std::int64_t i = done + first; i < n; i += stride) {
    const float g = to_f(grad[i]);
    s = fmaf(g, g, s);
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __shared__ float red[kNormThreads / 32];
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float w = red[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
    if (threadIdx.x == 0) partials[blockIdx.x] = w;
  }
}

__global__ void clip_kernel(const float* partials,  // [count]
                            std::int64_t count, float max_norm,
                            float* norm_coef) {  // [2]
  __shared__ double red[kThreads];
  double s = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += kThreads) s += partials[i];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float norm = static_cast<float>(sqrt(red[0]));
    const float clip = max_norm > 0.f ? (norm + 1e-6f) / max_norm : 0.f;
    norm_coef[0] = norm;
    norm_coef[1] = clip > 1.f ? 1.f / clip : 1.f;
  }
}

// ---- AdamW on one element (fp32 math, DeepSpeed's FusedAdam order of operations) ----

__device__ __forceinline__ float adamw_one(float g, float& master, float& m, float& v, const AdamStep& hp) {
  m = hp.beta1 * m + (1.f - hp.beta1) * g;
  v = hp.beta2 * v + (1.f - hp.beta2) * g * g;
  const float denom = sqrtf(v / hp.bias_correction2) + hp.eps;
  const float update = (m / hp.bias_correction1) / denom + hp.weight_decay * master;
  master = master - hp.lr * update;
  return master;
}

template <class G>
__global__ void adamw_kernel(__nv_bfloat16* param,  // [n]
                             float* master, float* m, float* v,  // [n] each
                             const G* grad,                      // [n]
                             std::int64_t n, AdamStep hp, const float* coef, bool vec4) {
  const float c = *coef;
  const std::int64_t stride = std::int64_t(gridDim.x) * kThreads;
  std::int64_t i = blockIdx.x * std::int64_t(kThreads) + threadIdx.x;
  if (vec4) {  // four at a time: 16-byte fp32 and 8-byte bf16 accesses (n % 4 == 0, pointers aligned)
    for (; 4 * i < n; i += stride) {
      float4 p4 = reinterpret_cast<float4*>(master)[i], m4 = reinterpret_cast<float4*>(m)[i], v4 = reinterpret_cast<float4*>(v)[i];
      float g[4];
      if constexpr (sizeof(G) == 2) {
        const uint2 raw = reinterpret_cast<const uint2*>(grad)[i];
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        g[0] = a.x, g[1] = a.y, g[2] = b.x, g[3] = b.y;
      } else {
        const float4 r = reinterpret_cast<const float4*>(grad)[i];
        g[0] = r.x, g[1] = r.y, g[2] = r.z, g[3] = r.w;
      }
      adamw_one(g[0] * c, p4.x, m4.x, v4.x, hp);
      adamw_one(g[1] * c, p4.y, m4.y, v4.y, hp);
      adamw_one(g[2] * c, p4.z, m4.z, v4.z, hp);
      adamw_one(g[3] * c, p4.w, m4.w, v4.w, hp);
      reinterpret_cast<float4*>(master)[i] = p4, reinterpret_cast<float4*>(m)[i] = m4, reinterpret_cast<float4*>(v)[i] = v4;
      __nv_bfloat162 lo = __floats2bfloat162_rn(p4.x, p4.y), hi = __floats2bfloat162_rn(p4.z, p4.w);
      uint2 out;
      out.x = *reinterpret_cast<unsigned*>(&lo), out.y = *reinterpret_cast<unsigned*>(&hi);
      reinterpret_cast<uint2*>(param)[i] = out;
    }
    return;
  }
  for (; i < n; i += stride) {
    float p = master[i], mm = m[i], vv = v[i];
    adamw_one(to_f(grad[i]) * c, p, mm, vv, hp);
    master[i] = p, m[i] = mm, v[i] = vv;
    param[i] = __float2bfloat16_rn(p);
  }
}

__global__ void widen_kernel(const __nv_bfloat16* x,  // [n]
                             float* y,                // [n]
                             std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(kThreads) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * kThreads)
    y[i] = __bfloat162float(x[i]);
}

template <class G>
cudaError_t launch_adamw(__nv_bfloat16* param, float* master, float* m, float* v, const G* grad, std::int64_t n,
                         const AdamStep& hp, const float* coef, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const auto aligned = [](const void* p, std::uintptr_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; };
  const bool vec4 = n % 4 == 0 && aligned(master, 16) && aligned(m, 16) && aligned(v, 16) && aligned(param, 8) &&
                    aligned(grad, 4 * sizeof(G));
  adamw_kernel<G><<<grid_for(n, 4), kThreads, 0, s>>>(param, master, m, v, grad, n, hp, coef, vec4);
  return cudaGetLastError();
}

template <class G>
cudaError_t launch_partials(const G* grad, std::int64_t n, float* partials, cudaStream_t s) {
  const bool vec = reinterpret_cast<std::uintptr_t>(grad) % 16 == 0;
  sq_partials_kernel<G><<<kNormBlocks, kNormThreads, 0, s>>>(grad, n, vec, partials);
  return cudaGetLastError();
}

}  // namespace

cudaError_t grad_sq_partials(const __nv_bfloat16* grad, std::int64_t n, float* partials, cudaStream_t s) {
  return launch_partials(grad, n, partials, s);
}
cudaError_t grad_sq_partials(const float* grad, std::int64_t n, float* partials, cudaStream_t s) {
  return launch_partials(grad, n, partials, s);
}

cudaError_t clip_coefficient(const float* partials, std::int64_t count, float max_norm, float* norm_coef, cudaStream_t s) {
  clip_kernel<<<1, kThreads, 0, s>>>(partials, count, max_norm, norm_coef);
  return cudaGetLastError();
}

cudaError_t adamw_step(__nv_bfloat16* param, float* master, float* m, float* v, const __nv_bfloat16* grad, std::int64_t n,
                       const AdamStep& hp, const float* coef, cudaStream_t s) {
  return launch_adamw(param, master, m, v, grad, n, hp, coef, s);
}
cudaError_t adamw_step(__nv_bfloat16* param, float* master, float* m, float* v, const float* grad, std::int64_t n,
                       const AdamStep& hp, const float* coef, cudaStream_t s) {
  return launch_adamw(param, master, m, v, grad, n, hp, coef, s);
}

cudaError_t widen_bf16(const __nv_bfloat16* x, float* y, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  widen_kernel<<<grid_for(n, 1), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
