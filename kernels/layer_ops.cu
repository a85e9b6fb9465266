// A decoder layer's elementwise kernels (kernels/layer_ops.hpp), read top to bottom: helpers, RMSNorm
// forward (a block per row; L lanes per row for rows of 32-256), RMSNorm backward (rows, then the weight
// gradient's column sums), RoPE, SwiGLU, add (each also in 16-byte words where the tensors allow).
// Bandwidth-bound: bf16 pairs (__nv_bfloat162) or 16-byte words of 8 bf16 in, fp32 math, one rounding per output.
#include "kernels/layer_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "kernels/bf16_pack.cuh"

namespace ulysses::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBwdMaxThreads = 512;  // rmsnorm_bwd's block: h <= 16384 is 32 bf16 per thread at most
constexpr std::int64_t kBwdMaxH = 16384;

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

// ---- RMSNorm forward over short rows (Qwen3's head norms: h = D): L lanes per row ----
// h = 8 L (L = 4, 8, 16 or 32: h = 32 .. 256), each lane one 16-byte word of 8 bf16 of its row, held in
// registers (x is read once); the row's sum of squares over its L lanes by shuffles (groups of L lanes
// are aligned within the warp). Every lane takes part in the shuffles, lanes past the last row included.

template <int L>
__global__ void __launch_bounds__(kThreads) rmsnorm_fwd_short_kernel(const Pack<8>* x,  // [rows, L] words of 8 bf16
                                                                     const Pack<8>* w,  // [L]
                                                                     Pack<8>* out,      // [rows, L]
                                                                     float* rstd,       // [rows]
                                                                     std::int64_t rows, float eps) {
  static_assert(L == 4 || L == 8 || L == 16 || L == 32, "a power of two of lanes within a warp");
  const std::int64_t g = blockIdx.x * std::int64_t(kThreads) + threadIdx.x, row = g / L;
  const int lane = static_cast<int>(g % L);
  const bool live = row < rows;
  float v[8] = {};
  if (live) to_floats(load_pack(x + row * L + lane), v);
  float ss = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) ss += v[k] * v[k];
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (!live) return;
  const float r = rsqrtf(ss / float(8 * L) + eps);
  if (lane == 0) rstd[row] = r;
  float wv[8], nv[8], n[8], y[8];
  to_floats(load_pack(w + lane), wv);
#pragma unroll
  for (int k = 0; k < 8; ++k) nv[k] = v[k] * r;
  to_floats(from_floats(nv), n);  // HF: weight * hidden.to(bf16): the normalized value rounded to bf16 first
#pragma unroll
  for (int k = 0; k < 8; ++k) y[k] = wv[k] * n[k];
  store_pack(out + row * L + lane, from_floats(y));
}

template <int L>
void launch_fwd_short(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, float* rstd, std::int64_t rows,
                      float eps, cudaStream_t stream) {
  const std::int64_t blocks = (rows * L + kThreads - 1) / kThreads;
  rmsnorm_fwd_short_kernel<L><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      reinterpret_cast<const Pack<8>*>(x), reinterpret_cast<const Pack<8>*>(w), reinterpret_cast<Pack<8>*>(out), rstd, rows,
      eps);
}

// ---- RMSNorm backward: dx and dw's partial sums in one pass over the rows, then dw ----
// Each block takes a contiguous range of rows (one block per resident slot of the GPU, launched
// once). Rows stream through a ring of S row buffers in shared memory (cp.async, S - 1 rows in
// flight ahead of the one computed); each thread copies and reads only its own columns, so the ring
// needs no barrier, and the row sum needs one. Each thread owns the same columns of every row and
// sums their dw terms in registers, in row order, into its block's row of the workspace. A second
// kernel adds the blocks' rows in block order. No atomics: dw's summation order depends only on T,
// h and the grid (the device's resident block count, rmsnorm_bwd_workspace_bytes).
// Accesses move N bf16 at once (N = 8: 16 bytes, when h % 8 == 0 and the pointers are 16-byte
// aligned; else N = 2); a thread owns V units of a row: units threadIdx.x + k * blockDim.x, k < V.

// "memory": the compiler keeps the ring's shared-memory reads after the wait and before the next copy
template <int Bytes>
__device__ void cp_async(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (Bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(Bytes) : "memory");
}
__device__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory"); }

