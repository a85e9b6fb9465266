// Attention forward/backward: dispatch (kernels/attention.hpp) and the "reference" kernels.
// The "flash" kind lives in kernels/attention_flash*.cu (another file set).
//
// Layouts (head-sharded, B batch, S sequence, H query heads, H_kv kv heads, D head dim):
//   q, o, dq, dout : [B, S, H, D]  bf16     element (b, i, h, d) at ((b*S + i)*H + h)*D + d
//   k, v, dk, dv   : [B, S, H_kv, D] bf16     q head h reads kv head h / (H/H_kv)
//   lse, delta     : [B, H, S]     fp32     natural-log log-sum-exp of scale*q.k; delta = rowsum(dout*o)
//
// Reference kernels: CUDA cores, fp32 everywhere after the bf16 load, online softmax. A block
// of 4 warps owns 16 rows (4 per warp) of one (b, head); tiles of 32 columns are staged in
// shared memory as fp32 with a row stride of D+4 floats, so lane j reading row j as float4 and
// all lanes reading one row hit distinct banks. Per tile, lane j computes the 4 dot products of
// its column j with the warp's 4 rows; then every lane accumulates its d-slice
// (d = lane + 32*t) of the 4 output rows.
//   forward : rows = queries, columns = keys:  o_i = sum_j softmax_j(scale q_i.k_j) v_j
//   dq      : rows = queries, columns = keys:  dq_i = scale * sum_j p_ij (dout_i.v_j - delta_i) k_j
//   dk, dv  : rows = keys, columns = queries of every q head of the group:
//             dv_j = sum_i p_ij dout_i,   dk_j = scale * sum_i p_ij (dout_i.v_j - delta_i) q_i
// No atomics: every output element has one writer, so results are deterministic.
#include <cfloat>
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/attention_flash.hpp"

namespace ulysses::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kRows = kWarps * kRowsPerWarp;  // rows per block
constexpr int kCols = 32;                     // columns per tile (one per lane)
constexpr int kThreads = kWarps * 32;

template <int D>
struct Tile {
  static constexpr int stride = D + 4;  // floats per staged row
};

// Stage n_rows rows (row index first + r, valid when < S) of a [B, S, H, D] bf16 tensor, head h,
// into smem as fp32 [n_rows][stride]. Rows past S are zero.
template <int D>
__device__ void stage_rows(float* dst, int stride, const __nv_bfloat16* __restrict__ x, std::int64_t b, std::int64_t first,
                           int n_rows, std::int64_t S, std::int64_t H, std::int64_t h) {
  constexpr int vec = 8;  // bf16 per 16-byte load
  for (int t = threadIdx.x; t < n_rows * (D / vec); t += blockDim.x) {
    const int r = t / (D / vec), dv = (t % (D / vec)) * vec;
    const std::int64_t i = first + r;
    float* out = dst + r * stride + dv;
    if (i < S) {
      const uint4 u = *reinterpret_cast<const uint4*>(x + ((b * S + i) * H + h) * D + dv);
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(p[k]);
        out[2 * k] = f.x;
        out[2 * k + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int k = 0; k < vec; ++k) out[k] = 0.f;
    }
  }
}

// acc[r] = rows[r] . cols[lane]  for the warp's 4 rows (rows: [4][rstride], cols: [32][stride]).
template <int D>
__device__ __forceinline__ void dot4(float (&acc)[kRowsPerWarp], const float* rows, int rstride, const float* cols, int lane) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) acc[r] = 0.f;
  const float* c = cols + lane * Tile<D>::stride;
#pragma unroll 8
  for (int d = 0; d < D; d += 4) {
    const float4 cv = *reinterpret_cast<const float4*>(c + d);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float4 rv = *reinterpret_cast<const float4*>(rows + r * rstride + d);
      acc[r] += rv.x * cv.x + rv.y * cv.y + rv.z * cv.z + rv.w * cv.w;
    }
  }
}

// out[r][t] += sum_j coef_j[r] * cols[j][lane + 32 t]; coef_j[r] lives in lane j's coef[r].
template <int D>
__device__ __forceinline__ void accumulate(float (&out)[kRowsPerWarp][D / 32], const float (&coef)[kRowsPerWarp],
                                           const float* cols, int lane) {
#pragma unroll 4
  for (int j = 0; j < kCols; ++j) {
    float cj[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) cj[r] = __shfl_sync(0xffffffffu, coef[r], j);
    const float* row = cols + j * Tile<D>::stride + lane;
#pragma unroll
    for (int t = 0; t < D / 32; ++t) {
      const float x = row[32 * t];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) out[r][t] += cj[r] * x;
    }
  }
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ void store_row(__nv_bfloat16* dst, const float* v, int D, int lane) {
  for (int t = 0; t * 32 + lane < D; ++t) dst[t * 32 + lane] = __float2bfloat16(v[t]);
}

