// A decoder layer's elementwise kernels (kernels/layer_ops.hpp), read top to bottom: helpers, RMSNorm
// forward, RMSNorm backward (rows, then the weight gradient's column sums), RoPE, SwiGLU, add.
// Bandwidth-bound: bf16 pairs (__nv_bfloat162) in, fp32 math, one rounding per output.
#include "kernels/layer_ops.hpp"

#include <algorithm>

namespace ulysses::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPairsPerThread = 32;  // rmsnorm_bwd's register accumulators: h <= 2 * 256 * 32 = 16384
constexpr int kBwdBlocks = 264;         // rmsnorm_bwd's row-block count (2 per SM on H100/H200)

__device__ float block_sum(float v, float* scratch) {  // scratch: [kThreads / 32] floats
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < kThreads / 32; ++i) s += scratch[i];
  return s;
}

int grid_for(std::int64_t work, int per_block) {
  return static_cast<int>(std::min<std::int64_t>((work + per_block - 1) / per_block, 65535 * 16));
}

// ---- RMSNorm forward: one block per row ----

__global__ void rmsnorm_fwd_kernel(const __nv_bfloat162* x,  // [T, h/2]
                                   const __nv_bfloat162* w,  // [h/2]
                                   __nv_bfloat162* out,      // [T, h/2]
                                   float* rstd,              // [T]
                                   std::int64_t h2, float eps) {
  __shared__ float scratch[kThreads / 32];
  const std::int64_t row = blockIdx.x;
  const __nv_bfloat162* xr = x + row * h2;
  float ss = 0;
  for (std::int64_t j = threadIdx.x; j < h2; j += kThreads) {
    const float2 v = __bfloat1622float2(xr[j]);
    ss += v.x * v.x + v.y * v.y;
  }
  const float r = rsqrtf(block_sum(ss, scratch) / float(2 * h2) + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (std::int64_t j = threadIdx.x; j < h2; j += kThreads) {
    const float2 v = __bfloat1622float2(xr[j]), wv = __bfloat1622float2(w[j]);
    // HF: weight * hidden.to(bf16): the normalized value is rounded to bf16 before the product
    const float2 n = __bfloat1622float2(__floats2bfloat162_rn(v.x * r, v.y * r));
    out[row * h2 + j] = __floats2bfloat162_rn(wv.x * n.x, wv.y * n.y);
  }
}

// ---- RMSNorm backward: rows strided over the blocks; each thread keeps its columns' dw sums ----

__global__ void rmsnorm_bwd_rows_kernel(const __nv_bfloat162* dout,  // [T, h/2]
                                        const __nv_bfloat162* x,     // [T, h/2]
                                        const __nv_bfloat162* w,     // [h/2]
                                        const float* rstd,           // [T]
                                        __nv_bfloat162* dx,          // [T, h/2]
                                        float2* dw_part,             // [gridDim.x, h/2]
                                        std::int64_t T, std::int64_t h2) {
  __shared__ float scratch[kThreads / 32];
  float2 acc[kMaxPairsPerThread];
  for (int k = 0; k < kMaxPairsPerThread; ++k) acc[k] = make_float2(0.f, 0.f);
  const float inv_h = 1.f / float(2 * h2);
  for (std::int64_t row = blockIdx.x; row < T; row += gridDim.x) {
    const float r = rstd[row];
    float dot = 0;
    for (int k = 0; k < kMaxPairsPerThread; ++k) {
      const std::int64_t j = threadIdx.x + std::int64_t(k) * kThreads;
      if (j >= h2) break;
      const float2 xv = __bfloat1622float2(x[row * h2 + j]), dv = __bfloat1622float2(dout[row * h2 + j]);
      const float2 wv = __bfloat1622float2(w[j]);
      const float2 n = make_float2(xv.x * r, xv.y * r);
      const float2 nb = __bfloat1622float2(__floats2bfloat162_rn(n.x, n.y));  // the forward's bf16(n)
      acc[k].x += dv.x * nb.x, acc[k].y += dv.y * nb.y;
      dot += dv.x * wv.x * n.x + dv.y * wv.y * n.y;
    }
    const float m = block_sum(dot, scratch) * inv_h;
    for (int k = 0; k < kMaxPairsPerThread; ++k) {
      const std::int64_t j = threadIdx.x + std::int64_t(k) * kThreads;
      if (j >= h2) break;
      const float2 xv = __bfloat1622float2(x[row * h2 + j]), dv = __bfloat1622float2(dout[row * h2 + j]);
      const float2 wv = __bfloat1622float2(w[j]);
      dx[row * h2 + j] = __floats2bfloat162_rn(r * (dv.x * wv.x - xv.x * r * m), r * (dv.y * wv.y - xv.y * r * m));
    }
  }
  for (int k = 0; k < kMaxPairsPerThread; ++k) {
    const std::int64_t j = threadIdx.x + std::int64_t(k) * kThreads;
    if (j >= h2) break;
    dw_part[blockIdx.x * h2 + j] = acc[k];
  }
}

__global__ void rmsnorm_bwd_dw_kernel(const float2* dw_part,  // [parts, h/2]
                                      float2* dw,             // [h/2]
                                      int parts, std::int64_t h2) {
  const std::int64_t j = blockIdx.x * std::int64_t(kThreads) + threadIdx.x;
  if (j >= h2) return;
  float2 s = make_float2(0.f, 0.f);
  for (int p = 0; p < parts; ++p) s.x += dw_part[p * h2 + j].x, s.y += dw_part[p * h2 + j].y;
  dw[j] = s;
}

// ---- RoPE: one thread per (row, two adjacent i): bf16 pairs at i and at i + D/2 ----

__global__ void rope_kernel(__nv_bfloat162* qk,         // [T, H, D/2 pairs]
                            const __nv_bfloat162* cos,  // [T, D/4 pairs]
                            const __nv_bfloat162* sin,  // [T, D/4 pairs]
                            std::int64_t T, std::int64_t H, std::int64_t quarter, float sign) {
  const std::int64_t n = T * H * quarter;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % quarter, row = e / quarter, t = row / H;
    __nv_bfloat162* v = qk + row * 2 * quarter;
    const float2 c = __bfloat1622float2(cos[t * quarter + i]), sr = __bfloat1622float2(sin[t * quarter + i]);
    const float2 s = make_float2(sign * sr.x, sign * sr.y);
    const float2 a = __bfloat1622float2(v[i]), b = __bfloat1622float2(v[i + quarter]);
    v[i] = __floats2bfloat162_rn(a.x * c.x - b.x * s.x, a.y * c.y - b.y * s.y);
    v[i + quarter] = __floats2bfloat162_rn(b.x * c.x + a.x * s.x, b.y * c.y + a.y * s.y);
  }
}