template <int N, int V, int S>
__global__ void __launch_bounds__(kBwdMaxThreads)
rmsnorm_bwd_rows_kernel(const Pack<N>* dout,  // [T, h/N]
                        const Pack<N>* x,     // [T, h/N]
                        const Pack<N>* w,     // [h/N]
                        const float* rstd,    // [T]
                        Pack<N>* dx,          // [T, h/N]
                        float* dw_part,       // [gridDim.x, h]
                        std::int64_t T, int hu) {
  extern __shared__ uint4 smem[];
  Pack<N>* ring = reinterpret_cast<Pack<N>*>(smem);   // [S, 2, h/N]: a row's x, then its dout
  __shared__ float scratch[2][kBwdMaxThreads / 32];  // the row sums' warp partials, by row parity
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float inv_h = 1.f / float(hu * N);
  const std::int64_t t0 = T * blockIdx.x / gridDim.x, t1 = T * (blockIdx.x + 1) / gridDim.x;
  const auto issue = [&](std::int64_t t) {  // row t into ring slot (t - t0) % S, one commit group
    if (t < t1) {
      Pack<N>* slot = ring + ((t - t0) % S) * 2 * hu;
      for (int k = 0; k < V; ++k) {
        const int j = threadIdx.x + k * blockDim.x;
        if (j < hu) cp_async<2 * N>(slot + j, x + t * hu + j), cp_async<2 * N>(slot + hu + j, dout + t * hu + j);
      }
    }
    cp_async_commit();
  };
  Pack<N> wv[V];    // [V] units of w (zero past the row's end: those threads add nothing)
  float acc[V][N];  // this thread's columns' dw sums over the block's rows
  for (int k = 0; k < V; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < hu) wv[k] = load_pack(w + j);
    else
      for (int e = 0; e < N / 2; ++e) wv[k].v[e] = __floats2bfloat162_rn(0.f, 0.f);
    for (int e = 0; e < N; ++e) acc[k][e] = 0.f;
  }
  for (int s = 0; s < S - 1; ++s) issue(t0 + s);
  float r_next = t0 < t1 ? rstd[t0] : 0.f;
  for (std::int64_t t = t0; t < t1; ++t) {
    const float r = r_next;
    if (t + 1 < t1) r_next = rstd[t + 1];  // used next row: its latency hides behind this one
    issue(t + S - 1);  // into the slot of row t - 1, which this thread has read
    cp_async_wait<S - 1>();
    const Pack<N>* xs = ring + ((t - t0) % S) * 2 * hu;  // [h/N] row t's x; its dout at xs + hu
    float dot = 0;  // sum of dout * w * (x * rstd) over this thread's columns
    for (int k = 0; k < V; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j >= hu) break;
      const Pack<N> xp = load_pack(xs + j), dp = load_pack(xs + hu + j);
      for (int e = 0; e < N / 2; ++e) {
        const float2 xv = __bfloat1622float2(xp.v[e]), dv = __bfloat1622float2(dp.v[e]), wf = __bfloat1622float2(wv[k].v[e]);
        dot += dv.x * wf.x * (xv.x * r) + dv.y * wf.y * (xv.y * r);
      }
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    // one barrier per row: a parity's buffer is written again two rows later, after the next barrier
    if (lane == 0) scratch[t & 1][warp] = dot;
    __syncthreads();
    float m = 0;
    for (int i = 0; i < warps; ++i) m += scratch[t & 1][i];
    m *= inv_h;
    for (int k = 0; k < V; ++k) {
      const int j = threadIdx.x + k * blockDim.x;
      if (j >= hu) break;
      const Pack<N> xp = load_pack(xs + j), dp = load_pack(xs + hu + j);
      Pack<N> out;
      for (int e = 0; e < N / 2; ++e) {
        const float2 xv = __bfloat1622float2(xp.v[e]), dv = __bfloat1622float2(dp.v[e]), wf = __bfloat1622float2(wv[k].v[e]);
        const float2 n = make_float2(xv.x * r, xv.y * r);
        const float2 nb = __bfloat1622float2(__floats2bfloat162_rn(n.x, n.y));  // the forward's bf16(n)
        acc[k][2 * e] += dv.x * nb.x, acc[k][2 * e + 1] += dv.y * nb.y;
        out.v[e] = __floats2bfloat162_rn(r * (dv.x * wf.x - n.x * m), r * (dv.y * wf.y - n.y * m));
      }
      store_pack(dx + t * hu + j, out);
    }
  }
  cp_async_wait<0>();  // the empty trailing groups
  for (int k = 0; k < V; ++k) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < hu)
      for (int e = 0; e < N / 2; ++e)
        reinterpret_cast<float2*>(dw_part + std::int64_t(blockIdx.x) * hu * N + std::int64_t(j) * N)[e] =
            make_float2(acc[k][2 * e], acc[k][2 * e + 1]);
  }
}

