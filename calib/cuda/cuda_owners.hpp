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

// a non-blocking stream and n CUDA events (runtime/cuda/cuda_events.hpp); pinned host memory is
// runtime/cuda/device_memory.hpp's alloc_pinned
using runtime::cuda::Events;
using runtime::cuda::Stream;

// Times fn (enqueued on st) warmup + iters times; the median of the timed ones in seconds.
template <class F>
double time_median(cudaStream_t st, int warmup, int iters, F&& fn) {
  return core::median(runtime::cuda::time_on_stream(st, warmup, iters, fn));
}

}  // namespace ulysses::calib::cuda
