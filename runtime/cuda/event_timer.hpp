#pragma once
// Times `fn`, enqueued on `stream`, `warmup + iters` times with CUDA events around each call (the
// stream drained after each): the `iters` timed durations in seconds. What the one-GPU microbenchmarks
// of calib/ and bench/ share; callers take core::median (and the max) of the result.
#include <vector>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {

template <class F>
std::vector<double> time_on_stream(cudaStream_t stream, int warmup, int iters, F&& fn) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int it = 0; it < warmup + iters; ++it) {
    CUDA_CHECK(cudaEventRecord(a, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (it >= warmup) t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  return t;
}

}  // namespace ulysses::runtime::cuda