// dw[c] = the blocks' partials of column c added in block order: 32 columns x 16 strided groups of
// blocks per thread block, then the 16 group sums in group order
__global__ void rmsnorm_bwd_dw_kernel(const float* dw_part,  // [parts, h]
                                      float* dw,             // [h]
                                      int parts, std::int64_t h) {
  __shared__ float group[16][33];
  const std::int64_t c = blockIdx.x * std::int64_t(32) + threadIdx.x;
  float s = 0;
  if (c < h)
    for (int p = threadIdx.y; p < parts; p += 16) s += dw_part[p * h + c];
  group[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < h) {
    float t = 0;
    for (int g = 0; g < 16; ++g) t += group[g][threadIdx.x];
    dw[c] = t;
  }
}

// ---- RoPE, SwiGLU and add: grid-stride over units of N bf16 (N = 8: 16-byte words where n % 8 == 0 and
// every tensor is 16-byte aligned, RoPE also D % 16 == 0; else N = 2, bf16 pairs) ----

// RoPE: one thread per (row, N adjacent i of the first half) and their partners at i + D/2
template <int N>
__global__ void rope_kernel(Pack<N>* qk,         // [T, H, D/N] units
                            const Pack<N>* cos,  // [T, D/(2N)] units (D/2 values per row)
                            const Pack<N>* sin,  // [T, D/(2N)]
                            std::int64_t T, std::int64_t H, std::int64_t half, float sign) {  // half = D/(2N)
  const std::int64_t n = T * H * half;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % half, row = e / half, t = row / H;
    Pack<N>* v = qk + row * 2 * half;
    float a[N], b[N], c[N], s[N], ya[N], yb[N];
    to_floats(load_pack(v + i), a), to_floats(load_pack(v + i + half), b);
    to_floats(load_pack(cos + t * half + i), c), to_floats(load_pack(sin + t * half + i), s);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float sk = sign * s[k];
      ya[k] = a[k] * c[k] - b[k] * sk;
      yb[k] = b[k] * c[k] + a[k] * sk;
    }
    store_pack(v + i, from_floats(ya)), store_pack(v + i + half, from_floats(yb));
  }
}

__device__ float sigmoidf_(float g) { return 1.f / (1.f + __expf(-g)); }

template <int N>
__global__ void swiglu_fwd_kernel(const Pack<N>* gate, const Pack<N>* up, Pack<N>* act, std::int64_t units) {  // all [n/N]
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < units;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    float g[N], u[N], y[N];
    to_floats(load_pack(gate + e), g), to_floats(load_pack(up + e), u);
#pragma unroll
    for (int k = 0; k < N; ++k) y[k] = g[k] * sigmoidf_(g[k]) * u[k];
    store_pack(act + e, from_floats(y));
  }
}

template <int N>
__global__ void swiglu_bwd_kernel(const Pack<N>* dact, const Pack<N>* gate, const Pack<N>* up, Pack<N>* dgate,
                                  Pack<N>* dup, std::int64_t units) {  // all [n/N]
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < units;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    float d[N], g[N], u[N], dg[N], du[N];
    to_floats(load_pack(dact + e), d), to_floats(load_pack(gate + e), g), to_floats(load_pack(up + e), u);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float sg = sigmoidf_(g[k]);
      du[k] = d[k] * g[k] * sg;
      dg[k] = d[k] * u[k] * sg * (1.f + g[k] * (1.f - sg));
    }
    store_pack(dup + e, from_floats(du)), store_pack(dgate + e, from_floats(dg));
  }
}

template <int N>
__global__ void add_kernel(const Pack<N>* a, const Pack<N>* b, Pack<N>* out, std::int64_t units) {  // all [n/N]
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < units;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    float x[N], y[N];
    to_floats(load_pack(a + e), x), to_floats(load_pack(b + e), y);
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = x[k] + y[k];
    store_pack(out + e, from_floats(x));
  }
}

__global__ void add_f32_kernel(const float* a, const float* b, float* out, std::int64_t n) {  // all [n]
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < n; e += std::int64_t(gridDim.x) * blockDim.x)
    out[e] = a[e] + b[e];
}

bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<std::uintptr_t>(p) % 16) return false;
  return true;
}

template <class T2, class T>
T2* pairs(T* p) { return reinterpret_cast<T2*>(p); }

