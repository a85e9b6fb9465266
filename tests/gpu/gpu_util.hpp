#pragma once
// Helpers of the GPU tests (tests/gpu, hidden tag [.gpu]: run with `ulysses_gpu_tests "[gpu]"`).
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::gputest {

inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

template <class T>
struct Dev {
  T* p = nullptr;
  std::int64_t n = 0;
  explicit Dev(std::int64_t count) : n(count) { CUDA_CHECK(cudaMalloc(&p, sizeof(T) * (count > 0 ? count : 1))); }
  Dev(const std::vector<T>& h) : Dev(static_cast<std::int64_t>(h.size())) { upload(h); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  void upload(const std::vector<T>& h) { CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> h(static_cast<std::size_t>(n));
    CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * h.size(), cudaMemcpyDeviceToHost));
    return h;
  }
  void fill_bytes(int v) { CUDA_CHECK(cudaMemset(p, v, sizeof(T) * n)); }
};

}  // namespace ulysses::gputest
