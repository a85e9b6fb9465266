#pragma once
// Device memory of one rank, counted: every buffer of the block comes from a DeviceArena, so
// peak_bytes is the exact high-water mark of live tensors and workspaces (not sampled).
// sample_device_used() adds the driver's view (cudaMemGetInfo: total - free, which also holds
// the CUDA context, NCCL buffers and anything else on the GPU) and keeps its maximum.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ulysses::runtime::cuda {

class DeviceArena {
 public:
  explicit DeviceArena(int device) : device_(device) {}
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  void* alloc(std::int64_t bytes);  // throws with the sizes on failure; 256-byte aligned
  void free(void* p);
  template <class T>
  T* alloc_as(std::int64_t count) { return static_cast<T*>(alloc(count * static_cast<std::int64_t>(sizeof(T)))); }

  std::int64_t live_bytes() const { return live_; }
  std::int64_t peak_bytes() const { return peak_; }
  std::int64_t sample_device_used();                // cudaMemGetInfo now; updates the max
  std::int64_t peak_device_used() const { return peak_used_; }
  int device() const { return device_; }

 private:
  int device_;
  std::int64_t live_ = 0, peak_ = 0, peak_used_ = 0;
  std::unordered_map<void*, std::int64_t> sizes_;
};

// Pinned host memory (cudaHostAlloc, cudaHostAllocDefault), freed with its owner: the staging of the host optimizer,
// ZeRO-3's parts with offload_params, the offloaded checkpoints. Outside the arena (host memory).
struct PinnedFree {
  void operator()(void* p) const;
};
using PinnedPtr = std::unique_ptr<void, PinnedFree>;
PinnedPtr alloc_pinned(std::int64_t bytes);  // throws (CUDA_CHECK) on failure

// RAII owner of one arena buffer.
template <class T>
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(DeviceArena& a, std::int64_t count) : a_(&a), n_(count), p_(count > 0 ? a.alloc_as<T>(count) : nullptr) {}
  ~DevBuf() { reset(); }
  DevBuf(DevBuf&& o) noexcept : a_(o.a_), n_(o.n_), p_(o.p_) { o.p_ = nullptr, o.n_ = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) reset(), a_ = o.a_, n_ = o.n_, p_ = o.p_, o.p_ = nullptr, o.n_ = 0;
    return *this;
  }
  void reset() {
    if (p_ && a_) a_->free(p_);
    p_ = nullptr, n_ = 0;
  }
  T* get() const { return p_; }
  std::int64_t size() const { return n_; }
  std::int64_t bytes() const { return n_ * static_cast<std::int64_t>(sizeof(T)); }

 private:
  DeviceArena* a_ = nullptr;
  std::int64_t n_ = 0;
  T* p_ = nullptr;
};

// Buffers owned together (a layer's weights, a step's activations), freed together; each buffer is
// one arena allocation, so the arena's counters see every one.
class BufferSet {
 public:
  explicit BufferSet(DeviceArena& a) : a_(&a) {}
  template <class T>
  T* take(std::int64_t count) {
    bufs_.emplace_back(*a_, count * static_cast<std::int64_t>(sizeof(T)));
    return reinterpret_cast<T*>(bufs_.back().get());
  }
  std::int64_t bytes() const {
    std::int64_t n = 0;
    for (const auto& b : bufs_) n += b.bytes();
    return n;
  }

 private:
  DeviceArena* a_;
  std::vector<DevBuf<unsigned char>> bufs_;
};

}  // namespace ulysses::runtime::cuda