// rmsnorm_bwd's launch for a row of h: N bf16 per access, V accesses per thread, S ring slots
template <int N, int V, int S>
void launch_bwd_rows(int grid, int threads, std::size_t smem, const __nv_bfloat16* dout, const __nv_bfloat16* x,
                     const __nv_bfloat16* w, const float* rstd, __nv_bfloat16* dx, float* part, std::int64_t T,
                     std::int64_t h, cudaStream_t s) {
  rmsnorm_bwd_rows_kernel<N, V, S><<<grid, threads, smem, s>>>(pairs<const Pack<N>>(dout), pairs<const Pack<N>>(x),
                                                               pairs<const Pack<N>>(w), rstd, pairs<Pack<N>>(dx), part, T,
                                                               static_cast<int>(h / N));
}

struct BwdConfig {
  const void* kernel;
  int threads;
  std::size_t smem;  // the ring: S rows of x and dout
  decltype(&launch_bwd_rows<2, 8, 4>) launch;
};

template <int N, int V, int S>
BwdConfig config_of(std::int64_t h) {
  const std::int64_t per_thread = std::int64_t(N) * V;
  return {reinterpret_cast<const void*>(&rmsnorm_bwd_rows_kernel<N, V, S>),
          static_cast<int>(((h + per_thread - 1) / per_thread + 31) / 32 * 32), static_cast<std::size_t>(S * 4 * h),
          &launch_bwd_rows<N, V, S>};
}

// 16 bf16 of a row per thread (32 past h = 8192): <= 512 threads up to h = 16384; a ring of 4 rows
// (64 KiB at h = 4096), 2 past h = 8192
BwdConfig bwd_config(std::int64_t h, bool vec8) {
  if (vec8) return h <= 16 * kBwdMaxThreads ? config_of<8, 2, 4>(h) : config_of<8, 4, 2>(h);
  return h <= 16 * kBwdMaxThreads ? config_of<2, 8, 4>(h) : config_of<2, 16, 2>(h);
}

// how many blocks of c fit on the current device at once (SMs x blocks per SM), looked up once
cudaError_t resident_blocks(const BwdConfig& c, int* out) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, std::size_t>, int> known;
  int dev = 0, sms = 0, smem_max = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, c.kernel, c.threads, c.smem);
  if (const auto it = known.find(key); it != known.end()) return *out = it->second, cudaSuccess;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  // the kernel may take the device's whole opt-in shared memory (every h's ring; occupancy below counts c's)
  if (e == cudaSuccess) e = cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max - 1024);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, c.kernel, c.threads, c.smem);
  if (e != cudaSuccess) return e;
  if (per_sm < 1) return cudaErrorInvalidConfiguration;
  return *out = known[key] = sms * per_sm, cudaSuccess;
}

}  // namespace

cudaError_t rmsnorm_fwd(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, float* rstd,
                        std::int64_t T, std::int64_t h, float eps, cudaStream_t stream) {
  if (T < 1 || h < 2 || h % 2 || T > 2147483647) return cudaErrorInvalidValue;
  const auto a16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (a16(x) && a16(w) && a16(out) && T * h / (8 * kThreads) < 2147483647) {
    switch (h) {  // short rows: a group of h / 8 lanes per row
      case 32: return launch_fwd_short<4>(x, w, out, rstd, T, eps, stream), cudaGetLastError();
      case 64: return launch_fwd_short<8>(x, w, out, rstd, T, eps, stream), cudaGetLastError();
      case 128: return launch_fwd_short<16>(x, w, out, rstd, T, eps, stream), cudaGetLastError();
      case 256: return launch_fwd_short<32>(x, w, out, rstd, T, eps, stream), cudaGetLastError();
      default: break;
    }
  }
  rmsnorm_fwd_kernel<<<static_cast<unsigned>(T), kThreads, 0, stream>>>(
      pairs<const __nv_bfloat162>(x), pairs<const __nv_bfloat162>(w), pairs<__nv_bfloat162>(out), rstd, h / 2, eps);
  return cudaGetLastError();
}

std::size_t rmsnorm_bwd_workspace_bytes(std::int64_t T, std::int64_t h) {
  if (T < 1 || h < 2 || h % 2 || h > kBwdMaxH) return 0;
  const BwdConfig c = bwd_config(h, h % 8 == 0);
  int resident = 0;
  if (resident_blocks(c, &resident) != cudaSuccess) return 0;
  return static_cast<std::size_t>(std::min<std::int64_t>(T, resident) * h) * sizeof(float);
}

