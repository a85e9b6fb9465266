// Pack/unpack kernels of the Ulysses exchange. Layouts and index maps: core/layout.hpp
// (the same functions the CPU reference calls). Summary, on rank r, chunk c = peer rank:
//   x_seq  [B, S_l, H, D]     sequence-sharded
//   x_head [B, S, H_l, D]     head-sharded
//   chunk  [B, S_l, H_l, D]   one per peer, buf[c] of layout.hpp
//   seq->head pack    chunk[c][b][s_l][h_l] = x_seq[b][s_l][source_head(c, h_l)]
//   seq->head unpack  x_head[b][c*S_l + s_l][h_l] = chunk[c][b][s_l][h_l]
//   head->seq pack    chunk[c][b][s_l][h_l] = x_head[b][c*S_l + s_l][h_l]
//   head->seq unpack  x_seq[b][s_l][c*H_l + h_l] = chunk[c][b][s_l][h_l]
// All copies move 16-byte vectors (uint4): the layout functions are evaluated with D counted
// in vectors (Dv = D * elem_bytes / 16), which is exact because every map is linear in d.
// Grid: blockIdx.y = chunk c, blockIdx.x/threadIdx.x stride over [b][s_l in slice][h_l][v].
#include "kernels/pack.cuh"

#include <algorithm>

#include <cuda_bf16.h>

namespace ulysses::kernels {
namespace {

using core::Dims;

constexpr int kThreads = 256;

struct SliceIdx {
  std::int64_t b, s_l, h_l, v;
};

// i in [0, B * n_s * H_l * Dv) -> (b, s_l, h_l, v), s_l offset by s_lo. The divisions run in
// 32 bits whenever the slice has fewer than 2^32 vectors (64-bit division costs ~4x more).
__device__ __forceinline__ SliceIdx decompose(std::int64_t i, std::int64_t n_s, std::int64_t H_l, std::int64_t Dv,
                                              std::int64_t s_lo) {
  SliceIdx r;
  if (((i | (n_s * H_l * Dv)) >> 32) == 0) {
    std::uint32_t j = static_cast<std::uint32_t>(i);
    const std::uint32_t dv = static_cast<std::uint32_t>(Dv), hl = static_cast<std::uint32_t>(H_l),
                        ns = static_cast<std::uint32_t>(n_s);
    r.v = j % dv;
    j /= dv;
    r.h_l = j % hl;
    j /= hl;
    r.s_l = s_lo + j % ns;
    r.b = j / ns;
    return r;
  }
  r.v = i % Dv;
  i /= Dv;
  r.h_l = i % H_l;
  i /= H_l;
  r.s_l = s_lo + i % n_s;
  r.b = i / n_s;
  return r;
}

__global__ void pack_seq_to_head_kernel(const uint4* __restrict__ x_seq, ChunkPtrs chunks, Dims xv, std::int64_t s_lo,
                                        std::int64_t n_s) {
  const int c = blockIdx.y;
  uint4* __restrict__ dst = static_cast<uint4*>(chunks.p[c]);
  if (dst == nullptr) return;
  const std::int64_t H_l = core::heads_per_rank(xv.H, xv.P);
  const std::int64_t n = xv.B * n_s * H_l * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, n_s, H_l, xv.D, s_lo);
    const std::int64_t h = core::source_head(xv, c, t.h_l);
    dst[core::buf_index(xv, 0, t.b, t.s_l, t.h_l, t.v)] = x_seq[core::seq_index(xv, t.b, t.s_l, h, t.v)];
  }
}

struct MultiJobs {
  const uint4* src[kMaxJobs];
  ChunkPtrs chunks[kMaxJobs];
  Dims xv[kMaxJobs];
};

// blockIdx.y = job * P + c (all jobs share P and S)
__global__ void pack_multi_kernel(MultiJobs jobs, int P, std::int64_t s_lo,
                                  std::int64_t n_s) {
  const int j = blockIdx.y / P, c = blockIdx.y % P;
  uint4* __restrict__ dst = static_cast<uint4*>(jobs.chunks[j].p[c]);
  if (dst == nullptr) return;
  const Dims xv = jobs.xv[j];
  const uint4* __restrict__ x_seq = jobs.src[j];
  const std::int64_t H_l = core::heads_per_rank(xv.H, xv.P);
  const std::int64_t n = xv.B * n_s * H_l * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, n_s, H_l, xv.D, s_lo);
    const std::int64_t h = core::source_head(xv, c, t.h_l);
    dst[core::buf_index(xv, 0, t.b, t.s_l, t.h_l, t.v)] = x_seq[core::seq_index(xv, t.b, t.s_l, h, t.v)];
  }
}

