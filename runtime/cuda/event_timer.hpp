#pragma once
// Times `fn`, enqueued on `stream`, `warmup + iters` times with CUDA events around each call (the
// stream drained after each): the `iters` timed durations in seconds. What the one-GPU microbenchmarks
// of calib/ and bench/ share; callers take core::median (and the max) of the result. time_on_stream_after
// runs `before` ahead of each call's start event, untimed: work that sets the conditions the call starts in
// (calib/cuda/gemm_rates.hpp: the GPU idle, or lighter work on the stream, so the call does not start at the
// clock that calls back to back hold under the board's power limit).
#include <chrono>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"
#include "runtime/cuda/cuda_events.hpp"

namespace ulysses::runtime::cuda {

template <class B, class F>
std::vector<double> time_on_stream_after(cudaStream_t stream, int warmup, int iters, B&& before, F&& fn) {
  const Events ev(2);
  const cudaEvent_t a = ev.e[0], b = ev.e[1];
  std::vector<double> t;
  for (int it = 0; it < warmup + iters; ++it) {
    before();
    CUDA_CHECK(cudaEventRecord(a, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (it >= warmup) t.push_back(ms * 1e-3);
  }
  return t;
}

// a `before` for time_on_stream_after: the host asleep for s seconds (none when s <= 0), the drained GPU idle with it
inline void idle_host(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

template <class F>
std::vector<double> time_on_stream(cudaStream_t stream, int warmup, int iters, F&& fn) {
  return time_on_stream_after(stream, warmup, iters, [] {}, fn);
}

}  // namespace ulysses::runtime::cuda