cudaError_t rmsnorm_bwd(const __nv_bfloat16* dout, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        const float* rstd, __nv_bfloat16* dx, float* dw, void* workspace, std::int64_t T,
                        std::int64_t h, cudaStream_t stream) {
  if (T < 1 || h < 2 || h % 2 || h > kBwdMaxH || workspace == nullptr) return cudaErrorInvalidValue;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vec8 = h % 8 == 0 && aligned(dout) && aligned(x) && aligned(w) && aligned(dx);
  // the grid: one block per resident slot, at most the workspace's rows (sized for the 16-byte path)
  const BwdConfig c = bwd_config(h, vec8), sized = bwd_config(h, h % 8 == 0);
  int resident = 0, resident_sized = 0;
  cudaError_t e = resident_blocks(c, &resident);
  if (e == cudaSuccess) e = resident_blocks(sized, &resident_sized);
  if (e != cudaSuccess) return e;
  const int parts = static_cast<int>(std::min<std::int64_t>({T, resident, resident_sized}));
  c.launch(parts, c.threads, c.smem, dout, x, w, rstd, dx, static_cast<float*>(workspace), T, h, stream);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  rmsnorm_bwd_dw_kernel<<<static_cast<unsigned>((h + 31) / 32), dim3(32, 16), 0, stream>>>(static_cast<float*>(workspace), dw,
                                                                                          parts, h);
  return cudaGetLastError();
}

cudaError_t rope(__nv_bfloat16* qk, const __nv_bfloat16* cos, const __nv_bfloat16* sin, std::int64_t T,
                 std::int64_t H, std::int64_t D, bool backward, cudaStream_t stream) {
  if (T < 1 || H < 1 || D < 4 || D % 4) return cudaErrorInvalidValue;
  const float sign = backward ? -1.f : 1.f;
  auto launch = [&](auto n) {
    constexpr int N = decltype(n)::value;
    rope_kernel<N><<<grid_for(T * H * (D / (2 * N)), kThreads), kThreads, 0, stream>>>(
        pairs<Pack<N>>(qk), pairs<const Pack<N>>(cos), pairs<const Pack<N>>(sin), T, H, D / (2 * N), sign);
    return cudaGetLastError();
  };
  return D % 16 == 0 && aligned16({qk, cos, sin}) ? launch(std::integral_constant<int, 8>{})
                                                   : launch(std::integral_constant<int, 2>{});
}

cudaError_t swiglu_fwd(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* act, std::int64_t n,
                       cudaStream_t stream) {
  if (n < 2 || n % 2) return cudaErrorInvalidValue;
  auto launch = [&](auto w) {
    constexpr int N = decltype(w)::value;
    swiglu_fwd_kernel<N><<<grid_for(n / N, kThreads), kThreads, 0, stream>>>(pairs<const Pack<N>>(gate), pairs<const Pack<N>>(up),
                                                                            pairs<Pack<N>>(act), n / N);
    return cudaGetLastError();
  };
  return n % 8 == 0 && aligned16({gate, up, act}) ? launch(std::integral_constant<int, 8>{})
                                                   : launch(std::integral_constant<int, 2>{});
}

cudaError_t swiglu_bwd(const __nv_bfloat16* dact, const __nv_bfloat16* gate, const __nv_bfloat16* up,
                       __nv_bfloat16* dgate, __nv_bfloat16* dup, std::int64_t n, cudaStream_t stream) {
  if (n < 2 || n % 2) return cudaErrorInvalidValue;
  auto launch = [&](auto w) {
    constexpr int N = decltype(w)::value;
    swiglu_bwd_kernel<N><<<grid_for(n / N, kThreads), kThreads, 0, stream>>>(
        pairs<const Pack<N>>(dact), pairs<const Pack<N>>(gate), pairs<const Pack<N>>(up), pairs<Pack<N>>(dgate),
        pairs<Pack<N>>(dup), n / N);
    return cudaGetLastError();
  };
  return n % 8 == 0 && aligned16({dact, gate, up, dgate, dup}) ? launch(std::integral_constant<int, 8>{})
                                                                : launch(std::integral_constant<int, 2>{});
}

cudaError_t add(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out, std::int64_t n,
                cudaStream_t stream) {
  if (n < 2 || n % 2) return cudaErrorInvalidValue;
  auto launch = [&](auto w) {
    constexpr int N = decltype(w)::value;
    add_kernel<N><<<grid_for(n / N, kThreads), kThreads, 0, stream>>>(pairs<const Pack<N>>(a), pairs<const Pack<N>>(b),
                                                                     pairs<Pack<N>>(out), n / N);
    return cudaGetLastError();
  };
  return n % 8 == 0 && aligned16({a, b, out}) ? launch(std::integral_constant<int, 8>{})
                                               : launch(std::integral_constant<int, 2>{});
}

cudaError_t add(const float* a, const float* b, float* out, std::int64_t n, cudaStream_t stream) {
  if (n < 1) return cudaErrorInvalidValue;
  add_f32_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
