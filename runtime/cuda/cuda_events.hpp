#pragma once
// n CUDA events (cudaEventCreate: with timing) destroyed with their owner, also when a later step of the owner's
// constructor throws or one of the n fails to be created. What the timers of runtime/ and calib/ hold.
#include <vector>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {

class Events {
 public:
  explicit Events(int n) {
    e.reserve(static_cast<std::size_t>(n));
    try {
      for (int i = 0; i < n; ++i) {
        cudaEvent_t x = nullptr;
        CUDA_CHECK(cudaEventCreate(&x));
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

}  // namespace ulysses::runtime::cuda
