#pragma once
// The CUDA objects calib/cuda's microbenchmarks hold, each released by its owner (a throwing measurement
// leaks nothing), and their one timing rule: the median of time_on_stream's timed runs.
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "core/stats.hpp"
#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/cuda_events.hpp"
#include "runtime/cuda/event_timer.hpp"

namespace ulysses::calib::cuda {

// a non-blocking stream on `device` (made current)
struct Stream {
  explicit Stream(int device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s = nullptr;
};

// n CUDA events (runtime/cuda/cuda_events.hpp); pinned host memory is runtime/cuda/device_memory.hpp's alloc_pinned
using runtime::cuda::Events;

// Times fn (enqueued on st) warmup + iters times; the median of the timed ones in seconds.
template <class F>
double time_median(cudaStream_t st, int warmup, int iters, F&& fn) {
  return core::median(runtime::cuda::time_on_stream(st, warmup, iters, fn));
}

}  // namespace ulysses::calib::cuda
