#pragma once
// Helpers of the GPU tests (tests/gpu, hidden tag [.gpu]: run with `ulysses_gpu_tests "[gpu]"`).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::gputest {

// ||got - want|| / ||want||, the GPU tests' measure of a tensor against its oracle (sizes must agree)
inline double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// A test that needs more GPUs than this host has is skipped and says so: one "SKIPPED" line on
// stderr naming the test, a Catch2 warning, and the test returns without a failure, so that a
// one-GPU host runs (and reports) the rest. Use as the first statement of the TEST_CASE.
#define GPUTEST_SKIP_UNLESS_DEVICES(n)                                                                     \
  do {                                                                                                     \
    const int have_devices_ = ::ulysses::gputest::device_count();                                         \
    if (have_devices_ < (n)) {                                                                             \
      std::fprintf(stderr, "SKIPPED (needs %d CUDA devices, this host has %d): %s\n", (n), have_devices_, \
                   Catch::getResultCapture().getCurrentTestName().c_str());                                \
      WARN("skipped: needs " << (n) << " CUDA devices, this host has " << have_devices_);                  \
      return;                                                                                              \
    }                                                                                                      \
  } while (0)

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
