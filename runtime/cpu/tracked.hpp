#pragma once
// Peak-memory accounting for the CPU backend: every buffer a rank allocates during the block
// is a Buffer<T> charged to that rank's MemoryTracker, so the reported peak per rank is the
// largest sum of live buffers, counted exactly (not sampled). New buffers are poisoned (bf16:
// NaN bits, float: NaN) so an output that a phase forgets to write fails the checks.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/bf16.hpp"

namespace ulysses::runtime::cpu {

struct MemoryTracker {
  std::int64_t live_bytes = 0;
  std::int64_t peak_bytes = 0;    // since construction
  std::int64_t window_peak = 0;   // since the last open_window(): one phase's high-water mark
  void add(std::int64_t b) {
    live_bytes += b;
    peak_bytes = std::max(peak_bytes, live_bytes);
    window_peak = std::max(window_peak, live_bytes);
  }
  void sub(std::int64_t b) { live_bytes -= b; }
  void open_window() { window_peak = live_bytes; }
};

template <class T>
inline T poison_value() {
  if constexpr (std::is_same_v<T, core::bf16>) return core::kBf16NaN;
  else return std::numeric_limits<T>::quiet_NaN();
}

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(MemoryTracker* tracker, std::int64_t n) : tracker_(tracker), n_(n), data_(new T[n]) {
    std::fill_n(data_.get(), n_, poison_value<T>());
    if (tracker_) tracker_->add(bytes());
  }
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~Buffer() { release(); }
  void release() {
    if (data_ && tracker_) tracker_->sub(bytes());
    data_.reset();
    n_ = 0;
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  T& operator[](std::int64_t i) { return data_[i]; }
  const T& operator[](std::int64_t i) const { return data_[i]; }
  std::int64_t size() const { return n_; }
  std::int64_t bytes() const { return n_ * static_cast<std::int64_t>(sizeof(T)); }
  bool empty() const { return n_ == 0; }

 private:
  void swap(Buffer& o) {
    std::swap(tracker_, o.tracker_);
    std::swap(n_, o.n_);
    std::swap(data_, o.data_);
  }
  MemoryTracker* tracker_ = nullptr;
  std::int64_t n_ = 0;
  std::unique_ptr<T[]> data_;
};

}  // namespace ulysses::runtime::cpu
