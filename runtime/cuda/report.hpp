#pragma once
// What one rank sends back after run_block, and its byte serialisation (for the all-gather in
// launcher mode; single-process mode uses the same path so both modes aggregate identically).
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/verify.hpp"

namespace ulysses::runtime::cuda {

inline constexpr int kPhases = 6;

struct RankReport {
  int rank = 0;
  std::string kernel;                                  // attention kernel used
  std::string exchange;                                // exchange transport: "p2p" or "nccl (<why not p2p>)"
  std::vector<std::array<double, kPhases>> phase_s;    // [timed iteration][phase], seconds (CUDA events)
  std::array<double, kPhases> traced_busy_s{};         // traced iteration: CUPTI GPU busy time per phase
  std::int64_t arena_peak_bytes = 0, device_used_peak_bytes = 0;
  std::vector<Check> checks;
  std::vector<TraceEvent> trace;                       // start_us relative to origin_ns
  std::uint64_t origin_ns = 0;
  bool kept = false;
  RankResult result;                                   // host copies (small sizes only)
};

class Writer {
 public:
  template <class T>
  void pod(const T& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) { pod<std::uint64_t>(s.size()), out.append(s); }
  template <class T>
  void vec(const std::vector<T>& v) { pod<std::uint64_t>(v.size()), out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)); }
  std::string out;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <class T>
  T pod() {
    T v;
    need(sizeof v);
    std::memcpy(&v, s_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = pod<std::uint64_t>();
    need(n);
    std::string r = s_.substr(pos_, n);
    pos_ += n;
    return r;
  }
  template <class T>
  std::vector<T> vec() {
    const auto n = pod<std::uint64_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
    std::memcpy(v.data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }

 private:
  void need(std::size_t n) const {
    if (pos_ + n > s_.size()) throw std::runtime_error("corrupt rank report");
  }
  const std::string& s_;
  std::size_t pos_ = 0;
};

std::string serialize(const RankReport& r);
RankReport deserialize(const std::string& s);

}  // namespace ulysses::runtime::cuda