// ---- forward: grid (ceil(S/16), H, B) ----
template <int D>
__global__ void __launch_bounds__(kThreads) fwd_kernel(AttnFwdParams p) {
  extern __shared__ float smem[];
  float* q_s = smem;                          // [16][D]
  float* k_s = q_s + kRows * D;               // [32][D+4]
  float* v_s = k_s + kCols * Tile<D>::stride;  // [32][D+4]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, i0 = (std::int64_t)blockIdx.x * kRows;
  const std::int64_t hk = h / (p.H / p.H_kv);
  stage_rows<D>(q_s, D, p.q, b, i0, kRows, p.S, p.H, h);

  float o[kRowsPerWarp][D / 32] = {};
  float m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) m[r] = -INFINITY, l[r] = 0.f;
  const std::int64_t row0 = i0 + warp * kRowsPerWarp;
  const std::int64_t j_end = p.causal ? min(p.S, i0 + kRows) : p.S;
  for (std::int64_t j0 = 0; j0 < j_end; j0 += kCols) {
    __syncthreads();
    stage_rows<D>(k_s, Tile<D>::stride, p.k, b, j0, kCols, p.S, p.H_kv, hk);
    stage_rows<D>(v_s, Tile<D>::stride, p.v, b, j0, kCols, p.S, p.H_kv, hk);
    __syncthreads();
    float s[kRowsPerWarp];
    dot4<D>(s, q_s + warp * kRowsPerWarp * D, D, k_s, lane);
    const std::int64_t j = j0 + lane;
    float pr[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const bool valid = j < p.S && (!p.causal || j <= row0 + r);
      const float x = valid ? s[r] * p.scale : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(x));
      const float alpha = m_new == -INFINITY ? 1.f : __expf(m[r] - m_new);
      pr[r] = valid ? __expf(x - m_new) : 0.f;
      l[r] = l[r] * alpha + warp_sum(pr[r]);
      m[r] = m_new;
#pragma unroll
      for (int t = 0; t < D / 32; ++t) o[r][t] *= alpha;
    }
    accumulate<D>(o, pr, v_s, lane);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t i = row0 + r;
    if (i >= p.S) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    float v[D / 32];
#pragma unroll
    for (int t = 0; t < D / 32; ++t) v[t] = o[r][t] * inv;
    store_row(p.o + ((b * p.S + i) * p.H + h) * D, v, D, lane);
    if (lane == 0) p.lse[(b * p.H + h) * p.S + i] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

// ---- backward ----
// delta[b][h][i] = sum_d dout[b][i][h][d] * o[b][i][h][d]; one warp per row.
__global__ void delta_kernel(AttnBwdParams p, float* delta) {
  const std::int64_t row = (std::int64_t)blockIdx.x * kWarps + threadIdx.x / 32;  // over [B][S][H]
  const int lane = threadIdx.x % 32;
  if (row >= p.B * p.S * p.H) return;
  const __nv_bfloat16* o = p.o + row * p.D;
  const __nv_bfloat16* g = p.dout + row * p.D;
  float acc = 0.f;
  for (std::int64_t d = lane; d < p.D; d += 32) acc += __bfloat162float(o[d]) * __bfloat162float(g[d]);
  acc = warp_sum(acc);
  const std::int64_t h = row % p.H, i = (row / p.H) % p.S, b = row / (p.H * p.S);
  if (lane == 0) delta[(b * p.H + h) * p.S + i] = acc;
}

