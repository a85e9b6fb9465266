#include "runtime/cuda/device_memory.hpp"

#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include "runtime/backend.hpp"
#include "runtime/cuda/cuda_check.hpp"

namespace ulysses::runtime::cuda {

DeviceArena::~DeviceArena() {
  for (auto& [p, n] : sizes_) cudaFree(p);
}

void* DeviceArena::alloc(std::int64_t bytes) {
  if (bytes <= 0) return nullptr;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(bytes));
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free allocation error
    const std::string what = "device " + std::to_string(device_) + ": cudaMalloc of " + std::to_string(bytes) +
                             " bytes failed (" + cudaGetErrorString(e) + ") with " + std::to_string(live_) +
                             " bytes live in this rank's arena";
    if (e == cudaErrorMemoryAllocation) throw OutOfMemory(what);  // runtime/backend.hpp
    throw std::runtime_error(what);
  }
  sizes_[p] = bytes;
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return p;
}

void DeviceArena::free(void* p) {
  auto it = sizes_.find(p);
  if (it == sizes_.end()) return;
  live_ -= it->second;
  sizes_.erase(it);
  cudaFree(p);
}

std::int64_t DeviceArena::sample_device_used() {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::int64_t used = static_cast<std::int64_t>(total_b - free_b);
  peak_used_ = std::max(peak_used_, used);
  return used;
}

void PinnedFree::operator()(void* p) const { cudaFreeHost(p); }

PinnedPtr alloc_pinned(std::int64_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaHostAlloc(&p, static_cast<std::size_t>(bytes), cudaHostAllocDefault));
  return PinnedPtr(p);
}

}  // namespace ulysses::runtime::cuda
