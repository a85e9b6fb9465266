// PyTorch's in-op scratch buffers (sim/torch_scratch.hpp).
#include "sim/torch_scratch.hpp"

namespace ulysses {

std::int64_t reduction_scratch_bytes(std::int64_t rows, std::int64_t cols, std::int64_t acc_bytes) {
  (void)rows, (void)cols, (void)acc_bytes;
  return 138412032;  // PROVISIONAL: replaced by Reduce.cuh's setReduceConfig
}

std::int64_t sdpa_backward_scratch_bytes(std::int64_t T, std::int64_t H, std::int64_t H_kv, std::int64_t D) {
  (void)H_kv;
  return 2 * T * H * D * 4 + T * H * 4;  // PROVISIONAL: source pending
}

std::int64_t embedding_backward_partials_bytes(std::int64_t T, std::int64_t h) {
  return (T + T / 10) * h * 4;  // PROVISIONAL: source pending
}

}  // namespace ulysses