// dq: grid (ceil(S/16), H, B)
template <int D>
__global__ void __launch_bounds__(kThreads) dq_kernel(AttnBwdParams p, const float* __restrict__ delta) {
  extern __shared__ float smem[];
  float* q_s = smem;                           // [16][D]
  float* g_s = q_s + kRows * D;                // [16][D]   dout rows
  float* k_s = g_s + kRows * D;                // [32][D+4]
  float* v_s = k_s + kCols * Tile<D>::stride;  // [32][D+4]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t b = blockIdx.z, h = blockIdx.y, i0 = (std::int64_t)blockIdx.x * kRows;
  const std::int64_t hk = h / (p.H / p.H_kv);
  stage_rows<D>(q_s, D, p.q, b, i0, kRows, p.S, p.H, h);
  stage_rows<D>(g_s, D, p.dout, b, i0, kRows, p.S, p.H, h);
  const std::int64_t row0 = i0 + warp * kRowsPerWarp;
  float lse[kRowsPerWarp], dl[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t i = min(row0 + r, p.S - 1);
    lse[r] = p.lse[(b * p.H + h) * p.S + i];
    dl[r] = delta[(b * p.H + h) * p.S + i];
  }
  float dq[kRowsPerWarp][D / 32] = {};
  const std::int64_t j_end = p.causal ? min(p.S, i0 + kRows) : p.S;
  for (std::int64_t j0 = 0; j0 < j_end; j0 += kCols) {
    __syncthreads();
    stage_rows<D>(k_s, Tile<D>::stride, p.k, b, j0, kCols, p.S, p.H_kv, hk);
    stage_rows<D>(v_s, Tile<D>::stride, p.v, b, j0, kCols, p.S, p.H_kv, hk);
    __syncthreads();
    float s[kRowsPerWarp], dp[kRowsPerWarp], ds[kRowsPerWarp];
    dot4<D>(s, q_s + warp * kRowsPerWarp * D, D, k_s, lane);
    dot4<D>(dp, g_s + warp * kRowsPerWarp * D, D, v_s, lane);
    const std::int64_t j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const bool valid = j < p.S && row0 + r < p.S && (!p.causal || j <= row0 + r);
      const float pr = valid ? __expf(s[r] * p.scale - lse[r]) : 0.f;
      ds[r] = pr * (dp[r] - dl[r]);
    }
    accumulate<D>(dq, ds, k_s, lane);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t i = row0 + r;
    if (i >= p.S) continue;
    float v[D / 32];
#pragma unroll
    for (int t = 0; t < D / 32; ++t) v[t] = dq[r][t] * p.scale;
    store_row(p.dq + ((b * p.S + i) * p.H + h) * D, v, D, lane);
  }
}

// dk, dv: grid (ceil(S/16), H_kv, B); rows = keys, columns = queries of the G heads of the group.
template <int D>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(AttnBwdParams p, const float* __restrict__ delta) {
  extern __shared__ float smem[];
  float* k_s = smem;                           // [16][D]
  float* v_s = k_s + kRows * D;                // [16][D]
  float* q_s = v_s + kRows * D;                // [32][D+4]
  float* g_s = q_s + kCols * Tile<D>::stride;  // [32][D+4]  dout
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t b = blockIdx.z, hk = blockIdx.y, j0 = (std::int64_t)blockIdx.x * kRows;
  const std::int64_t G = p.H / p.H_kv;
  stage_rows<D>(k_s, D, p.k, b, j0, kRows, p.S, p.H_kv, hk);
  stage_rows<D>(v_s, D, p.v, b, j0, kRows, p.S, p.H_kv, hk);
  const std::int64_t row0 = j0 + warp * kRowsPerWarp;  // this warp's first key
  float dk[kRowsPerWarp][D / 32] = {}, dv[kRowsPerWarp][D / 32] = {};
  const std::int64_t i_begin = p.causal ? j0 / kCols * kCols : 0;
  for (std::int64_t h = hk * G; h < (hk + 1) * G; ++h) {
    for (std::int64_t i0 = i_begin; i0 < p.S; i0 += kCols) {
      __syncthreads();
      stage_rows<D>(q_s, Tile<D>::stride, p.q, b, i0, kCols, p.S, p.H, h);
      stage_rows<D>(g_s, Tile<D>::stride, p.dout, b, i0, kCols, p.S, p.H, h);
      __syncthreads();
      const std::int64_t i = i0 + lane;  // this lane's query
      const bool in = i < p.S;
      const float lse = in ? p.lse[(b * p.H + h) * p.S + i] : 0.f;
      const float dl = in ? delta[(b * p.H + h) * p.S + i] : 0.f;
      float s[kRowsPerWarp], dp[kRowsPerWarp], pr[kRowsPerWarp], ds[kRowsPerWarp];
      // dot4 computes rows . cols[lane]: rows = this warp's keys, cols = queries
      dot4<D>(s, k_s + warp * kRowsPerWarp * D, D, q_s, lane);
      dot4<D>(dp, v_s + warp * kRowsPerWarp * D, D, g_s, lane);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const std::int64_t j = row0 + r;
        const bool valid = in && j < p.S && (!p.causal || j <= i);
        pr[r] = valid ? __expf(s[r] * p.scale - lse) : 0.f;
        ds[r] = pr[r] * (dp[r] - dl);
      }
      accumulate<D>(dv, pr, g_s, lane);
      accumulate<D>(dk, ds, q_s, lane);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t j = row0 + r;
    if (j >= p.S) continue;
    float vk[D / 32];
#pragma unroll
    for (int t = 0; t < D / 32; ++t) vk[t] = dk[r][t] * p.scale;
    store_row(p.dk + ((b * p.S + j) * p.H_kv + hk) * D, vk, D, lane);
    store_row(p.dv + ((b * p.S + j) * p.H_kv + hk) * D, dv[r], D, lane);
  }
}