__global__ void unpack_seq_to_head_kernel(ChunkPtrs chunks, uint4* __restrict__ x_head, Dims xv, std::int64_t s_lo,
                                          std::int64_t n_s) {
  const int c = blockIdx.y;
  const uint4* __restrict__ src = static_cast<const uint4*>(chunks.p[c]);
  if (src == nullptr) return;
  const std::int64_t H_l = core::heads_per_rank(xv.H, xv.P);
  const std::int64_t n = xv.B * n_s * H_l * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, n_s, H_l, xv.D, s_lo);
    x_head[core::head_index(xv, t.b, core::global_pos(xv, c, t.s_l), t.h_l, t.v)] =
        src[core::buf_index(xv, 0, t.b, t.s_l, t.h_l, t.v)];
  }
}

__global__ void pack_head_to_seq_kernel(const uint4* __restrict__ x_head, ChunkPtrs chunks, Dims xv, std::int64_t s_lo,
                                        std::int64_t n_s) {
  const int c = blockIdx.y;
  uint4* __restrict__ dst = static_cast<uint4*>(chunks.p[c]);
  if (dst == nullptr) return;
  const std::int64_t H_l = core::heads_per_rank(xv.H, xv.P);
  const std::int64_t n = xv.B * n_s * H_l * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, n_s, H_l, xv.D, s_lo);
    dst[core::buf_index(xv, 0, t.b, t.s_l, t.h_l, t.v)] =
        x_head[core::head_index(xv, t.b, core::global_pos(xv, c, t.s_l), t.h_l, t.v)];
  }
}

__global__ void unpack_head_to_seq_kernel(ChunkPtrs chunks, uint4* __restrict__ x_seq, Dims xv, std::int64_t s_lo,
                                          std::int64_t n_s) {
  const int c = blockIdx.y;
  const uint4* __restrict__ src = static_cast<const uint4*>(chunks.p[c]);
  if (src == nullptr) return;
  const std::int64_t H_l = core::heads_per_rank(xv.H, xv.P);
  const std::int64_t n = xv.B * n_s * H_l * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, n_s, H_l, xv.D, s_lo);
    x_seq[core::seq_index(xv, t.b, t.s_l, core::source_head(xv, c, t.h_l), t.v)] =
        src[core::buf_index(xv, 0, t.b, t.s_l, t.h_l, t.v)];
  }
}

// 8 bf16 in a uint4 <-> 8 floats
__device__ __forceinline__ void add_bf16x8(float (&acc)[8], const uint4& u) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(h[k]);
    acc[2 * k] += f.x;
    acc[2 * k + 1] += f.y;
  }
}
__device__ __forceinline__ uint4 to_bf16x8(const float (&acc)[8]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(acc[2 * k], acc[2 * k + 1]);
  return u;
}

// dx_seq[b][s_l][g][v] = sum_{c: c/R == g} chunk[c][b][s_l][0][v]; grid stride over [b][s_l][g][v].
__global__ void unpack_reduce_kernel(ChunkPtrs chunks, uint4* __restrict__ x_seq, Dims xv, std::int64_t s_lo,
                                     std::int64_t n_s) {
  const std::int64_t R = xv.P / xv.H;
  const std::int64_t n = xv.B * n_s * xv.H * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, n_s, xv.H, xv.D, s_lo);  // t.h_l is the kv head g here
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::int64_t c = t.h_l * R; c < (t.h_l + 1) * R; ++c)
      add_bf16x8(acc, static_cast<const uint4*>(chunks.p[c])[core::buf_index(xv, 0, t.b, t.s_l, 0, t.v)]);
    x_seq[core::seq_index(xv, t.b, t.s_l, t.h_l, t.v)] = to_bf16x8(acc);
  }
}

