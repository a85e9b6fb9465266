#pragma once
// CUDA events and streams destroyed with their owner, also when a later step of the owner's constructor throws or
// one of n events fails to be created. What the runners and timers of runtime/ and calib/ hold.
#include <vector>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {

// n events; flags as cudaEventCreateWithFlags takes them (default: with timing)
class Events {
 public:
  explicit Events(int n, unsigned flags = cudaEventDefault) {
    e.reserve(static_cast<std::size_t>(n));
    try {
      for (int i = 0; i < n; ++i) {
        cudaEvent_t x = nullptr;
        CUDA_CHECK(cudaEventCreateWithFlags(&x, flags));
        e.push_back(x);
      }
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~Events() { destroy(); }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  std::vector<cudaEvent_t> e;

 private:
  void destroy() {
    for (cudaEvent_t x : e) cudaEventDestroy(x);
    e.clear();
  }
};

// a non-blocking stream on the current device, or on `device` (made current)
class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  explicit Stream(int device) {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s = nullptr;
};

}  // namespace ulysses::runtime::cuda