constexpr std::size_t smem_fwd(int D) { return sizeof(float) * (kRows * D + 2 * kCols * (D + 4)); }
constexpr std::size_t smem_bwd(int D) { return sizeof(float) * (2 * kRows * D + 2 * kCols * (D + 4)); }

bool shape_ok(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D) {
  return B >= 1 && S >= 1 && H >= 1 && H_kv >= 1 && H % H_kv == 0 && (D == 64 || D == 128) && S <= 0x7fffffffLL * kRows &&
         H <= 65535 && B <= 65535;
}

template <int D>
cudaError_t ref_fwd(const AttnFwdParams& p, cudaStream_t stream) {
  const std::size_t smem = smem_fwd(D);
  cudaError_t e = cudaFuncSetAttribute(fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  const dim3 grid((unsigned)((p.S + kRows - 1) / kRows), (unsigned)p.H, (unsigned)p.B);
  fwd_kernel<D><<<grid, kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <int D>
cudaError_t ref_bwd(const AttnBwdParams& p, cudaStream_t stream) {
  float* delta = static_cast<float*>(p.workspace);
  const std::int64_t rows = p.B * p.S * p.H;
  delta_kernel<<<(unsigned)((rows + kWarps - 1) / kWarps), kThreads, 0, stream>>>(p, delta);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const std::size_t smem = smem_bwd(D);
  if ((e = cudaFuncSetAttribute(dq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) != cudaSuccess) return e;
  if ((e = cudaFuncSetAttribute(dkdv_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) != cudaSuccess) return e;
  const unsigned tiles = (unsigned)((p.S + kRows - 1) / kRows);
  dq_kernel<D><<<dim3(tiles, (unsigned)p.H, (unsigned)p.B), kThreads, smem, stream>>>(p, delta);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  dkdv_kernel<D><<<dim3(tiles, (unsigned)p.H_kv, (unsigned)p.B), kThreads, smem, stream>>>(p, delta);
  return cudaGetLastError();
}

}  // namespace

std::size_t attn_bwd_workspace_bytes(AttnKernel kind, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv,
                                     std::int64_t D) {
  if (kind == AttnKernel::flash) return attn_bwd_flash_workspace_bytes(B, S, H, H_kv, D);
  return sizeof(float) * static_cast<std::size_t>(B * H * S);  // delta
}

cudaError_t attn_fwd(AttnKernel kind, const AttnFwdParams& p, cudaStream_t stream) {
  if (kind == AttnKernel::flash) return attn_fwd_flash(p, stream);
  if (!shape_ok(p.B, p.S, p.H, p.H_kv, p.D) || !p.q || !p.k || !p.v || !p.o || !p.lse) return cudaErrorInvalidValue;
  return p.D == 64 ? ref_fwd<64>(p, stream) : ref_fwd<128>(p, stream);
}

cudaError_t attn_bwd(AttnKernel kind, const AttnBwdParams& p, cudaStream_t stream) {
  if (kind == AttnKernel::flash) return attn_bwd_flash(p, stream);
  if (!shape_ok(p.B, p.S, p.H, p.H_kv, p.D) || !p.q || !p.k || !p.v || !p.o || !p.dout || !p.lse || !p.dq || !p.dk ||
      !p.dv || !p.workspace)
    return cudaErrorInvalidValue;
  return p.D == 64 ? ref_bwd<64>(p, stream) : ref_bwd<128>(p, stream);
}

}  // namespace ulysses::kernels
