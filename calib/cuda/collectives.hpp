#pragma once
// NCCL all-gather and reduce-scatter of bf16 buffers over P GPUs (issue 13's calibration list: ZeRO-3's per-layer
// parameter gathers and gradient reduce-scatters), nccl-tests' way: per buffer size the mean time of `iters` calls
// back to back on the slowest rank, algbw = bytes / t and busbw = algbw * (P - 1) / P, where `bytes` is the whole
// gathered (or reduced) buffer. Each size is checked once before it is timed (#wrong: elements that differ from the
// exact result: rank r sends the value r + 1, so a gather holds chunk j = j + 1 and a reduce-scatter P (P + 1) / 2,
// all exact in bf16 for P <= 8); wrong data throws.
#include <cstdint>
#include <vector>

namespace ulysses::calib::cuda {

struct CollectiveRow {
  std::int64_t bytes = 0;  // the whole buffer
  double allgather_s = 0, reduce_scatter_s = 0;  // one call: the mean of `iters` back to back, the slowest rank
  std::int64_t wrong = 0;  // elements off the exact result (over both, every rank)
};

// bytes: each a multiple of 2 * P (bf16 chunks); every visible rank of the cluster of P GPUs (runtime/cuda/cluster.hpp).
std::vector<CollectiveRow> collective_times(int P, const std::vector<std::int64_t>& bytes, int warmup, int iters,
                                            double timeout_s);

// nccl-tests' bus bandwidth of a time (GB/s)
inline double busbw_GBps(std::int64_t bytes, double t_s, int P) {
  return t_s > 0 ? double(bytes) / t_s * double(P - 1) / double(P) * 1e-9 : 0;
}

}  // namespace ulysses::calib::cuda