// x_rep[b][s_l][j][v] = x_seq[b][s_l][j/R][v], x_rep viewed with P heads.
__global__ void replicate_kernel(const uint4* __restrict__ x_seq, uint4* __restrict__ x_rep, Dims xv) {
  const std::int64_t R = xv.P / xv.H, S_l = xv.S / xv.P;
  const Dims rep{xv.B, xv.S, xv.P, xv.P, xv.D};
  const std::int64_t n = xv.B * S_l * xv.P * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, S_l, xv.P, xv.D, 0);  // t.h_l is the replica head j
    x_rep[core::seq_index(rep, t.b, t.s_l, t.h_l, t.v)] = x_seq[core::seq_index(xv, t.b, t.s_l, t.h_l / R, t.v)];
  }
}

__global__ void reduce_replicas_kernel(const uint4* __restrict__ dx_rep, uint4* __restrict__ dx_seq, Dims xv) {
  const std::int64_t R = xv.P / xv.H, S_l = xv.S / xv.P;
  const Dims rep{xv.B, xv.S, xv.P, xv.P, xv.D};
  const std::int64_t n = xv.B * S_l * xv.H * xv.D;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n; i += (std::int64_t)gridDim.x * blockDim.x) {
    const SliceIdx t = decompose(i, S_l, xv.H, xv.D, 0);  // t.h_l is the kv head g
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::int64_t j = t.h_l * R; j < (t.h_l + 1) * R; ++j) add_bf16x8(acc, dx_rep[core::seq_index(rep, t.b, t.s_l, j, t.v)]);
    dx_seq[core::seq_index(xv, t.b, t.s_l, t.h_l, t.v)] = to_bf16x8(acc);
  }
}

// ---- launch helpers ----

bool vector_dims(const Dims& x, int elem_bytes, Dims& xv) {
  if (elem_bytes <= 0 || (x.D * elem_bytes) % 16 != 0 || x.P <= 0 || x.P > kMaxPeers || x.S % x.P != 0) return false;
  if (!(x.H % x.P == 0 || x.P % x.H == 0)) return false;
  xv = x;
  xv.D = x.D * elem_bytes / 16;
  return true;
}

dim3 grid_for(std::int64_t units, int chunks) {
  std::int64_t blocks = (units + kThreads - 1) / kThreads;
  const std::int64_t cap = 132LL * 16 / (chunks > 0 ? chunks : 1) + 1;  // a few waves; grid-stride beyond
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks));
}

bool slice_ok(const Dims& x, std::int64_t s_lo, std::int64_t s_hi) { return 0 <= s_lo && s_lo <= s_hi && s_hi <= x.S / x.P; }

template <typename Kernel, typename Src, typename Dst>
cudaError_t launch_chunked(Kernel k, Src src, Dst dst, const Dims& x, int elem_bytes, std::int64_t s_lo, std::int64_t s_hi,
                           cudaStream_t stream) {
  Dims xv;
  if (!vector_dims(x, elem_bytes, xv) || !slice_ok(x, s_lo, s_hi)) return cudaErrorInvalidValue;
  const std::int64_t n_s = s_hi - s_lo;
  if (n_s == 0) return cudaSuccess;
  const std::int64_t units = xv.B * n_s * core::heads_per_rank(xv.H, xv.P) * xv.D;
  k<<<grid_for(units, static_cast<int>(x.P)), kThreads, 0, stream>>>(src, dst, xv, s_lo, n_s);
  return cudaGetLastError();
}

}  // namespace

cudaError_t pack_seq_to_head(const void* x_seq, const ChunkPtrs& chunks, const Dims& x, int elem_bytes, std::int64_t s_lo,
                             std::int64_t s_hi, cudaStream_t stream) {
  return launch_chunked(pack_seq_to_head_kernel, static_cast<const uint4*>(x_seq), chunks, x, elem_bytes, s_lo, s_hi, stream);
}

