#pragma once
// Scratch buffers that PyTorch's CUDA ops take from the caching allocator and free again within the op,
// sized as the ops' source sizes them (docs/MODEL.md "Reserved memory"): they decide whether a step maps
// another granule at that moment.
#include <cstdint>

namespace ulysses {

// A sum over the rows of a [rows, cols] tensor down to [cols] with `acc_bytes` accumulators
// (aten/src/ATen/native/cuda/Reduce.cuh) on an H200: the global-reduction buffer, 0 when none is needed.
std::int64_t reduction_scratch_bytes(std::int64_t rows, std::int64_t cols, std::int64_t acc_bytes);
// The backward of scaled_dot_product_attention for q [1, H, T, D], k/v [1, H_kv, T, D] (bf16, causal).
std::int64_t sdpa_backward_scratch_bytes(std::int64_t T, std::int64_t H, std::int64_t H_kv, std::int64_t D);
// embedding_dense_backward for T indices of a [V, h] embedding: the partial-segment sums (0: none).
std::int64_t embedding_backward_partials_bytes(std::int64_t T, std::int64_t h, std::int64_t V);

}  // namespace ulysses
