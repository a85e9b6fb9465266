// Direct peer-to-peer Ulysses exchange kernel. Layouts, index maps and the synchronisation
// protocol: kernels/p2p_exchange.cuh (maps from core/layout.hpp).
//
// Work: job j (q, k, v), destination c, n_j = B * S_l * H_l * Dv vectors per destination
// (Dv = D / 8, one uint4 = 8 bf16). A tile is kTile = kThreads * kVec vectors; the tiles of a
// job run destination-interleaved: tile t of job j goes to k = t % P, c = (r + 1 + k) % P, piece
// t / P. So every block mixes NVLink stores to every peer (rotated per rank, no hot spot) with
// the local copy of its own chunk (k = P - 1), which overlaps the remote traffic instead of
// following it. Block b takes tiles b, b + G, b + 2G, ... (G = grid) over all jobs.
#include "kernels/p2p_exchange.cuh"

namespace ulysses::kernels {
namespace {

using core::Dims;

constexpr int kThreads = 256;
constexpr int kVec = 4;                       // vectors in flight per thread
constexpr int kTile = kThreads * kVec;        // 1024 vectors = 16 KiB

struct Jobs {
  P2pJob job[kP2pMaxJobs];
};

__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ long long global_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// flag[phase][block][writer]
__device__ __forceinline__ std::int64_t flag_at(int phase, int block, int writer) {
  return (static_cast<std::int64_t>(phase) * kP2pMaxBlocks + block) * kP2pMaxPeers + writer;
}

// Threads 0..P-1 of the block: signal rank threadIdx.x, then wait for rank threadIdx.x's signal.
__device__ __forceinline__ void block_barrier(const P2pSync& s, int phase, int rank, int P) {
  const int c = threadIdx.x;
  if (c < P) {
    if (phase == 1) __threadfence_system();  // this block's stores before the end signal
    st_release_sys(s.peer[c] + flag_at(phase, blockIdx.x, rank), s.epoch);
    const unsigned* f = s.self + flag_at(phase, blockIdx.x, c);
    const long long t0 = global_ns();
    for (unsigned n = 1; ld_acquire_sys(f) != s.epoch; ++n) {
      if ((n & 1023u) == 0 && global_ns() - t0 > s.timeout_ns) {
        *reinterpret_cast<volatile int*>(s.timeout_flag) = 1 + c;  // host-mapped: which rank is missing
        __threadfence_system();
        __trap();
      }
    }
  }
  __syncthreads();
}

struct Idx {
  std::uint32_t b, s_l, h_l, v;
};

__device__ __forceinline__ Idx decompose(std::uint32_t i, std::uint32_t S_l, std::uint32_t H_l, std::uint32_t Dv) {
  Idx t;
  t.v = i % Dv;
  i /= Dv;
  t.h_l = i % H_l;
  i /= H_l;
  t.s_l = i % S_l;
  t.b = i / S_l;
  return t;
}

template <bool kSeqToHead>
__global__ void __launch_bounds__(kThreads) p2p_exchange_kernel(Jobs jobs, int n_jobs, int rank, int P, P2pSync sync) {
  block_barrier(sync, 0, rank, P);
  std::int64_t first = 0;  // first global tile of job j
  for (int j = 0; j < n_jobs; ++j) {
    const P2pJob& jb = jobs.job[j];
    const Dims xv{jb.x.B, jb.x.S, jb.x.P, jb.x.H, jb.x.D / 8};
    const std::uint32_t S_l = static_cast<std::uint32_t>(xv.S / xv.P);
    const std::uint32_t H_l = static_cast<std::uint32_t>(core::heads_per_rank(xv.H, xv.P));
    const std::uint32_t Dv = static_cast<std::uint32_t>(xv.D);
    const std::uint32_t n = static_cast<std::uint32_t>(xv.B) * S_l * H_l * Dv;
    const std::int64_t tiles = static_cast<std::int64_t>((n + kTile - 1) / kTile) * P;
    // this block's first tile of this job: the global tile sequence continues across jobs
    std::int64_t t = (blockIdx.x - first % gridDim.x + gridDim.x) % gridDim.x;
    const uint4* __restrict__ src = static_cast<const uint4*>(jb.src);
    for (; t < tiles; t += gridDim.x) {
      const int k = static_cast<int>(t % P);
      const int c = (rank + 1 + k) % P;
      uint4* __restrict__ dst = static_cast<uint4*>(jb.dst[c]);
      const std::uint32_t base = static_cast<std::uint32_t>(t / P) * kTile + threadIdx.x;
      uint4 val[kVec];
      std::int64_t at[kVec];
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        const std::uint32_t i = base + u * kThreads;
        at[u] = -1;
        if (i < n) {
          const Idx x = decompose(i, S_l, H_l, Dv);
          std::int64_t from;
          if constexpr (kSeqToHead) {
            from = core::seq_index(xv, x.b, x.s_l, core::source_head(xv, c, x.h_l), x.v);
            at[u] = core::head_index(xv, x.b, core::global_pos(xv, rank, x.s_l), x.h_l, x.v);
          } else {
            from = core::head_index(xv, x.b, core::global_pos(xv, c, x.s_l), x.h_l, x.v);
            at[u] = core::seq_index(xv, x.b, x.s_l, static_cast<std::int64_t>(rank) * H_l + x.h_l, x.v);
          }
          val[u] = src[from];
        }
      }
#pragma unroll
      for (int u = 0; u < kVec; ++u)
        if (at[u] >= 0) dst[at[u]] = val[u];
    }
    first += tiles;
  }
  __syncthreads();
  block_barrier(sync, 1, rank, P);
}

}  // namespace

cudaError_t p2p_exchange(bool seq_to_head, const P2pJob* jobs, int n_jobs, int rank, int P, const P2pSync& sync,
                         int blocks, cudaStream_t stream) {
  if (n_jobs < 1 || n_jobs > kP2pMaxJobs || P < 1 || P > kP2pMaxPeers || rank < 0 || rank >= P || blocks < 1 ||
      blocks > kP2pMaxBlocks || sync.epoch == 0 || !sync.self || !sync.timeout_flag)
    return cudaErrorInvalidValue;
  Jobs js{};
  for (int j = 0; j < n_jobs; ++j) {
    const Dims& x = jobs[j].x;
    if (x.P != P || x.D % 8 || x.S % P || !jobs[j].src) return cudaErrorInvalidValue;
    if (!seq_to_head && x.H < P) return cudaErrorInvalidValue;  // the summed kv gradient: NCCL path
    // 32-bit vector indices within one destination's share
    if (x.B * (x.S / P) * core::heads_per_rank(x.H, P) * (x.D / 8) >= (1LL << 32) - kTile) return cudaErrorInvalidValue;
    for (int c = 0; c < P; ++c)
      if (!jobs[j].dst[c] || !sync.peer[c]) return cudaErrorInvalidValue;
    js.job[j] = jobs[j];
  }
  if (seq_to_head) p2p_exchange_kernel<true><<<blocks, kThreads, 0, stream>>>(js, n_jobs, rank, P, sync);
  else p2p_exchange_kernel<false><<<blocks, kThreads, 0, stream>>>(js, n_jobs, rank, P, sync);
  return cudaGetLastError();
}

}  // namespace ulysses::kernels