cudaError_t pack_seq_to_head_multi(const PackJob* jobs, int n_jobs, int elem_bytes, std::int64_t s_lo, std::int64_t s_hi,
                                   int max_blocks, cudaStream_t stream) {
  if (n_jobs < 1 || n_jobs > kMaxJobs) return cudaErrorInvalidValue;
  MultiJobs m{};
  std::int64_t units = 0;
  const std::int64_t P = jobs[0].x.P;
  for (int j = 0; j < n_jobs; ++j) {
    if (!vector_dims(jobs[j].x, elem_bytes, m.xv[j]) || !slice_ok(jobs[j].x, s_lo, s_hi) || jobs[j].x.P != P ||
        jobs[j].x.S != jobs[0].x.S)
      return cudaErrorInvalidValue;
    m.src[j] = static_cast<const uint4*>(jobs[j].src);
    m.chunks[j] = jobs[j].chunks;
    units = std::max(units, m.xv[j].B * (s_hi - s_lo) * core::heads_per_rank(m.xv[j].H, P) * m.xv[j].D);
  }
  if (s_hi == s_lo) return cudaSuccess;
  dim3 grid = grid_for(units, static_cast<int>(P * n_jobs));
  if (max_blocks > 0) grid.x = std::max(1u, std::min(grid.x, static_cast<unsigned>(max_blocks)));
  pack_multi_kernel<<<grid, kThreads, 0, stream>>>(m, static_cast<int>(P), s_lo, s_hi - s_lo);
  return cudaGetLastError();
}

cudaError_t unpack_seq_to_head(const ChunkPtrs& chunks, void* x_head, const Dims& x, int elem_bytes, std::int64_t s_lo,
                               std::int64_t s_hi, cudaStream_t stream) {
  return launch_chunked(unpack_seq_to_head_kernel, chunks, static_cast<uint4*>(x_head), x, elem_bytes, s_lo, s_hi, stream);
}

cudaError_t pack_head_to_seq(const void* x_head, const ChunkPtrs& chunks, const Dims& x, int elem_bytes, std::int64_t s_lo,
                             std::int64_t s_hi, cudaStream_t stream) {
  return launch_chunked(pack_head_to_seq_kernel, static_cast<const uint4*>(x_head), chunks, x, elem_bytes, s_lo, s_hi, stream);
}

cudaError_t unpack_head_to_seq(const ChunkPtrs& chunks, void* x_seq, const Dims& x, int elem_bytes, std::int64_t s_lo,
                               std::int64_t s_hi, cudaStream_t stream) {
  if (x.H < x.P) return cudaErrorInvalidValue;  // several chunks feed one head: use the reduce variant
  return launch_chunked(unpack_head_to_seq_kernel, chunks, static_cast<uint4*>(x_seq), x, elem_bytes, s_lo, s_hi, stream);
}

cudaError_t unpack_head_to_seq_reduce_bf16(const ChunkPtrs& chunks, void* x_seq, const Dims& x, std::int64_t s_lo,
                                           std::int64_t s_hi, cudaStream_t stream) {
  Dims xv;
  if (!vector_dims(x, 2, xv) || !slice_ok(x, s_lo, s_hi) || x.H >= x.P) return cudaErrorInvalidValue;
  for (int c = 0; c < x.P; ++c)
    if (chunks.p[c] == nullptr) return cudaErrorInvalidValue;
  const std::int64_t n_s = s_hi - s_lo;
  if (n_s == 0) return cudaSuccess;
  unpack_reduce_kernel<<<grid_for(xv.B * n_s * xv.H * xv.D, 1), kThreads, 0, stream>>>(chunks, static_cast<uint4*>(x_seq), xv,
                                                                                       s_lo, n_s);
  return cudaGetLastError();
}

cudaError_t replicate_heads(const void* x_seq, void* x_rep, const Dims& x, int elem_bytes, cudaStream_t stream) {
  Dims xv;
  if (!vector_dims(x, elem_bytes, xv) || x.H >= x.P) return cudaErrorInvalidValue;
  replicate_kernel<<<grid_for(xv.B * (x.S / x.P) * x.P * xv.D, 1), kThreads, 0, stream>>>(static_cast<const uint4*>(x_seq),
                                                                                          static_cast<uint4*>(x_rep), xv);
  return cudaGetLastError();
}

cudaError_t reduce_replicas_bf16(const void* dx_rep, void* dx_seq, const Dims& x, cudaStream_t stream) {
  Dims xv;
  if (!vector_dims(x, 2, xv) || x.H >= x.P) return cudaErrorInvalidValue;
  reduce_replicas_kernel<<<grid_for(xv.B * (x.S / x.P) * x.H * xv.D, 1), kThreads, 0, stream>>>(
      static_cast<const uint4*>(dx_rep), static_cast<uint4*>(dx_seq), xv);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