// ---- SwiGLU and add: grid-stride over bf16 pairs ----

__device__ float sigmoidf_(float g) { return 1.f / (1.f + __expf(-g)); }

__global__ void swiglu_fwd_kernel(const __nv_bfloat162* gate, const __nv_bfloat162* up, __nv_bfloat162* act,
                                  std::int64_t n2) {  // all [n/2]
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n2;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const float2 g = __bfloat1622float2(gate[e]), u = __bfloat1622float2(up[e]);
    act[e] = __floats2bfloat162_rn(g.x * sigmoidf_(g.x) * u.x, g.y * sigmoidf_(g.y) * u.y);
  }
}

__global__ void swiglu_bwd_kernel(const __nv_bfloat162* dact, const __nv_bfloat162* gate, const __nv_bfloat162* up,
                                  __nv_bfloat162* dgate, __nv_bfloat162* dup, std::int64_t n2) {  // all [n/2]
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n2;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const float2 d = __bfloat1622float2(dact[e]), g = __bfloat1622float2(gate[e]), u = __bfloat1622float2(up[e]);
    const float sx = sigmoidf_(g.x), sy = sigmoidf_(g.y);
    dup[e] = __floats2bfloat162_rn(d.x * g.x * sx, d.y * g.y * sy);
    dgate[e] = __floats2bfloat162_rn(d.x * u.x * sx * (1.f + g.x * (1.f - sx)), d.y * u.y * sy * (1.f + g.y * (1.f - sy)));
  }
}

__global__ void add_kernel(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* out, std::int64_t n2) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n2;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const float2 x = __bfloat1622float2(a[e]), y = __bfloat1622float2(b[e]);
    out[e] = __floats2bfloat162_rn(x.x + y.x, x.y + y.y);
  }
}

