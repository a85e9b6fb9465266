// PyTorch's in-op scratch buffers (sim/torch_scratch.hpp), from torch 2.11's source (git 70d99e99; the
// derivation and its check on one H200 in docs/MODEL.md "Reserved memory").
#include "sim/torch_scratch.hpp"

#include <algorithm>
#include <cstdint>

namespace ulysses {
namespace {

std::int64_t div_up(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t last_pow2(std::int64_t n) {
  std::int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// The device the scratch sizes are derived for: H200 (cudaDeviceProp multiProcessorCount,
// maxThreadsPerMultiProcessor, warpSize)
constexpr std::int64_t kSms = 132, kThreadsPerSm = 2048, kWarp = 32;
constexpr std::int64_t kMaxNumThreads = 512;          // Reduce.cuh MAX_NUM_THREADS
constexpr std::int64_t kMinValuesPerThread = 16;      // setReduceConfig (CUDA)
constexpr std::int64_t kMaxValuesPerThread = 256;
constexpr std::int64_t kInt32Max = 2147483647;

}  // namespace

// Reduce.cuh, the column reduction of a contiguous [rows, cols] input (the reduced dims lead):
// set_block_dimension (100-108) with outputs vectorized by 4 (get_output_vec_size), setReduceConfig
// (1033-1179): the input split across the block's rows when each thread would read at least
// min(16 * block_height, 256) values, across CTAs when a thread still reads >= 256 and the grid fits
// the device; global_memory_size (193-202) = acc_bytes * outputs * ctas_per_output * block.x * vec.
// The buffer and the (small) semaphores are two allocations (gpu_reduce_kernel 1255-1256). An input
// past 32-bit indexing is reduced in halves (TensorIterator::with_32bit_indexing), each its own pair.
std::int64_t reduction_scratch_bytes(std::int64_t rows, std::int64_t cols, std::int64_t acc_bytes) {
  const std::int64_t vec = cols % 4 == 0 ? 4 : cols % 2 == 0 ? 2 : 1;
  std::int64_t R = rows;
  while (R > 1 && (R * cols - 1) * 2 + 1 > kInt32Max) R = div_up(R, 2);
  const std::int64_t mnt = kMaxNumThreads / vec, dim0 = cols / vec;
  const std::int64_t d0 = dim0 < mnt ? last_pow2(dim0) : mnt, d1 = R < mnt ? last_pow2(R) : mnt;
  std::int64_t bw = std::min(d0, kWarp);
  const std::int64_t bh = std::min(d1, mnt / bw);
  bw = std::min(d0, mnt / bh);
  if (R < std::min(bh * kMinValuesPerThread, kMaxValuesPerThread)) return 0;
  const std::int64_t per_thread = div_up(R, bh), grid_x = div_up(dim0, bw);
  const std::int64_t target = kSms * (kThreadsPerSm / (bw * bh));
  if (per_thread < kMaxValuesPerThread || grid_x > target) return 0;
  const std::int64_t ctas = std::max(std::min(div_up(target, grid_x), div_up(per_thread, kMinValuesPerThread)),
                                     div_up(per_thread, kMaxValuesPerThread));
  if (ctas <= 1) return 0;
  return acc_bytes * cols * ctas * bw * vec;
}

// SDPA picks cuDNN on sm_90 with cuDNN > 9.15 (sdp_utils.cpp priority_order, check_prefer_cudnn_attention;
// GQA through enable_gqa); its backward (run_cudnn_SDP_bprop) takes one workspace of
// mha_graph.get_workspace_size(): the frontend's fp32 dQ accumulator [H, T, D] and softmax sum [H, T]
// (cudnn-frontend 1.18 CompositeSDPABackwardNode::get_fe_workspace_size_node), plus the closed cuDNN
// plan's part, measured on one H200 (torch 2.11, cuDNN 9.19) alone: 256 B, and with grouped heads
// (H_kv < H) another [H, T, D] fp32 for the full-head dK/dV it reduces.
std::int64_t sdpa_backward_scratch_bytes(std::int64_t T, std::int64_t H, std::int64_t H_kv, std::int64_t D) {
  const std::int64_t frontend = T * H * D * 4 + T * H * 4;
  const std::int64_t plan = (H_kv < H ? T * H * D * 4 : 0) + 256;
  return frontend + plan;
}

// embedding_dense_backward_cuda (Embedding.cu 256: up to 3072 indices only the gradient's zeros) ->
// embedding_backward_cuda_kernel (EmbeddingBackwardKernel.cu 314, 349, 447-449): the fp32 partial sums
// of at most floor(T / NROWS_PER_THREAD) + min(T, V) segments; the index buffers are T * 8 bytes.
std::int64_t embedding_backward_partials_bytes(std::int64_t T, std::int64_t h, std::int64_t V) {
  if (T <= 3072) return 0;
  constexpr std::int64_t kRowsPerThread = 10;  // NROWS_PER_THREAD
  return (T / kRowsPerThread + std::min(T, V)) * h * 4;
}

}  // namespace ulysses