template <class T2, class T>
T2* pairs(T* p) { return reinterpret_cast<T2*>(p); }

}  // namespace

cudaError_t rmsnorm_fwd(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, float* rstd,
                        std::int64_t T, std::int64_t h, float eps, cudaStream_t stream) {
  if (T < 1 || h < 2 || h % 2 || T > 2147483647) return cudaErrorInvalidValue;
  rmsnorm_fwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(
      pairs<const __nv_bfloat162>(x), pairs<const __nv_bfloat162>(w), pairs<__nv_bfloat162>(out), rstd, h / 2, eps);
  return cudaGetLastError();
}

std::size_t rmsnorm_bwd_workspace_bytes(std::int64_t T, std::int64_t h) {
  return static_cast<std::size_t>(std::min<std::int64_t>(T, kBwdBlocks) * h) * sizeof(float);
}

cudaError_t rmsnorm_bwd(const __nv_bfloat16* dout, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        const float* rstd, __nv_bfloat16* dx, float* dw, void* workspace, std::int64_t T,
                        std::int64_t h, cudaStream_t stream) {
  if (T < 1 || h < 2 || h % 2 || h > 2 * kThreads * kMaxPairsPerThread) return cudaErrorInvalidValue;
  const int parts = static_cast<int>(std::min<std::int64_t>(T, kBwdBlocks));
  auto* part = static_cast<float2*>(workspace);
  rmsnorm_bwd_rows_kernel<<<parts, kThreads, 0, stream>>>(pairs<const __nv_bfloat162>(dout), pairs<const __nv_bfloat162>(x),
                                                          pairs<const __nv_bfloat162>(w), rstd, pairs<__nv_bfloat162>(dx),
                                                          part, T, h / 2);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  rmsnorm_bwd_dw_kernel<<<grid_for(h / 2, kThreads), kThreads, 0, stream>>>(part, pairs<float2>(dw), parts, h / 2);
  return cudaGetLastError();
}

cudaError_t rope(__nv_bfloat16* qk, const __nv_bfloat16* cos, const __nv_bfloat16* sin, std::int64_t T,
                 std::int64_t H, std::int64_t D, bool backward, cudaStream_t stream) {
  if (T < 1 || H < 1 || D < 4 || D % 4) return cudaErrorInvalidValue;
  rope_kernel<<<grid_for(T * H * (D / 4), kThreads), kThreads, 0, stream>>>(
      pairs<__nv_bfloat162>(qk), pairs<const __nv_bfloat162>(cos), pairs<const __nv_bfloat162>(sin), T, H, D / 4,
      backward ? -1.f : 1.f);
  return cudaGetLastError();
}

cudaError_t swiglu_fwd(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* act, std::int64_t n,
                       cudaStream_t stream) {
  if (n < 2 || n % 2) return cudaErrorInvalidValue;
  swiglu_fwd_kernel<<<grid_for(n / 2, kThreads), kThreads, 0, stream>>>(
      pairs<const __nv_bfloat162>(gate), pairs<const __nv_bfloat162>(up), pairs<__nv_bfloat162>(act), n / 2);
  return cudaGetLastError();
}

cudaError_t swiglu_bwd(const __nv_bfloat16* dact, const __nv_bfloat16* gate, const __nv_bfloat16* up,
                       __nv_bfloat16* dgate, __nv_bfloat16* dup, std::int64_t n, cudaStream_t stream) {
  if (n < 2 || n % 2) return cudaErrorInvalidValue;
  swiglu_bwd_kernel<<<grid_for(n / 2, kThreads), kThreads, 0, stream>>>(
      pairs<const __nv_bfloat162>(dact), pairs<const __nv_bfloat162>(gate), pairs<const __nv_bfloat162>(up),
      pairs<__nv_bfloat162>(dgate), pairs<__nv_bfloat162>(dup), n / 2);
  return cudaGetLastError();
}

cudaError_t add(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, std::int64_t n,
                cudaStream_t stream) {
  if (n < 2 || n % 2) return cudaErrorInvalidValue;
  add_kernel<<<grid_for(n / 2, kThreads), kThreads, 0, stream>>>(pairs<const __nv_bfloat162>(a), pairs<const __nv_bfloat162>(b),
                                                                 pairs<__nv_bfloat162>(out), n / 2);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
